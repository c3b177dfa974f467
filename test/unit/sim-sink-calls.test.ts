// The simulator's record of sink calls and its check of I15 (src/sim/sink-calls.ts): for a
// single-copy dataset, two nodes' calls of one shard must never be under way at once. A checker
// that cannot fail proves nothing: it must fire on an overlap and stay quiet on a clean history,
// and leave to the fencing token exactly the cases the design leaves to it.
import { describe, expect, it } from 'vitest';
import { SimulatedClock } from '../../src/cluster/clock.js';
import { StaleTokenError, type FencingToken } from '../../src/core/fencing-token.js';
import type { DatasetConfig } from '../../src/core/dataset-config.js';
import { oneWriterViolations, SinkCallLog, type OneWriterRules, type SinkCall } from '../../src/sim/sink-calls.js';
import { HandoffWindows } from '../../src/sim/handoffs.js';
import type { ShardMapper } from '../../src/core/shard-mapper.js';
import { shardNum } from '../../src/core/ids.js';

const token = (epoch: number, version: number): FencingToken => ({ epoch, version });

function call(node: string, start: number, end: number, t: FencingToken | undefined, o: Partial<SinkCall> = {}): SinkCall {
  return { node, incarnation: `${node}-1`, dataset: 'alpha', shard: 0, token: t, records: 5, start, end, outcome: 'applied', ...o };
}

const RULES: OneWriterRules = {
  singleCopy: (dataset) => dataset === 'alpha',
  stoppedDuring: () => false,
  sinkTimeoutMs: 1_000,
  inHandoff: () => false,
};

