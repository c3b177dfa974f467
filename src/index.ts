/**
 * shardherd's public API. Everything a user may import is listed here by name; anything else is
 * internal and may change.
 */

// Identifiers
export type { Brand, DatasetRef, Epoch, Incarnation, NodeId, ReplyTo, ShardNum, SubscriberId } from './core/ids.js';
export {
  datasetRef,
  epoch,
  incarnation,
  isShardInRange,
  nodeId,
  parseDatasetRef,
  parseIncarnation,
  parseNodeId,
  parseSubscriberId,
  replyTo,
  shardNum,
  subscriberId,
} from './core/ids.js';

// Results and errors
export type { Result } from './core/result.js';
export { assertNever, err, ok } from './core/result.js';
export type { ShardherdErrorCode, ShardherdErrorContext } from './core/errors.js';
export {
  DatasetMismatchError,
  InvalidEventError,
  InvalidIdError,
  InvalidShardCountError,
  InvalidSnapshotError,
  InvalidSpreadError,
  ShardherdError,
  ShardOutOfRangeError,
} from './core/errors.js';

// Statuses and events
export type { PlacementState, ShardEvent, ShardEventType, ShardStatus, ShardStatusType } from './core/status.js';
export { isIngestionStatus, NODE_REPORTED_EVENTS, ShardEvents, Status, statusEquals, statusLetter } from './core/status.js';

// Whole-map placement (the `balanced` strategy), its metrics and lower bounds, and scenarios
export type { Placement, PlacementError, PlacementInput, PlacementNode, PlacementStrategy } from './core/placement/placement-types.js';
export { BalancedPlacementStrategy, checkIsolationFeasible } from './core/placement/balanced-strategy.js';
export type { PlacementMetrics } from './core/placement/placement-metrics.js';
export { copiesPerShard, movesLowerBound, placementMetrics, spreadLowerBound, spreadOf } from './core/placement/placement-metrics.js';
export type { PlacementScenario, ScenarioOperation } from './core/placement/scenario.js';
export { applyOperation, describeOperation, parseScenario, toNode, withNodeGroups } from './core/placement/scenario.js';

// Dataset configuration
export type { DatasetConfig, IngestionSourceConfig, InvalidDatasetConfig } from './core/dataset-config.js';
export { datasetConfigDifferences, validateDatasetConfig } from './core/dataset-config.js';

// Shard arithmetic and hashing
export {
  ingestionShard,
  isValidShardCount,
  log2Shards,
  MAX_SHARDS,
  partitionHashMask,
  queryShards,
  shardHashMask,
} from './core/spread.js';
export { combineHashes, DEFAULT_HASH_SEED, murmur3, partitionKeyHash, shardKeyHash } from './core/hashing.js';

// Shard maps
export type { MapperError, UpdateOutcome } from './core/shard-mapper.js';
export { ShardMapper } from './core/shard-mapper.js';
export type { ShardAssignment, ShardMapSnapshot, ShardRecord } from './core/shard-map-snapshot.js';
export { compareStamps, parseShardMapSnapshot, SHARD_MAP_FORMAT } from './core/shard-map-snapshot.js';
export type { CompactSnapshot, EncodedEvents, EncodedRecords } from './core/map-codec.js';
export { COMPACT_MAP_FORMAT, decodeEvents, decodeSnapshot, encodeEvents, encodeSnapshot } from './core/map-codec.js';
export type { FollowOutcome, MapChanges } from './core/map-follower.js';
export { ShardMapFollower } from './core/map-follower.js';

// Assignment strategies
export type { AssignmentSpec, ShardAssignmentStrategy } from './core/assignment-strategy.js';
export { DefaultShardAssignmentStrategy } from './core/assignment-strategy.js';
export { OrdinalBlockShardAssignmentStrategy, ordinalOf, shardsForOrdinal } from './core/ordinal-strategy.js';

// Subscriptions
export { ShardSubscriptions } from './core/subscriptions.js';

// The coordinator's brain
export type {
  DatasetDescription,
  Effect,
  EffectType,
  MapStamp,
  Member,
  MemberIncarnation,
  NodeReportBody,
  Notice,
  NoticeName,
  RecoveryData,
  Reply,
  RunningShard,
  ShardManagerInput,
  ShardManagerInputType,
  ShardsWithoutCopies,
  StampedShardEvent,
  SubscriberMessage,
} from './core/shard-manager/protocol.js';
export type { DatasetState, Decision, ShardManagerState } from './core/shard-manager/step.js';
export type { ShardManagerOptions } from './core/shard-manager/shard-manager.js';
export { DEFAULT_REASSIGNMENT_COOLDOWN_MS, ShardManager } from './core/shard-manager/shard-manager.js';

// Ingestion arithmetic
export { recoveryProgressPct } from './core/recovery-progress.js';

