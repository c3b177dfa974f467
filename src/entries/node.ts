/**
 * `shardherd/node`: a real node process (what `shardherd node` runs) from its config file: Kafka bus
 * and membership, Cassandra MetaStore, the ingestion source, and the HTTP API when configured.
 * Loads kafkajs, cassandra-driver and fastify, and @platformatic/kafka once a part runs on it (the default).
 */
export type { NodeConfig, ServeConfig } from '../node/node-config.js';
export type { LoadedServeHandler, ServeHandlerContext } from '../node/serve-handlers.js';
export { loadServeHandlers } from '../node/serve-handlers.js';
// What `started.node.serve(dataset, handler, options)` takes (also exported by `shardherd`).
export type { DatasetServerOptions, ShardRequest, ShardRequestHandler } from '../serving/dataset-server.js';
export { loadNodeConfig, NodeConfigError, parseNodeConfig } from '../node/node-config.js';
export type { StartedNode, StartNodeOptions } from '../node/run-node.js';
export { startNode } from '../node/run-node.js';
export { StatusPortError } from '../node/status-port.js';
export { BrokersUnreachableError } from '../cluster/broker-reach.js';
// What `shardherd topics create` runs: the topics a cluster needs before its nodes start.
export type { ClusterTopic, CreateClusterTopicsOptions } from '../node/cluster-topics.js';
export { createClusterTopics } from '../node/cluster-topics.js';
