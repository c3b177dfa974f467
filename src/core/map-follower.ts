import type { DatasetRef, Epoch } from './ids.js';
import { compareStamps, type ShardMapSnapshot } from './shard-map-snapshot.js';
import { ShardMapper } from './shard-mapper.js';
import type { StampedShardEvent } from './shard-manager/protocol.js';

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
    if (snapshot.dataset !== this.dataset) return 'stale';
    if (this.current && compareStamps(snapshot, this.stamp) <= 0) return 'stale';
    this.current = ShardMapper.fromSnapshot(snapshot);
    this.stamp = { epoch: snapshot.epoch, version: snapshot.version };
    return 'applied';
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
