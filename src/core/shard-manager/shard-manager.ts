import { describeCluster } from './describe.js';
import { DefaultShardAssignmentStrategy, type ShardAssignmentStrategy } from '../assignment-strategy.js';
import { datasetConfigDifferences, type DatasetConfig } from '../dataset-config.js';
import type { DatasetRef, Epoch, Incarnation, NodeId, ReplyTo, SubscriberId } from '../ids.js';
import { assertNever, ok } from '../result.js';
import { ShardMapper } from '../shard-mapper.js';
import { ShardEvents } from '../status.js';
import { BalancedPlacementStrategy, checkIsolationFeasible } from '../placement/balanced-strategy.js';
import type { PlacementStrategy } from '../placement/placement-types.js';
import { ShardSubscriptions } from '../subscriptions.js';
import { startShards, stopShards } from './admin.js';
import { addNode, forgetNode, nodeOperationsState, releaseDrainedNodes, removeNode, replaceNode, startPendingReplacement } from './node-operations.js';
import { groupsOf } from './planned-moves.js';
import {
  type Effect,
  isChangingRequest,
  type Member,
  NO_NODE_OPERATIONS,
  type ReadRequest,
  type RecoveryData,
  type Reply,
  requestFingerprint,
  requestIdentity,
  type ShardManagerInput,
} from './protocol.js';
import { recover } from './recovery.js';
import { checkCooldowns, nodeReports } from './reports.js';
import { checkLoads } from './load-balancing.js';
import { explainPlacement, setLoadBalancing } from './load-operator.js';
import { loadReports } from './load-reports.js';
import { endAbsences, nodeJoined, nodeLost } from './absence.js';
import { endSettleWindows, roundUnlessSettling, settleMembershipRounds } from './settle-window.js';
import { type Decision, type ShardManagerState, Step, type StepSettings } from './step.js';
import { worstCaseMapBytes } from '../map-codec.js';
import { count } from '../plural.js';
import { runWhole, type Steps } from '../steps.js';

/** FiloDB's `reassignment-min-interval`: an errored shard moves at most once per 2 hours. */
export const DEFAULT_REASSIGNMENT_COOLDOWN_MS = 2 * 60 * 60 * 1000;

/**
 * How long a membership change's `balanced` round waits for more changes: long enough to take in
 * the membership events of one operation (a rack's nodes stopping, a replacement's leave and join,
 * which a Kafka rebalance reports within a second or so), short next to the replacement delay
 * (60 s) and to a copy's catch-up, so that nothing waits noticeably for it.
 */
export const DEFAULT_SETTLE_WINDOW_MS = 1_000;

export interface ShardManagerOptions {
  /** Which node takes which shards of `filodb-default` datasets. Default: `DefaultShardAssignmentStrategy` (FiloDB's). */
  readonly strategy?: ShardAssignmentStrategy;
  /** The whole-map strategy of `balanced` datasets. Default: `BalancedPlacementStrategy`. */
  readonly placement?: PlacementStrategy;
  /** How long after an error-triggered move a shard may not move again (ms). Default 2 hours. */
  readonly reassignmentCooldownMs?: number;
  /**
   * The largest map the singleton can send and store, encoded (bytes): a dataset whose map could
   * grow past it is refused at setup (`DatasetTooLarge`). Default: the bus's 64 MiB message limit.
   */
  readonly maxMapBytes?: number;
  /**
   * A membership change that leaves every shard of a `balanced` dataset served waits this long
   * (ms) for more changes, and one round then decides them all. 0: a round at every change.
   * Default 1000.
   */
  readonly settleWindowMs?: number;
}

/** The bus's default limit of one message (its `maxMessageBytes`). */
export const DEFAULT_MAX_MAP_BYTES = 64 * 1024 * 1024;

/**
 * The singleton's brain: FiloDB's ShardManager as a pure function
 * `decide(state, input, now) → { state, effects }`. No I/O, no clock, no randomness: the actor layer
 * performs the effects (in list order) and feeds results back as inputs.
 *
 * Every state starts `recovering`: inputs are buffered until the `Recover` input (a first-ever
 * singleton recovers from an empty MetaStore), then replayed in arrival order, never dropped.
 *
 * Gotchas: state objects are shared between calls; never mutate one (mappers included).
 */
