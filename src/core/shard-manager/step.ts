import { freeShards, type AssignmentSpec, type ShardAssignmentStrategy } from '../assignment-strategy.js';
import type { PlacementStrategy } from '../placement/placement-types.js';
import type { DatasetConfig } from '../dataset-config.js';
import type { DatasetRef, Epoch, NodeId, ReplyTo, ShardNum, SubscriberId } from '../ids.js';
import type { ShardMapper } from '../shard-mapper.js';
import { type ShardEvent, ShardEvents } from '../status.js';
import type { ShardSubscriptions } from '../subscriptions.js';
import type { Steps } from '../steps.js';
import { NoticeLots } from './notice-lots.js';
import { balancedRound, completeHandoffs, startDrainMoves, type WaitingMoves } from './planned-moves.js';
import type { DatasetLoad } from './load-view.js';
import {
  APPLIED_REQUESTS_KEPT,
  type AbsentNode,
  type AppliedRequest,
  type Effect,
  type MapStamp,
  type Member,
  type NodeOperations,
  type Notice,
  type Reply,
  type ShardManagerInput,
  type SubscriberMessage,
} from './protocol.js';

/** One dataset as the singleton holds it. The mapper is never mutated once in a state. */
export interface DatasetState {
  readonly config: DatasetConfig;
  readonly mapper: ShardMapper;
  /** Shard → when it was last reassigned after an IngestionError (ms). */
  readonly cooldowns: ReadonlyMap<number, number>;
  /**
   * The planned moves a `balanced` round left for later (the move budget was spent), in shard
   * order: each copy that catches up starts the next ones (`continueMoves`). Empty: the last round's
   * moves have all started. Absent: no round since this singleton took over (or a `filodb-default`
   * dataset). Not persisted: a new singleton runs a round on recovery.
   */
  readonly waitingMoves?: WaitingMoves | undefined;
  /**
   * A `balanced` round the membership asked for waits until this time (ms), the end of its settle
   * window, so that the changes of one operation are decided together. Not persisted.
   */
  readonly roundDueAt?: number | undefined;
  /** When the open settle window opened (ms): each change moves its end, never past a bound from here. */
  readonly windowOpenedAt?: number | undefined;
}

/** The singleton's whole state. Treat it as immutable: `decide` returns a new one. */
export interface ShardManagerState {
  /** `recovering` until the `Recover` input; everything else that arrives before is buffered. */
  readonly phase: 'recovering' | 'active';
  readonly epoch: Epoch;
  /** Oldest first. */
  readonly members: readonly Member[];
  readonly datasets: ReadonlyMap<DatasetRef, DatasetState>;
  readonly subscriptions: ShardSubscriptions;
  readonly buffered: readonly ShardManagerInput[];
  /**
   * The last version of each dataset removed under this epoch. A dataset set up again under the
   * same name continues after it, so a subscriber that missed the removal still takes the new map
   * as newer instead of keeping the old one (a new epoch orders maps by itself).
   */
  readonly retiredVersions: ReadonlyMap<DatasetRef, number>;
  /** Drains and replacements in flight (persisted). */
  readonly operations: NodeOperations;
  /** Drained nodes already told they may stop (not persisted: a new singleton tells them again). */
  readonly released: readonly NodeId[];
  /** The last changing requests applied, oldest first (persisted): a replay is answered, not applied. */
  readonly applied: readonly AppliedRequest[];
  /** Grows with every change of the member incarnations under this epoch (the digest carries it). */
  readonly membersVersion: number;
  /** Departed members whose copies may still be kept for them, by node (see `absence.ts`). */
  readonly absent: ReadonlyMap<NodeId, AbsentNode>;
  /** Load-aware datasets' load views (`load-balancing.ts`); not persisted. */
  readonly loads: ReadonlyMap<DatasetRef, DatasetLoad>;
}

/** What one `decide` call returns. */
export interface Decision {
  readonly state: ShardManagerState;
  readonly effects: readonly Effect[];
}

