// /status, /healthz and /metrics answer from the node's own state (docs/ARCHITECTURE.md §12.4):
// with every MetaStore call 1.25 s slow (the singleton's writes, the checkpoints, the lease read),
// the singleton's node still answers each within a fraction of that, with what it last knew. On
// simulated time: "within 250 ms" is of the cluster's clock, whatever else runs on the machine.
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SimulatedClock } from '../../src/cluster/clock.js';
import { EmbeddedCluster } from '../../src/embedded/embedded-cluster.js';
import { SimDriver } from '../../src/sim/driver.js';
import { startNodeApi, type NodeApi } from '../../src/http/node-api.js';
import type { NodeStatus } from '../../src/http/node-status.js';
import { MemoryMetaStore } from '../../src/store/memory-meta-store.js';
import type { MetaStore } from '../../src/store/meta-store.js';

const SLOW_MS = 1_250;
let slow = false;
const clock = new SimulatedClock(0);
let cluster: EmbeddedCluster;
let driver: SimDriver;
let api: NodeApi;

/** A memory store each of whose calls takes SLOW_MS more (of the cluster's time) once `slow` is set. */
function slowable(): MetaStore {
  const store = new MemoryMetaStore();
  return new Proxy(store, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver) as unknown;
      if (typeof value !== 'function') return value;
      return async (...args: unknown[]) => {
        if (slow) await new Promise<void>((resolve) => clock.schedule(SLOW_MS, resolve));
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
}

beforeAll(async () => {
  cluster = new EmbeddedCluster({
    name: 'status-local',
    clock,
    nodes: ['n1', 'n2'],
    metaStore: slowable(),
    log: pino({ level: 'silent' }),
    sessionTimeoutMs: 3_000,
    settings: { publishIntervalMs: 500, recoveryReplyTimeoutMs: 500, pollIntervalMs: 50, reportResendMs: 500, checkpointIntervalMs: 100 },
  });
  driver = new SimDriver(cluster);
  await driver.whenSettled(cluster.start());
  await driver.whenSettled(cluster.setupDataset({ ref: 'm', numShards: 4, minNumNodes: 2, source: { type: 'synthetic', recordsPerSecond: 200 } }));
  await driver.whenSettled(cluster.whenConverged('m', { timeoutMs: 20_000 }));
  const singleton = (await cluster.singletonNode())!;
  api = await startNodeApi(singleton, { port: 0, token: 'local-state-token', singletonTimeoutMs: 2_000 });
  // Read once while the store is fast, so the lease is known.
  await driver.whenSettled(fetch(`${api.url}/status`));
  slow = true;
  // The singleton's next writes (and every checkpoint) are now slow: its actor waits on them.
  await driver.whenSettled(cluster.request((replyTo) => ({ type: 'StopShards', replyTo, dataset: 'm' as never, shards: [3] }), 100).catch(() => undefined));
});

afterAll(async () => {
  slow = false;
  await api?.close();
  await cluster?.stop();
});

/** A request and how much of the cluster's time passed before its answer (it fails past 250 ms). */
async function timed(path: string): Promise<{ ms: number; status: number; body: string }> {
  const t0 = clock.now();
  const { status, body } = await driver.whenSettled(
    (async () => {
      const res = await fetch(`${api.url}${path}`);
      return { status: res.status, body: await res.text() };
    })(),
    250,
    10,
  );
  return { ms: clock.now() - t0, status, body };
}

describe('with a MetaStore 1.25 s slow', () => {
  it('/status, /healthz and /metrics answer within 250 ms, from what the node knows', async () => {
    for (let i = 0; i < 5; i++) {
      const status = await timed('/status');
      const health = await timed('/healthz');
      const metrics = await timed('/metrics');
      expect([status.status, health.status, metrics.status]).toEqual([200, 200, 200]);
      expect(Math.max(status.ms, health.ms, metrics.ms), `answers took ${status.ms}, ${health.ms}, ${metrics.ms} ms`).toBeLessThan(250);
      const s = JSON.parse(status.body) as NodeStatus;
      expect(s.singletonAt?.epoch).toBe(1);
      expect(s.maps.map((m) => m.dataset)).toEqual(['m']);
      expect(metrics.body).toMatch(/shardherd_is_singleton 1/);
    }
  });
});
