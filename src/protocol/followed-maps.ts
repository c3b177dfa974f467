// A node's copy of every dataset's map, kept by its guardian from the events topic: the singleton's
// changes applied as they come, a whole map taken only when the node is behind (a gap, another
// epoch's map, a digest newer than its copy), and the member incarnations the maps are made for.
// What it lacks it asks for, once at a time (`SyncMaps`). Plain state and decisions: the guardian
// performs the I/O through `FollowedMapsPorts`.
import type { DatasetConfig } from '../core/dataset-config.js';
import type { DatasetRef, Epoch, SubscriberId } from '../core/ids.js';
import { ShardMapFollower, type FollowOutcome } from '../core/map-follower.js';
import { compareStamps } from '../core/shard-map-snapshot.js';
import type { MemberIncarnation, SubscriberMessage } from '../core/shard-manager/protocol.js';
import { configFingerprint, snapshotReading, type EventsRecord, type SnapshotEnvelope } from './wire-events.js';
import { runInSlices, runWhole, type Steps } from '../core/steps.js';

type Record<K extends EventsRecord['kind']> = Extract<EventsRecord, { kind: K }>;

/** The member incarnations as the singleton last published them, under its epoch. */
export interface MembersRecord {
  readonly epoch: Epoch;
  readonly version: number;
  readonly members: readonly MemberIncarnation[];
}

/** Where this node stands in the members: since which members version the singleton counts it. */
export interface Admission {
  readonly epoch: Epoch;
  readonly version: number;
}

/**
 * Whether a map of `epoch`, made for the members at version `madeFor`, is one a node admitted at
 * `admission` may act on: made for its admission's members or later ones. A map of another epoch
 * is judged by the members of its own epoch (the node does not act on it before those list it),
 * and a map that does not say what it was made for is taken as it was before the stamp existed.
 */
export function madeForAdmission(epoch: Epoch, madeFor: number | undefined, admission: Admission | undefined): boolean {
  return admission === undefined || epoch !== admission.epoch || madeFor === undefined || madeFor >= admission.version;
}

/** What the node does with what it learned: its runner, its local subscribers, the singleton. */
export interface FollowedMapsPorts {
  /**
   * A dataset's map or config changed: the node runs what the map gives it. `shards` are the
   * shards that changes touched (absent: the map may have changed anywhere).
   */
  readonly mapChanged: (dataset: DatasetRef, follower: ShardMapFollower, config: DatasetConfig, shards?: ReadonlySet<number>) => void;
  /** The member incarnations changed. */
  readonly membersChanged: (members: MembersRecord) => void;
  /** The dataset is gone: the node stops its shards. */
  readonly datasetGone: (dataset: DatasetRef) => void;
  /**
   * Delivers a message to the node's local subscribers of a dataset (or to these ids only). The
   * message is built when a subscriber is there to take it: a whole map's copy is costly.
   */
  readonly deliver: (dataset: DatasetRef, message: () => SubscriberMessage, only?: readonly SubscriberId[]) => void;
  /** Asks the singleton for what the node lacks (one request at a time; see `syncFailed`). */
  readonly askSync: (wanted: { readonly datasets: readonly DatasetRef[] | 'all'; readonly members: boolean }) => void;
}

export class FollowedMaps {
  readonly followers = new Map<DatasetRef, ShardMapFollower>();
  readonly configs = new Map<DatasetRef, DatasetConfig>();
  members: MembersRecord | undefined;
  /**
   * The members version each map was made for (`map-snapshot`, `map-changes`); undefined for a
   * map from a singleton that does not say, taken as made for any members.
   */
  private readonly madeFor = new Map<DatasetRef, number | undefined>();
  /** Since when the singleton counts `self` (the first members record of its epoch that lists it). */
  private admittedAt: Admission | undefined;
  /** What the node lacks: these maps (`all`: every dataset's, at start), the members. */
  private readonly wanted = { datasets: new Set<DatasetRef>(), all: false, members: false };
  private asking = false;
  /** Requests in a row that got no complete answer in time (each waits twice as long as the last: `syncWaitFactor`). */
  private unanswered = 0;

