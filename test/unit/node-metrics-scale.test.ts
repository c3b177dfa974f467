// A node of many copies exports per-dataset series only: per-shard series at 65 536 copies made an
// 8.5 MB scrape that held the event loop for half a second (issue 34). Checked on a small limit.
import parsePrometheusTextFormat, { type ParsedFamily } from 'parse-prometheus-text-format';
import { describe, expect, it } from 'vitest';
import type { DatasetRef } from '../../src/core/ids.js';
import { NodeMetrics } from '../../src/metrics/node-metrics.js';
import { aTurn } from '../../src/cluster/turns.js';

const LIMIT = 8;

async function scrape(m: NodeMetrics): Promise<Map<string, ParsedFamily>> {
  // A turn of the event loop between scrapes, as between two of Prometheus's.
  await aTurn();
  return new Map(parsePrometheusTextFormat(await m.scrape()).map((f) => [f.name, f]));
}

const series = (f: Map<string, ParsedFamily>, name: string) => f.get(name)?.metrics ?? [];
const valueOf = (f: Map<string, ParsedFamily>, name: string, dataset: string) => Number(series(f, name).find((m) => m.labels?.dataset === dataset)?.value);

/** Tracks `copies` copies of `dataset`, each `lag` records behind and having ingested `records`. */
function track(m: NodeMetrics, dataset: DatasetRef, copies: number, lag: number, records: number): (() => void)[] {
  const untrack: (() => void)[] = [];
  for (let shard = 0; shard < copies; shard++) {
    const probe = { dataset, shard, position: () => 100, endOffset: async () => 100 + lag };
    m.trackIngestion(probe);
    untrack.push(() => m.untrackIngestion(probe));
    m.ingested(dataset, shard, records);
  }
  return untrack;
}

describe('node metrics on a node of many copies', () => {
  it('has per-shard series up to the limit, and per-dataset series that add up to them', async () => {
    const m = new NodeMetrics({ perShardSeriesUpTo: LIMIT });
    track(m, 'small' as DatasetRef, LIMIT, 3, 5);
    const f = await scrape(m);
    expect(series(f, 'shardherd_ingested_records_total')).toHaveLength(LIMIT);
    expect(series(f, 'shardherd_ingestion_lag_records')).toHaveLength(LIMIT);
    expect(valueOf(f, 'shardherd_dataset_ingested_records_total', 'small')).toBe(5 * LIMIT);
    expect(valueOf(f, 'shardherd_dataset_ingestion_lag_records', 'small')).toBe(3 * LIMIT);
  });

  it('drops per-shard series past the limit and keeps the per-dataset ones whole; they come back below it', async () => {
    const m = new NodeMetrics({ perShardSeriesUpTo: LIMIT });
    const untrack = track(m, 'big' as DatasetRef, 4 * LIMIT, 2, 7);
    await scrape(m); // the first scrape reads the end offsets; lags show from the next one
    const f = await scrape(m);
    expect(series(f, 'shardherd_ingested_records_total')).toHaveLength(0);
    expect(series(f, 'shardherd_ingestion_lag_records')).toHaveLength(0);
    expect(valueOf(f, 'shardherd_dataset_ingested_records_total', 'big')).toBe(7 * 4 * LIMIT);
    expect(valueOf(f, 'shardherd_dataset_ingestion_lag_records', 'big')).toBe(2 * 4 * LIMIT);
    // Copies stop until the node is under the limit again: the lag goes per shard again.
    for (const stop of untrack.slice(LIMIT)) stop();
    const g = await scrape(m);
    expect(series(g, 'shardherd_ingestion_lag_records')).toHaveLength(LIMIT);
    expect(valueOf(g, 'shardherd_dataset_ingestion_lag_records', 'big')).toBe(2 * LIMIT);
    m.ingested('big' as DatasetRef, 0, 1);
    expect(valueOf(await scrape(m), 'shardherd_ingested_records_total', 'big')).toBe(1);
  });
});
