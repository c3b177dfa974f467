// An exact checker of the load-aware objective (docs/PLACEMENT.md, "The `load-aware` mode"),
// independent of the strategy: it reads the hard rules from the copy-count contract's own reading
// (exact-placement/contract.ts) and solves the load objective as an integer program with HiGHS,
// a solver of its own (a dev dependency, compiled to WebAssembly).
//
// For an input without hot shards it finds V*, the least load outside the band any valid map
// reaches, and M*, the fewest copies moved among maps within V* (plus a rounding tolerance). The
// band of node i is [(1 − b)·w_i·λ, (1 + b)·w_i·λ] with λ the map's load on present nodes over their
// weight: linear in the map, so "outside the band" is exact in the program, not approximated.
import highsModule, { type Highs } from 'highs';
import type { Placement, PlacementInput } from '../../src/core/placement/placement-types.js';
import { readContract, validityProblems, type ContractView, type Problem } from './exact-placement/contract.js';
import { exactOptimum } from './placement-checker.js';

export interface LoadScore {
  readonly problems: readonly Problem[];
  /** Copies on present nodes of non-held shards. */
  readonly placed: number;
  readonly outside: number;
  readonly moves: number;
}

// The package's types describe its CommonJS build; `import` loads its ES module build, whose
// default export is the loader itself.
const highsLoader = highsModule as unknown as () => Promise<Highs>;

let solver: Promise<Highs> | undefined;
/** The solver, loaded once per process (its WebAssembly takes about 100 ms to compile). */
export const loadSolver = (): Promise<Highs> => (solver ??= highsLoader());

/** Loads outside the band within this of each other count as the same (float sums in a different order). */
export const OUTSIDE_TOLERANCE = 1e-6;

/** Each node's load outside its band, summed, and the hard-rule problems of `map`. */
export function scoreLoadMap(input: PlacementInput, loads: readonly number[], band: number, map: Placement): LoadScore {
  const view = readContract(input);
  const nodeLoad = new Array<number>(view.present.length).fill(0);
  let placed = 0;
  let moves = 0;
  map.forEach((ids, s) =>
    ids.forEach((id) => {
      const i = view.presentIndex.get(id);
      if (i === undefined) return;
      nodeLoad[i]! += loads[s]!;
      if (view.held[s]) return;
      placed += 1;
      if (!view.before[s]!.has(id)) moves += 1;
    }),
  );
  const total = nodeLoad.reduce((a, b) => a + b, 0);
  const weight = view.present.reduce((a, n) => a + n.weight, 0);
  const outside = nodeLoad.reduce((sum, l, i) => {
    const share = (total * view.present[i]!.weight) / weight;
    return sum + Math.max(0, l - (1 + band) * share) + Math.max(0, (1 - band) * share - l);
  }, 0);
  return { problems: validityProblems(view, map), placed, outside, moves };
}

/** The most copies any valid map places (the copy-count contract's exact optimum). */
export function mostPlaced(input: PlacementInput): number {
  return exactOptimum(input).objective.placed;
}

/** V*: the least load outside the band over every valid map placing the most copies. */
export async function leastOutside(input: PlacementInput, loads: readonly number[], band: number): Promise<number> {
  const view = readContract(input);
  return solve(await loadSolver(), program(view, loads, band, mostPlaced(input), { minimise: 'outside' }));
}

/** M*: the fewest copies moved (created on a node that did not hold them) among maps within `outsideAtMost` (V* and a tolerance). */
export async function fewestMoves(input: PlacementInput, loads: readonly number[], band: number, outsideAtMost: number): Promise<number> {
  const view = readContract(input);
  return Math.round(solve(await loadSolver(), program(view, loads, band, mostPlaced(input), { minimise: 'moves', outsideAtMost })));
}

/** Exact: the solver's default stops within 0.01 % of the optimum. */
const EXACT = { mip_rel_gap: 0, mip_abs_gap: 1e-9 } as const;

function solve(highs: Highs, lp: string): number {
  const result = highs.solve(lp, EXACT as Parameters<Highs['solve']>[1]);
  if (result.Status !== 'Optimal') throw new Error(`HiGHS: ${result.Status}\n${lp}`);
  return result.ObjectiveValue;
}

/**
 * The program in CPLEX LP format. x_s_i = 1 when present node i holds a copy of non-held shard s
 * (only where its group is not blocked by a frozen copy); per shard at most its slots and one per
 * group; exactly `placed` copies in all; o_i and u_i the load above and below node i's band.
 */
