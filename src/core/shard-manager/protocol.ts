import type { FencingToken } from '../fencing-token.js';
import type { DatasetConfig, LoadMeasure } from '../dataset-config.js';
import type { DatasetRef, Epoch, Incarnation, NodeId, ReplyTo, ShardNum, SubscriberId } from '../ids.js';
import type { ShardMapSnapshot } from '../shard-map-snapshot.js';
import type { ShardEvent, ShardStatus, ShardStatusType } from '../status.js';
import { murmur3 } from '../hashing.js';

/** A live node in the membership view. Members are ordered by `joinedAt`, then by node id. */
export interface Member {
  readonly node: NodeId;
  readonly incarnation: Incarnation;
  /** When the member joined (ms); the oldest member hosts the singleton, the newest is asked first. */
  readonly joinedAt: number;
  /** Isolation group: replicas of a shard go to distinct racks. A member without one is its own group. */
  readonly rack?: string;
  readonly address?: string;
  /** Relative capacity for the `balanced` strategy (default 1). */
  readonly weight?: number;
  /** Its failure detector endpoint (host:port), in `heartbeat` mode (docs/ARCHITECTURE.md §11.2). */
  readonly detector?: string;
}

/**
 * Planned node operations in flight, persisted so a new singleton carries them on: nodes being
 * drained (they get no new copies and hand theirs off), and replacements waiting for the new node
 * to join (`old` is drained into `new` when it does).
 */
export interface NodeOperations {
  readonly draining: readonly NodeId[];
  readonly replacements: readonly { readonly old: NodeId; readonly new: NodeId }[];
  /**
   * Members that left and whose copies are kept for them (`balanced` datasets' replacement delay),
   * so a new singleton keeps waiting for them instead of re-creating their copies. Absent in the
   * records of older singletons and in answers to operators.
   */
  readonly absent?: readonly AbsentNode[];
  /**
   * The members the singleton counted at its last change: a successor finds here the rack and
   * weight of a member lost while no singleton ran (its own host, in a rolling restart), and keeps
   * its copies for it as any absent member's. Absent as `absent` is.
   */
  readonly members?: readonly Member[];
  /**
   * Datasets whose moves for load alone an operator paused (`SetLoadBalancing`): persisted, so a
   * new singleton keeps them paused. Absent: none.
   */
  readonly loadBalancePaused?: readonly DatasetRef[];
  /**
   * The copies load rounds moved, when (the singleton's clock), kept while the hourly limit or the
   * shard cooldown counts them: persisted, so a new singleton keeps to `maxMovesPerHour` and the
   * cooldowns across a failover. Absent: none.
   */
  readonly loadMoves?: readonly LoadMoveRecord[];
}

/** One copy moved for load, as the node operations keep it. */
export interface LoadMoveRecord {
  readonly dataset: DatasetRef;
  readonly shard: number;
  readonly at: number;
}

/**
 * One node's load figures for its copies of one dataset, per second over a window (docs/PLACEMENT.md,
 * "Load reports"). Lists by position: `shards[i]`'s copy ingested `records[i]` records, `bytes[i]`
 * bytes, and its sink spent `sinkMs[i]` ms, per second; `weights[i]` is the node's own hook's
 * figure, when it has one.
 */
export interface LoadReport {
  readonly node: NodeId;
  readonly incarnation: Incarnation;
  readonly dataset: DatasetRef;
  /** When the window ended, on the node's clock (ms): a report from the future is refused. */
  readonly at: number;
  readonly windowMs: number;
  readonly shards: readonly number[];
  readonly records: readonly number[];
  readonly bytes: readonly number[];
  readonly sinkMs: readonly number[];
  readonly weights?: readonly number[];
}

/** Why a load figure was refused (counted per dataset, never acted on). */
export type LoadRefusal = 'unknown-dataset' | 'not-a-member' | 'from-the-future' | 'not-a-number' | 'negative' | 'absurd' | 'not-its-copy' | 'malformed';

/**
 * A node's place in the load view of a dataset, as an operator sees it: its load, its share and the
 * band around it; `hotShard` when it carries a hot copy alone (its band is that copy's load).
 */
export interface NodeLoad {
  readonly node: NodeId;
  readonly weight: number;
  readonly copies: number;
  readonly load: number;
  readonly share: number;
  readonly lo: number;
  readonly hi: number;
  readonly hotShard?: number;
}

