// The least weighted spread among the maps that are otherwise optimal (placed, bounds, moves).
// Each node's load is ⌊q⌋ or ⌈q⌉, so the spread is set by a window [a, b] of weighted loads that
// every node's load must fall in. Windows are tried narrowest first, each screened by counting
// (every node has a load in it, the loads can add up to the total, no group over its capacity)
// and only then confirmed by a flow with the bounds narrowed to the window. Equal weights give few
// distinct weighted loads, so the search is short; it is skipped when the first map already sits
// at the narrowest window that passes the screen.
import type { CopyTable } from './copy-table.js';
import { placeByFlow, type LoadBounds } from './flow-placement.js';
import { outcomeOf, type PlacementOutcome } from './placement-outcome.js';
import type { PlacementProblem } from './placement-problem.js';

// Weighted loads are ratios computed in floating point: values this close are the same value.
const SAME = 1e-9;

export function narrowSpread(problem: PlacementProblem, table: CopyTable): CopyTable {
  const first = outcomeOf(problem, table);
  if (first.violation > 0) return table;
  const presentNodes: number[] = [];
  for (let i = 0; i < problem.nodes.length; i++) if (problem.present[i]) presentNodes.push(i);
  const values = distinctValues(presentNodes.flatMap((i) => [problem.weighted(i, problem.lo[i]!), problem.weighted(i, problem.hi[i]!)]));
  const windows: [number, number][] = [];
  for (let a = 0; a < values.length; a++) {
    for (let b = a; b < values.length; b++) {
      if (values[b]! - values[a]! >= first.spread - SAME) break;
      windows.push([values[a]!, values[b]!]);
    }
  }
  windows.sort((x, y) => x[1] - x[0] - (y[1] - y[0]) || x[0] - y[0]);
  const total = presentNodes.reduce((sum, i) => sum + first.load[i]!, 0);
  for (const [a, b] of windows) {
    const bounds = windowBounds(problem, presentNodes, a, b);
    if (!bounds || !canAddUp(problem, presentNodes, bounds, total)) continue;
    const candidate = placeByFlow(problem, bounds);
    // Within the window's bounds (not only ⌊q⌋..⌈q⌉), with as many copies placed and moved.
    if (sameOptimum(outcomeOf(problem, candidate, bounds), first)) return candidate;
  }
  return table;
}

function distinctValues(values: number[]): number[] {
  values.sort((a, b) => a - b);
  const out: number[] = [];
  for (const v of values) if (out.length === 0 || v - out[out.length - 1]! > SAME) out.push(v);
  return out;
}

/** Each node's loads within ⌊q⌋..⌈q⌉ whose weighted value lies in [a, b]; undefined if a node has none. */
function windowBounds(problem: PlacementProblem, presentNodes: readonly number[], a: number, b: number): LoadBounds | undefined {
  const lo = new Int32Array(problem.nodes.length);
  const hi = new Int32Array(problem.nodes.length);
  for (const i of presentNodes) {
    let low = Infinity;
    let high = -Infinity;
    for (let load = problem.lo[i]!; load <= problem.hi[i]!; load++) {
      const w = problem.weighted(i, load);
      if (w < a - SAME || w > b + SAME) continue;
      low = Math.min(low, load);
      high = Math.max(high, load);
    }
    if (low > high) return undefined;
    lo[i] = low;
    hi[i] = high;
  }
  return { lo, hi };
}

/** A necessary condition: the total fits between the bounds' sums, and no group must exceed its capacity. */
function canAddUp(problem: PlacementProblem, presentNodes: readonly number[], bounds: LoadBounds, total: number): boolean {
  let low = 0;
  let high = 0;
  const groupLow = new Int32Array(problem.groupCount);
  for (const i of presentNodes) {
    low += bounds.lo[i]!;
    high += bounds.hi[i]!;
    groupLow[problem.groupOf[i]!]! += bounds.lo[i]!;
  }
  if (low > total || high < total) return false;
  for (let g = 0; g < problem.groupCount; g++) if (groupLow[g]! > problem.groupCapacity[g]!) return false;
  return true;
}

function sameOptimum(candidate: PlacementOutcome, first: PlacementOutcome): boolean {
  return candidate.placed === first.placed && candidate.violation === 0 && candidate.moves === first.moves;
}
