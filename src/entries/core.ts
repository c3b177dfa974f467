/**
 * `shardherd/core`: the coordinator's internals, for tools, simulators and alternative runtimes: the
 * ShardManager (the singleton's pure `decide`) with its inputs and effects, the compact map codec,
 * the map follower, subscriptions, the assignment and placement strategies with their arithmetic,
 * and the ports a hand-built node runs on. Loads none of kafkajs, cassandra-driver and fastify.
 *
 * Gotchas: unlike the root, these may change between minor versions.
 */

// The coordinator's brain
export type {
  ChangingRequest,
  Effect,
  EffectType,
  MemberIncarnation,
  NodeReportBody,
  Notice,
  NoticeName,
  RecoveryData,
  ShardManagerInput,
  ShardManagerInputType,
} from '../core/shard-manager/protocol.js';
export type { DatasetState, Decision, ShardManagerState } from '../core/shard-manager/step.js';
export type { ShardManagerOptions } from '../core/shard-manager/shard-manager.js';
export { DEFAULT_REASSIGNMENT_COOLDOWN_MS, DEFAULT_SETTLE_WINDOW_MS, ShardManager } from '../core/shard-manager/shard-manager.js';
export { ShardSubscriptions } from '../core/subscriptions.js';

// Shard maps on the wire
export { compareStamps } from '../core/shard-map-snapshot.js';
export type { CompactSnapshot, EncodedEvents, EncodedRecords, PackedSnapshot } from '../core/map-codec.js';
export {
  COMPACT_MAP_FORMAT,
  decodeEvents,
  decodeSnapshot,
  encodeEvents,
  encodeSnapshot,
  NEWEST_MAP_FORMAT,
  PACKED_MAP_FORMAT,
  packSnapshot,
} from '../core/map-codec.js';
export type { FollowOutcome, MapChanges } from '../core/map-follower.js';
export { ShardMapFollower } from '../core/map-follower.js';

// Assignment strategies
export type { AssignmentSpec, ShardAssignmentStrategy } from '../core/assignment-strategy.js';
export { DefaultShardAssignmentStrategy } from '../core/assignment-strategy.js';
export { OrdinalBlockShardAssignmentStrategy, ordinalOf, shardsForOrdinal } from '../core/ordinal-strategy.js';

// Whole-map placement (the `balanced` strategy and its `load-aware` mode), its metrics and lower bounds, and scenarios
export type { Placement, PlacementError, PlacementInput, PlacementNode, PlacementStrategy } from '../core/placement/placement-types.js';
export { BalancedPlacementStrategy, checkIsolationFeasible } from '../core/placement/balanced-strategy.js';
export type { LoadAwareDecision, LoadAwareInput } from '../core/placement/load-aware-strategy.js';
export { DEFAULT_LOAD_BAND, LoadAwarePlacementStrategy } from '../core/placement/load-aware-strategy.js';
export type { LoadBalanceReport } from '../core/placement/load-balance.js';
export type { PlacementMetrics } from '../core/placement/placement-metrics.js';
export { copiesPerShard, movesLowerBound, placementMetrics, spreadLowerBound, spreadOf } from '../core/placement/placement-metrics.js';
export type { PlacementScenario, ScenarioOperation } from '../core/placement/scenario.js';
export { applyOperation, describeOperation, parseScenario, toNode, withNodeGroups } from '../core/placement/scenario.js';

// Ingestion arithmetic
export { recoveryProgressPct } from '../core/recovery-progress.js';

// The ports a node is built on by hand (`new ShardherdNode(services, ...)`)
export type { ClusterServices } from '../actors/node-process.js';