/** A move a load round plans, with why. */
export interface LoadMove {
  readonly shard: number;
  readonly from: NodeId;
  readonly to: NodeId;
  /** The load the copy carries. */
  readonly load: number;
  readonly why: string;
}

/** Whether a load round would move copies now, and if not, why not. */
export type LoadVerdict =
  'would-move' | 'balanced' | 'within-trigger' | 'paused' | 'waiting' | 'moves-in-flight' | 'hourly-limit' | 'view-incomplete' | 'no-gain' | 'not-load-aware';

/** `ExplainPlacement`'s answer: the load view, and what a load round would do now (a dry run). */
export interface PlacementExplanation {
  readonly dataset: DatasetRef;
  readonly measure: LoadMeasure;
  readonly band: number;
  readonly triggerBand: number;
  readonly paused: boolean;
  /** Shards with a fresh load figure, of those with a serving copy. */
  readonly measured: number;
  readonly serving: number;
  readonly nodes: readonly NodeLoad[];
  readonly hotShards: readonly number[];
  /** Since when some node has been outside the trigger band (ms), if it is. */
  readonly imbalancedSince?: number;
  readonly movesLastHour: number;
  readonly maxMovesPerHour: number;
  /** The most copies one load round moves (the dataset's `maxConcurrentMoves`), and per node (`maxConcurrentMovesPerNode`). */
  readonly maxConcurrentMoves: number;
  readonly maxConcurrentMovesPerNode: number;
  readonly refused: Readonly<Partial<Record<LoadRefusal, number>>>;
  readonly verdict: LoadVerdict;
  readonly message: string;
  /** The moves a load round would plan now (also when the verdict holds them back). */
  readonly moves: readonly LoadMove[];
  /** The load outside the band summed over nodes, now and after those moves. */
  readonly outsideBefore: number;
  readonly outsideAfter: number;
}

/**
 * A member that left or stopped answering and whose copies may be kept for it: absent for each
 * `balanced` dataset until `since` plus that dataset's `replacementDelayMs`.
 */
export interface AbsentNode {
  readonly member: Member;
  readonly since: number;
}

export const NO_NODE_OPERATIONS: NodeOperations = { draining: [], replacements: [] };

/**
 * A request that changed (or may have changed) the cluster, by its reply address (unique per
 * request), with the answer it got. A request replayed from the inbox after a failover is found
 * here and answered the same again instead of being applied twice.
 */
export interface AppliedRequest {
  /** Its idempotency key when it had one, else its reply address (a replay from the inbox has the same). */
  readonly request: ReplyTo;
  readonly reply: Reply;
  /**
   * What was asked, as `requestFingerprint` gives it: a request sent again under the same address
   * (an HTTP `Idempotency-Key` sent again) is answered as the first only if it asks the same
   * thing. Absent from requests applied before fingerprints were kept.
   */
  readonly fingerprint?: string;
}

/** Who a changing request is, for a replay: its idempotency key (an HTTP client's), else its reply address. */
export const requestIdentity = (request: ChangingRequest): ReplyTo =>
  request.idempotencyKey === undefined ? request.replyTo : (`key:${request.idempotencyKey}` as ReplyTo);

/**
 * What a changing request asks, without its reply address and key: its canonical JSON (keys sorted, so a
 * body sent again with its keys in another order asks the same thing), hashed twice with murmur3.
 */
export function requestFingerprint(request: ChangingRequest): string {
  const { replyTo: _, idempotencyKey: __, ...asked } = request;
  const text = canonicalJson(asked);
  return `${(murmur3(text, 1) >>> 0).toString(16).padStart(8, '0')}${(murmur3(text, 2) >>> 0).toString(16).padStart(8, '0')}`;
}

function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

/** How many applied requests the singleton remembers (persisted; the newest kept). */
export const APPLIED_REQUESTS_KEPT = 100;

/** One node's own account of a shard it is running, gathered during recovery. */
export interface RunningShard {
  readonly dataset: DatasetRef;
  readonly shard: number;
  readonly status: ShardStatus;
  /**
   * The fencing token its writes carry now; absent while the node acts on no map that gives it the
   * copy (a new singleton's map not acted on yet, say): it then writes nothing, and waits.
   */
  readonly writingUnder?: FencingToken;
}