describe('I15: one writer per RF-1 shard at a time, from the recorded sink calls', () => {
  it('stays quiet on a clean history: one owner, then another after it stopped', () => {
    const calls = [call('a', 0, 10, token(1, 5)), call('a', 250, 400, token(1, 5)), call('b', 900, 910, token(1, 8)), call('b', 1_150, 1_150, token(1, 8))];
    expect(oneWriterViolations(calls, RULES)).toEqual([]);
  });

  it('fires when a call of another node begins while one is under way', () => {
    const calls = [call('b', 1_000, 1_300, token(2, 9)), call('a', 1_100, 1_100, token(1, 5), { outcome: 'refused' })];
    const v = oneWriterViolations(calls, RULES);
    expect(v).toHaveLength(1);
    expect(v[0]).toMatch(
      /^alpha\/0: b@b-1 \(token 2\/9, 1000\.\.1300 ms, 5 records, applied\) overlapped a@a-1 \(token 1\/5, 1100\.\.1100 ms, 5 records, refused\)$/,
    );
  });

  it('fires on an old owner writing again after the new one began, whatever the fence answered', () => {
    const calls = [
      call('a', 0, 0, token(1, 5)),
      call('b', 500, 500, token(1, 8)),
      call('b', 750, 900, token(1, 8)),
      call('a', 800, 800, token(1, 5), { outcome: 'failed' }),
    ];
    expect(oneWriterViolations(calls, RULES)).toHaveLength(1);
  });

  it('reports one overlap per shard, and judges only single-copy datasets', () => {
    const calls = [
      call('a', 0, 100, token(1, 9)),
      call('b', 50, 60, token(1, 5)),
      call('b', 70, 80, token(1, 5)),
      call('a', 0, 100, token(1, 9), { dataset: 'gamma' }),
      call('b', 50, 60, token(1, 5), { dataset: 'gamma' }),
    ];
    expect(oneWriterViolations(calls, RULES)).toHaveLength(1);
  });

  it('takes calls that follow each other at one instant for one after the other', () => {
    const calls = [call('a', 100, 100, token(1, 5), { outcome: 'failed' }), call('b', 100, 100, token(1, 8)), call('a', 50, 100, token(1, 5))];
    expect(oneWriterViolations(calls, RULES)).toEqual([]);
  });

  it('leaves to the fence a call under way while its process was stopped, or given up after the sink timeout', () => {
    const paused = [call('b', 0, 0, token(1, 8)), call('a', 100, 2_600, token(1, 5)), call('b', 1_500, 1_500, token(1, 8))];
    const patient = { ...RULES, sinkTimeoutMs: 5_000 };
    expect(oneWriterViolations(paused, patient)).toHaveLength(1);
    expect(oneWriterViolations(paused, { ...patient, stoppedDuring: (node, from, to) => node === 'a' && from <= 200 && to >= 2_500 })).toEqual([]);
    const hung = [call('b', 0, 0, token(1, 8)), call('a', 100, 1_200, token(1, 5)), call('b', 1_100, 1_100, token(1, 8))];
    expect(oneWriterViolations(hung, { ...RULES, sinkTimeoutMs: 1_000 })).toEqual([]);
    expect(oneWriterViolations(hung, { ...RULES, sinkTimeoutMs: 5_000 })).toHaveLength(1);
  });

  it('leaves to the fence an older call already under way when the new owner first wrote, not one begun after', () => {
    const underWay = [call('a', 900, 1_300, token(1, 5)), call('b', 1_000, 1_000, token(1, 8))];
    expect(oneWriterViolations(underWay, RULES)).toEqual([]);
    const begunAfter = [call('b', 1_000, 1_000, token(1, 8)), call('b', 1_250, 1_400, token(1, 8)), call('a', 1_300, 1_300, token(1, 5))];
    expect(oneWriterViolations(begunAfter, RULES)).toHaveLength(1);
    // At one instant, the order they began in decides: the older call first is under way, after is not.
    expect(oneWriterViolations([call('a', 1_000, 1_200, token(1, 5)), call('b', 1_000, 1_000, token(1, 8))], RULES)).toEqual([]);
    expect(oneWriterViolations([call('b', 1_000, 1_100, token(1, 8)), call('a', 1_000, 1_200, token(1, 5))], RULES)).toHaveLength(1);
  });

  it('leaves out one token by two nodes, and a planned handoff while the maps name both copies', () => {
    expect(oneWriterViolations([call('a', 0, 100, token(1, 7)), call('b', 50, 50, token(1, 7))], RULES)).toEqual([]);
    const handoff = [call('b', 1_000, 1_200, token(1, 8)), call('a', 1_100, 1_100, token(1, 5))];
    expect(oneWriterViolations(handoff, RULES)).toHaveLength(1);
    expect(oneWriterViolations(handoff, { ...RULES, inHandoff: (_d, _s, a, b) => [a, b].sort().join() === 'a,b' })).toEqual([]);
  });

  it('records each call from the outside, with its times on the simulated clock and its outcome', async () => {
    const clock = new SimulatedClock(100);
    const log = new SinkCallLog(() => clock.now());
    const ds = { ref: 'alpha' } as DatasetConfig;
    const slow = log.wrap('a', () => 'a-7', { accept: () => new Promise<void>((resolve) => clock.schedule(40, resolve)) });
    const p = slow.accept(ds, shardNum(3), [{ offset: 0, value: 1 }] as never, token(1, 2));
    clock.advance(40);
    await p;
    const stale = log.wrap('b', () => 'b-1', { accept: () => Promise.reject(new StaleTokenError('alpha', 3, token(1, 1), token(1, 2))) });
    await expect(stale.accept(ds, shardNum(3), [], token(1, 1))).rejects.toThrow(StaleTokenError);
    expect(log.calls.map((c) => [c.node, c.incarnation, c.shard, c.start, c.end, c.records, c.outcome])).toEqual([
      ['a', 'a-7', 3, 100, 140, 1, 'applied'],
      ['b', 'b-1', 3, 140, 140, 0, 'refused'],
    ]);
  });
});

/** A one-shard map whose copies are `copies` (node: placement), as `HandoffWindows` reads it. */
const mapOf = (copies: Record<string, string>) =>
  ({ numShards: 1, recordForShard: () => ({ assignments: Object.entries(copies).map(([node, placement]) => ({ node, placement })) }) }) as unknown as Pick<
    ShardMapper,
    'numShards' | 'recordForShard'
  >;

describe('HandoffWindows (the RF-1 handoffs I15 leaves to the fence)', () => {
  it('covers the two copies from the map naming one Leaving until the map without it, and the tail after', () => {
    const w = new HandoffWindows(500);
    w.noteMap('alpha', mapOf({ a: 'Active' }), 0);
    w.noteMap('alpha', mapOf({ a: 'Leaving', b: 'Initializing' }), 1_000);
    w.noteMap('alpha', mapOf({ b: 'Active' }), 3_000);
    expect(w.covers('alpha', 0, 'a', 'b', 1_000, 3_400)).toBe(true);
    expect(w.covers('alpha', 0, 'b', 'a', 2_000, 3_500)).toBe(true);
    expect(w.covers('alpha', 0, 'a', 'b', 900, 1_100)).toBe(false); // before the handoff began
    expect(w.covers('alpha', 0, 'a', 'b', 3_400, 3_600)).toBe(false); // past its tail
    expect(w.covers('alpha', 0, 'a', 'c', 1_500, 1_600)).toBe(false); // not its copies
    expect(w.covers('beta', 0, 'a', 'b', 1_500, 1_600)).toBe(false);
  });
});