/** A dataset being changed within one step: its mapper is a private clone. */
interface WorkingDataset {
  readonly ref: DatasetRef;
  readonly config: DatasetConfig;
  readonly mapper: ShardMapper;
  readonly cooldowns: Map<number, number>;
  waitingMoves: WaitingMoves | undefined;
  roundDueAt: number | undefined;
  windowOpenedAt: number | undefined;
  /** The changes since the map was last published, and the stamp they apply to. */
  events: ShardEvent[];
  base: { readonly epoch: Epoch; readonly version: number };
  created: boolean;
  removed: boolean;
  /** Publish a whole map instead of the changes (a new dataset, or one recovered from nothing). */
  snapshotInstead: boolean;
}

export interface StepSettings {
  /** FiloDB's kind of strategy, for `filodb-default` datasets. */
  readonly strategy: ShardAssignmentStrategy;
  /** The whole-map strategy of `balanced` datasets. */
  readonly placement: PlacementStrategy;
  readonly reassignmentCooldownMs: number;
  /** The largest encoded map the bus carries (see `ShardManagerOptions.maxMapBytes`). */
  readonly maxMapBytes: number;
  /** How long a membership change's `balanced` round waits for more changes (ms; 0: none). */
  readonly settleWindowMs: number;
}

/**
 * The working copy of the state during one `decide` call. Handlers change it through these
 * methods; `finish` turns the changes into effects in a fixed order (persist, publish, reply, notice).
 */
export class Step {
  readonly epoch: Epoch;
  members: Member[];
  subscriptions: ShardSubscriptions;
  /** Nodes being drained → the node that replaces each, if any. */
  readonly draining: Map<NodeId, NodeId | undefined>;
  /** Replacements waiting for their new node to join: new → old. */
  readonly pendingReplacements: Map<NodeId, NodeId>;
  released: Set<NodeId>;
  /** Departed members whose copies may still be kept for them. */
  readonly absent: Map<NodeId, AbsentNode>;
  /** Load-aware datasets' load views. */
  readonly loads: Map<DatasetRef, DatasetLoad>;
  /** Datasets whose moves for load an operator paused. */
  private readonly loadPaused: Set<DatasetRef>;
  /**
   * `balanced` datasets whose members changed in this step and have had no round since: the end
   * of the step runs their round or opens their settle window (`settle-window.ts`).
   */
  readonly membershipChanged = new Set<DatasetRef>();
  private applied: readonly AppliedRequest[];
  private appliedNow: { readonly replyTo: ReplyTo; readonly id: ReplyTo; readonly fingerprint: string } | undefined;
  private readonly baseOperations: NodeOperations;
  private readonly datasets: Map<DatasetRef, DatasetState>;
  private readonly retiredVersions: Map<DatasetRef, number>;
  private readonly baseSubscriptions: ShardSubscriptions;
  private readonly working = new Map<DatasetRef, WorkingDataset>();
  private readonly persists: Effect[] = [];
  private readonly sends: Effect[] = [];
  private readonly replies: Effect[] = [];
  private readonly schedules = new Set<number>();
  private readonly notices = new NoticeLots();
  private readonly baseMembers: readonly Member[];
  private membersVersion: number;
  /** Publish the members even if they did not change (recovery, a node that asked for them). */
  private membersWanted = false;

  constructor(
    base: ShardManagerState,
    readonly settings: StepSettings,
    readonly now: number,
  ) {
    this.epoch = base.epoch;
    this.members = [...base.members];
    this.subscriptions = base.subscriptions;
    this.baseSubscriptions = base.subscriptions;
    this.datasets = new Map(base.datasets);
    this.retiredVersions = new Map(base.retiredVersions);
    this.baseOperations = base.operations;
    this.draining = new Map(base.operations.draining.map((n) => [n, base.operations.replacements.find((r) => r.old === n)?.new]));
    this.pendingReplacements = new Map(base.operations.replacements.filter((r) => !this.draining.has(r.old)).map((r) => [r.new, r.old]));
    this.released = new Set(base.released);
    this.absent = new Map(base.absent);
    this.loads = new Map(base.loads);
    this.loadPaused = new Set(base.operations.loadBalancePaused ?? []);
    this.applied = base.applied;
    this.baseMembers = base.members;
    this.membersVersion = base.membersVersion;
  }

  // ---------------------------------------------------------------- reads

  dataset(ref: DatasetRef): DatasetState | undefined {
    const w = this.working.get(ref);
    if (w) return w.removed ? undefined : w;
    return this.datasets.get(ref);
  }