/** What a node runs, for an operator: every copy counted per dataset and status, the first ones listed. */
export interface RunningSummary {
  readonly listed: readonly RunningShard[];
  readonly counts: Record<string, Record<string, number>>;
}

/** Everything a new singleton gathered before it acts (docs/ARCHITECTURE.md §6). */
export interface RecoveryData {
  /** The epoch this singleton won by compare-and-set. */
  readonly epoch: Epoch;
  /** Dataset configs from the MetaStore. */
  readonly datasets: readonly DatasetConfig[];
  /** Candidate maps from the MetaStore and every guardian; the newest `(epoch, version)` per dataset wins. */
  readonly maps: readonly ShardMapSnapshot[];
  /** Subscriptions cached by the guardians; merged, never replaced. */
  readonly subscriptions: readonly { readonly dataset: DatasetRef; readonly subscribers: readonly SubscriberId[] }[];
  readonly watchers: readonly SubscriberId[];
  /** Reassignment cooldowns from the MetaStore: when each shard was last moved after an error. */
  readonly cooldowns: readonly { readonly dataset: DatasetRef; readonly shard: number; readonly reassignedAt: number }[];
  /** Drains and replacements in flight, from the MetaStore (absent: none). */
  readonly operations?: NodeOperations;
  /** The last requests applied, from the MetaStore (absent: none). */
  readonly applied?: readonly AppliedRequest[];
  /** The membership view now. */
  readonly members: readonly Member[];
  /** What each node that answered says it runs. */
  readonly running: readonly { readonly node: NodeId; readonly incarnation: Incarnation; readonly shards: readonly RunningShard[] }[];
}

/** Everything `ShardManager.decide` accepts. */
export type ShardManagerInput =
  | { readonly type: 'Recover'; readonly recovery: RecoveryData }
  | { readonly type: 'MemberUp'; readonly member: Member }
  | { readonly type: 'MemberDown'; readonly node: NodeId; readonly incarnation: Incarnation }
  | { readonly type: 'MembershipView'; readonly members: readonly Member[] }
  | { readonly type: 'SetupDataset'; readonly config: DatasetConfig; readonly replyTo: ReplyTo; readonly idempotencyKey?: string }
  | { readonly type: 'RemoveDataset'; readonly dataset: DatasetRef; readonly replyTo: ReplyTo; readonly idempotencyKey?: string }
  /** `mapFormat`, here and in `SyncMaps`: the newest whole-map format the subscriber reads (the runtime's concern; the core ignores it). */
  | { readonly type: 'Subscribe'; readonly subscriber: SubscriberId; readonly dataset: DatasetRef; readonly mapFormat?: number }
  | { readonly type: 'SubscribeAll'; readonly subscriber: SubscriberId }
  | { readonly type: 'Unsubscribe'; readonly subscriber: SubscriberId; readonly dataset?: DatasetRef }
  | { readonly type: 'SubscriberTerminated'; readonly subscriber: SubscriberId }
  | { readonly type: 'GetShardMap'; readonly dataset: DatasetRef; readonly replyTo: ReplyTo }
  | { readonly type: 'ListRegisteredDatasets'; readonly replyTo: ReplyTo }
  /** `node` is the raw string an operator typed: a malformed or unknown one gets `BadData`. */
  | {
      readonly type: 'StartShards';
      readonly dataset: DatasetRef;
      readonly node: string;
      readonly shards: readonly number[];
      readonly replyTo: ReplyTo;
      readonly idempotencyKey?: string;
    }
  | {
      readonly type: 'StopShards';
      readonly dataset: DatasetRef;
      readonly shards: readonly number[];
      readonly replyTo: ReplyTo;
      readonly idempotencyKey?: string;
    }
  /** A node's shard events, numbered by the node; acknowledged after they are applied and published. */
  | ({ readonly type: 'NodeReport' } & NodeReportBody)
  /**
   * Reports that arrived together (from one node or several), applied in order in one decision:
   * their changes go out as one record per dataset instead of one per report.
   */
  | { readonly type: 'NodeReports'; readonly reports: readonly NodeReportBody[] }
  /**
   * The periodic digest (every map's stamp and the members' version): a node or subscriber that is
   * behind or missed something learns it and asks (`SyncMaps`). Bounds staleness.
   */
  | { readonly type: 'PublishDigest' }
  /**
   * A node that is behind asks for what it lacks: the whole maps of these datasets (or of every
   * dataset: a node starting), broadcast so that every node behind on one catches up from the same
   * record, and the members. `subscriber` is who asked (a node's guardian).
   */
  | {
      readonly type: 'SyncMaps';
      readonly subscriber: SubscriberId;
      readonly datasets: readonly DatasetRef[] | 'all';
      readonly members: boolean;
      readonly mapFormat?: number;
    }
  /**
   * Sent at a `ScheduleCheck` time: places shards whose reassignment cooldown has ended, ends the
   * replacement delays and settle windows that are due (the name is the first timer it served).
   */
  | { readonly type: 'CheckCooldowns' }
  /**
   * Drain: every copy on `node` is handed off (new copy first, old one removed once the new one
   * serves), then the node is released (told it may stop). `node` is raw operator input.
   */
  | { readonly type: 'RemoveNode'; readonly node: string; readonly replyTo: ReplyTo; readonly idempotencyKey?: string }
  /**
   * Each copy of `old` is handed to `new` (moves = old's copies, not twice that). If `new` is not a
   * member yet the replacement waits for it to join. Raw operator input.
   */
  | { readonly type: 'ReplaceNode'; readonly old: string; readonly new: string; readonly replyTo: ReplyTo; readonly idempotencyKey?: string }
  /** Undoes a drain or a pending replacement of `node`, so it takes copies again. Raw operator input. */
  | { readonly type: 'AddNode'; readonly node: string; readonly replyTo: ReplyTo; readonly idempotencyKey?: string }
  /** The planned operations in flight and what each node still holds. */
  | { readonly type: 'GetNodeOperations'; readonly replyTo: ReplyTo }
  /** Nodes' load figures for their copies (sent every report window, never acknowledged). */
  | { readonly type: 'LoadReports'; readonly reports: readonly LoadReport[] }
  /** A load-aware dataset's load view and what a load round would do now, changing nothing. */
  | { readonly type: 'ExplainPlacement'; readonly dataset: DatasetRef; readonly replyTo: ReplyTo }
  /** Pauses (or resumes) a load-aware dataset's moves for load alone; joins, drains and lost copies still move. */
  | { readonly type: 'SetLoadBalancing'; readonly dataset: DatasetRef; readonly paused: boolean; readonly replyTo: ReplyTo; readonly idempotencyKey?: string }
  /**
   * Everything an operator looks at but the maps themselves (every node follows those): members,
   * datasets with their map stamps, cooldowns and missing copies, operations; one dataset's only if
   * `dataset` is given.
   */
  | { readonly type: 'DescribeCluster'; readonly replyTo: ReplyTo; readonly dataset?: DatasetRef };