  /** `self`: the node incarnation that acts on these maps (none for a client that only follows them). */
  constructor(
    private readonly ports: FollowedMapsPorts,
    private readonly self?: MemberIncarnation,
  ) {}

  /** Since when the singleton counts this node, if it does. */
  get admission(): Admission | undefined {
    return this.admittedAt;
  }

  /**
   * Whether this node may act on its map of `dataset`: one made for the members that admitted it,
   * or later ones. An older map may still give it its previous incarnation's copies (a delayed
   * record, a sync answer overtaken by the changes that took them away); the node asks for the map
   * again instead.
   */
  madeForThisNode(dataset: DatasetRef): boolean {
    const f = this.followers.get(dataset);
    return f === undefined || madeForAdmission(f.epoch, this.madeFor.get(dataset), this.admittedAt);
  }

  /** The members version the node's map of `dataset` was made for (undefined: not said). */
  madeForMembers(dataset: DatasetRef): number | undefined {
    return this.madeFor.get(dataset);
  }

  /** One decision's changes: applied if they continue this node's map, else the map is asked for. */
  changes(m: Record<'map-changes'>): void {
    const f = this.followerFor(m);
    if (f) this.changesApplied(m, f, f.applyChanges(m));
  }

  /**
   * `changes`, applied in slices with `pause()` awaited in between (the map changes at once, at the
   * end). Its caller handles nothing else of these maps until it resolves.
   */
  async changesInSlices(m: Record<'map-changes'>, pause: () => Promise<void>): Promise<void> {
    const f = this.followerFor(m);
    if (f) this.changesApplied(m, f, await runInSlices(f.applyingChanges(m), pause));
  }

  /** The follower changes apply to; none (and the map is asked for) when the node lacks the map or its config. */
  private followerFor(m: Record<'map-changes'>): ShardMapFollower | undefined {
    const f = this.followers.get(m.dataset);
    if (f && this.configs.has(m.dataset)) return f;
    this.want({ dataset: m.dataset });
    return undefined;
  }

  private changesApplied(m: Record<'map-changes'>, f: ShardMapFollower, outcome: FollowOutcome): void {
    if (outcome === 'gap') return this.want({ dataset: m.dataset });
    if (outcome !== 'applied') return;
    const wasCurrent = this.madeForThisNode(m.dataset);
    this.madeFor.set(m.dataset, m.members);
    // A map that becomes one the node may act on is reconciled whole, not only where it changed.
    const whole = !wasCurrent && this.madeForThisNode(m.dataset);
    this.ports.mapChanged(m.dataset, f, this.configs.get(m.dataset)!, whole ? undefined : new Set(m.events.map((e) => e.shard)));
    this.askIfMadeForOthers(m.dataset);
    if (m.base.epoch === m.epoch) {
      m.events.forEach((event, i) =>
        this.ports.deliver(m.dataset, () => ({ type: 'StampedShardEvent', epoch: m.epoch, version: m.base.version + i + 1, event })),
      );
    } else {
      // A failover: the map goes on under a new epoch, which a subscriber takes as a whole map.
      this.ports.deliver(m.dataset, () => ({ type: 'CurrentShardSnapshot', snapshot: f.mapper!.toSnapshot(f.epoch) }));
    }
  }

  /**
   * A whole map: taken if it is newer than this node's (decoded only then), and handed to the
   * subscribers it was addressed to in any case (the node's own map when that is as new).
   */
  snapshot(m: Record<'map-snapshot'>): void {
    this.snapshotRead(m, runWhole(this.reading(m)));
  }

  /**
   * `snapshot`, with `pause()` awaited between slices of decoding the map (a node joining a
   * 65 536 × 3 map held its event loop for half a second): the maps change at once, at the end. Its
   * caller handles nothing else of these maps until it resolves.
   */
  async snapshotInSlices(m: Record<'map-snapshot'>, pause: () => Promise<void>): Promise<void> {
    this.snapshotRead(m, await runInSlices(this.reading(m), pause));
  }

