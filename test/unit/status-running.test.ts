// `/status` of a node that runs many copies: it lists a bounded number and counts them all, so an
// operator's (or a harness's) poll does not stall a node of 65 536 copies with megabytes of JSON.
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SimulatedClock } from '../../src/cluster/clock.js';
import { EmbeddedCluster } from '../../src/embedded/embedded-cluster.js';
import { RUNNING_LISTED } from '../../src/http/node-status.js';
import { startNodeApi, type NodeApi } from '../../src/http/node-api.js';
import { SimDriver } from '../../src/sim/driver.js';
import { MemoryMetaStore } from '../../src/store/memory-meta-store.js';

const SHARDS = 2048;
let cluster: EmbeddedCluster;
let api: NodeApi;

beforeAll(async () => {
  const clock = new SimulatedClock(0);
  cluster = new EmbeddedCluster({
    name: 'status-running',
    clock,
    nodes: [{ name: 'n1' }],
    metaStore: new MemoryMetaStore(),
    log: pino({ level: 'silent' }),
    sessionTimeoutMs: 1_000,
    heartbeatIntervalMs: 250,
    settings: { publishIntervalMs: 1_000, recoveryReplyTimeoutMs: 500, pollIntervalMs: 250 },
  });
  const driver = new SimDriver(cluster);
  await cluster.node('n1').start();
  await driver.advance(1_000);
  const reply = cluster.setupDataset({ ref: 'alpha', numShards: SHARDS, minNumNodes: 1, source: { type: 'synthetic', recordsPerSecond: 1 } }, 10_000);
  await driver.advance(5_000);
  expect((await reply).type).toBe('DatasetVerified');
  api = await startNodeApi(cluster.node('n1'), { port: 0, token: 'test-token-0123456789', singletonTimeoutMs: 2_000 });
}, 60_000);

afterAll(async () => {
  await api?.close();
  await cluster?.stop();
});

const get = async (path: string) => {
  const res = await fetch(`${api.url}${path}`);
  return {
    status: res.status,
    body: (await res.json()) as { running: { dataset: string; shard: number }[]; runningCounts: Record<string, Record<string, number>> },
  };
};

describe('/status of a node running many copies', () => {
  it(`lists the first ${RUNNING_LISTED} and counts every copy per dataset and status`, async () => {
    const { status, body } = await get('/status');
    expect(status).toBe(200);
    expect(body.running).toHaveLength(RUNNING_LISTED);
    expect(body.running.map((r) => r.shard)).toEqual(Array.from({ length: RUNNING_LISTED }, (_, i) => i));
    expect(body.runningCounts).toEqual({ alpha: { Active: SHARDS } });
  });

  it('lists every copy when asked, and refuses a value it does not know', async () => {
    const all = await get('/status?running=all');
    expect(all.body.running).toHaveLength(SHARDS);
    expect((await fetch(`${api.url}/api/v1/node?running=some`)).status).toBe(400);
  });
});