export type ShardManagerInputType = ShardManagerInput['type'];

/** One node report: its sender, the report's number, and its events. */
export interface NodeReportBody {
  readonly node: NodeId;
  readonly incarnation: Incarnation;
  readonly seq: number;
  readonly events: readonly ShardEvent[];
}

/** Requests that change the cluster: each is applied once, however often the inbox replays it. */
export type ChangingRequest = Extract<
  ShardManagerInput,
  { type: 'SetupDataset' | 'RemoveDataset' | 'StartShards' | 'StopShards' | 'RemoveNode' | 'ReplaceNode' | 'AddNode' | 'SetLoadBalancing' }
>;

const CHANGING_REQUESTS: ReadonlySet<ShardManagerInputType> = new Set<ChangingRequest['type']>([
  'SetupDataset',
  'RemoveDataset',
  'StartShards',
  'StopShards',
  'RemoveNode',
  'ReplaceNode',
  'AddNode',
  'SetLoadBalancing',
]);

export const isChangingRequest = (input: ShardManagerInput): input is ChangingRequest => CHANGING_REQUESTS.has(input.type);

/** Requests that only read the state: answered from it without changing it (`ShardManager.answer`). */
export type ReadRequest = Extract<
  ShardManagerInput,
  { type: 'GetShardMap' | 'ListRegisteredDatasets' | 'GetNodeOperations' | 'DescribeCluster' | 'ExplainPlacement' }
>;

const READ_REQUESTS: ReadonlySet<string> = new Set<ReadRequest['type']>([
  'GetShardMap',
  'ListRegisteredDatasets',
  'GetNodeOperations',
  'DescribeCluster',
  'ExplainPlacement',
]);

