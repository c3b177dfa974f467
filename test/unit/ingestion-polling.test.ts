// An idle shard must not spend its node's CPU asking an empty source ten times a second: a node of
// 65 536 idle shards did nothing else. A source that knows when its next record exists is read
// then; one that does not is polled less and less often, and at full pace again once records flow.
import { describe, expect, it } from 'vitest';
import { idlePollDelay, IDLE_POLL_FACTOR } from '../../src/actors/shard-copy.js';
import { SimulatedClock } from '../../src/cluster/clock.js';
import type { DatasetConfig } from '../../src/core/dataset-config.js';
import type { ShardNum } from '../../src/core/ids.js';
import { EmbeddedCluster } from '../../src/embedded/embedded-cluster.js';
import type { ShardReader } from '../../src/ingest/ingestion-source.js';
import { SimDriver } from '../../src/sim/driver.js';

/**
 * An embedded node with one shard whose source has a record every 20 s (the first at 20 s); every
 * read's time is recorded. `plain` hides the source's `nextRecordAt`, as a log would; `wake` hides
 * it too but says when records arrive (`whenReadable`, as the Kafka source does) at 20 s.
 */
async function idleShard(mode: 'plain' | 'hint' | 'wake') {
  const clock = new SimulatedClock(0);
  const cluster = new EmbeddedCluster({ clock, nodes: ['n1'], metrics: false, settings: { pollIntervalMs: POLL_MS, publishIntervalMs: 1_000 } });
  const reads: number[] = [];
  const open = cluster.source.open.bind(cluster.source);
  cluster.source.open = async (config: DatasetConfig, shard: ShardNum): Promise<ShardReader> => {
    const reader = await open(config, shard);
    const read = reader.read.bind(reader);
    const counted: ShardReader = {
      earliestOffset: () => reader.earliestOffset(),
      endOffset: () => reader.endOffset(),
      read: (offset, max) => {
        reads.push(clock.now());
        return read(offset, max);
      },
      close: () => reader.close(),
    };
    if (mode === 'hint') return { ...counted, nextRecordAt: () => reader.nextRecordAt!() };
    // Says so a little after the record exists, off the poll grid, so that only a wake-up reads then.
    if (mode === 'wake') return { ...counted, whenReadable: (listener) => void (clock.now() < WAKE_AT && clock.schedule(WAKE_AT - clock.now(), listener)) };
    return counted;
  };
  const driver = new SimDriver(cluster);
  await cluster.startNodes();
  await driver.advance(500);
  const reply = cluster.setupDataset({ ref: 'idle', numShards: 1, minNumNodes: 1, source: { type: 'synthetic', recordsPerSecond: 0.05 } });
  await driver.advance(200);
  expect((await reply).type).toBe('DatasetVerified');
  await driver.advance(3_000);
  const from = clock.now();
  await driver.advance(10_000);
  const idleReads = reads.filter((t) => t >= from && t < from + 10_000).length;
  await driver.advance(20_000 - clock.now() + 3_000);
  await cluster.stop();
  return { idleReads, after: reads.filter((t) => t >= 20_000) };
}

// Off the 100 ms grid of everything else, so that a read at these times is the wake-up's alone.
const POLL_MS = 130;
const WAKE_AT = 20_037;

describe('idle polling', () => {
  it('doubles the poll interval with each empty read in a row, up to IDLE_POLL_FACTOR times it', () => {
    expect([1, 2, 3, 4, 5, 6, 20].map((n) => idlePollDelay(100, n))).toEqual([100, 200, 400, 800, 1000, 1000, 1000]);
    expect(idlePollDelay(100, 50)).toBe(100 * IDLE_POLL_FACTOR);
  });

  it('a source that cannot say when records come is read about a tenth as often while idle, and at once and at full pace when they do', async () => {
    const { idleReads, after } = await idleShard('plain');
    // 77 at a fixed 130 ms; 7 to 9 at the 1.3 s the interval grows to.
    expect(idleReads).toBeGreaterThanOrEqual(7);
    expect(idleReads).toBeLessThanOrEqual(9);
    expect(after[0]! - 20_000).toBeLessThanOrEqual(POLL_MS * IDLE_POLL_FACTOR);
    expect([after[1]! - after[0]!, after[2]! - after[1]!]).toEqual([0, POLL_MS]);
  });

  it('a source that says when its next record exists is not read while idle, and is read when it appears', async () => {
    const { idleReads, after } = await idleShard('hint');
    expect(idleReads).toBe(0);
    expect(after[0]).toBe(20_000);
  });

  it("a source that says when records arrive wakes the shard at once, through the node's gate", async () => {
    const { after } = await idleShard('wake');
    expect(after[0]).toBe(WAKE_AT);
  });
});
