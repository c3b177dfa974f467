// The one-writer history checker (test/support/history-checker.ts) on hand-made histories: each rule
// fires on a history that breaks it and stays quiet on a clean one.
import { describe, expect, it } from 'vitest';
import { checkHistory, compareToken, formatReport, parseHistory, violations, type AckedRecord, type Call } from '../support/history-checker.js';

const call = (node: string, start: number, end: number, token: [number, number], offsets: [number, number] | null, over: Partial<Call> = {}): Call => ({
  node,
  dataset: 'ds',
  shard: 0,
  token,
  start,
  end,
  firstOffset: offsets?.[0] ?? null,
  lastOffset: offsets?.[1] ?? null,
  count: offsets ? offsets[1] - offsets[0] + 1 : 0,
  offsets: offsets ? [offsets] : [],
  outcome: 'ok',
  ...over,
});

const acked = (from: number, to: number, shard = 0): AckedRecord[] =>
  Array.from({ length: to - from + 1 }, (_, i) => ({ dataset: 'ds', shard, offset: from + i }));
const RF1 = new Set(['ds']);

/** A clean handover: node a writes under (1,1), stops; node b takes over under (1,5), then a new epoch. */
const clean: Call[] = [
  call('a', 0, 10, [1, 1], [0, 9]),
  call('a', 12, 20, [1, 1], [10, 19]),
  call('b', 25, 30, [1, 5], [15, 24]),
  call('b', 31, 40, [2, 1], [25, 30]),
  // Another shard, at the same time: no concern of shard 0's.
  call('a', 25, 35, [1, 1], [0, 3], { shard: 1 }),
];