export const isReadRequestType = (type: string): type is ReadRequest['type'] => READ_REQUESTS.has(type);
export const isReadRequest = (input: ShardManagerInput): input is ReadRequest => READ_REQUESTS.has(input.type);

/** Answers to requests, FiloDB's names. Expected failures are replies, not exceptions. */
export type Reply =
  | { readonly type: 'DatasetVerified'; readonly dataset: DatasetRef }
  | { readonly type: 'DatasetExists'; readonly dataset: DatasetRef }
  | { readonly type: 'DatasetConflict'; readonly dataset: DatasetRef; readonly fields: readonly string[]; readonly message: string }
  | { readonly type: 'DatasetUnknown'; readonly dataset: DatasetRef }
  | { readonly type: 'Success' }
  | { readonly type: 'BadSchema'; readonly message: string }
  | { readonly type: 'BadData'; readonly message: string }
  | { readonly type: 'CurrentShardSnapshot'; readonly snapshot: ShardMapSnapshot }
  | { readonly type: 'RegisteredDatasets'; readonly datasets: readonly DatasetRef[] }
  /** A dataset's replicas cannot go to distinct isolation groups with the members there are. */
  | {
      readonly type: 'IsolationImpossible';
      readonly dataset: DatasetRef;
      readonly replicationFactor: number;
      readonly groups: readonly string[];
      readonly message: string;
    }
  /** The dataset's map could not be carried on the bus within its limit (`maxMapBytes`): nothing was set up. */
  | { readonly type: 'DatasetTooLarge'; readonly dataset: DatasetRef; readonly bytes: number; readonly limit: number; readonly message: string }
  /** A node operation started (or, for a replacement whose new node has not joined, was recorded). */
  | {
      readonly type: 'NodeOperationAccepted';
      readonly operation: NodeOperationName;
      readonly node: NodeId;
      readonly moves: number;
      readonly pending: boolean;
      readonly message: string;
    }
  /** A node operation refused; nothing changed. */
  | { readonly type: 'NodeOperationRefused'; readonly operation: NodeOperationName; readonly reason: NodeOperationRefusal; readonly message: string }
  | {
      readonly type: 'NodeOperationsState';
      readonly operations: NodeOperations;
      readonly copies: readonly { readonly node: NodeId; readonly copies: number; readonly leaving: number }[];
    }
  | { readonly type: 'PlacementExplanation'; readonly explanation: PlacementExplanation }
  /** `SetLoadBalancing` applied (or a dataset that does not place by load: `NotLoadAware`). */
  | { readonly type: 'LoadBalancingSet'; readonly dataset: DatasetRef; readonly paused: boolean }
  | { readonly type: 'NotLoadAware'; readonly dataset: DatasetRef; readonly message: string }
  /** A request sent under the address of an applied one, asking something else: nothing changed. */
  | { readonly type: 'RequestIdReused'; readonly message: string }
  | {
      readonly type: 'ClusterDescription';
      readonly epoch: Epoch;
      readonly members: readonly Member[];
      readonly datasets: readonly DatasetDescription[];
      readonly operations: NodeOperations;
      /** Failures of the singleton's node that no retry fixes (added by the actor, not the core). */
      readonly problems?: readonly OperatorProblem[];
    };

/** A failure no retry fixes, as a node keeps it for operators: each is logged once and counted. */
export interface OperatorProblem {
  /** The event it was logged under (docs/EVENTS.md). */
  readonly event: string;
  /** What failed; one entry per event and cause. */
  readonly cause: string;
  readonly message: string;
  readonly count: number;
  /** When it happened first and last (ms). */
  readonly firstAt: number;
  readonly lastAt: number;
}

/** Which map of a dataset: its shard count and `(epoch, version)` stamp. */
export interface MapStamp {
  readonly dataset: DatasetRef;
  readonly numShards: number;
  readonly epoch: Epoch;
  readonly version: number;
}

/**
 * One dataset as `DescribeCluster` tells it: not its map (thousands of shards; every node follows
 * it), only the map's stamp, so a reader can check its own copy is as new.
 */
