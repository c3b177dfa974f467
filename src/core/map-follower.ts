import type { DatasetRef, Epoch } from './ids.js';
import { compareStamps, type ShardMapSnapshot } from './shard-map-snapshot.js';
import { ShardMapper } from './shard-mapper.js';
import type { StampedShardEvent } from './shard-manager/protocol.js';
import type { ShardEvent } from './status.js';
import { ITEMS_PER_STEP, runWhole, type Steps } from './steps.js';

/** One decision's changes of a map: they turn the map at `base` into the map at `(epoch, base.version + events.length)`. */
export interface MapChanges {
  readonly epoch: Epoch;
  readonly base: { readonly epoch: number; readonly version: number };
  readonly events: readonly ShardEvent[];
}

/**
 * What a follower did with a message: `applied`; `stale` (older than what it has: ignored);
 * `gap` (it missed something, or a new singleton took over: it must resync from a snapshot).
 */
export type FollowOutcome = 'applied' | 'stale' | 'gap';

/**
 * A subscriber's copy of one dataset's map, kept current by the singleton's snapshots and stamped
 * events. Refuses anything older than what it has, so a stale singleton (older epoch) or a
 * reordered message changes nothing; detects gaps so the owner can resubscribe.
 */
export class ShardMapFollower {
  private current: ShardMapper | undefined;
  private stamp: { epoch: number; version: number } = { epoch: -1, version: -1 };

  constructor(readonly dataset: DatasetRef) {}

  /** The map as last applied, or undefined before the first snapshot. Do not mutate it. */
  get mapper(): ShardMapper | undefined {
    return this.current;
  }

  get epoch(): Epoch {
    return this.stamp.epoch as Epoch;
  }

  get version(): number {
    return this.stamp.version;
  }

  applySnapshot(snapshot: ShardMapSnapshot): FollowOutcome {
    return runWhole(this.applyingSnapshot(snapshot));
  }

  /** `applySnapshot` in steps: the map changes at once, at the end. */
  *applyingSnapshot(snapshot: ShardMapSnapshot): Steps<FollowOutcome> {
    if (snapshot.dataset !== this.dataset) return 'stale';
    if (this.current && compareStamps(snapshot, this.stamp) <= 0) return 'stale';
    const built = yield* ShardMapper.buildingFrom(snapshot);
    if (this.current && compareStamps(snapshot, this.stamp) <= 0) return 'stale'; // a newer one came meanwhile
    this.current = built;
    this.stamp = { epoch: snapshot.epoch, version: snapshot.version };
    return 'applied';
  }

  /**
   * Applies one decision's changes, all or nothing. They apply to exactly the map at their `base`
   * (after a failover the base is the previous singleton's map the new one continues); changes
   * that end at or before what the follower has are `stale`; anything else is a `gap`, as is a
   * change that does not apply (a map that is not the singleton's: resync).
   */
  applyChanges(c: MapChanges): FollowOutcome {
    return runWhole(this.applyingChanges(c));
  }

  /**
   * `applyChanges` in steps of a thousand events (a decision of 65 536 copies' reports took a node
   * hundreds of milliseconds in one task): the map changes at once, at the end.
   */
  *applyingChanges(c: MapChanges): Steps<FollowOutcome> {
    const end = { epoch: c.epoch, version: c.base.version + c.events.length };
    if (this.current && compareStamps(end, this.stamp) <= 0) return 'stale';
    if (!this.current || compareStamps(c.base, this.stamp) !== 0) return 'gap';
    const base = this.current;
    const next = base.clone();
    for (let i = 0; i < c.events.length; i++) {
      const e = c.events[i]!;
      if (e.dataset !== this.dataset) return 'gap';
      const r = next.updateFromEvent(e);
      if (!r.ok) return 'gap';
      if (i % ITEMS_PER_STEP === ITEMS_PER_STEP - 1) yield;
    }
    // Every published change changed the singleton's map: one that changes nothing here means this
    // map is not the one the changes were made on. And none applies to a map that changed meanwhile
    // (only its owner changes it, and it waits for this).
    if (next.version !== end.version || this.current !== base) return 'gap';
    this.current = next;
    this.stamp = end;
    return 'applied';
  }

  /**
   * Compares with the singleton's stamp of the map (its digest): `gap` when the follower is behind
   * or on another epoch's map, `stale` when the stamp is older than what it has, else `applied`
   * (nothing to do).
   */
  checkStamp(stamp: { readonly epoch: number; readonly version: number }): FollowOutcome {
    if (!this.current) return 'gap';
    const c = compareStamps(stamp, this.stamp);
    if (c < 0) return 'stale';
    return c === 0 ? 'applied' : 'gap';
  }

  applyEvent(e: StampedShardEvent): FollowOutcome {
    if (e.event.dataset !== this.dataset) return 'stale';
    if (!this.current) return 'gap';
    if (e.epoch < this.stamp.epoch) return 'stale';
    if (e.epoch > this.stamp.epoch) return 'gap';
    if (e.version <= this.stamp.version) return 'stale';
    if (e.version > this.stamp.version + 1) return 'gap';
    const next = this.current.clone();
    const r = next.updateFromEvent(e.event);
    if (!r.ok) return 'gap'; // a map we cannot apply to is not ours: resync
    this.current = next;
    this.stamp = { epoch: e.epoch, version: e.version };
    return 'applied';
  }
}
