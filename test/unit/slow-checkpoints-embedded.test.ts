// Checkpoint writes do not hold ingestion back (docs/ARCHITECTURE.md §12.4): with a MetaStore whose
// checkpoint writes take 1.25 s, a shard ingests as fast as with an instant one; only past
// `maxUncheckpointedRecords` does it wait, and then the gap between what the sink accepted and what
// is checkpointed stays within the bound.
import { describe, expect, it } from 'vitest';
import { SimulatedClock } from '../../src/cluster/clock.js';
import type { DatasetRef, NodeId } from '../../src/core/ids.js';
import { EmbeddedCluster } from '../../src/embedded/embedded-cluster.js';
import { CountingSink } from '../../src/ingest/counting-sink.js';
import { SimDriver } from '../../src/sim/driver.js';
import { MemoryMetaStore } from '../../src/store/memory-meta-store.js';

const RATE = 2_000; // records per second per shard

/** One node, two shards at RATE, checkpoint writes taking `delayMs`; the sink's count and the largest gap seen. */
async function run(delayMs: number, settings: Record<string, number> = {}) {
  const clock = new SimulatedClock(0);
  const store = new MemoryMetaStore();
  const write = store.writeCheckpoint.bind(store);
  store.writeCheckpoint = (...args) => new Promise<void>((resolve) => clock.schedule(delayMs, resolve)).then(() => write(...args));
  const sink = new CountingSink();
  const cluster = new EmbeddedCluster({
    clock,
    nodes: ['n1'],
    metrics: false,
    sink,
    metaStore: store,
    settings: { pollIntervalMs: 20, batchSize: 200, publishIntervalMs: 1_000, ...settings },
  });
  const driver = new SimDriver(cluster);
  await cluster.startNodes();
  await driver.advance(500);
  const reply = cluster.setupDataset({ ref: 'm', numShards: 2, minNumNodes: 1, source: { type: 'synthetic', recordsPerSecond: RATE } });
  await driver.advance(200);
  expect((await reply).type).toBe('DatasetVerified');
  let widestGap = 0;
  for (let t = 0; t < 100; t++) {
    await driver.advance(100);
    for (const shard of [0, 1]) {
      const stored = (await store.readCheckpoints('m' as DatasetRef, shard)).copies.get('n1' as NodeId)?.get('0') ?? -1;
      widestGap = Math.max(widestGap, sink.tally('m', shard).covered - 1 - stored);
    }
  }
  const ingested = sink.tally('m', 0).covered + sink.tally('m', 1).covered;
  await cluster.stop();
  return { ingested, widestGap };
}

describe('checkpoints written in the background', () => {
  it('a store 1.25 s slow on checkpoints: the shards ingest within 10 % of an instant store', async () => {
    const fast = await run(0);
    const slow = await run(1_250);
    expect(fast.ingested).toBeGreaterThan(2 * RATE * 9);
    expect(slow.ingested).toBeGreaterThanOrEqual(0.9 * fast.ingested);
    // The records not yet checkpointed are about what arrives during one write (plus an interval).
    expect(slow.widestGap).toBeLessThan(RATE * 3);
  });

  it('past maxUncheckpointedRecords the shard waits for its checkpoints: the gap stays within the bound and a batch', async () => {
    const bound = 500;
    const held = await run(1_250, { maxUncheckpointedRecords: bound });
    const fast = await run(0, { maxUncheckpointedRecords: bound });
    expect(held.widestGap).toBeLessThanOrEqual(bound + 200);
    // Held back: about a bound per write of 1.25 s, far below the source's rate.
    expect(held.ingested).toBeLessThan(0.5 * fast.ingested);
    expect(held.ingested).toBeGreaterThan(0);
  });
});
