// /healthz says whether this node hears from a singleton: a singleton publishes at least a digest
// every publishIntervalMs, so a node that heard nothing for two of them is red, with the reason,
// and green again once it hears. Nothing is asked on the bus for it.
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { SimulatedClock } from '../../src/cluster/clock.js';
import { EmbeddedCluster } from '../../src/embedded/embedded-cluster.js';
import { startNodeApi } from '../../src/http/node-api.js';
import { SimDriver } from '../../src/sim/driver.js';
import { MemoryMetaStore } from '../../src/store/memory-meta-store.js';

const PUBLISH_MS = 1_000;

describe('/healthz and a stalled singleton', () => {
  it('turns red within two publish intervals of the singleton going silent, and green when it is heard again', async () => {
    const clock = new SimulatedClock(0);
    const cluster = new EmbeddedCluster({
      name: 'health',
      clock,
      nodes: ['n1', 'n2', 'n3'],
      metaStore: new MemoryMetaStore(),
      log: pino({ level: 'silent' }),
      // A long session: the silent singleton is not replaced while the test looks.
      sessionTimeoutMs: 20_000,
      heartbeatIntervalMs: 250,
      settings: { publishIntervalMs: PUBLISH_MS, recoveryReplyTimeoutMs: 500, pollIntervalMs: 250, retryInitialMs: 50, retryMaxMs: 400 },
    });
    const driver = new SimDriver(cluster);
    await cluster.startNodes();
    await driver.advance(3_000);
    const host = (await cluster.singletonNode())!;
    const other = cluster.nodes.find((n) => n !== host)!;
    const api = await startNodeApi(other, { port: 0, token: 'health-token-0123456789' });
    const health = async () => {
      const res = await fetch(`${api.url}/healthz`);
      return { status: res.status, body: (await res.json()) as { ok: boolean; singletonHeard: boolean; singletonSilentMs?: number; reason?: string } };
    };
    try {
      expect(await health()).toMatchObject({ status: 200, body: { ok: true, singletonHeard: true } });
      host.pause();
      await driver.advance(PUBLISH_MS);
      expect((await health()).status).toBe(200); // one missed digest is not silence
      await driver.advance(2 * PUBLISH_MS);
      const red = await health();
      expect(red.status).toBe(503);
      expect(red.body).toMatchObject({ ok: false, singletonHeard: false });
      expect(red.body.reason).toMatch(/has heard from no singleton for \d+ ms \(more than 2000 ms/);
      host.resume();
      await driver.advance(2 * PUBLISH_MS);
      expect(await health()).toMatchObject({ status: 200, body: { ok: true, singletonHeard: true } });
    } finally {
      await api.close();
      await cluster.stop();
    }
  }, 60_000);
});
