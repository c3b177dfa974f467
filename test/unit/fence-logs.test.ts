// A node-wide event logs a few lines, not one per copy: a fence of a node holding 16 384 copies
// logged 49 158 lines (issue 34). Here a node holding 16 384 copies, and one holding a third of 512,
// is evicted and comes back as a new incarnation; what it logs meanwhile stays within 20 lines at
// info level.
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { SimulatedClock } from '../../src/cluster/clock.js';
import { EmbeddedCluster } from '../../src/embedded/embedded-cluster.js';
import { SimDriver } from '../../src/sim/driver.js';
import { MemoryMetaStore } from '../../src/store/memory-meta-store.js';

/** Two or three nodes on a simulated clock, heartbeat mode, every log line kept. */
function fencedCluster(nodes: readonly string[]) {
  const clock = new SimulatedClock(0);
  const lines: { msg: string; node?: string }[] = [];
  const cluster = new EmbeddedCluster({
    name: 'fence',
    clock,
    nodes: [...nodes],
    metaStore: new MemoryMetaStore(),
    log: pino({ level: 'info' }, { write: (line: string) => lines.push(JSON.parse(line) as { msg: string; node?: string }) }),
    sessionTimeoutMs: 10_000,
    heartbeatIntervalMs: 250,
    settings: {
      publishIntervalMs: 500,
      recoveryReplyTimeoutMs: 500,
      pollIntervalMs: 250,
      retryInitialMs: 50,
      retryMaxMs: 400,
      failureDetector: { mode: 'heartbeat' },
    },
  });
  return { cluster, lines, driver: new SimDriver(cluster) };
}

/**
 * Two nodes, a dataset of `numShards` idle shards (a record every 1000 s: what is measured is the
 * logs, not ingestion) balanced over them; the node that does not host the singleton is the victim.
 */
async function twoNodesWith(ref: string, numShards: number) {
  const { cluster, lines, driver } = fencedCluster(['n1', 'n2']);
  await cluster.startNodes();
  await driver.advance(1_000);
  const reply = cluster.setupDataset({ ref, numShards, minNumNodes: 2, strategy: 'balanced', source: { type: 'synthetic', recordsPerSecond: 0.001 } }, 30_000);
  await driver.advance(5_000);
  expect((await reply).type).toBe('DatasetVerified');
  const host = (await cluster.singletonNode())!;
  const victim = cluster.nodes.find((n) => n !== host)!;
  return { cluster, lines, driver, victim };
}

/**
 * Pauses `victim` past its lease (the singleton evicts it; it fences itself when it runs again),
 * resumes it and lets `afterMs` pass: the lines it logged from the pause on.
 */
async function evictAndResume(
  w: { lines: { msg: string; node?: string }[]; driver: SimDriver },
  victim: { node: string; pause(): void; resume(): void },
  afterMs: number,
) {
  const from = w.lines.length;
  victim.pause();
  await w.driver.advance(3_000);
  victim.resume();
  await w.driver.advance(afterMs);
  return w.lines.slice(from).filter((l) => l.node === victim.node);
}

describe('logs of a node-wide event', () => {
  it('an eviction of a node holding 16 384 copies, its fence, its restart and the return of every copy, take at most 20 lines on that node', async () => {
    const w = await twoNodesWith('large', 32_768);
    const { cluster, victim } = w;
    expect((await victim.localRunning()).length).toBe(16_384);
    // Its fence, its restart as a new incarnation, and every copy given back in planned moves of
    // 16: 1024 changes of the map. Each used to run a whole placement round on the singleton per
    // copy caught up (quadratic: this return did not end within minutes); it takes seconds now.
    const its = await evictAndResume(w, victim, 15_000);
    expect((await victim.localRunning()).length).toBe(16_384);
    expect(its.some((l) => /evicted this incarnation/.test(l.msg))).toBe(true);
    expect(its.length, its.map((l) => l.msg).join('\n')).toBeLessThanOrEqual(20);
    await cluster.stop();
  }, 120_000);

  it('a node given 2048 copies back in planned moves of 16 says them in one line per 10 s, not one per change of the map', async () => {
    const w = await twoNodesWith('mid', 4096);
    const { cluster, victim } = w;
    const started = (await evictAndResume(w, victim, 12_000)).filter((l) => (l as { event?: string }).event === 'shards.started') as unknown as {
      copies: number;
      changes?: number;
    }[];
    // More than one change of the map brought copies back, and every copy is in a line.
    expect(started.reduce((n, l) => n + (l.changes ?? 1), 0)).toBeGreaterThan(8);
    expect(started.reduce((n, l) => n + l.copies, 0)).toBe((await victim.localRunning()).length);
    expect(started.length).toBeLessThanOrEqual(4);
    await cluster.stop();
  }, 60_000);

  it('an eviction of a node holding 170 copies, and its return, take at most 20 lines on that node', async () => {
    const w = fencedCluster(['n1', 'n2', 'n3']);
    const { cluster, driver } = w;
    await cluster.startNodes();
    await driver.advance(1_000);
    const reply = cluster.setupDataset(
      { ref: 'alpha', numShards: 512, minNumNodes: 1, strategy: 'balanced', source: { type: 'synthetic', recordsPerSecond: 2 } },
      10_000,
    );
    await driver.advance(3_000);
    expect((await reply).type).toBe('DatasetVerified');
    const host = (await cluster.singletonNode())!;
    const victim = cluster.nodes.find((n) => n !== host)!;
    const held = (await victim.localRunning()).length;
    expect(held).toBeGreaterThan(150);
    const its = await evictAndResume(w, victim, 3_000);
    expect(its.some((l) => /evicted this incarnation/.test(l.msg))).toBe(true);
    expect(its.length, its.map((l) => l.msg).join('\n')).toBeLessThanOrEqual(20);
    await cluster.stop();
  }, 60_000);
});
