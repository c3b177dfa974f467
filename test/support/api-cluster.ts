// The setting of the API's conformance and random-body tests: three embedded nodes, dataset
// `metrics` placed by FiloDB's strategy (8 shards, minNumNodes 2: two nodes hold 4 each and n1
// none, room for a drain that gets through), the API on n2, and its OpenAPI document read back.
import type { EmbeddedCluster } from '../../src/embedded/embedded-cluster.js';
import { startNodeApi, type NodeApi } from '../../src/http/node-api.js';
import { liveCluster } from './live-cluster.js';
import { openApiCheck, type OpenApiCheck } from './openapi-check.js';

export interface ApiCluster {
  readonly cluster: EmbeddedCluster;
  readonly api: NodeApi;
  readonly check: OpenApiCheck;
}

export async function startApiCluster(prefix: string, token: string): Promise<ApiCluster> {
  const cluster = liveCluster(prefix, ['n1', 'n2', 'n3']);
  await cluster.start();
  await cluster.setupDataset({ ref: 'metrics', numShards: 8, minNumNodes: 2, source: { type: 'synthetic', recordsPerSecond: 100 } });
  const api = await startNodeApi(cluster.node('n2'), { port: 0, token, singletonTimeoutMs: 2_000 });
  await cluster.whenConverged('metrics', { timeoutMs: 10_000 });
  const check = await openApiCheck(await (await fetch(`${api.url}/api/v1/openapi.json`)).json());
  return { cluster, api, check };
}
