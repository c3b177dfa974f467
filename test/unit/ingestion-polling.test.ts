// An idle shard polls less and less often (a node of thousands of idle shards must not spend its
// CPU asking empty sources ten times a second each), and polls at full pace again once records flow.
import { describe, expect, it } from 'vitest';
import { idlePollDelay, IDLE_POLL_FACTOR } from '../../src/actors/ingestion-actor.js';
import { SimulatedClock } from '../../src/cluster/clock.js';
import type { DatasetConfig } from '../../src/core/dataset-config.js';
import type { ShardNum } from '../../src/core/ids.js';
import { EmbeddedCluster } from '../../src/embedded/embedded-cluster.js';
import { SimDriver } from '../../src/sim/driver.js';

describe('idle polling', () => {
  it('doubles the poll interval with each empty read in a row, up to IDLE_POLL_FACTOR times it', () => {
    expect([1, 2, 3, 4, 5, 6, 20].map((n) => idlePollDelay(100, n))).toEqual([100, 200, 400, 800, 1000, 1000, 1000]);
    expect(idlePollDelay(100, 50)).toBe(100 * IDLE_POLL_FACTOR);
  });

  it('an idle shard reads its source about a tenth as often; records arriving bring it back to full pace', async () => {
    const clock = new SimulatedClock(0);
    const cluster = new EmbeddedCluster({ clock, nodes: ['n1'], metrics: false, settings: { pollIntervalMs: 100, publishIntervalMs: 1_000 } });
    const reads: number[] = [];
    const open = cluster.source.open.bind(cluster.source);
    cluster.source.open = async (config: DatasetConfig, shard: ShardNum) => {
      const reader = await open(config, shard);
      const read = reader.read.bind(reader);
      reader.read = (offset, max) => {
        reads.push(clock.now());
        return read(offset, max);
      };
      return reader;
    };
    const driver = new SimDriver(cluster);
    await cluster.start();
    await driver.advance(500);
    // One record every 20 s: idle in between.
    const reply = cluster.setupDataset({ ref: 'idle', numShards: 1, minNumNodes: 1, source: { type: 'synthetic', recordsPerSecond: 0.05 } });
    await driver.advance(200);
    expect((await reply).type).toBe('DatasetVerified');
    await driver.advance(3_000);
    const from = clock.now();
    await driver.advance(10_000);
    const idleReads = reads.filter((t) => t >= from && t < from + 10_000).length;
    // 100 at a fixed 100 ms; 10 to 11 at the 1 s the interval grows to.
    expect(idleReads).toBeGreaterThanOrEqual(9);
    expect(idleReads).toBeLessThanOrEqual(12);
    // The first record appears at 20 s (the source started at 0): read at most one idle interval
    // late, then the shard polls at once and at the base interval again.
    await driver.advance(20_000 - clock.now() + 3_000);
    const after = reads.filter((t) => t >= 20_000);
    expect(after[0]! - 20_000).toBeLessThanOrEqual(100 * IDLE_POLL_FACTOR);
    expect([after[1]! - after[0]!, after[2]! - after[1]!]).toEqual([0, 100]);
    await cluster.stop();
  });
});
