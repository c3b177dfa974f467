/**
 * Recovery progress in percent, FiloDB's `getRecoveryProgressPercentage` (recursive recovery):
 * round `depth` of `maxDepth` replays offsets `start..end`; each round is worth `floor(100 / maxDepth)`
 * percent, and only the end of the last round reports 100.
 */
export function recoveryProgressPct(depth: number, maxDepth: number, offset: number, start: number, end: number): number {
  const per = Math.floor(100 / maxDepth);
  if (offset >= end && depth === maxDepth) return 100;
  if (offset >= end || end === start) return depth * per;
  return Math.floor(((offset - start) * per) / (end - start)) + (depth - 1) * per;
}