  /** The whole map read into a new follower if this node takes it (it is newer), else 'kept'. */
  private *reading(m: Record<'map-snapshot'>): Steps<ShardMapFollower | 'kept' | 'unreadable'> {
    const f = this.followers.get(m.dataset);
    if (f?.mapper && f.mapper.numShards === m.numShards && compareStamps({ epoch: m.epoch, version: m.version }, f) <= 0) return 'kept';
    const snapshot = yield* snapshotReading(m);
    if (!snapshot.ok) return 'unreadable';
    const fresh = new ShardMapFollower(m.dataset);
    yield* fresh.applyingSnapshot(snapshot.value);
    return fresh;
  }

  private snapshotRead(m: Record<'map-snapshot'>, read: ShardMapFollower | 'kept' | 'unreadable'): void {
    const known = this.configs.get(m.dataset);
    const configChanged = known !== undefined && configFingerprint(known) !== configFingerprint(m.config);
    this.configs.set(m.dataset, m.config);
    // The singleton wrote it: a bad one is a bug, and the next sync asks again.
    if (read === 'unreadable') return;
    const taken = read !== 'kept';
    if (taken) {
      this.followers.set(m.dataset, read);
      this.madeFor.set(m.dataset, m.members);
    }
    const current = this.followers.get(m.dataset)!;
    // The same map, said now to be made for newer members: the node may act on it where it waited.
    const made = this.madeFor.get(m.dataset);
    const remade =
      !taken && compareStamps(current, { epoch: m.epoch, version: m.version }) === 0 && m.members !== undefined && made !== undefined && m.members > made;
    if (remade) this.madeFor.set(m.dataset, m.members);
    if (compareStamps(current, { epoch: m.epoch, version: m.version }) >= 0) this.satisfied(() => this.wanted.datasets.delete(m.dataset));
    this.satisfied(() => (this.wanted.all = false));
    if (taken || configChanged || remade) this.ports.mapChanged(m.dataset, current, m.config);
    this.askIfMadeForOthers(m.dataset);
    // Copied only for a subscriber of this node to take: most nodes read a whole map another node
    // asked for, and copying 65 536 shards for nobody cost each of them ~50 ms.
    const message = (): SubscriberMessage => ({ type: 'CurrentShardSnapshot', snapshot: current.mapper!.toSnapshot(current.epoch) });
    if (taken) this.ports.deliver(m.dataset, message);
    else if (m.to.length > 0) this.ports.deliver(m.dataset, message, m.to);
  }

  /**
   * Handles a whole map from its envelope alone when that is all reading it would do, so that a
   * record of megabytes need not be read (`SubscribeOptions.skip`): true if so. That is when the
   * node has the dataset's map at least as new, with the same shard count and config, acts on it
   * already, and waits for no map: `snapshot` would then take nothing from it but, for the same
   * map said to be made for newer members (the answer to a new node's sync), those members, and
   * hand it to the subscribers it names (the caller reads a record addressed to one of its own).
   */
  snapshotFromEnvelope(m: SnapshotEnvelope): boolean {
    const f = this.followers.get(m.dataset);
    const config = this.configs.get(m.dataset);
    if (!f?.mapper || f.mapper.numShards !== m.numShards || config === undefined || configFingerprint(config) !== m.config) return false;
    if (this.wanted.all || this.wanted.datasets.has(m.dataset) || !this.madeForThisNode(m.dataset)) return false;
    const order = compareStamps(f, { epoch: m.epoch, version: m.version });
    if (order < 0) return false;
    const made = this.madeFor.get(m.dataset);
    if (order === 0 && m.members !== undefined && made !== undefined && m.members > made) {
      this.madeFor.set(m.dataset, m.members);
      this.ports.mapChanged(m.dataset, f, config);
    }
    return true;
  }

  membersRecord(m: Record<'members'>): void {
    if (this.members && compareStamps(m, this.members) <= 0) return;
    this.setMembers({ epoch: m.epoch, version: m.version, members: m.members });
  }

  /** A change of the members: applied if it continues this node's members, else they are asked for. */
  membersChange(m: Record<'members-change'>): void {
    const have = this.members;
    if (have && compareStamps(m, have) <= 0) return;
    if (!have || have.epoch !== m.epoch || have.version !== m.version - 1) return this.want({ members: true });
    const key = (x: { node: string; incarnation: string }) => `${x.node}@${x.incarnation}`;
    const left = new Set(m.left.map(key));
    this.setMembers({ epoch: m.epoch, version: m.version, members: [...have.members.filter((x) => !left.has(key(x))), ...m.joined] });
  }

