// FiloDB's IngestionStreamSpec "Progress percentage table" (reference §7.5): recursive recovery in
// `maxDepth` rounds, round `depth` replaying offsets `start..end`; each round is worth floor(100/maxDepth)
// percent and only the end of the last round reports 100.
import { describe, expect, it } from 'vitest';
import { recoveryProgressPct } from '../../src/core/recovery-progress.js';

describe('recoveryProgressPct (IngestionStreamSpec progress table)', () => {
  it.each([
    [1, 3, 200, 100, 500, 8],
    [1, 3, 400, 100, 500, 24],
    [1, 3, 500, 100, 500, 33],
    [1, 3, 500, 500, 500, 33],
    [2, 3, 600, 500, 700, 49],
    [2, 3, 700, 500, 700, 66],
    [2, 3, 700, 700, 700, 66],
    [3, 3, 800, 700, 1000, 77],
    [3, 3, 900, 700, 1000, 88],
    [3, 3, 1000, 700, 1000, 100],
  ])('(depth %i, maxDepth %i, offset %i, start %i, end %i) = %i%%', (depth, maxDepth, offset, start, end, expected) => {
    expect(recoveryProgressPct(depth, maxDepth, offset, start, end)).toBe(expected);
  });

  it('never goes backwards across the whole three-round recovery of the table', () => {
    const rounds: [number, number, number][] = [
      [1, 100, 500],
      [2, 500, 700],
      [3, 700, 1000],
    ];
    const seen: number[] = [];
    for (const [depth, start, end] of rounds) {
      for (let offset = start; offset <= end; offset += 50) seen.push(recoveryProgressPct(depth, 3, offset, start, end));
    }
    for (let i = 1; i < seen.length; i++) expect(seen[i]).toBeGreaterThanOrEqual(seen[i - 1]!);
    expect(seen[0]).toBe(0);
    expect(seen.at(-1)).toBe(100);
    expect(seen.slice(0, -1).every((p) => p < 100)).toBe(true);
  });
});
