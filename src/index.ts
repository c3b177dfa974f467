/**
 * shardherd's public API, the package root (`shardherd`): what an application needs to run an
 * embedded cluster, follow shard maps and route to shards. Everything is listed here by name.
 *
 * The root loads none of kafkajs, cassandra-driver and fastify (a test checks it): the adapters of a
 * real deployment are behind `shardherd/kafka`, `shardherd/cassandra`, `shardherd/node` and
 * `shardherd/http`, the simulator behind `shardherd/sim`, and the coordinator's internals (the
 * ShardManager, its protocol, the map codec, placement arithmetic) behind `shardherd/core`, which
 * may change between minor versions.
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

// Dataset configuration
export type {
  DatasetConfig,
  DatasetConfigInput,
  IngestionSourceConfig,
  IngestionSourceConfigInput,
  InvalidDatasetConfig,
  LoadBalanceConfig,
  LoadBalanceConfigInput,
  LoadMeasure,
  PlacementStrategyName,
} from './core/dataset-config.js';
export { DEFAULT_LOAD_BALANCE, DEFAULT_REPLACEMENT_DELAY_MS, datasetConfigDifferences, validateDatasetConfig } from './core/dataset-config.js';

// Shard arithmetic and hashing
export { ingestionShard, isValidShardCount, log2Shards, MAX_SHARDS, partitionHashMask, queryShards, shardHashMask } from './core/spread.js';
export { combineHashes, DEFAULT_HASH_SEED, murmur3, partitionKeyHash, shardKeyHash } from './core/hashing.js';

// Shard maps
export type { MapperError, UpdateOutcome } from './core/shard-mapper.js';
export { ShardMapper } from './core/shard-mapper.js';
export type { ShardAssignment, ShardMapSnapshot, ShardRecord } from './core/shard-map-snapshot.js';
export { parseShardMapSnapshot, SHARD_MAP_FORMAT } from './core/shard-map-snapshot.js';

// What requests answer, what subscribers receive, and what a node runs
export type {
  DatasetDescription,
  LoadMove,
  LoadRefusal,
  LoadReport,
  LoadVerdict,
  MapStamp,
  Member,
  NodeLoad,
  PlacementExplanation,
  Reply,
  RunningShard,
  ShardsWithoutCopies,
  StampedShardEvent,
  SubscriberMessage,
} from './core/shard-manager/protocol.js';

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
export type { IngestionSource, RecordSink, ShardReader, SinkStorage, SourceRecord } from './ingest/ingestion-source.js';
export { IngestionFailure } from './ingest/ingestion-source.js';
export type { SyntheticSourceOptions } from './ingest/synthetic-source.js';
export { SyntheticSource } from './ingest/synthetic-source.js';
export type { ShardTally } from './ingest/counting-sink.js';
export { CountingSink } from './ingest/counting-sink.js';
export { JsonLinesSink, LogSink } from './ingest/node-sinks.js';
export type { FencingToken } from './core/fencing-token.js';
export { compareTokens, isFencingToken, StaleTokenError, tokenText } from './core/fencing-token.js';
export { TokenFence } from './ingest/token-fence.js';

// The node runtime, the embedded cluster, and what applications embed
export type { RuntimeOptions, RuntimeSettings } from './actors/settings.js';
export { runtimeSettings } from './actors/settings.js';
export type { NodeState, RestartTrouble } from './actors/node-process.js';
export { ShardherdNode } from './actors/node-process.js';
export { RequestTimeoutError } from './actors/node-hub.js';
export type { EmbeddedClusterOptions, EmbeddedNodeSpec, Request } from './embedded/embedded-cluster.js';
export type { LoadWeightHook } from './actors/load-meter.js';
export { ClusterWaitTimeoutError, EmbeddedCluster } from './embedded/embedded-cluster.js';
export type { ShardMapListener } from './client/shard-event-subscriber.js';
export { ShardEventSubscriber } from './client/shard-event-subscriber.js';
export type { RoutedAnswer, ShardRouterOptions } from './client/shard-router.js';
export { RoutingError, ShardRouter } from './client/shard-router.js';
export type { ShardCheck } from './core/shard-check.js';
export { checkShard } from './core/shard-check.js';
export { NodeMetrics } from './metrics/node-metrics.js';

// A client that is not a member, and routed requests the library carries (nodes serve them with `ShardherdNode.serve`)
export { ShardherdClient } from './client/shardherd-client.js';
export type {
  EmbeddedClusterLike,
  FanOutResult,
  Labels,
  RequestOptions,
  RequestTarget,
  ShardherdClientOptions,
  ShardOutcome,
} from './client/shardherd-client.js';
export { HandlerError, ShardherdClientError } from './client/client-errors.js';
export type { ClientErrorCode, ClientErrorContext, RemoteError } from './client/client-errors.js';
export { FetchTransport, HttpTransport } from './client/http-transport.js';
export type { HttpTransportOptions, RequestTransport, TransportAnswer } from './client/http-transport.js';
export type { AttemptCancellation } from './core/cancellation.js';
export type { SpreadPolicy, SuspicionOptions } from './client/replica-choice.js';
export type { DatasetServerOptions, ShardRequest, ShardRequestHandler } from './serving/dataset-server.js';

// Elsewhere: `shardherd/kafka` (KafkaBus, KafkaMembership, KafkaIngestionSource, ShardedProducer),
// `shardherd/cassandra` (CassandraMetaStore), `shardherd/node` (startNode and its config),
// `shardherd/http` (the node's HTTP API), `shardherd/sim` (the simulator), `shardherd/core`.
