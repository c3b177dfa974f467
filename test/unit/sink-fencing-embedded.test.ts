// How a shard treats its sink's answers (docs/ARCHITECTURE.md §12): a batch refused for an older
// token is kept and tried again, never counted as ingested and never an error; a sink that does not
// answer, or refuses without naming a newer token, fails the shard with a typed reason.
import { describe, expect, it } from 'vitest';
import { SimulatedClock } from '../../src/cluster/clock.js';
import { StaleTokenError, type FencingToken } from '../../src/core/fencing-token.js';
import { EmbeddedCluster } from '../../src/embedded/embedded-cluster.js';
import { CountingSink } from '../../src/ingest/counting-sink.js';
import type { RecordSink } from '../../src/ingest/ingestion-source.js';
import { SimDriver } from '../../src/sim/driver.js';
import { MemoryMetaStore } from '../../src/store/memory-meta-store.js';
import type { DatasetRef, NodeId } from '../../src/core/ids.js';

/** One node, one shard at 50 records/s, `sink` behind it; runs 6 s of simulated time. */
async function oneShard(sink: RecordSink, settings: Record<string, number> = {}, metaStore = new MemoryMetaStore()) {
  const clock = new SimulatedClock(0);
  const cluster = new EmbeddedCluster({
    clock,
    nodes: ['n1'],
    metrics: true,
    sink,
    metaStore,
    settings: { pollIntervalMs: 100, publishIntervalMs: 1_000, retryInitialMs: 50, retryMaxMs: 400, ...settings },
  });
  const driver = new SimDriver(cluster);
  await cluster.startNodes();
  await driver.advance(500);
  const reply = cluster.setupDataset({ ref: 'm', numShards: 1, minNumNodes: 1, source: { type: 'synthetic', recordsPerSecond: 50 } });
  await driver.advance(200);
  expect((await reply).type).toBe('DatasetVerified');
  await driver.advance(6_000);
  const map = (await (await cluster.singletonNode())!.singletonState())!.datasets.get('m' as never)!.mapper;
  const status = map.recordForShard(0).status;
  const scrape = await cluster.node('n1').metrics!.scrape();
  const problems = cluster.node('n1').problems.list();
  await cluster.stop();
  return { status, scrape, problems };
}

describe('a shard and its sink', () => {
  it('gets the token of its assignment; a batch refused as fenced is tried again, and every record arrives once in order', async () => {
    const inner = new CountingSink();
    const tokens: FencingToken[] = [];
    let refusals = 3;
    const sink: RecordSink = {
      accept: async (ds, shard, records, token) => {
        tokens.push(token!);
        // The first batches meet a sink that saw a newer token (as after a late write's successor).
        if (refusals > 0) {
          refusals -= 1;
          throw new StaleTokenError(ds.ref, shard, token!, { epoch: token!.epoch, version: token!.version + 1 });
        }
        return inner.accept(ds, shard, records, token);
      },
    };
    const { status, scrape } = await oneShard(sink);
    expect(status.type).toBe('Active');
    expect(tokens[0]!.epoch).toBeGreaterThanOrEqual(1);
    expect(tokens[0]!.version).toBeGreaterThanOrEqual(1);
    const tally = inner.tally('m', 0);
    expect(tally.covered).toBeGreaterThan(200);
    expect(tally.duplicates).toBe(0);
    expect(tally.ahead.size).toBe(0);
    expect(scrape).toMatch(/shardherd_fenced_writes_total\{dataset="m",kind="sink",cause="stale-token"\} 3\b/);
  });

  it('a sink that never answers fails the shard with SINK_TIMEOUT', async () => {
    const sink: RecordSink = { accept: () => new Promise(() => {}) };
    const { status } = await oneShard(sink, { sinkTimeoutMs: 1_000 });
    expect(status.type).toBe('Error');
    expect(JSON.stringify(status)).toMatch(/did not answer.*within 1000 ms/);
  });

  it('a refusal naming no newer token breaks the contract: the shard fails with SINK_CONTRACT, not a retry loop', async () => {
    const sink: RecordSink = { accept: async (ds, shard, _records, token) => Promise.reject(new StaleTokenError(ds.ref, shard, token!, token!)) };
    const { status } = await oneShard(sink);
    expect(status.type).toBe('Error');
    expect(JSON.stringify(status)).toMatch(/broke its contract/);
  });

  it('a sink that throws fails the shard with its message', async () => {
    const { status } = await oneShard({ accept: () => Promise.reject(new Error('disk full')) });
    expect(status.type).toBe('Error');
    expect(JSON.stringify(status)).toMatch(/disk full/);
  });

  it('checkpoints carry the token of the records they vouch for', async () => {
    const store = new MemoryMetaStore();
    const tokens: FencingToken[] = [];
    const sink = new CountingSink();
    await oneShard({ accept: (ds, shard, records, token) => (tokens.push(token!), sink.accept(ds, shard, records, token)) }, {}, store);
    const read = await store.readCheckpoints('m' as DatasetRef, 0);
    expect(read.copies.get('n1' as NodeId)?.get('0')).toBe(sink.tally('m', 0).covered - 1);
    expect(read.tokens?.get('n1' as NodeId)?.get('0')).toEqual(tokens.at(-1));
  });

  it('a copy whose own checkpoint has a newer token than its map does not start: it waits, and says so on /status', async () => {
    const store = new MemoryMetaStore();
    // As if a newer owner (a later incarnation of this node, under a later epoch) had written it.
    await store.writeCheckpoint('m' as DatasetRef, 0, 'n1' as NodeId, '0', 40, { epoch: 99, version: 1 });
    const sink = new CountingSink();
    const { status, problems, scrape } = await oneShard(sink, {}, store);
    expect(status.type).toBe('Assigned');
    expect(sink.total().accepted).toBe(0);
    expect(problems.map((p) => p.event)).toContain('checkpoint.write-refused');
    expect(scrape).toMatch(/shardherd_fenced_writes_total\{dataset="m",kind="checkpoint",cause="newer-token-stored"\} \d+/);
    // Nothing moved the stored checkpoint.
    expect((await store.readCheckpoints('m' as DatasetRef, 0)).copies.get('n1' as NodeId)?.get('0')).toBe(40);
  });
});