// Ports (what adapters implement) and the in-memory adapters of the embedded mode
export type { Cancel, Clock } from './cluster/clock.js';
export { RealClock, SimulatedClock } from './cluster/clock.js';
export type { JoinRequest, Membership, MembershipView } from './cluster/membership.js';
export { MemoryMembership, MemoryMembershipService } from './cluster/memory-membership.js';
export type { Bus, BusRecord, BusSubscription, IncompleteReason, RecordHandler, SubscribeOptions } from './cluster/bus.js';
export { IncompleteMessageError, MessageTooLargeError } from './cluster/bus.js';
export type { BusLimitOptions, BusLimits } from './cluster/bus-limits.js';
export type { BusFault, MemoryBusOptions, MemoryBusRecord, MemoryChunk } from './cluster/memory-bus.js';
export { MemoryBus } from './cluster/memory-bus.js';
export type { SingletonLease } from './cluster/singleton-lease.js';
export type { Lease, MetaStore, StoredCooldown, StoredSubscriptions } from './store/meta-store.js';
export { FencedError, MetaStoreUnavailableError, MetaStoreWriteTooLargeError } from './store/meta-store.js';
export { MemoryMetaStore } from './store/memory-meta-store.js';
export { FileMetaStore, MetaStoreFileError } from './store/file-meta-store.js';
export type { IngestionSource, RecordSink, ShardReader, SourceRecord } from './ingest/ingestion-source.js';
export { IngestionFailure } from './ingest/ingestion-source.js';
export type { SyntheticSourceOptions } from './ingest/synthetic-source.js';
export { SyntheticSource } from './ingest/synthetic-source.js';
export type { ShardTally } from './ingest/counting-sink.js';
export { CountingSink } from './ingest/counting-sink.js';

// The node runtime, the embedded cluster, and what applications embed
export type { RuntimeOptions, RuntimeSettings } from './actors/settings.js';
export { runtimeSettings } from './actors/settings.js';
export type { ClusterServices, NodeState } from './actors/node-process.js';
export { ShardherdNode } from './actors/node-process.js';
export { RequestTimeoutError } from './actors/node-hub.js';
export type { EmbeddedClusterOptions } from './embedded/embedded-cluster.js';
export { EmbeddedCluster } from './embedded/embedded-cluster.js';
export type { ShardMapListener } from './client/shard-event-subscriber.js';
export { ShardEventSubscriber } from './client/shard-event-subscriber.js';
export type { RoutedAnswer, ShardRouterOptions } from './client/shard-router.js';
export { RoutingError, ShardRouter } from './client/shard-router.js';
export type { ShardCheck } from './core/shard-check.js';
export { checkShard } from './core/shard-check.js';

// Real deployment: the Kafka and Cassandra adapters, the gateway producer, and a node process
export type { KafkaConnection } from './cluster/kafka-client.js';
export type { BusCompression, KafkaBusErrorCode, KafkaBusOptions } from './cluster/kafka-bus.js';
export { KafkaBus, KafkaBusError } from './cluster/kafka-bus.js';
export type { KafkaMembershipErrorCode, KafkaMembershipOptions } from './cluster/kafka-membership.js';
export { KafkaMembership, KafkaMembershipError } from './cluster/kafka-membership.js';
export type { CassandraMetaStoreOptions, KeyspaceReplication } from './store/cassandra-meta-store.js';
export { CassandraMetaStore, MetaStoreRowError } from './store/cassandra-meta-store.js';
export type { KafkaFetchOptions, KafkaIngestionSourceOptions, KafkaValueDecoder } from './ingest/kafka-source.js';
export { decodeKafkaValue, KafkaIngestionSource } from './ingest/kafka-source.js';
export type { SentRecord, ShardedProducerOptions, ShardedRecord } from './client/sharded-producer.js';
export { ShardedProducer } from './client/sharded-producer.js';
export { JsonLinesSink, LogSink } from './ingest/node-sinks.js';
export type { NodeConfig } from './node/node-config.js';
export { loadNodeConfig, NodeConfigError, parseNodeConfig } from './node/node-config.js';
export type { StartedNode, StartNodeOptions } from './node/run-node.js';
export { startNode } from './node/run-node.js';
export type { NodeStatus, SingletonStatus } from './http/node-status.js';
export { startNodeApi, type NodeApi, type NodeApiOptions } from './http/node-api.js';
export { NodeMetrics } from './metrics/node-metrics.js';

// The whole-cluster simulator
export type { Invariant, SimulationOptions, SimulationReport, Violation } from './sim/simulation.js';
export { runSimulation } from './sim/simulation.js';
export { SimDriver } from './sim/driver.js';

// A client that is not a member, and routed requests the library carries (nodes serve them with `ShardherdNode.serve`)
export { ShardherdClient } from './client/shardherd-client.js';
export type { EmbeddedClusterLike, FanOutResult, Labels, RequestOptions, RequestTarget, ShardherdClientOptions, ShardOutcome } from './client/shardherd-client.js';
export { HandlerError, ShardherdClientError } from './client/client-errors.js';
export type { ClientErrorCode, ClientErrorContext, RemoteError } from './client/client-errors.js';
export { FetchTransport, HttpTransport } from './client/http-transport.js';
export type { HttpTransportOptions, RequestTransport, TransportAnswer } from './client/http-transport.js';
export type { SpreadPolicy, SuspicionOptions } from './client/replica-choice.js';
export type { DatasetServerOptions, ShardRequest, ShardRequestHandler } from './serving/dataset-server.js';
