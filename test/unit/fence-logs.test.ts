// A node-wide event logs a few lines, not one per copy: a fence of a node holding 16 384 copies
// logged 49 158 lines (issue 34). Here a node holding a third of 512 copies is evicted and comes
// back as a new incarnation; what it logs meanwhile stays within 20 lines at info level.
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { SimulatedClock } from '../../src/cluster/clock.js';
import { EmbeddedCluster } from '../../src/embedded/embedded-cluster.js';
import { SimDriver } from '../../src/sim/driver.js';
import { MemoryMetaStore } from '../../src/store/memory-meta-store.js';

describe('logs of a node-wide event', () => {
  it('an eviction of a node holding 170 copies, and its return, take at most 20 lines on that node', async () => {
    const clock = new SimulatedClock(0);
    const lines: { msg: string; node?: string }[] = [];
    const cluster = new EmbeddedCluster({
      name: 'fence',
      clock,
      nodes: ['n1', 'n2', 'n3'],
      metaStore: new MemoryMetaStore(),
      log: pino({ level: 'info' }, { write: (line: string) => lines.push(JSON.parse(line) as { msg: string; node?: string }) }),
      sessionTimeoutMs: 10_000,
      heartbeatIntervalMs: 250,
      settings: { publishIntervalMs: 500, recoveryReplyTimeoutMs: 500, pollIntervalMs: 250, retryInitialMs: 50, retryMaxMs: 400, failureDetector: { mode: 'heartbeat' } },
    });
    const driver = new SimDriver(cluster);
    await cluster.startNodes();
    await driver.advance(1_000);
    const reply = cluster.setupDataset({ ref: 'alpha', numShards: 512, minNumNodes: 1, strategy: 'balanced', source: { type: 'synthetic', recordsPerSecond: 2 } }, 10_000);
    await driver.advance(3_000);
    expect((await reply).type).toBe('DatasetVerified');
    const host = (await cluster.singletonNode())!;
    const victim = cluster.nodes.find((n) => n !== host)!;
    const held = (await victim.localRunning()).length;
    expect(held).toBeGreaterThan(150);

    const from = lines.length;
    victim.pause(); // past its lease: the singleton evicts it, and it fences itself when it runs again
    await driver.advance(3_000);
    victim.resume();
    await driver.advance(3_000);
    const its = lines.slice(from).filter((l) => l.node === victim.node);
    expect(its.some((l) => /evicted this incarnation/.test(l.msg))).toBe(true);
    expect(its.length, its.map((l) => l.msg).join('\n')).toBeLessThanOrEqual(20);
    await cluster.stop();
  }, 60_000);
});