export class ShardManager {
  private readonly settings: StepSettings;

  constructor(options: ShardManagerOptions = {}) {
    const cooldown = options.reassignmentCooldownMs ?? DEFAULT_REASSIGNMENT_COOLDOWN_MS;
    if (!Number.isSafeInteger(cooldown) || cooldown < 0) {
      throw new RangeError(`reassignmentCooldownMs must be a non-negative integer (ms), got ${cooldown}`);
    }
    const maxMapBytes = options.maxMapBytes ?? DEFAULT_MAX_MAP_BYTES;
    if (!Number.isSafeInteger(maxMapBytes) || maxMapBytes < 1) throw new RangeError(`maxMapBytes must be a positive integer (bytes), got ${maxMapBytes}`);
    const settleWindowMs = options.settleWindowMs ?? DEFAULT_SETTLE_WINDOW_MS;
    if (!Number.isSafeInteger(settleWindowMs) || settleWindowMs < 0) {
      throw new RangeError(`settleWindowMs must be a non-negative integer (ms), got ${settleWindowMs}`);
    }
    this.settings = {
      strategy: options.strategy ?? new DefaultShardAssignmentStrategy(),
      placement: options.placement ?? new BalancedPlacementStrategy(),
      reassignmentCooldownMs: cooldown,
      maxMapBytes,
      settleWindowMs,
    };
  }

  /** A singleton before recovery, at epoch 0. */
  initialState(): ShardManagerState {
    return {
      phase: 'recovering',
      epoch: 0 as Epoch,
      members: [],
      datasets: new Map(),
      subscriptions: ShardSubscriptions.empty,
      buffered: [],
      retiredVersions: new Map(),
      operations: NO_NODE_OPERATIONS,
      released: [],
      applied: [],
      membersVersion: 0,
      absent: new Map(),
      loads: new Map(),
    };
  }

  decide(state: ShardManagerState, input: ShardManagerInput, now: number): Decision {
    return runWhole(this.decideInSteps(state, input, now));
  }

  /**
   * `decide` in steps (a generator that yields between them, returning the same decision): a
   * runtime gives its event loop a turn at each, so that a large round (65 536 × 3, a join wave) does
   * not hold it for a quarter of a second. Nothing else may decide meanwhile: the steps work on a
   * copy of `state`, and the decision is the next state.
   */
  *decideInSteps(state: ShardManagerState, input: ShardManagerInput, now: number): Steps<Decision> {
    if (state.phase === 'recovering') {
      if (input.type === 'Recover') return yield* this.recover(state, input.recovery, now);
      const notice: Effect = { type: 'Notice', notice: { name: 'input.buffered', level: 'debug', message: `${input.type} buffered until recovery completes` } };
      return { state: { ...state, buffered: [...state.buffered, input] }, effects: [notice] };
    }
    const fingerprint = isChangingRequest(input) ? requestFingerprint(input) : undefined;
    if (isChangingRequest(input)) {
      const id = requestIdentity(input);
      const earlier = state.applied.find((a) => a.request === id);
      if (earlier && earlier.fingerprint !== undefined && earlier.fingerprint !== fingerprint) return reusedKey(state, input.type, id, input.replyTo);
      // Answered where this one waits: a client that sent its request again waits at a new address.
      if (earlier) return replayed(state, input.type, id, input.replyTo, earlier.reply);
    }
    const step = new Step(state, this.settings, now);
    yield* this.handle(step, input);
    yield* settleMembershipRounds(step);
    releaseDrainedNodes(step);
    if (isChangingRequest(input)) step.recordApplied(input.replyTo, requestIdentity(input), fingerprint!);
    return step.finish();
  }

  /**
   * A read request's answer from `state` alone, which it never changes (unlike `decide`, it runs
   * none of the work any input may end, such as releasing a drained node). A runtime may answer
   * reads this way from the last state it acted on while a decision is under way: a read waited
   * behind a 65 536-shard setup for seconds (issue 34).
   */
  answer(state: ShardManagerState, input: ReadRequest, now: number): readonly Effect[] {
    const step = new Step(state, this.settings, now);
    runWhole(this.handle(step, input));
    return step.finish().effects;
  }

