/** `shardherd/http`: a node's HTTP API (status, cluster view, admin, metrics, the status page). Loads fastify. */
export type { NodeStatus, SingletonStatus } from '../http/node-status.js';
export { startNodeApi, type NodeApi, type NodeApiOptions } from '../http/node-api.js';
