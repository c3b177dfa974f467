// What a decided map achieves, in the terms of the strategy's objective (docs/PLACEMENT.md, "What
// exact means"): copies placed, bound violations, moves, and the weighted spread.
import type { CopyTable } from './copy-table.js';
import type { LoadBounds } from './flow-placement.js';
import type { PlacementProblem } from './placement-problem.js';

export interface PlacementOutcome {
  /** Copies of non-held shards on present nodes. */
  readonly placed: number;
  /** Σ over present nodes of how far its load lies outside its bounds. */
  readonly violation: number;
  /** Copies on present nodes that were not there before (held shards never move). */
  readonly moves: number;
  /** Highest minus lowest weighted load over present nodes. */
  readonly spread: number;
  /** Load of each node (held copies included). */
  readonly load: Int32Array;
}

export function outcomeOf(problem: PlacementProblem, table: CopyTable, bounds: LoadBounds = problem): PlacementOutcome {
  const load = Int32Array.from(problem.heldLoad);
  let placed = 0;
  let moves = 0;
  const { currentStart, currentNode, present } = problem;
  for (let s = 0; s < problem.shards; s++) {
    if (problem.held.has(s)) continue;
    for (let k = 0; k < table.count(s); k++) {
      const i = table.at(s, k);
      if (!present[i]) continue;
      load[i]!++;
      placed++;
      let had = false;
      for (let c = currentStart[s]!; !had && c < currentStart[s + 1]!; c++) had = currentNode[c] === i;
      if (!had) moves++;
    }
  }
  let violation = 0;
  let highest = -Infinity;
  let lowest = Infinity;
  for (let i = 0; i < load.length; i++) {
    if (!present[i]) continue;
    violation += Math.max(0, bounds.lo[i]! - load[i]!) + Math.max(0, load[i]! - bounds.hi[i]!);
    const w = problem.weighted(i, load[i]!);
    highest = Math.max(highest, w);
    lowest = Math.min(lowest, w);
  }
  return { placed, violation, moves, spread: highest >= lowest ? highest - lowest : 0, load };
}