  private *recover(state: ShardManagerState, data: RecoveryData, now: number): Steps<Decision> {
    const base: ShardManagerState = {
      ...state,
      epoch: data.epoch,
      members: sortMembers(uniqueMembers(data.members)),
      datasets: new Map(),
      retiredVersions: new Map(),
      operations: data.operations ?? NO_NODE_OPERATIONS,
      released: [],
      applied: data.applied ?? [],
      membersVersion: 0,
      absent: new Map(),
      loads: new Map(),
    };
    const step = new Step(base, this.settings, now);
    yield* recover(step, data);
    step.announceMembers();
    releaseDrainedNodes(step);
    let decision = step.finish();
    const effects = [...decision.effects];
    for (const input of state.buffered) {
      decision = yield* this.decideInSteps(decision.state, input, now);
      effects.push(...decision.effects);
    }
    return { state: decision.state, effects };
  }

  private *handle(step: Step, input: ShardManagerInput): Steps<void> {
    switch (input.type) {
      case 'Recover':
        return step.notice({ name: 'input.ignored', level: 'warn', message: `Recover ignored: this singleton already recovered at epoch ${step.epoch}` });
      case 'MemberUp':
        return yield* memberUp(step, input.member);
      case 'MemberDown':
        return yield* memberDown(step, input.node, input.incarnation);
      case 'MembershipView':
        return yield* membershipView(step, input.members);
      case 'SetupDataset':
        return yield* setupDataset(step, input.config, input.replyTo);
      case 'RemoveDataset':
        return removeDataset(step, input.dataset, input.replyTo);
      case 'Subscribe':
        return subscribe(step, input.subscriber, input.dataset);
      case 'SubscribeAll':
        return subscribeAll(step, input.subscriber);
      case 'Unsubscribe':
        return unsubscribe(step, input.subscriber, input.dataset);
      case 'SubscriberTerminated':
        return unsubscribe(step, input.subscriber, undefined);
      case 'GetShardMap': {
        const ds = step.dataset(input.dataset);
        return step.reply(
          input.replyTo,
          ds ? { type: 'CurrentShardSnapshot', snapshot: ds.mapper.toSnapshot(step.epoch) } : { type: 'DatasetUnknown', dataset: input.dataset },
        );
      }
      case 'ListRegisteredDatasets':
        return step.reply(input.replyTo, { type: 'RegisteredDatasets', datasets: step.datasetRefs().sort() });
      case 'StartShards':
        return yield* startShards(step, input.dataset, input.node, input.shards, input.replyTo);
      case 'StopShards':
        return stopShards(step, input.dataset, input.shards, input.replyTo);
      case 'NodeReport':
        return yield* nodeReports(step, [input]);
      case 'NodeReports':
        return yield* nodeReports(step, input.reports);
      case 'PublishDigest':
        return yield* publishDigest(step);
      case 'SyncMaps':
        return syncMaps(step, input.subscriber, input.datasets, input.members);
      case 'CheckCooldowns':
        yield* checkCooldowns(step);
        endAbsences(step);
        yield* endSettleWindows(step);
        return yield* checkLoads(step);
      case 'LoadReports':
        return yield* loadReports(step, input.reports);
      case 'ExplainPlacement':
        return yield* explainPlacement(step, input.dataset, input.replyTo);
      case 'SetLoadBalancing':
        return setLoadBalancing(step, input.dataset, input.paused, input.replyTo);
      case 'RemoveNode':
        return yield* removeNode(step, input.node, input.replyTo);
      case 'ReplaceNode':
        return yield* replaceNode(step, input.old, input.new, input.replyTo);
      case 'AddNode':
        return yield* addNode(step, input.node, input.replyTo);
      case 'GetNodeOperations':
        return nodeOperationsState(step, input.replyTo);
      case 'DescribeCluster':
        return describeCluster(step, input.replyTo, input.dataset);
      default:
        return assertNever(input);
    }
  }
}