  private setMembers(members: MembersRecord): void {
    this.members = members;
    const self = this.self;
    const listed = self !== undefined && members.members.some((m) => m.node === self.node && m.incarnation === self.incarnation);
    if (!listed) this.admittedAt = undefined;
    else if (this.admittedAt?.epoch !== members.epoch) this.admittedAt = { epoch: members.epoch, version: members.version };
    this.satisfied(() => (this.wanted.members = false));
    this.ports.membersChanged(members);
    for (const dataset of this.followers.keys()) this.askIfMadeForOthers(dataset);
  }

  /** A map made for members older than this node's admission is asked for again (see `madeForThisNode`). */
  private askIfMadeForOthers(dataset: DatasetRef): void {
    if (!this.madeForThisNode(dataset)) this.want({ dataset });
  }

  /**
   * The periodic digest: whatever this node lacks or is behind on it asks for; datasets it has
   * that the singleton no longer lists are gone (their removal was lost); local subscribers hear
   * the stamp of their dataset, so they can tell they missed something. A digest also answers a
   * node that asked for every map while there was none.
   */
  digest(m: Record<'digest'>): void {
    const listed = new Set<DatasetRef>();
    for (const d of m.maps) {
      listed.add(d.dataset);
      const f = this.followers.get(d.dataset);
      const stamp = { epoch: m.epoch, version: d.version };
      if (!f || !this.configs.has(d.dataset) || f.mapper?.numShards !== d.numShards || f.checkStamp(stamp) === 'gap') this.wanted.datasets.add(d.dataset);
      this.ports.deliver(d.dataset, () => ({ type: 'ShardMapStamp', epoch: m.epoch, dataset: d.dataset, version: d.version }));
    }
    for (const dataset of [...this.followers.keys()]) if (!listed.has(dataset)) this.gone(dataset);
    if (!this.members || this.members.epoch !== m.epoch || this.members.version !== m.members) this.wanted.members = true;
    this.wanted.all = false;
    // Everything lacking in one request.
    this.want({});
  }

  /** The dataset was removed (or the singleton does not know it): the node forgets it. */
  gone(dataset: DatasetRef): void {
    this.satisfied(() => this.wanted.datasets.delete(dataset));
    const had = this.followers.delete(dataset);
    this.configs.delete(dataset);
    if (had) this.ports.datasetGone(dataset);
  }

  /** Adds to what the node lacks and asks, unless a request is on its way. */
  want(what: { readonly dataset?: DatasetRef; readonly all?: boolean; readonly members?: boolean }): void {
    if (what.dataset !== undefined) this.wanted.datasets.add(what.dataset);
    if (what.all) this.wanted.all = true;
    if (what.members) this.wanted.members = true;
    if (!this.asking) this.ask();
  }

  /** The request on its way got no (complete) answer in time: what is still lacking is asked again. */
  syncFailed(): void {
    this.asking = false;
    this.unanswered++;
    this.ask();
  }

  /**
   * How many times the usual wait the request on its way waits for its answer: 1, then twice as
   * long after each one not answered in time, up to 8. A singleton busy with a large decision
   * answers whole maps seconds late, and each request asked again at the usual pace made it
   * broadcast another: nine 1.5 MB maps in a 65 536 × 3 join wave instead of three (issue 34).
   * An answer lost on the bus is still asked for again.
   */
  get syncWaitFactor(): number {
    return 2 ** Math.min(this.unanswered, 3);
  }

  /** Whether anything is still lacking. */
  get lacking(): boolean {
    return this.wanted.all || this.wanted.datasets.size > 0 || this.wanted.members;
  }

  /** Something lacking arrived; once nothing is, the next lack is asked for at once. */
  private satisfied(update: () => void): void {
    update();
    if (this.lacking) return;
    this.asking = false;
    this.unanswered = 0;
  }

  private ask(): void {
    if (!this.lacking) return;
    this.asking = true;
    this.ports.askSync({ datasets: this.wanted.all ? 'all' : [...this.wanted.datasets].sort(), members: this.wanted.members });
  }
}
