// A node's /status during a restart (a fence, then a new incarnation): a read that reaches the old
// guardian between the runtime's shutdown and its actors' stop was dropped with nobody left to
// answer it, and the node's running list stayed empty until its next restart. Seen on real
// processes after a broker freeze (integration test broker-faults): the new incarnation ran its
// four shards while /status listed none for two minutes.
import { describe, expect, it } from 'vitest';
import { SimulatedClock } from '../../src/cluster/clock.js';
import { EmbeddedCluster } from '../../src/embedded/embedded-cluster.js';
import { SimDriver } from '../../src/sim/driver.js';

const turn = () => new Promise<void>((r) => setImmediate(r));

describe("a node's running list across a restart", () => {
  it('is current again after the new incarnation starts its copies, however often it was read during the restart', async () => {
    const clock = new SimulatedClock(0);
    const cluster = new EmbeddedCluster({ clock, nodes: ['n1'], settings: { pollIntervalMs: 100, publishIntervalMs: 1_000 } });
    const driver = new SimDriver(cluster);
    await cluster.startNodes();
    await driver.advance(500);
    const reply = cluster.setupDataset({ ref: 'm', numShards: 4, minNumNodes: 1, source: { type: 'synthetic', recordsPerSecond: 10 } });
    await driver.advance(2_000);
    expect((await reply).type).toBe('DatasetVerified');
    const n1 = cluster.node('n1');
    // As /status reads it: within a few milliseconds of simulated time, else the last answer.
    const active = async () => (await driver.whenSettled(n1.localRunningSummary())).counts['m']?.Active;
    expect(await active()).toBe(4);

    // Read between every two steps of the restart (each microtask of a turn, then the next turn),
    // as a poll of a real process lands anywhere in it.
    let restarted = false;
    const restart = n1.restart().finally(() => (restarted = true));
    while (!restarted) {
      for (let i = 0; i < 50; i++) {
        void n1.localRunningSummary();
        await Promise.resolve();
      }
      await turn();
      clock.advance(5);
    }
    await restart;
    await driver.advance(5_000);
    const reads: (number | undefined)[] = [];
    for (let i = 0; i < 5; i++) {
      reads.push(await active());
      await driver.advance(200);
    }
    expect(reads.at(-1)).toBe(4);
    expect(n1.localRunningAge(false).waitingMs).toBe(0);
    await cluster.stop();
  });
});