function compareMembers(a: Member, b: Member): number {
  return a.joinedAt !== b.joinedAt ? a.joinedAt - b.joinedAt : a.node < b.node ? -1 : a.node > b.node ? 1 : 0;
}

/**
 * A changing request applied before, seen again: the inbox replays what a crashed singleton read
 * but had not committed. Answered as it was then; nothing changes twice.
 */
function replayed(state: ShardManagerState, type: string, id: ReplyTo, to: ReplyTo, reply: Reply): Decision {
  const notice: Effect = {
    type: 'Notice',
    notice: {
      name: 'request.replayed',
      level: 'info',
      message: `${type} ${id} was applied before (sent again, or replayed by the inbox after a failover): answered as then, nothing changed`,
    },
  };
  return { state, effects: [{ type: 'Reply', to, reply }, notice] };
}

/**
 * A changing request under the key of an applied one that asked something else (an HTTP
 * `Idempotency-Key` used again for another body): refused, nothing changes.
 */
function reusedKey(state: ShardManagerState, type: string, id: ReplyTo, to: ReplyTo): Decision {
  const message = `${id} was used for another request before: a request sent again under the same idempotency key must ask the same thing; nothing changed`;
  const notice: Effect = { type: 'Notice', notice: { name: 'request.id-reused', level: 'warn', message: `${type} refused: ${message}` } };
  return { state, effects: [{ type: 'Reply', to, reply: { type: 'RequestIdReused', message } }, notice] };
}

const sortMembers = (members: readonly Member[]): Member[] => [...members].sort(compareMembers);

/** The last entry per node wins: a view cannot hold two incarnations of one node. */
function uniqueMembers(members: readonly Member[]): Member[] {
  return [...new Map(members.map((m) => [m.node, m])).values()];
}

/**
 * A node joins: free shards are placed, newest member (the joiner) first; nothing assigned moves
 * (FiloDB never rebalances on join). FiloDB asks only the joiner, so a shard freed by StopShards or
 * a skipped error reassignment stays unassigned when the joiner has no room but an older node has.
 * A known node with a new incarnation restarted: it leaves (its shards go down and are re-placed)
 * and joins again last.
 *
 * `balanced` datasets: a node absent within its replacement delay is back and restarts the copies
 * kept for it; a restarted one keeps its copies the same way; a new node ends the absences
 * (`absence.ts`). Their round runs at the end of the step or of the settle window.
 */
function* memberUp(step: Step, member: Member): Steps<void> {
  const existing = step.member(member.node);
  if (existing?.incarnation === member.incarnation) {
    return step.notice({ name: 'member.ignored', level: 'debug', node: member.node, message: `${member.node} is already a member` });
  }
  if (existing) yield* memberDown(step, existing.node, existing.incarnation, true);
  step.members = sortMembers([...step.members, member]);
  step.notice({ name: 'member.up', level: 'info', node: member.node, message: `${member.node} (incarnation ${member.incarnation}) joined` });
  nodeJoined(step, member, existing !== undefined);
  yield* startPendingReplacement(step, member);
  for (const ref of step.datasetRefs()) if (step.dataset(ref)!.config.strategy !== 'balanced') yield* step.assignShards(ref);
}

/**
 * A node left or was declared dead: its shards go down and are re-placed newest-first. A
 * `balanced` dataset keeps the node's copies whose shards are served elsewhere for its replacement
 * delay (`absence.ts`); `restarting`: the node is back already, with a new incarnation.
 */
function* memberDown(step: Step, node: NodeId, incarnation: Incarnation, restarting = false): Steps<void> {
  const member = step.member(node);
  if (!member || member.incarnation !== incarnation) {
    const why = member ? `the member is incarnation ${member.incarnation}` : 'it is not a member';
    return step.notice({ name: 'member.ignored', level: 'info', node, message: `departure of ${node} (incarnation ${incarnation}) ignored: ${why}` });
  }
  const wasDraining = step.draining.has(node);
  step.members = step.members.filter((m) => m.node !== node);
  forgetNode(step, node);
  step.notice({
    name: 'member.down',
    level: 'warn',
    node,
    message: `${node} (incarnation ${incarnation}) is no longer a member: it left or stopped answering`,
  });
  nodeLost(step, member, wasDraining, restarting);
  for (const ref of step.datasetRefs()) {
    if (step.dataset(ref)!.config.strategy === 'balanced') continue;
    const mapper = step.dataset(ref)!.mapper;
    for (const s of mapper.shardsForNode(node)) step.apply(ref, ShardEvents.shardDown(ref, s, node));
    yield* step.assignShards(ref);
  }
}