export interface DatasetDescription {
  readonly config: DatasetConfig;
  readonly stamp: MapStamp;
  /** Shards inside their reassignment cooldown; `endsAt` is when they may move again (ms). */
  readonly cooldowns: readonly { readonly shard: number; readonly reassignedAt: number; readonly endsAt: number }[];
  /** Shards with fewer copies than the replication factor, grouped by why and by how many copies they have. */
  readonly missingCopies: readonly ShardsWithoutCopies[];
  /** Shards per status in the map of `stamp`: what a summary shows without the map itself. */
  readonly counts: Partial<Record<ShardStatusType, number>>;
  /** Copies of the dataset each node holds in that map, by node (nodes holding none left out). */
  readonly copies: Readonly<Record<string, number>>;
}

export interface ShardsWithoutCopies {
  readonly shards: readonly number[];
  /** Copies each of them has (0: unassigned). */
  readonly copies: number;
  readonly reason: string;
}

export type NodeOperationName = 'remove' | 'replace' | 'add';
/** Why a node operation was refused: a malformed or unknown node, isolation, a busy target, or capacity. */
export type NodeOperationRefusal = 'bad-node' | 'unknown-node' | 'isolation' | 'serving' | 'capacity' | 'conflict';

/** A node incarnation the singleton counts as a member. */
export interface MemberIncarnation {
  readonly node: NodeId;
  readonly incarnation: Incarnation;
}

/** A shard event as published: `(epoch, version)` is the map's stamp right after the event applied. */
export interface StampedShardEvent {
  readonly type: 'StampedShardEvent';
  readonly epoch: Epoch;
  readonly version: number;
  readonly event: ShardEvent;
}

/** What subscribers receive. */
export type SubscriberMessage =
  | { readonly type: 'CurrentShardSnapshot'; readonly snapshot: ShardMapSnapshot }
  | StampedShardEvent
  | {
      readonly type: 'ShardSubscriptions';
      readonly epoch: Epoch;
      readonly subscriptions: readonly { readonly dataset: DatasetRef; readonly subscribers: readonly SubscriberId[] }[];
      readonly watchers: readonly SubscriberId[];
    }
  | { readonly type: 'DatasetUnknown'; readonly dataset: DatasetRef }
  | { readonly type: 'DatasetRemoved'; readonly epoch: Epoch; readonly dataset: DatasetRef }
  /**
   * The singleton's map of the dataset is at this stamp (from its periodic digest): a subscriber
   * whose map is older missed something and subscribes again.
   */
  | { readonly type: 'ShardMapStamp'; readonly epoch: Epoch; readonly dataset: DatasetRef; readonly version: number };

/** Named, documented happenings that logs and metrics hang off (see docs/EVENTS.md). */
export type NoticeName =
  | 'singleton.recovered'
  | 'recovery.map-chosen'
  | 'recovery.map-ignored'
  | 'recovery.shard-adopted'
  | 'recovery.stray-shard'
  | 'recovery.node-fenced'
  | 'member.up'
  | 'member.down'
  | 'member.ignored'
  | 'node.draining'
  | 'node.drained'
  | 'node.replacement-pending'
  | 'node.operation-cancelled'
  | 'node.absent'
  | 'node.returned'
  | 'node.absence-ended'
  | 'round.deferred'
  | 'shard.handoff-started'
  | 'shard.handoff-completed'
  | 'shard.handoff-cancelled'
  | 'shard.replica-added'
  | 'dataset.created'
  | 'dataset.removed'
  | 'shard.reassigned'
  | 'shard.reassignment-skipped'
  | 'shard.cooldown-ended'
  | 'load.reports-refused'
  | 'load.imbalanced'
  | 'load.moves-planned'
  | 'load.paused'
  | 'report.rejected'
  | 'input.buffered'
  | 'input.ignored'
  | 'request.replayed'
  | 'request.id-reused';

export interface Notice {
  readonly name: NoticeName;
  readonly level: 'debug' | 'info' | 'warn';
  readonly message: string;
  readonly dataset?: DatasetRef;
  readonly shard?: number;
  readonly node?: NodeId;
  /**
   * Set when this notice stands for many of one decision (`NoticeLots`): how many, and the
   * messages of the first few. `shard` and `node` are then the first one's.
   */
  readonly lot?: { readonly count: number; readonly sample: readonly string[] };
}

/**
 * What the actor layer must do, in list order: persist first, then publish and send, then reply
 * and acknowledge (so an acknowledged report is always applied, persisted and published).
 */
