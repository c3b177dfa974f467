/**
 * `shardherd/node`: a real node process (what `shardherd node` runs) from its config file: Kafka bus
 * and membership, Cassandra MetaStore, the ingestion source, and the HTTP API when configured.
 * Loads kafkajs, cassandra-driver and fastify.
 */
export type { NodeConfig } from '../node/node-config.js';
export { loadNodeConfig, NodeConfigError, parseNodeConfig } from '../node/node-config.js';
export type { StartedNode, StartNodeOptions } from '../node/run-node.js';
export { startNode } from '../node/run-node.js';