/**
 * A whole membership view (e.g. after a Kafka rebalance): departures first, then nodes coming back
 * (so that a new node joining in the same view is not taken as their replacement), then the other
 * joins oldest first.
 */
function* membershipView(step: Step, view: readonly Member[]): Steps<void> {
  const members = uniqueMembers(view);
  const byNode = new Map(members.map((m) => [m.node, m]));
  for (const m of [...step.members]) {
    if (byNode.get(m.node)?.incarnation !== m.incarnation) yield* memberDown(step, m.node, m.incarnation);
  }
  const joining = sortMembers(members).filter((m) => !step.member(m.node));
  const back = joining.filter((m) => step.absent.has(m.node));
  for (const m of [...back, ...joining.filter((j) => !back.includes(j))]) yield* memberUp(step, m);
}

function* setupDataset(step: Step, config: DatasetConfig, replyTo: ReplyTo): Steps<void> {
  const existing = step.dataset(config.ref);
  if (existing) {
    const fields = datasetConfigDifferences(existing.config, config);
    if (fields.length === 0) return step.reply(replyTo, { type: 'DatasetExists', dataset: config.ref });
    return step.reply(replyTo, {
      type: 'DatasetConflict',
      dataset: config.ref,
      fields,
      message: `dataset ${config.ref} already exists with a different ${fields.join(', ')}`,
    });
  }
  // Never a silent placement that breaks isolation: replicas need as many racks as copies.
  const feasible = config.replicationFactor > 1 ? checkIsolationFeasible(config.replicationFactor, groupsOf(step.placeableMembers())) : ok(undefined);
  if (!feasible.ok && feasible.error.type === 'IsolationImpossible') {
    const { replicationFactor, groups } = feasible.error;
    return step.reply(replyTo, {
      type: 'IsolationImpossible',
      dataset: config.ref,
      replicationFactor,
      groups,
      message: `dataset ${config.ref}: ${feasible.error.message}`,
    });
  }
  // Never "set up" and then silent: a map the bus could not carry is refused now.
  const bytes = worstCaseMapBytes(
    config.numShards,
    config.replicationFactor,
    step.members.map((m) => m.node),
  );
  if (bytes > step.settings.maxMapBytes) {
    const message = `dataset ${config.ref}: its map (${config.numShards} shards × ${config.replicationFactor}) may take ${bytes} bytes, more than the ${step.settings.maxMapBytes} the bus carries in one message (maxMessageBytes): use fewer shards or raise the limit`;
    return step.reply(replyTo, { type: 'DatasetTooLarge', dataset: config.ref, bytes, limit: step.settings.maxMapBytes, message });
  }
  step.persist({ type: 'PersistDataset', config });
  step.createDataset(config, new ShardMapper(config.numShards, config.ref, step.firstVersion(config.ref)));
  step.subscriptions = step.subscriptions.addDataset(config.ref);
  if (step.subscriptions.watchers.size > 0) step.publishSubscriptions();
  const placed = yield* step.assignShards(config.ref);
  step.notice({
    name: 'dataset.created',
    level: 'info',
    dataset: config.ref,
    message: `dataset ${config.ref} set up: ${config.numShards} shards × ${config.replicationFactor} (${config.strategy}), minNumNodes ${config.minNumNodes}, ${count(placed.length, 'copy', 'copies')} placed over ${count(step.members.length, 'member')}`,
  });
  step.reply(replyTo, { type: 'DatasetVerified', dataset: config.ref });
}

