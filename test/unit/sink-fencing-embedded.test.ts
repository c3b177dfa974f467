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

/** One node, one shard at 50 records/s, `sink` behind it; runs 6 s of simulated time. */
async function oneShard(sink: RecordSink, settings: Record<string, number> = {}) {
  const clock = new SimulatedClock(0);
  const cluster = new EmbeddedCluster({ clock, nodes: ['n1'], metrics: true, sink, settings: { pollIntervalMs: 100, publishIntervalMs: 1_000, retryInitialMs: 50, retryMaxMs: 400, ...settings } });
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
  await cluster.stop();
  return { status, scrape };
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
});
