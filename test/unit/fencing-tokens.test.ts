// Fencing tokens and the bundled sinks' side of the contract: a write whose token is older than one
// a sink applied for the shard is refused with StaleTokenError and nothing of it is applied.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { compareTokens, isFencingToken, StaleTokenError, type FencingToken } from '../../src/core/fencing-token.js';
import { validateDatasetConfig, type DatasetConfig } from '../../src/core/dataset-config.js';
import type { ShardNum } from '../../src/core/ids.js';
import { CountingSink } from '../../src/ingest/counting-sink.js';
import { JsonLinesSink, LogSink } from '../../src/ingest/node-sinks.js';
import { TokenFence } from '../../src/ingest/token-fence.js';

const t = (epoch: number, version: number): FencingToken => ({ epoch, version });
const valid = validateDatasetConfig({ ref: 'metrics', numShards: 4, minNumNodes: 1, source: { type: 'synthetic' } });
if (!valid.ok) throw new Error('bad test dataset');
const ds: DatasetConfig = valid.value;
const shard = 1 as ShardNum;
const recs = (from: number, n: number) => Array.from({ length: n }, (_, i) => ({ offset: from + i, key: `k${from + i}`, value: from + i }));

describe('fencing tokens', () => {
  it('are ordered by epoch first, then by assignment version', () => {
    expect(compareTokens(t(2, 1), t(1, 900))).toBeGreaterThan(0);
    expect(compareTokens(t(1, 5), t(1, 7))).toBeLessThan(0);
    expect(compareTokens(t(3, 3), t(3, 3))).toBe(0);
  });

  it('are well formed only as two safe whole numbers >= 0', () => {
    expect(isFencingToken(t(0, 0))).toBe(true);
    for (const bad of [
      null,
      {},
      { epoch: 1 },
      { epoch: -1, version: 0 },
      { epoch: 1.5, version: 0 },
      { epoch: '1', version: 2 },
      { epoch: 2 ** 60, version: 0 },
    ])
      expect(isFencingToken(bad), JSON.stringify(bad)).toBe(false);
  });
});

describe('TokenFence', () => {
  it('admits equal and newer tokens, refuses an older one naming the newest, per shard', () => {
    const f = new TokenFence();
    f.admit('m', 0, t(1, 5));
    f.admit('m', 0, t(1, 5));
    f.admit('m', 0, t(2, 3));
    const e = (() => {
      try {
        f.admit('m', 0, t(1, 9));
      } catch (x) {
        return x;
      }
      return undefined;
    })();
    expect(e).toBeInstanceOf(StaleTokenError);
    expect((e as StaleTokenError).given).toEqual(t(1, 9));
    expect((e as StaleTokenError).newest).toEqual(t(2, 3));
    expect((e as StaleTokenError).code).toBe('STALE_TOKEN');
    // Another shard, another dataset: their own fences.
    f.admit('m', 1, t(1, 1));
    f.admit('other', 0, t(1, 1));
    // A caller of the three-argument API is not fenced.
    f.admit('m', 0, undefined);
    expect(f.newestOf('m', 0)).toEqual(t(2, 3));
  });
});

describe('bundled sinks fence by token', () => {
  it('CountingSink applies nothing of a refused batch and counts the refusal', async () => {
    const sink = new CountingSink();
    await sink.accept(ds, shard, recs(0, 3), t(1, 4));
    await sink.accept(ds, shard, recs(3, 2), t(2, 1));
    await expect(sink.accept(ds, shard, recs(5, 10), t(1, 4))).rejects.toBeInstanceOf(StaleTokenError);
    const tally = sink.tally('metrics', 1);
    expect(tally.covered).toBe(5);
    expect(tally.accepted).toBe(5);
    expect(tally.refused).toBe(1);
  });

  it('LogSink refuses an older token and does not count its records', async () => {
    const sink = new LogSink(pino({ level: 'silent' }));
    await sink.accept(ds, shard, recs(0, 3), t(3, 3));
    await expect(sink.accept(ds, shard, recs(3, 3), t(3, 2))).rejects.toBeInstanceOf(StaleTokenError);
    expect(sink.total).toBe(3);
  });

  describe('JsonLinesSink', () => {
    let dir: string | undefined;
    afterEach(() => dir && rmSync(dir, { recursive: true, force: true }));

    it('writes each record with its token; a late write of an older token, issued after a newer one, writes no line', async () => {
      dir = mkdtempSync(join(tmpdir(), 'shardherd-jsonl-'));
      const file = join(dir, 'records.jsonl');
      const sink = new JsonLinesSink(file);
      // Issued together: the newer one first, then a former owner's late one.
      const newer = sink.accept(ds, shard, recs(10, 2), t(2, 7));
      const late = sink.accept(ds, shard, recs(5, 3), t(2, 6));
      await newer;
      await expect(late).rejects.toBeInstanceOf(StaleTokenError);
      await sink.accept(ds, shard, recs(12, 1), t(2, 7));
      const lines = readFileSync(file, 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as { offset: number; token: number[] });
      expect(lines.map((l) => l.offset)).toEqual([10, 11, 12]);
      expect(lines.every((l) => l.token[0] === 2 && l.token[1] === 7)).toBe(true);
    });
  });
});