function program(
  view: ContractView,
  loads: readonly number[],
  band: number,
  placed: number,
  goal: { minimise: 'outside' | 'moves'; outsideAtMost?: number },
): string {
  const nodes = view.present;
  const weight = nodes.reduce((a, n) => a + n.weight, 0);
  const x: { s: number; i: number; name: string }[] = [];
  for (let s = 0; s < view.numShards; s++) {
    if (view.held[s]) continue;
    nodes.forEach((n, i) => {
      if (!view.blockedGroups[s]!.has(n.group)) x.push({ s, i, name: `x_${s}_${i}` });
    });
  }
  const heldLoad = nodes.map((n) => view.heldCopies.reduce((sum, ids, s) => sum + (ids.includes(n.id) ? loads[s]! : 0), 0));
  const term = (c: number, v: string) => `${c >= 0 ? '+' : '-'} ${fmt(Math.abs(c))} ${v}`;
  const lines: string[] = [];
  const outsideSum = nodes.map((_, i) => `+ o_${i} + u_${i}`).join(' ');
  const movedSum =
    x
      .filter(({ s, i }) => !view.before[s]!.has(nodes[i]!.id))
      .map((v) => `+ ${v.name}`)
      .join(' ') || '0 o_0';
  lines.push('Minimize', ` obj: ${goal.minimise === 'outside' ? outsideSum : movedSum}`, 'Subject To');
  if (goal.outsideAtMost !== undefined) lines.push(` within: ${outsideSum} <= ${fmt(goal.outsideAtMost)}`);
  lines.push(` placed: ${x.map((v) => `+ ${v.name}`).join(' ') || '0 o_0'} = ${placed}`);
  for (let s = 0; s < view.numShards; s++) {
    const mine = x.filter((v) => v.s === s);
    if (mine.length === 0) continue;
    lines.push(` slots_${s}: ${mine.map((v) => `+ ${v.name}`).join(' ')} <= ${view.slots[s]}`);
    for (const g of new Set(mine.map((v) => nodes[v.i]!.group))) {
      const inGroup = mine.filter((v) => nodes[v.i]!.group === g);
      if (inGroup.length > 1) lines.push(` group_${s}_${lines.length}: ${inGroup.map((v) => `+ ${v.name}`).join(' ')} <= 1`);
    }
  }
  // L_i − (1 + b)·(w_i / W)·T − o_i <= 0 and (1 − b)·(w_i / W)·T − L_i − u_i <= 0, T = Σ loads on
  // present nodes. When every shard gets all its slots T is a constant and each row holds only the
  // node's own variables (a dense row per node made the program several times slower to solve).
  const slotsTotal = view.slots.reduce((a, b) => a + b, 0);
  const fixedTotal = placed === slotsTotal ? view.slots.reduce((sum, k, s) => sum + k * loads[s]!, 0) + heldLoad.reduce((a, b) => a + b, 0) : undefined;
  nodes.forEach((n, i) => {
    const f = n.weight / weight;
    if (fixedTotal !== undefined) {
      const own =
        x
          .filter((v) => v.i === i)
          .map((v) => term(loads[v.s]!, v.name))
          .join(' ') || '0 o_0';
      lines.push(` over_${i}: ${own} - o_${i} <= ${fmt((1 + band) * f * fixedTotal - heldLoad[i]!)}`);
      lines.push(` under_${i}: ${own} + u_${i} >= ${fmt((1 - band) * f * fixedTotal - heldLoad[i]!)}`);
      return;
    }
    const up = (own: boolean) => (own ? 1 : 0) - (1 + band) * f;
    const down = (own: boolean) => (1 - band) * f - (own ? 1 : 0);
    const constant = (coef: (own: boolean) => number) => nodes.reduce((sum, _, k) => sum + coef(k === i) * heldLoad[k]!, 0);
    const over = x.map((v) => term(up(v.i === i) * loads[v.s]!, v.name)).join(' ');
    const under = x.map((v) => term(down(v.i === i) * loads[v.s]!, v.name)).join(' ');
    lines.push(` over_${i}: ${over} - o_${i} <= ${fmt(-constant(up))}`);
    lines.push(` under_${i}: ${under} - u_${i} <= ${fmt(-constant(down))}`);
  });
  lines.push('Bounds');
  for (const v of x) lines.push(` 0 <= ${v.name} <= 1`);
  nodes.forEach((_, i) => lines.push(` o_${i} >= 0`, ` u_${i} >= 0`));
  if (x.length > 0) lines.push('General', ` ${x.map((v) => v.name).join(' ')}`);
  lines.push('End');
  return lines.join('\n');
}

/** A number as LP text: plain decimal, never exponent notation the parser may refuse. */
function fmt(v: number): string {
  return Math.abs(v) < 1e-12 ? '0' : v.toFixed(12);
}