export type Effect =
  | { readonly type: 'PersistDataset'; readonly config: DatasetConfig }
  | { readonly type: 'DeleteDataset'; readonly dataset: DatasetRef }
  | { readonly type: 'PersistShardMap'; readonly snapshot: ShardMapSnapshot }
  | { readonly type: 'PersistCooldown'; readonly dataset: DatasetRef; readonly shard: ShardNum; readonly reassignedAt: number }
  /** The requests applied lately, whenever one was: a replay after a failover is answered, not applied again. */
  | { readonly type: 'PersistAppliedRequests'; readonly applied: readonly AppliedRequest[] }
  /** The planned node operations, whenever they changed: a drain outlives the singleton that began it. */
  | { readonly type: 'PersistNodeOperations'; readonly operations: NodeOperations }
  /** The whole subscription list, whenever it changed: a subscriber told it is subscribed stays so across failovers. */
  | {
      readonly type: 'PersistSubscriptions';
      readonly subscriptions: readonly { readonly dataset: DatasetRef; readonly subscribers: readonly SubscriberId[] }[];
      readonly watchers: readonly SubscriberId[];
    }
  /** A message for some subscribers: subscriptions to the watchers, a dataset unknown or removed. */
  | { readonly type: 'Publish'; readonly to: readonly SubscriberId[]; readonly message: SubscriberMessage }
  /**
   * One decision's changes to a dataset's map, in order: they turn the map at `base` into the map
   * at `(epoch, base.version + events.length)`, event i stamped `base.version + i + 1`. Every node
   * applies them to its copy and runs exactly the shards its copy gives it; `to` are the subscribers
   * of the dataset. `base.epoch` is older than `epoch` only after a failover: the new singleton
   * continues the map it recovered, and whoever holds that map continues with it.
   */
  | {
      readonly type: 'PublishChanges';
      readonly to: readonly SubscriberId[];
      readonly epoch: Epoch;
      readonly dataset: DatasetRef;
      readonly numShards: number;
      readonly base: { readonly epoch: Epoch; readonly version: number };
      readonly events: readonly ShardEvent[];
      /** The members' version the changed map was made for (see `PublishSnapshot`). */
      readonly members: number;
    }
  /** A whole map, for everyone behind on it (a new dataset, a sync, a subscribe); `to` must have it. */
  /**
   * `members`: the members' version the map was made for. A node that joined at a members version
   * acts only on a map made for that version or a later one: an older map may still give it the
   * copies of its previous incarnation (a delayed record, a sync answer overtaken).
   */
  | { readonly type: 'PublishSnapshot'; readonly to: readonly SubscriberId[]; readonly snapshot: ShardMapSnapshot; readonly members: number }
  /**
   * The member incarnations the maps are made for, whole (after a failover, or for a node that
   * asked): a node acts on its map only while its own incarnation is among them, so a restarted
   * node never runs what its previous incarnation was given.
   */
  | { readonly type: 'PublishMembers'; readonly version: number; readonly members: readonly MemberIncarnation[] }
  /**
   * How the member incarnations changed in one decision (after that decision's changes of the
   * maps): `version - 1` is the version they apply to. A thousand members are not sent again for
   * one that joined.
   */
  | {
      readonly type: 'PublishMembersChange';
      readonly version: number;
      readonly joined: readonly MemberIncarnation[];
      readonly left: readonly MemberIncarnation[];
    }
  /** The periodic digest: every map's stamp and the members' version. */
  | { readonly type: 'PublishDigest'; readonly maps: readonly MapStamp[]; readonly members: number }
  /** Tells a drained node that it holds nothing any more and may stop. */
  | { readonly type: 'ReleaseNode'; readonly node: NodeId; readonly incarnation: Incarnation }
  /** Tells a node that is not a member to stop every shard it runs. */
  | { readonly type: 'FenceNode'; readonly node: NodeId; readonly incarnation: Incarnation; readonly reason: string }
  | { readonly type: 'Reply'; readonly to: ReplyTo; readonly reply: Reply }
  | { readonly type: 'AckReport'; readonly node: NodeId; readonly incarnation: Incarnation; readonly seq: number }
  /** Feed `CheckCooldowns` at (or after) this time. */
  | { readonly type: 'ScheduleCheck'; readonly at: number }
  | { readonly type: 'Notice'; readonly notice: Notice };

export type EffectType = Effect['type'];