/** Every shard goes down (nodes stop them), subscribers hear `DatasetRemoved`, then it is forgotten. */
function removeDataset(step: Step, dataset: DatasetRef, replyTo: ReplyTo): void {
  const ds = step.dataset(dataset);
  if (!ds) return step.reply(replyTo, { type: 'DatasetUnknown', dataset });
  for (const s of ds.mapper.assignedShards()) {
    for (const node of ds.mapper.nodesForShard(s)) step.apply(dataset, ShardEvents.shardDown(dataset, s, node));
  }
  step.removeDataset(dataset);
  step.flush(dataset);
  // Sent even with no subscriber: every node forgets the dataset on it (the digest would, later).
  step.send({ type: 'Publish', to: step.subscriptions.subscribersOf(dataset), message: { type: 'DatasetRemoved', epoch: step.epoch, dataset } });
  step.subscriptions = step.subscriptions.removeDataset(dataset);
  if (step.subscriptions.watchers.size > 0) step.publishSubscriptions();
  step.persist({ type: 'DeleteDataset', dataset });
  step.notice({ name: 'dataset.removed', level: 'info', dataset, message: `dataset ${dataset} removed` });
  step.reply(replyTo, { type: 'Success' });
}

/**
 * Subscribing again is how a subscriber resyncs after a gap: it always gets a fresh snapshot.
 */
function subscribe(step: Step, subscriber: SubscriberId, dataset: DatasetRef): void {
  if (!step.dataset(dataset)) return step.publish([subscriber], { type: 'DatasetUnknown', dataset });
  const before = step.subscriptions;
  step.subscriptions = before.subscribe(subscriber, dataset);
  if (step.subscriptions !== before && step.subscriptions.watchers.size > 0) step.publishSubscriptions();
  sendSnapshot(step, dataset, [subscriber]);
}

/** The whole map of a dataset, after any change of it this step (a snapshot must not overtake them). */
function sendSnapshot(step: Step, dataset: DatasetRef, to: readonly SubscriberId[]): void {
  step.flush(dataset);
  step.send({ type: 'PublishSnapshot', to, snapshot: step.dataset(dataset)!.mapper.toSnapshot(step.epoch), members: step.membersVersionNow });
}

/**
 * A watcher (a node guardian) gets every dataset now and later, and every subscription change; and
 * the members, which it needs before it acts on any map.
 */
function subscribeAll(step: Step, subscriber: SubscriberId): void {
  step.subscriptions = step.subscriptions.subscribeAll(subscriber);
  step.publishSubscriptions();
  for (const dataset of step.datasetRefs()) sendSnapshot(step, dataset, [subscriber]);
  step.announceMembers();
}

/**
 * A node behind on some maps (it saw a gap, or the digest told it) asks for them: each is
 * broadcast whole, so any other node behind on it catches up with the same record. A dataset the
 * singleton does not know is answered `DatasetUnknown`, so the node forgets it.
 */
function syncMaps(step: Step, subscriber: SubscriberId, datasets: readonly DatasetRef[] | 'all', members: boolean): void {
  for (const dataset of new Set(datasets === 'all' ? step.datasetRefs() : datasets)) {
    if (step.dataset(dataset)) sendSnapshot(step, dataset, [subscriber]);
    else step.publish([subscriber], { type: 'DatasetUnknown', dataset });
  }
  if (members) step.announceMembers();
}

function unsubscribe(step: Step, subscriber: SubscriberId, dataset: DatasetRef | undefined): void {
  const before = step.subscriptions;
  step.subscriptions = before.unsubscribe(subscriber, dataset);
  if (step.subscriptions !== before && step.subscriptions.watchers.size > 0) step.publishSubscriptions();
}

/**
 * The periodic digest: bounds how long a lost message can leave anyone stale. It is small (a stamp
 * per map, two versions) whatever the maps' size: a node or subscriber that is behind asks for
 * what it lacks. Nothing is persisted.
 */
function* publishDigest(step: Step): Steps<void> {
  // Planned moves waiting for the budget get a round at least once per interval: a report that
  // would have run one may have come before the budget freed up (or never, its node having died).
  for (const dataset of step.datasetRefs()) if (step.movesWaiting(dataset)) yield* roundUnlessSettling(step, dataset);
  // The digest tells the stamps after this step's changes: those go out first.
  step.flushAll();
  step.send({ type: 'PublishDigest', maps: step.mapStamps(), members: step.membersVersionNow });
}
