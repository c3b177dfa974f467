// An exact checker of the placement contract of issue 21 (stated in exact-placement/contract.ts),
// independent of the strategy: it imports only the types of src/core/placement and solves the
// contract from its definition, by min-cost flow (exact-placement/placement-flow.ts).
//
// For an input it finds the best (placed, violation, moves) any valid map reaches, and, when that
// optimum has no violation, the narrowest weighted spread among the maps that reach it. For an
// output it lists what breaks the hard rules and measures it the same way. Each answer comes with a
// witness map, so a claim "the strategy could have done better" can be checked by hand.
import type { Placement, PlacementInput } from '../../src/core/placement/placement-types.js';
import {
  readContract,
  sameObjective,
  scaledLoad,
  scoreMap,
  validityProblems,
  withChosenBounds,
  type ContractView,
  type MapScore,
  type Objective,
  type Problem,
} from './exact-placement/contract.js';
import type { FairShare } from './exact-placement/fair-shares.js';
import { bestMapWithin, type LoadBounds } from './exact-placement/placement-flow.js';

export {
  invalidInputReason,
  betterObjective,
  sameObjective,
  type MapScore,
  type Objective,
  type Problem,
  type ProblemKind,
} from './exact-placement/contract.js';
export { fairShares, type FairShare } from './exact-placement/fair-shares.js';

export interface ExactOptimum {
  /** The best (placed, violation, moves) over every valid map. */
  readonly objective: Objective;
  /** A valid map reaching `objective`. */
  readonly witness: Placement;
  /** The narrowest spread among maps reaching `objective`; undefined when its violation is not 0. */
  readonly minSpread: number | undefined;
  /** A map reaching `objective` at `minSpread`. */
  readonly spreadWitness: Placement | undefined;
  /** Present nodes in id order, each with its fair share (q, lo, hi). */
  readonly shares: readonly { readonly id: string; readonly share: FairShare }[];
}

export interface PlacementVerdict {
  /** The hard rules `output` breaks; empty when valid. */
  readonly problems: readonly Problem[];
  readonly own: MapScore;
  readonly exact: ExactOptimum;
}

/** Scaled values closer than this are the same value (they come from different float divisions). */
const SPREAD_TOLERANCE = 1e-9;

/** The input read as the contract says, its bounds chosen by the flow (see `withChosenBounds`). */
function contractView(input: PlacementInput): ContractView {
  return withChosenBounds(readContract(input), (view) => scoreMap(view, bestMapWithin(view, view.shares)).violation === 0);
}

export function exactOptimum(input: PlacementInput): ExactOptimum {
  const view = contractView(input);
  const witness = bestMapWithin(view, view.shares);
  const objective = objectiveOf(scoreMap(view, witness));
  const shares = view.present.map((n, i) => ({ id: n.id as string, share: view.shares[i]! }));
  if (objective.violation !== 0) return { objective, witness, minSpread: undefined, spreadWitness: undefined, shares };
  const narrowest = narrowestSpread(view, objective);
  return { objective, witness, minSpread: narrowest.spread, spreadWitness: narrowest.map, shares };
}

export function checkPlacement(input: PlacementInput, output: Placement): PlacementVerdict {
  const view = contractView(input);
  return { problems: validityProblems(view, output), own: scoreMap(view, output), exact: exactOptimum(input) };
}

/** The contract's measures of any map for this input (a witness, a map made by hand). */
export function scorePlacement(input: PlacementInput, map: Placement): { readonly problems: readonly Problem[]; readonly score: MapScore } {
  const view = contractView(input);
  return { problems: validityProblems(view, map), score: scoreMap(view, map) };
}

const objectiveOf = ({ placed, violation, moves }: Objective): Objective => ({ placed, violation, moves });

/**
 * Window search. With violation 0 every load is lo or hi, so a map's spread is b − a for some pair
 * of the candidate values lo·k/w and hi·k/w. A window [a, b] is reachable when some map optimal for
 * the objective keeps every node's scaled load inside it: tighten each node's bounds to its loads in
 * the window and ask the flow whether the optimum survives. Reachability only grows with the window,
 * so the least reachable b never decreases as a grows: a two-pointer walk asks O(candidates) flows.
 */
function narrowestSpread(view: ContractView, optimum: Objective): { spread: number; map: Placement } {
  const n = view.present.length;
  if (n === 0) return { spread: 0, map: bestMapWithin(view, view.shares) };
  const values = distinctSorted(view.shares.flatMap((s, i) => [scaledLoad(view, i, s.lo), scaledLoad(view, i, s.hi)]));
  let best: { spread: number; map: Placement } | undefined;
  let right = 0;
  for (let left = 0; left < values.length; left++) {
    right = Math.max(right, left);
    let map: Placement | undefined;
    while (right < values.length && (map = mapInWindow(view, optimum, values[left]!, values[right]!)) === undefined) right++;
    if (right === values.length || map === undefined) break;
    const spread = scoreMap(view, map).spread;
    if (best === undefined || spread < best.spread) best = { spread, map };
  }
  if (best === undefined) throw new Error('checker bug: the full window must hold an optimal map');
  return best;
}

/** An optimal map whose scaled loads all lie in [a, b], or undefined when there is none. */
function mapInWindow(view: ContractView, optimum: Objective, a: number, b: number): Placement | undefined {
  const bounds: LoadBounds[] = [];
  for (let i = 0; i < view.present.length; i++) {
    const { lo, hi } = view.shares[i]!;
    const allowed = [lo, hi].filter((load) => {
      const v = scaledLoad(view, i, load);
      return v >= a - SPREAD_TOLERANCE && v <= b + SPREAD_TOLERANCE;
    });
    if (allowed.length === 0) return undefined;
    bounds.push({ lo: Math.min(...allowed), hi: Math.max(...allowed) });
  }
  const map = bestMapWithin(view, bounds);
  const score = scoreMap(view, map);
  const inside = score.loads.every((load, i) => load >= bounds[i]!.lo && load <= bounds[i]!.hi);
  return inside && sameObjective(objectiveOf(score), optimum) ? map : undefined;
}

function distinctSorted(values: readonly number[]): number[] {
  const sorted = [...values].sort((x, y) => x - y);
  const out: number[] = [];
  for (const v of sorted) if (out.length === 0 || v - out[out.length - 1]! > SPREAD_TOLERANCE) out.push(v);
  return out;
}
