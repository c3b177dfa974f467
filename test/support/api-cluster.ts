// The setting of the API's conformance and random-body tests: three embedded nodes on simulated
// time, dataset `metrics` placed by FiloDB's strategy (8 shards, minNumNodes 2: two nodes hold 4
// each and n1 none, room for a drain that gets through), the API on n2, and its OpenAPI document
// read back. Requests go over real HTTP; the driver moves the cluster's clock until each is answered.
import type { EmbeddedCluster } from '../../src/embedded/embedded-cluster.js';
import { startNodeApi, type NodeApi } from '../../src/http/node-api.js';
import type { SimDriver } from '../../src/sim/driver.js';
import { simulatedCluster } from './live-cluster.js';
import { openApiCheck, type OpenApiCheck } from './openapi-check.js';

export interface ApiCluster {
  readonly cluster: EmbeddedCluster;
  readonly driver: SimDriver;
  readonly api: NodeApi;
  readonly check: OpenApiCheck;
  /** `fetch`, answered as the driver moves the cluster's time. */
  readonly request: (url: string, init?: RequestInit) => Promise<Response>;
}

export async function startApiCluster(prefix: string, token: string): Promise<ApiCluster> {
  const { cluster, driver } = simulatedCluster(prefix, ['n1', 'n2', 'n3']);
  const request = (url: string, init?: RequestInit) => driver.whenSettled(fetch(url, init));
  await driver.whenSettled(cluster.start());
  await driver.whenSettled(cluster.setupDataset({ ref: 'metrics', numShards: 8, minNumNodes: 2, source: { type: 'synthetic', recordsPerSecond: 100 } }));
  const api = await startNodeApi(cluster.node('n2'), { port: 0, token, singletonTimeoutMs: 2_000 });
  await driver.whenSettled(cluster.whenConverged('metrics', { timeoutMs: 10_000 }));
  const check = await openApiCheck(await (await request(`${api.url}/api/v1/openapi.json`)).json());
  return { cluster, driver, api, check, request };
}
