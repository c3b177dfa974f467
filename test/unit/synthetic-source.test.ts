// The synthetic ingestion source: records appear at the dataset's configured rate on the injected
// clock, reads return exactly the records that exist, poison records fail every time they are
// read, and old records expire with retention.
import { describe, expect, it } from 'vitest';
import { SimulatedClock } from '../../src/cluster/clock.js';
import { validateDatasetConfig, type DatasetConfig } from '../../src/core/dataset-config.js';
import { ShardOutOfRangeError } from '../../src/core/errors.js';
import { shardNum } from '../../src/core/ids.js';
import { IngestionFailure } from '../../src/ingest/ingestion-source.js';
import { SyntheticSource } from '../../src/ingest/synthetic-source.js';

function config(source: unknown, ref = 'metrics', numShards = 4): DatasetConfig {
  const r = validateDatasetConfig({ ref, numShards, minNumNodes: 1, source });
  if (!r.ok) throw new Error(r.error.message);
  return r.value;
}

const synthetic = (recordsPerSecond: number): DatasetConfig => config({ type: 'synthetic', recordsPerSecond });
const offsets = (records: { offset: number }[]): number[] => records.map((r) => r.offset);
const range = (from: number, to: number): number[] => Array.from({ length: to - from }, (_, i) => from + i);

describe('SyntheticSource', () => {
  it('the end offset grows with simulated time at the configured rate, from when the source was created', async () => {
    const clock = new SimulatedClock(7_000);
    const source = new SyntheticSource(clock);
    clock.advance(2_000); // before opening: the stream runs from the source's creation
    const reader = await source.open(synthetic(100), shardNum(0));
    expect(await reader.endOffset()).toBe(200);
    clock.advance(9);
    expect(await reader.endOffset()).toBe(200); // the next record is due every 10 ms
    clock.advance(1);
    expect(await reader.endOffset()).toBe(201);
    clock.advance(60_000);
    expect(await reader.endOffset()).toBe(6_201);
    expect(await reader.earliestOffset()).toBe(0);
  });

  it('runs each dataset at its own rate, and a slow rate yields whole records only', async () => {
    const clock = new SimulatedClock();
    const source = new SyntheticSource(clock);
    const fast = await source.open(synthetic(1000), shardNum(0));
    const slow = await source.open(config({ type: 'synthetic', recordsPerSecond: 0.5 }, 'slow'), shardNum(0));
    expect(await slow.endOffset()).toBe(0);
    clock.advance(1_999);
    expect(await slow.endOffset()).toBe(0);
    expect(await fast.endOffset()).toBe(1_999);
    clock.advance(1);
    expect(await slow.endOffset()).toBe(1);
  });

  it('reads the records that exist from the offset on, up to max, with keys and countable values', async () => {
    const clock = new SimulatedClock();
    const source = new SyntheticSource(clock);
    const reader = await source.open(synthetic(100), shardNum(3));
    expect(await reader.read(0, 10)).toEqual([]); // nothing yet
    clock.advance(1_000); // 100 records

    const batch = await reader.read(10, 3);
    expect(batch).toEqual([
      { offset: 10, key: 'metrics/3/10', value: { dataset: 'metrics', shard: 3, n: 10 } },
      { offset: 11, key: 'metrics/3/11', value: { dataset: 'metrics', shard: 3, n: 11 } },
      { offset: 12, key: 'metrics/3/12', value: { dataset: 'metrics', shard: 3, n: 12 } },
    ]);
    expect(offsets(await reader.read(95, 50))).toEqual(range(95, 100)); // stops at the end
    expect(await reader.read(100, 50)).toEqual([]);
    expect(await reader.read(500, 50)).toEqual([]);
    expect(await reader.read(0, 0)).toEqual([]);
    clock.advance(50);
    expect(offsets(await reader.read(100, 50))).toEqual(range(100, 105)); // new records appear

    const other = await source.open(synthetic(100), shardNum(1));
    expect((await other.read(10, 1))[0]?.key).toBe('metrics/1/10');
  });

  it('refuses malformed read arguments and reads after close', async () => {
    const reader = await new SyntheticSource(new SimulatedClock()).open(synthetic(100), shardNum(0));
    await expect(reader.read(-1, 10)).rejects.toThrow(RangeError);
    await expect(reader.read(1.5, 10)).rejects.toThrow(RangeError);
    await expect(reader.read(0, -1)).rejects.toThrow(RangeError);
    await reader.close();
    await expect(reader.read(0, 10)).rejects.toThrow(/closed/);
    await expect(reader.endOffset()).rejects.toThrow(/closed/);
  });

  it('a poison record ends a read before it, and fails every read that starts at it', async () => {
    const clock = new SimulatedClock();
    const failAt = (dataset: string, shard: number, offset: number): string | undefined =>
      dataset === 'metrics' && shard === 1 && offset === 42 ? 'cannot decode record 42' : undefined;
    const source = new SyntheticSource(clock, { failAt });
    clock.advance(1_000);
    const reader = await source.open(synthetic(100), shardNum(1));

    expect(offsets(await reader.read(40, 10))).toEqual([40, 41]);
    const error = await reader.read(42, 10).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(IngestionFailure);
    expect(error).toMatchObject({ message: 'cannot decode record 42', offset: 42 });
    await expect(reader.read(42, 1)).rejects.toMatchObject({ offset: 42 });
    await expect(reader.read(42, 1)).rejects.toBeInstanceOf(IngestionFailure); // and again
    expect(offsets(await reader.read(43, 3))).toEqual([43, 44, 45]);

    const otherShard = await source.open(synthetic(100), shardNum(0));
    expect(offsets(await otherShard.read(40, 5))).toEqual(range(40, 45));
  });

  it('with retention, only the newest records are kept: the earliest offset moves and reads start there', async () => {
    const clock = new SimulatedClock();
    const source = new SyntheticSource(clock, { retentionRecords: 50 });
    const reader = await source.open(synthetic(100), shardNum(0));
    clock.advance(300); // 30 records: none expired yet
    expect(await reader.earliestOffset()).toBe(0);
    clock.advance(700); // 100 records
    expect(await reader.earliestOffset()).toBe(50);
    expect(await reader.endOffset()).toBe(100);
    expect(offsets(await reader.read(0, 5))).toEqual(range(50, 55));
    expect(offsets(await reader.read(60, 5))).toEqual(range(60, 65));
    expect(() => new SyntheticSource(clock, { retentionRecords: 0 })).toThrow(RangeError);
  });

  it('refuses a dataset whose source is not synthetic, and a shard outside the dataset', async () => {
    const source = new SyntheticSource(new SimulatedClock());
    const kafka = config({ type: 'kafka', topic: 'metrics-in' }, 'fromkafka');
    await expect(source.open(kafka, shardNum(0))).rejects.toThrow(/fromkafka.*kafka/);
    // At setup already, typed: the singleton answers BadData with this message and stores nothing.
    await expect(source.validate(kafka)).rejects.toMatchObject({
      code: 'SOURCE_MISMATCH',
      dataset: 'fromkafka',
      message: expect.stringMatching(/synthetic sources only/),
    });
    await expect(source.validate(synthetic(100))).resolves.toBeUndefined();
    await expect(source.open(synthetic(100), shardNum(4))).rejects.toBeInstanceOf(ShardOutOfRangeError);
  });
});
