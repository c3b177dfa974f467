// A long simulation run's progress lines (src/sim/run-progress.ts): how often they come (every
// second in place on a terminal, every `everyMs` in a log) and what they say.
import { describe, expect, it } from 'vitest';
import { formatDuration, RunProgress } from '../../src/sim/run-progress.js';

function run(inPlace: boolean) {
  let t = 0;
  const out: string[] = [];
  const p = new RunProgress({ total: 100, write: (s) => out.push(s), inPlace, everyMs: 10_000, now: () => t });
  return { p, out, at: (ms: number) => (t = ms) };
}

describe('RunProgress', () => {
  it('adds a line to a log every everyMs, with seeds done, the rate, violations and the time left', () => {
    const { p, out, at } = run(false);
    at(5_000);
    p.seedDone(0);
    expect(out).toEqual([]);
    at(10_000);
    p.seedDone(2);
    expect(out).toEqual(['2 of 100 seeds, 0.2 seeds/s, 1 with violations, 10s elapsed, ~8m 10s left\n']);
    at(15_000);
    p.seedDone(0);
    expect(out).toHaveLength(1);
    p.finish();
    expect(out).toHaveLength(1);
  });

  it('rewrites one line on a terminal every second, and ends it', () => {
    const { p, out, at } = run(true);
    at(1_000);
    p.seedDone(0);
    at(1_500);
    p.seedDone(0);
    at(2_000);
    p.seedDone(0);
    expect(out).toEqual([
      '\r1 of 100 seeds, 1.0 seeds/s, 0 with violations, 1s elapsed, ~1m 39s left   ',
      '\r3 of 100 seeds, 1.5 seeds/s, 0 with violations, 2s elapsed, ~1m 05s left   ',
    ]);
    p.finish();
    expect(out.at(-1)).toBe('\n');
  });

  it('formats durations', () => {
    expect(formatDuration(12.4)).toBe('12s');
    expect(formatDuration(245)).toBe('4m 05s');
    expect(formatDuration(3_720)).toBe('1h 02m');
  });
});