  /** The version a new map of `ref` starts at: after the last one removed under this epoch, else 0. */
  firstVersion(ref: DatasetRef): number {
    const retired = this.retiredVersions.get(ref);
    return retired === undefined ? 0 : retired + 1;
  }

  datasetRefs(): DatasetRef[] {
    return [...this.datasets.keys()].filter((ds) => this.dataset(ds) !== undefined);
  }

  member(node: NodeId): Member | undefined {
    return this.members.find((m) => m.node === node);
  }

  memberNodes(): NodeId[] {
    return this.members.map((m) => m.node);
  }

  /** Members that may take copies: not being drained. Oldest first. */
  placeableMembers(): Member[] {
    return this.members.filter((m) => !this.draining.has(m.node));
  }

  /** The node operations as they now stand, in a canonical order. */
  operations(): NodeOperations {
    const replacements = [
      ...[...this.draining].flatMap(([old, to]) => (to === undefined ? [] : [{ old, new: to }])),
      ...[...this.pendingReplacements].map(([to, old]) => ({ old, new: to })),
    ].sort((a, b) => (a.old < b.old ? -1 : a.old > b.old ? 1 : 0));
    return { draining: [...this.draining.keys()].sort(), replacements };
  }

  /** What is persisted of the operations: with the absences, the members a successor needs, the paused load moves and the moves for load. */
  persistedOperations(): NodeOperations {
    const absent = [...this.absent.values()].sort((a, b) => (a.member.node < b.member.node ? -1 : a.member.node > b.member.node ? 1 : 0));
    const paused = [...this.loadPaused].filter((ref) => this.dataset(ref) !== undefined).sort();
    const loadMoves = [...this.loads]
      .filter(([ref]) => this.dataset(ref) !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .flatMap(([dataset, load]) => load.moved.map((m) => ({ dataset, shard: m.shard, at: m.at })));
    return {
      ...this.operations(),
      absent,
      members: this.members,
      ...(paused.length === 0 ? {} : { loadBalancePaused: paused }),
      ...(loadMoves.length === 0 ? {} : { loadMoves }),
    };
  }

  /** Whether an operator paused the dataset's moves for load. */
  paused(ref: DatasetRef): boolean {
    return this.loadPaused.has(ref);
  }

  setPaused(ref: DatasetRef, paused: boolean): void {
    if (paused) this.loadPaused.add(ref);
    else this.loadPaused.delete(ref);
  }

  /**
   * Shards of a dataset the strategy must not hand out now: errored shards inside their cooldown,
   * and shards an operator stopped (no copy, Stopped) until an operator starts them. FiloDB places
   * a stopped shard again at the next membership change; shardherd keeps the operator's intent
   * through drains, replacements, joins and failovers (the Stopped status is in the stored map).
   */
  held(ref: DatasetRef): Set<number> {
    const held = this.cooling(ref);
    const ds = this.dataset(ref);
    if (ds) for (const shard of ds.mapper.unassignedShards(Infinity)) if (ds.mapper.statusForShard(shard).type === 'Stopped') held.add(shard);
    return held;
  }

  /** Errored shards inside their reassignment cooldown, without a copy. */
  cooling(ref: DatasetRef): Set<number> {
    const ds = this.dataset(ref);
    const held = new Set<number>();
    if (!ds) return held;
    for (const [shard, at] of ds.cooldowns) {
      if (this.inCooldown(at) && ds.mapper.nodeForShard(shard) === undefined && ds.mapper.statusForShard(shard).type === 'Error') held.add(shard);
    }
    return held;
  }

  /** FiloDB's rule, strict: a shard may move again only when `now - last > cooldown`. */
  inCooldown(reassignedAt: number): boolean {
    return this.now - reassignedAt <= this.settings.reassignmentCooldownMs;
  }

  cooldownEnd(reassignedAt: number): number {
    return reassignedAt + this.settings.reassignmentCooldownMs + 1;
  }

  // ---------------------------------------------------------------- writes

  /**
   * Adds a dataset with its map: a new one (published whole when the step ends), or, after a
   * failover, the map recovered at `recoveredFrom`, which this epoch continues: whoever holds that
   * map goes on from it with this step's changes, and only those who do not need a snapshot.
   */
  createDataset(
    config: DatasetConfig,
    mapper: ShardMapper,
    cooldowns: ReadonlyMap<number, number> = new Map(),
    recoveredFrom?: { readonly epoch: Epoch; readonly version: number },
  ): void {
    this.datasets.set(config.ref, { config, mapper, cooldowns });
    const w = this.edit(config.ref);
    w.created = true;
    if (recoveredFrom) w.base = recoveredFrom;
    else w.snapshotInstead = true;
  }

  /**
   * Remembers that the request answered at `replyTo` was applied (or refused), with its answer,
   * persisted after everything it changed and before the answer goes out: a replay of it after a
   * failover is answered the same and changes nothing.
   */
  recordApplied(replyTo: ReplyTo, id: ReplyTo, fingerprint: string): void {
    this.appliedNow = { replyTo, id, fingerprint };
  }

  private persistApplied(): void {
    const now = this.appliedNow;
    const answer = now === undefined ? undefined : this.replies.find((e) => e.type === 'Reply' && e.to === now.replyTo);
    if (now === undefined || answer?.type !== 'Reply') return;
    this.applied = [...this.applied, { request: now.id, reply: answer.reply, fingerprint: now.fingerprint }].slice(-APPLIED_REQUESTS_KEPT);
    this.persist({ type: 'PersistAppliedRequests', applied: this.applied });
  }

  /** Sets (or clears) the time a dataset's deferred round runs, and when its window opened. */
  setRoundDue(ref: DatasetRef, at: number | undefined, openedAt?: number): void {
    const ds = this.dataset(ref);
    const opened = at === undefined ? undefined : openedAt;
    if (ds?.roundDueAt === at && ds?.windowOpenedAt === opened) return;
    const w = this.edit(ref);
    w.roundDueAt = at;
    w.windowOpenedAt = opened;
  }

  /** Records the planned moves a `balanced` round left waiting for the budget (undefined: not known). */
  setWaitingMoves(ref: DatasetRef, moves: WaitingMoves | undefined): void {
    const before = this.dataset(ref)?.waitingMoves;
    if (before === moves || (before?.count === 0 && moves?.count === 0)) return;
    this.edit(ref).waitingMoves = moves;
  }

  /** Whether a `balanced` round left planned moves waiting for the budget. */
  movesWaiting(ref: DatasetRef): boolean {
    return (this.dataset(ref)?.waitingMoves?.count ?? 0) > 0;
  }

  /** Marks a dataset removed: no map is persisted for it, and it leaves the state. */
  removeDataset(ref: DatasetRef): void {
    this.edit(ref).removed = true;
  }

  /** Applies an event to a dataset's working map; records it for publishing if it changed anything. */
  apply(ref: DatasetRef, event: ShardEvent): boolean {
    const w = this.edit(ref);
    const r = w.mapper.updateFromEvent(event);
    if (!r.ok) throw r.error; // callers validate first: reaching this is a bug, not bad input
    if (r.value.changed) w.events.push(event);
    return r.value.changed;
  }

  /** Every map's stamp now (changes not yet flushed included). */
  mapStamps(): MapStamp[] {
    return this.datasetRefs()
      .sort()
      .map((dataset) => {
        const { mapper } = this.dataset(dataset)!;
        return { dataset, numShards: mapper.numShards, epoch: this.epoch, version: mapper.version };
      });
  }

  /** The version of the member incarnations as they stand now. */
  get membersVersionNow(): number {
    return this.membersVersion + (this.membersChanged() ? 1 : 0);
  }

  private membersChanged(): boolean {
    const incarnations = (ms: readonly Member[]) => ms.map((m) => `${m.node}@${m.incarnation}`).join(' ');
    return incarnations(this.members) !== incarnations(this.baseMembers);
  }

  /** The members are published when the step ends, changed or not. */
  announceMembers(): void {
    this.membersWanted = true;
  }

  setCooldown(ref: DatasetRef, shard: ShardNum, reassignedAt: number): void {
    this.edit(ref).cooldowns.set(shard, reassignedAt);
    this.persist({ type: 'PersistCooldown', dataset: ref, shard, reassignedAt });
  }

  /**
   * Asks the strategy about every member, newest first, applying each answer before asking the next
   * node, as FiloDB does; then asks again until a round places nothing, so a strategy whose answers
   * depend on what later nodes took still leaves no room unused (for the default strategy one round
   * is already a fixpoint, and the extra round costs one count per member). Returns the shards placed.
   * Drained nodes get nothing, and the planned moves off them start (see `planned-moves.ts`).
   * A `balanced` dataset is placed whole by its strategy instead.
   */
  *assignShards(ref: DatasetRef, opts: { exclude?: NodeId; hold?: ReadonlySet<number> } = {}): Steps<ShardNum[]> {
    const ds = this.dataset(ref);
    if (!ds) return [];
    const held = opts.hold ?? this.held(ref);
    if (ds.config.strategy === 'balanced') return yield* balancedRound(this, ref, held);
    // Finished handoffs first: a Leaving copy still counts against its node's room.
    completeHandoffs(this, ref, 1);
    const placed = this.assignFree(ref, held, this.placeableMembers(), opts.exclude);
    // Nothing lost over an operator's intent: when no other member has room, a drained one takes
    // the shards that would otherwise stay unassigned (they move off again once there is room).
    const drained = this.members.filter((m) => this.draining.has(m.node));
    if (drained.length > 0 && freeShards(this.dataset(ref)!.mapper, held, 1).length > 0) {
      const fallback = this.assignFree(ref, held, drained, opts.exclude);
      for (const shard of fallback) {
        this.notice({
          name: 'shard.reassigned',
          level: 'warn',
          dataset: ref,
          shard,
          node: this.dataset(ref)!.mapper.nodeForShard(shard)!,
          message: `${ref}/${shard} went to drained ${this.dataset(ref)!.mapper.nodeForShard(shard)}: no other member has room`,
        });
      }
      placed.push(...fallback);
    }
    startDrainMoves(this, ref);
    return placed;
  }

  /** FiloDB's placement of free shards on `among`, newest first (see `assignShards`). */
  private assignFree(ref: DatasetRef, held: ReadonlySet<number>, among: readonly Member[], exclude: NodeId | undefined): ShardNum[] {
    const ds = this.dataset(ref)!;
    const spec: AssignmentSpec = { numShards: ds.config.numShards, minNumNodes: ds.config.minNumNodes, held };
    const nodes = among
      .map((m) => m.node)
      .reverse()
      .filter((n) => n !== exclude);
    const placed: ShardNum[] = [];
    for (let round = placed.length - 1; round < placed.length;) {
      round = placed.length;
      for (const node of nodes) {
        // Read through `dataset` each time: the first change clones the mapper.
        const shards = this.settings.strategy.shardAssignments(node, spec, this.dataset(ref)!.mapper);
        for (const shard of shards) {
          this.apply(ref, ShardEvents.assignmentStarted(ref, shard, node));
          placed.push(shard);
        }
      }
    }
    return placed;
  }

  persist(effect: Effect): void {
    this.persists.push(effect);
  }

  publish(to: readonly SubscriberId[], message: SubscriberMessage): void {
    if (to.length > 0) this.sends.push({ type: 'Publish', to, message });
  }

  send(effect: Effect): void {
    this.sends.push(effect);
  }

  reply(to: ReplyTo, reply: Reply): void {
    this.replies.push({ type: 'Reply', to, reply });
  }

  ack(effect: Effect): void {
    this.replies.push(effect);
  }

  schedule(at: number): void {
    this.schedules.add(at);
  }

  notice(notice: Notice): void {
    this.notices.add(notice);
  }

  /** The subscriptions, to every watcher. */
  publishSubscriptions(): void {
    this.publish(this.subscriptions.watcherList(), {
      type: 'ShardSubscriptions',
      epoch: this.epoch,
      subscriptions: this.subscriptions.toList(),
      watchers: this.subscriptions.watcherList(),
    });
  }

  /**
   * Emits the pending changes of one dataset now: its map persisted, then its changes (or the
   * whole map, for a new dataset) to every node and subscriber. Nothing when nothing changed.
   */
  flush(ref: DatasetRef): void {
    const w = this.working.get(ref);
    const rebased = w !== undefined && w.base.epoch !== this.epoch;
    if (!w || (w.events.length === 0 && !w.snapshotInstead && !rebased)) return;
    const snapshot = w.mapper.toSnapshot(this.epoch, ref);
    if (!w.removed) this.persist({ type: 'PersistShardMap', snapshot });
    const to = this.subscriptions.subscribersOf(ref);
    const members = this.membersVersionNow;
    if (w.snapshotInstead) this.sends.push({ type: 'PublishSnapshot', to, snapshot, members });
    else
      this.sends.push({ type: 'PublishChanges', to, epoch: this.epoch, dataset: ref, numShards: w.mapper.numShards, base: w.base, events: w.events, members });
    w.events = [];
    w.base = { epoch: this.epoch, version: w.mapper.version };
    w.snapshotInstead = false;
  }

  /** Flushes every dataset changed so far (before a message that must come after their changes). */
  flushAll(): void {
    for (const ref of this.working.keys()) this.flush(ref);
  }

  finish(buffered: ShardManagerState['buffered'] = []): Decision {
    this.flushAll();
    const membersVersion = this.membersVersionNow;
    // After the changes: a node learns it is a member only once its map is the one made for it.
    const incarnation = (m: Member) => ({ node: m.node, incarnation: m.incarnation });
    if (this.membersWanted) {
      this.sends.push({ type: 'PublishMembers', version: membersVersion, members: this.members.map(incarnation) });
    } else if (this.membersChanged()) {
      const key = (m: Member) => `${m.node}@${m.incarnation}`;
      const before = new Set(this.baseMembers.map(key));
      const now = new Set(this.members.map(key));
      this.sends.push({
        type: 'PublishMembersChange',
        version: membersVersion,
        joined: this.members.filter((m) => !before.has(key(m))).map(incarnation),
        left: this.baseMembers.filter((m) => !now.has(key(m))).map(incarnation),
      });
    }
    if (this.subscriptions !== this.baseSubscriptions) {
      this.persist({ type: 'PersistSubscriptions', subscriptions: this.subscriptions.toList(), watchers: this.subscriptions.watcherList() });
    }
    this.membersVersion = membersVersion;
    const operations = this.persistedOperations();
    if (JSON.stringify(operations) !== JSON.stringify(this.baseOperations)) this.persist({ type: 'PersistNodeOperations', operations });
    this.persistApplied();
    const datasets = new Map<DatasetRef, DatasetState>();
    for (const [ref, ds] of this.datasets) {
      const w = this.working.get(ref);
      if (w?.removed) {
        this.retiredVersions.set(ref, w.mapper.version);
        continue;
      }
      datasets.set(
        ref,
        w
          ? {
              config: w.config,
              mapper: w.mapper,
              cooldowns: w.cooldowns,
              waitingMoves: w.waitingMoves,
              ...(w.roundDueAt === undefined ? {} : { roundDueAt: w.roundDueAt, windowOpenedAt: w.windowOpenedAt }),
            }
          : ds,
      );
    }
    const state: ShardManagerState = {
      phase: 'active',
      epoch: this.epoch,
      members: this.members,
      datasets,
      subscriptions: this.subscriptions,
      buffered,
      retiredVersions: this.retiredVersions,
      operations,
      released: [...this.released].filter((n) => this.draining.has(n)).sort(),
      applied: this.applied,
      membersVersion: this.membersVersion,
      absent: this.absent,
      loads: new Map([...this.loads].filter(([ref]) => datasets.has(ref))),
    };
    const schedules: Effect[] = [...this.schedules].sort((a, b) => a - b).map((at) => ({ type: 'ScheduleCheck', at }));
    return { state, effects: [...this.persists, ...this.sends, ...this.replies, ...schedules, ...this.notices.effects()] };
  }

  private edit(ref: DatasetRef): WorkingDataset {
    let w = this.working.get(ref);
    if (!w) {
      const ds = this.datasets.get(ref);
      if (!ds) throw new Error(`no dataset ${ref}`); // handlers check existence first
      w = {
        ref,
        config: ds.config,
        mapper: ds.mapper.clone(),
        cooldowns: new Map(ds.cooldowns),
        waitingMoves: ds.waitingMoves,
        roundDueAt: ds.roundDueAt,
        windowOpenedAt: ds.windowOpenedAt,
        events: [],
        base: { epoch: this.epoch, version: ds.mapper.version },
        created: false,
        removed: false,
        snapshotInstead: false,
      };
      this.working.set(ref, w);
    }
    return w;
  }
}
