// The arithmetic of suspicion (docs/ARCHITECTURE.md §11.5): the majority of votes an eviction needs,
// the Lifeguard-style timeout that shrinks with confirmations, and what a probe's outcome is worth.
import { describe, expect, it } from 'vitest';
import { probeVote } from '../../src/cluster/failure-detector/probe-vote.js';
import { quorum, silenceNeededMs } from '../../src/core/failure-detection/suspicion.js';

describe('quorum', () => {
  it('is a strict majority of the observers (everyone but the suspect)', () => {
    expect([2, 3, 4, 5, 6, 10, 11, 1000].map(quorum)).toEqual([1, 2, 2, 3, 3, 5, 6, 500]);
  });

  it('needs two members', () => {
    expect(() => quorum(1)).toThrow(RangeError);
    expect(() => quorum(2.5)).toThrow(RangeError);
  });
});

describe('silenceNeededMs', () => {
  it('is the whole timeout without confirmations and three quarters of it with all of them', () => {
    expect(silenceNeededMs(1800, 3, 0)).toBe(1800);
    expect(silenceNeededMs(1800, 3, 3)).toBeCloseTo(1350, 9);
    expect(silenceNeededMs(1800, 0, 0)).toBe(1800);
    expect(silenceNeededMs(1800, 3, 7)).toBeCloseTo(1350, 9); // more confirmations than asked count as all
  });

  it('shrinks with every confirmation, the first ones most (log curve)', () => {
    const steps = [0, 1, 2, 3].map((c) => silenceNeededMs(1800, 3, c));
    expect(steps[1]).toBe(1575); // log 2 / log 4 = 1/2 of the 450 ms range
    for (let i = 1; i < steps.length; i++) expect(steps[i]!).toBeLessThan(steps[i - 1]!);
    expect(steps[0]! - steps[1]!).toBeGreaterThan(steps[2]! - steps[3]!);
  });
});

describe('probeVote', () => {
  const h = { heartbeatIntervalMs: 100 };
  it('turns an ack into alive, a refusal into refused', () => {
    expect(probeVote({ kind: 'acked' }, h)).toBe('alive');
    expect(probeVote({ kind: 'refused' }, h)).toBe('refused');
  });

  it('counts a timeout as silent only when the observer ran on time; a late observer is unsure', () => {
    expect(probeVote({ kind: 'timed-out', latenessMs: 3 }, h)).toBe('silent');
    expect(probeVote({ kind: 'timed-out', latenessMs: 100 }, h)).toBe('silent');
    expect(probeVote({ kind: 'timed-out', latenessMs: 101 }, h)).toBe('unsure');
  });
});
