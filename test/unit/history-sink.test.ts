// The recording sink (`{"type":"recorded"}`): one history line per call around the wrapped sink,
// with its outcome as the wrapped sink answered, and the slow-call test hook; and its config.
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { StaleTokenError, type FencingToken } from '../../src/core/fencing-token.js';
import { validateDatasetConfig, type DatasetConfig } from '../../src/core/dataset-config.js';
import type { ShardNum } from '../../src/core/ids.js';
import { HistorySink, offsetRuns, type SinkCallRecord } from '../../src/ingest/history-sink.js';
import { JsonLinesSink } from '../../src/ingest/node-sinks.js';
import { NodeConfigError, parseNodeConfig } from '../../src/node/node-config.js';

const t = (epoch: number, version: number): FencingToken => ({ epoch, version });
const valid = validateDatasetConfig({ ref: 'metrics', numShards: 4, minNumNodes: 1, source: { type: 'synthetic' } });
if (!valid.ok) throw new Error('bad test dataset');
const ds: DatasetConfig = valid.value;
const shard = 2 as ShardNum;
const recs = (offsets: number[]) => offsets.map((offset) => ({ offset, key: `k${offset}`, value: offset }));

describe('HistorySink', () => {
  let dir: string | undefined;
  afterEach(() => dir && rmSync(dir, { recursive: true, force: true }));
  const history = () =>
    readFileSync(join(dir!, 'history.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as SinkCallRecord);

  it('records each call with its token, times, offsets and the wrapped sink’s outcome, and passes the outcome on', async () => {
    dir = mkdtempSync(join(tmpdir(), 'shardherd-history-'));
    const sink = new HistorySink(new JsonLinesSink(join(dir, 'records.jsonl')), join(dir, 'history.jsonl'), 'node-7');
    const before = Date.now();
    await sink.accept(ds, shard, recs([4, 5, 6, 9]), t(2, 7));
    await expect(sink.accept(ds, shard, recs([7]), t(2, 6))).rejects.toBeInstanceOf(StaleTokenError);
    const [ok, refused] = history();
    expect(ok).toMatchObject({
      node: 'node-7',
      dataset: 'metrics',
      shard: 2,
      token: [2, 7],
      firstOffset: 4,
      lastOffset: 9,
      count: 4,
      offsets: [
        [4, 6],
        [9, 9],
      ],
      outcome: 'ok',
    });
    expect(ok!.start).toBeGreaterThanOrEqual(before - 1);
    expect(ok!.end).toBeGreaterThanOrEqual(ok!.start);
    expect(refused).toMatchObject({ token: [2, 6], offsets: [[7, 7]], outcome: 'refused' });
    expect(refused!.start).toBeGreaterThanOrEqual(ok!.end);
    // The wrapped sink wrote only the accepted batch.
    expect(readFileSync(join(dir, 'records.jsonl'), 'utf8').trim().split('\n')).toHaveLength(4);
  });

  it('a failing sink is recorded as failed, with its message', async () => {
    dir = mkdtempSync(join(tmpdir(), 'shardherd-history-'));
    const sink = new HistorySink({ accept: () => Promise.reject(new Error('disk full')) }, join(dir, 'history.jsonl'), 'n');
    await expect(sink.accept(ds, shard, [], t(1, 1))).rejects.toThrow('disk full');
    expect(history()).toEqual([expect.objectContaining({ outcome: 'failed', error: 'disk full', count: 0, firstOffset: null, offsets: [] })]);
  });

  it('the slow-call hook holds back one call per trigger file, inside the recorded interval', async () => {
    dir = mkdtempSync(join(tmpdir(), 'shardherd-history-'));
    const trigger = join(dir, 'slow');
    const sink = new HistorySink({ accept: () => Promise.resolve() }, join(dir, 'history.jsonl'), 'n', { triggerPath: trigger, delayMs: 60 });
    await sink.accept(ds, shard, recs([0]), t(1, 1));
    writeFileSync(trigger, '');
    await sink.accept(ds, shard, recs([1]), t(1, 1));
    expect(existsSync(trigger)).toBe(false);
    await sink.accept(ds, shard, recs([2]), t(1, 1));
    const [fast, slow, after] = history();
    expect(fast!.delayedMs).toBeUndefined();
    expect(slow!.delayedMs).toBe(60);
    expect(slow!.end - slow!.start).toBeGreaterThanOrEqual(55);
    expect(after!.delayedMs).toBeUndefined();
  });

  it('offset runs are exact', () => {
    expect(offsetRuns(recs([]))).toEqual([]);
    expect(offsetRuns(recs([3, 4, 5, 7, 8, 10]))).toEqual([
      [3, 5],
      [7, 8],
      [10, 10],
    ]);
  });
});

describe('node config: the recorded sink', () => {
  const minimal = { node: 'node-1', kafka: { brokers: ['127.0.0.1:9092'] }, cassandra: { contactPoints: ['127.0.0.1:9042'] } };
  const refusal = (sink: unknown): string => {
    try {
      parseNodeConfig({ ...minimal, sink }, 'node.json');
    } catch (e) {
      expect(e).toBeInstanceOf(NodeConfigError);
      return (e as Error).message;
    }
    throw new Error('the config was accepted');
  };

  it('wraps any other sink (the log sink by default), with the optional slow-call hook', () => {
    expect(parseNodeConfig({ ...minimal, sink: { type: 'recorded', history: 'h.jsonl' } }).sink).toEqual({
      type: 'recorded',
      history: 'h.jsonl',
      sink: { type: 'log' },
    });
    const c = parseNodeConfig({
      ...minimal,
      sink: { type: 'recorded', history: 'h.jsonl', sink: { type: 'jsonl', path: 'r.jsonl' }, slowCall: { triggerPath: 'slow', delayMs: 5000 } },
    });
    expect(c.sink).toEqual({
      type: 'recorded',
      history: 'h.jsonl',
      sink: { type: 'jsonl', path: 'r.jsonl' },
      slowCall: { triggerPath: 'slow', delayMs: 5000 },
    });
    expect(parseNodeConfig({ ...minimal, sink: { type: 'recorded', history: 'h', sink: { type: 'cassandra' } } }).sink).toMatchObject({
      sink: { type: 'cassandra', table: 'shardherd_records' },
    });
  });

  it('refuses bad keys by name', () => {
    expect(refusal({ type: 'recorded' })).toMatch(/sink\.history is required/);
    expect(refusal({ type: 'recorded', history: 'h', sink: { type: 'recorded', history: 'h2' } })).toMatch(/sink\.sink\.type/);
    expect(refusal({ type: 'recorded', history: 'h', slowCall: { triggerPath: 'x', delayMs: -1 } })).toMatch(/sink\.slowCall\.delayMs/);
    expect(refusal({ type: 'recorded', history: 'h', extra: 1 })).toMatch(/sink\.extra is not a known key/);
  });
});