describe('history checker', () => {
  it('a clean history: no violation of any rule', () => {
    const r = checkHistory({ calls: clean, rf1Datasets: RF1, acked: [...acked(0, 30), ...acked(0, 3, 1)] });
    expect(violations(r), formatReport(r)).toBe(0);
    expect(r).toMatchObject({ calls: 5, accepted: 5, refused: 0, failed: 0, nodes: ['a', 'b'], attemptedOverlaps: 0, acked: 35 });
  });

  it('tokens compare lexicographically, epoch first', () => {
    expect(compareToken([2, 1], [1, 9])).toBeGreaterThan(0);
    expect(compareToken([1, 9], [1, 10])).toBeLessThan(0);
    expect(compareToken([3, 3], [3, 3])).toBe(0);
  });

  describe('(a) overlapping writes', () => {
    it('two nodes writing a shard at once is reported with both calls and the overlap', () => {
      const r = checkHistory({ calls: [...clean, call('a', 28, 33, [1, 1], [20, 22])], rf1Datasets: RF1, acked: [] });
      expect(r.overlaps).toHaveLength(2);
      expect(r.overlaps.map((o) => [o.first.node, o.second.node, o.overlapMs])).toEqual([
        ['b', 'a', 2],
        ['a', 'b', 2],
      ]);
      expect(formatReport(r)).toMatch(
        /\(a\) overlapping accepted writes of one RF 1 shard by two nodes: 2 pairs of calls \(3 calls\) on 1 shards, longest overlap 2\.0 ms/,
      );
    });

    it('a call that contains another one is an overlap too', () => {
      const r = checkHistory({ calls: [call('a', 0, 100, [1, 1], [0, 5], { delayedMs: 90 }), call('b', 40, 50, [1, 2], [0, 5])], rf1Datasets: RF1, acked: [] });
      expect(r.overlaps.map((o) => [o.overlapMs, o.kind])).toEqual([[10, 'in-flight']]);
      expect(formatReport(r)).toContain('held 90 ms by the test hook');
    });

    it('says whether the older token’s call began after a newer token was in use, or was under way when it came', () => {
      const stale = checkHistory({
        calls: [call('b', 0, 10, [1, 5], [0, 1]), call('a', 20, 30, [1, 1], [0, 0]), call('b', 25, 35, [1, 5], [2, 3])],
        rf1Datasets: RF1,
        acked: [],
      });
      expect(stale.overlaps.map((o) => o.kind)).toEqual(['stale-start']);
      const inFlight = checkHistory({ calls: [call('a', 0, 30, [1, 1], [0, 0]), call('b', 25, 35, [1, 5], [1, 3])], rf1Datasets: RF1, acked: [] });
      expect(inFlight.overlaps.map((o) => o.kind)).toEqual(['in-flight']);
      const same = checkHistory({ calls: [call('a', 0, 30, [1, 1], [0, 0]), call('b', 25, 35, [1, 1], [1, 3])], rf1Datasets: RF1, acked: [] });
      expect(same.overlaps.map((o) => o.kind)).toEqual(['same-token']);
      expect(formatReport(stale)).toMatch(/1 stale-start .*, 0 in-flight .*, 0 same-token/);
    });

    it('an in-flight call cut by a stop of its own process is set apart; any other overlap still counts', () => {
      const calls = [call('a', 0, 30, [1, 1], [0, 0]), call('b', 25, 35, [1, 5], [1, 3])];
      const cut = checkHistory({ calls, rf1Datasets: RF1, acked: [], paused: [{ node: 'a', from: 5, to: 28 }] });
      expect(violations(cut)).toBe(0);
      expect(cut.pausedOverlaps.map((o) => o.kind)).toEqual(['in-flight']);
      expect(formatReport(cut)).toContain('in-flight calls cut by a stop of their own process, 1');
      // A call recorded a little after the stop signal was sent began before the signal landed.
      const lateSignal = [call('a', 6, 30, [1, 1], [0, 0]), call('b', 25, 35, [1, 5], [1, 3])];
      expect(violations(checkHistory({ calls: lateSignal, rf1Datasets: RF1, acked: [], paused: [{ node: 'a', from: 5, to: 28 }] }))).toBe(0);
      // One begun after the process ran again was not cut by the stop.
      const afterResume = checkHistory({ calls, rf1Datasets: RF1, acked: [], paused: [{ node: 'a', from: -10, to: -1 }] });
      expect(afterResume.overlaps.map((o) => o.kind)).toEqual(['in-flight']);
      // The stop of another node, or one outside the call, excuses nothing.
      expect(checkHistory({ calls, rf1Datasets: RF1, acked: [], paused: [{ node: 'b', from: 5, to: 28 }] }).overlaps).toHaveLength(1);
      expect(checkHistory({ calls, rf1Datasets: RF1, acked: [], paused: [{ node: 'a', from: 31, to: 40 }] }).overlaps).toHaveLength(1);
      // Nor a stale start: a call begun after a newer token was in use is never a pause's doing.
      const stale = [call('b', 0, 10, [1, 5], [0, 1]), call('a', 20, 30, [1, 1], [0, 0]), call('b', 25, 35, [1, 5], [2, 3])];
      expect(checkHistory({ calls: stale, rf1Datasets: RF1, acked: [], paused: [{ node: 'a', from: 21, to: 29 }] }).overlaps).toHaveLength(1);
    });

    it('a hung call that overlaps many others counts every pair, and shows as one example', () => {
      const hung = call('a', 0, 100, [1, 1], [0, 0], { delayedMs: 95 });
      const r = checkHistory({
        calls: [hung, call('b', 10, 11, [1, 2], [1, 1]), call('b', 20, 21, [1, 2], [2, 2]), call('b', 30, 31, [1, 2], [3, 3])],
        rf1Datasets: RF1,
        acked: [],
      });
      expect(r.overlaps).toHaveLength(3);
      const text = formatReport(r);
      expect(text).toMatch(/3 pairs of calls \(4 calls\) on 1 shards/);
      expect(text.match(/ms overlap/g)).toHaveLength(1);
    });

    it('quiet when the other side was refused, when one node overlaps itself, at touching ends, and for a replicated dataset', () => {
      const refused = checkHistory({
        calls: [call('a', 0, 10, [1, 1], [0, 1]), call('b', 5, 15, [1, 2], [0, 1], { outcome: 'refused' })],
        rf1Datasets: RF1,
        acked: [],
      });
      expect(refused.overlaps).toEqual([]);
      expect(refused.attemptedOverlaps).toBe(1);
      const self = checkHistory({ calls: [call('a', 0, 10, [1, 1], [0, 1]), call('a', 5, 15, [1, 1], [2, 3])], rf1Datasets: RF1, acked: [] });
      expect(self.overlaps).toEqual([]);
      const touching = checkHistory({ calls: [call('a', 0, 10, [1, 1], [0, 1]), call('b', 10, 15, [1, 2], [2, 3])], rf1Datasets: RF1, acked: [] });
      expect(touching.overlaps).toEqual([]);
      const rf2 = checkHistory({ calls: [call('a', 0, 10, [1, 1], [0, 1]), call('b', 5, 15, [1, 1], [0, 1])], rf1Datasets: new Set(), acked: [] });
      expect(rf2.overlaps).toEqual([]);
    });
  });

  describe('(b) out-of-order tokens', () => {
    it('an older token accepted after a newer one ended is reported, against the newest before it', () => {
      const late = call('a', 45, 50, [1, 1], [31, 32]);
      const r = checkHistory({ calls: [...clean, late], rf1Datasets: new Set(), acked: [] });
      expect(r.outOfOrder).toHaveLength(1);
      expect(r.outOfOrder[0]!.earlier.token).toEqual([2, 1]);
      expect(r.outOfOrder[0]!.later).toBe(late);
      expect(formatReport(r)).toMatch(/\(b\) accepted writes with a token older than one accepted before: 1/);
    });

    it('quiet for calls that overlap (neither was before the other), for refused calls, and for equal tokens', () => {
      const concurrent = checkHistory({ calls: [call('a', 0, 10, [1, 5], [0, 1]), call('b', 5, 15, [1, 1], [0, 1])], rf1Datasets: new Set(), acked: [] });
      expect(concurrent.outOfOrder).toEqual([]);
      const refused = checkHistory({
        calls: [call('a', 0, 10, [1, 5], [0, 1]), call('b', 20, 25, [1, 1], [0, 1], { outcome: 'refused' })],
        rf1Datasets: new Set(),
        acked: [],
      });
      expect(refused.outOfOrder).toEqual([]);
      const same = checkHistory({ calls: [call('a', 0, 10, [1, 5], [0, 1]), call('a', 20, 25, [1, 5], [2, 3])], rf1Datasets: new Set(), acked: [] });
      expect(same.outOfOrder).toEqual([]);
    });
  });

  describe('(c) lost acknowledged records', () => {
    it('an acknowledged record in no accepted call is reported; one only in a refused or failed call counts as lost', () => {
      const calls = [
        call('a', 0, 10, [1, 1], [0, 4]),
        call('b', 20, 30, [1, 2], [5, 9], { outcome: 'refused' }),
        call('b', 31, 32, [1, 2], [10, 10], { outcome: 'failed' }),
        call('b', 40, 50, [1, 2], [12, 14]),
      ];
      const r = checkHistory({ calls, rf1Datasets: RF1, acked: acked(0, 14) });
      expect(r.lost.map((l) => l.offset)).toEqual([5, 6, 7, 8, 9, 10, 11]);
      expect(formatReport(r)).toMatch(/\(c\) acknowledged records in no accepted write: 7 of 15\n {4}ds\/0@5, /);
    });

    it('offsets of one shard do not cover another shard or dataset', () => {
      const r = checkHistory({
        calls: [call('a', 0, 10, [1, 1], [0, 4])],
        rf1Datasets: RF1,
        acked: [
          { dataset: 'ds', shard: 1, offset: 0 },
          { dataset: 'other', shard: 0, offset: 0 },
        ],
      });
      expect(r.lost).toHaveLength(2);
    });

    it('a batch with gaps in its offsets covers only the offsets it had', () => {
      const r = checkHistory({
        calls: [
          call('a', 0, 10, [1, 1], null, {
            firstOffset: 0,
            lastOffset: 9,
            count: 2,
            offsets: [
              [0, 0],
              [9, 9],
            ],
          }),
        ],
        rf1Datasets: RF1,
        acked: acked(0, 9),
      });
      expect(r.lost.map((l) => l.offset)).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
    });
  });

  it('parses history lines, counting a torn last line instead of failing', () => {
    const text = `${JSON.stringify(call('a', 0, 1, [1, 1], [0, 0]))}\n${JSON.stringify(call('b', 2, 3, [1, 2], [1, 1]))}\n{"node":"a","sta`;
    const { calls, malformedLines } = parseHistory([text, '']);
    expect(calls.map((c) => c.node)).toEqual(['a', 'b']);
    expect(malformedLines).toBe(1);
  });
});
