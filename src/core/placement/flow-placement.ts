// Any placement problem, exactly, as one min-cost flow (docs/PLACEMENT.md, "What exact means").
//
// Shards with the same current copies are interchangeable, so they form one "kind" with m shards
// (a balanced map has far fewer kinds than shards). Network, vertices in topological order:
//
//   source → kind (m × copies still wanted)
//   kind → (kind, group) → node: keep a current copy (cost 0), at most m per group
//   (kind, group) → pool of the group, or kind → pool directly: a new copy in the group (cost 1)
//   pool → each present node of the group
//   node → sink: up to ⌊q⌋ rewarded (−BOUND), up to ⌈q⌉ free, beyond penalised (+BOUND)
//   kind → sink: a copy that cannot be placed (+UNPLACED)
//
// UNPLACED ≫ BOUND ≫ 1 makes the costs lexicographic: place every copy the groups allow, then keep
// every node within ⌊q⌋..⌈q⌉ when possible, then move the fewest copies. A kind's flow into each
// group is at most m and sums to what it places, so it splits into shards with one copy per group
// (deal the groups round-robin), and which shards of a kind keep or get a new copy is free.
//
// With many groups (members without racks are a group each) that network has an edge per kind and
// group. So it is first solved relaxed, every kind's new copies through one shared pool: a lower
// bound of the cost. If the new copies can then be dealt to shards without two in one group and
// none in a group the shard already uses (they almost always can: each shard uses few groups), the
// relaxed optimum is reached by a valid map, hence optimal; if not, the full network decides.
import { CopyTable } from './copy-table.js';
import { MinCostFlow } from './min-cost-flow.js';
import type { PlacementProblem } from './placement-problem.js';

/** Per present node, the loads allowed: ⌊q⌋..⌈q⌉, or narrower (the spread search). */
export interface LoadBounds {
  readonly lo: Int32Array;
  readonly hi: Int32Array;
}

interface Kind {
  /** Shards of this kind, ascending. */
  readonly shards: number[];
  /** Present nodes holding a current copy (the same for every shard of the kind), ascending. */
  readonly keep: Int32Array;
  /** Groups of its current copies on present nodes that may be kept (not a frozen copy's group). */
  readonly keepGroups: readonly number[];
  /** Groups of its frozen copies (no new copy goes there). */
  readonly frozenGroups: ReadonlySet<number>;
  readonly wanted: number;
}

/** Below this many groups the full network is small enough to solve directly. */
const RELAXED_FROM_GROUPS = 8;

export function placeByFlow(problem: PlacementProblem, bounds: LoadBounds = problem): CopyTable {
  const kinds = kindsOf(problem);
  if (problem.groupCount >= RELAXED_FROM_GROUPS) {
    const relaxed = solve(problem, kinds, bounds, true);
    const table = dealShared(problem, kinds, relaxed);
    if (table) return table;
  }
  return dealPerGroup(problem, kinds, solve(problem, kinds, bounds, false));
}

/** The flows a decomposition reads back. */
interface Solution {
  kept(kind: number, node: number): number;
  /** New copies of a kind in a group (full network) or in all (shared pool: group −1). */
  fresh(kind: number, group: number): number;
  /** New copies a node received. */
  received(node: number): number;
  /** New copies a group received (shared pool). */
  groupReceived(group: number): number;
}

function solve(problem: PlacementProblem, kinds: readonly Kind[], bounds: LoadBounds, shared: boolean): Solution {
  const { groupCount: groups, groupOf, present } = problem;
  const nodeCount = problem.nodes.length;
  const groupHasNodes = new Uint8Array(groups);
  for (let i = 0; i < nodeCount; i++) if (present[i]) groupHasNodes[groupOf[i]!] = 1;

  // Vertex numbering: source, kinds, (kind, group) pairs, [shared pool], group pools, nodes, sink.
  const pairBase: number[] = [];
  let vertices = 1 + kinds.length;
  for (const kind of kinds) {
    pairBase.push(vertices);
    vertices += kind.keepGroups.length;
  }
  const sharedPool = shared ? vertices++ : -1;
  const poolBase = vertices;
  vertices += groups;
  const nodeBase = vertices;
  vertices += nodeCount;
  const sink = vertices++;
  const flow = new MinCostFlow(vertices);

  const wantedTotal = kinds.reduce((sum, k) => sum + k.shards.length * k.wanted, 0);
  const BOUND = wantedTotal + 1;
  const UNPLACED = BOUND * (2 * (wantedTotal + problem.presentTotal) + 2);

  const keepEdge: number[][] = [];
  const newEdge: number[][] = [];
  kinds.forEach((kind, k) => {
    const v = 1 + k;
    const m = kind.shards.length;
    flow.addEdge(0, v, m * kind.wanted, 0);
    flow.addEdge(v, sink, m * kind.wanted, UNPLACED);
    const keeps: number[] = [];
    const news: number[] = [];
    kind.keepGroups.forEach((g, p) => {
      const pair = pairBase[k]! + p;
      flow.addEdge(v, pair, m, 0);
      for (const i of kind.keep) if (groupOf[i] === g) keeps[i] = flow.addEdge(pair, nodeBase + i, m, 0);
      if (!shared && groupHasNodes[g]) news[g] = flow.addEdge(pair, poolBase + g, m, 1);
    });
    if (shared) news[0] = flow.addEdge(v, sharedPool, m * kind.wanted, 1);
    else {
      for (let g = 0; g < groups; g++) {
        if (groupHasNodes[g] && !kind.frozenGroups.has(g) && !kind.keepGroups.includes(g)) news[g] = flow.addEdge(v, poolBase + g, m, 1);
      }
    }
    keepEdge.push(keeps);
    newEdge.push(news);
  });
  const sharedEdge = new Int32Array(groups).fill(-1);
  if (shared) for (let g = 0; g < groups; g++) if (groupHasNodes[g]) sharedEdge[g] = flow.addEdge(sharedPool, poolBase + g, wantedTotal, 0);
  const poolEdge = new Int32Array(nodeCount).fill(-1);
  for (let i = 0; i < nodeCount; i++) {
    if (!present[i]) continue;
    poolEdge[i] = flow.addEdge(poolBase + groupOf[i]!, nodeBase + i, wantedTotal, 0);
    const held = problem.heldLoad[i]!;
    const lo = bounds.lo[i]!;
    const hi = bounds.hi[i]!;
    flow.addEdge(nodeBase + i, sink, Math.max(0, lo - held), -BOUND);
    flow.addEdge(nodeBase + i, sink, Math.max(0, hi - Math.max(lo, held)), 0);
    flow.addEdge(nodeBase + i, sink, wantedTotal, BOUND);
  }
  flow.solve(0, sink);
  return {
    kept: (k, i) => flow.flow(keepEdge[k]![i] ?? -1),
    fresh: (k, g) => flow.flow(newEdge[k]![shared ? 0 : g] ?? -1),
    received: (i) => flow.flow(poolEdge[i]!),
    groupReceived: (g) => flow.flow(sharedEdge[g]!),
  };
}

/** Groups the non-held shards by their current copies (present ones kept as candidates, frozen ones). */
function kindsOf(problem: PlacementProblem): Kind[] {
  const byKey = new Map<string, Kind>();
  const kinds: Kind[] = [];
  const { currentStart, currentNode, frozenStart, frozenNode, groupOf } = problem;
  for (let s = 0; s < problem.shards; s++) {
    if (problem.held.has(s)) continue;
    const keep = currentNode.subarray(currentStart[s]!, currentStart[s + 1]!);
    const frozen = frozenNode.subarray(frozenStart[s]!, frozenStart[s + 1]!);
    const key = `${keep.join(',')}|${frozen.join(',')}`;
    let kind = byKey.get(key);
    if (!kind) {
      const frozenGroups = new Set(Array.from(frozen, (i) => groupOf[i]!));
      const keepGroups = [...new Set(Array.from(keep, (i) => groupOf[i]!))].filter((g) => !frozenGroups.has(g)).sort((a, b) => a - b);
      kind = { shards: [], keep: Int32Array.from(keep), keepGroups, frozenGroups, wanted: problem.copies - frozen.length };
      byKey.set(key, kind);
      kinds.push(kind);
    }
    kind.shards.push(s);
  }
  return kinds;
}

/** A table wide enough for every shard, with the held shards' and the frozen copies in it. */
function tableWithFixedCopies(problem: PlacementProblem, kinds: readonly Kind[]): CopyTable {
  let width = problem.copies;
  for (let s = 0; s < problem.shards; s++) width = Math.max(width, problem.currentStart[s + 1]! - problem.currentStart[s]!);
  const table = new CopyTable(problem.shards, width);
  for (const kind of kinds) {
    for (const s of kind.shards) for (let f = problem.frozenStart[s]!; f < problem.frozenStart[s + 1]!; f++) table.add(s, problem.frozenNode[f]!);
  }
  for (const s of problem.held) {
    if (s < 0 || s >= problem.shards) continue;
    for (let k = problem.currentStart[s]!; k < problem.currentStart[s + 1]!; k++) table.add(s, problem.currentNode[k]!);
  }
  return table;
}

/** The nodes of a group, each repeated once per new copy the flow sent it. */
function receivers(problem: PlacementProblem, solution: Solution, group: number): number[] {
  const out: number[] = [];
  for (let i = 0; i < problem.nodes.length; i++) {
    if (problem.groupOf[i] !== group || !problem.present[i]) continue;
    for (let r = solution.received(i); r > 0; r--) out.push(i);
  }
  return out;
}

/**
 * Full network: each kind's group counts dealt round-robin over its shards (a group's count is at
 * most m, so no shard gets two), kept copies first, then the group's new copies to the nodes the
 * pool sent them to.
 */
function dealPerGroup(problem: PlacementProblem, kinds: readonly Kind[], solution: Solution): CopyTable {
  const groups = problem.groupCount;
  const table = tableWithFixedCopies(problem, kinds);
  const waiting: number[][] = Array.from({ length: groups }, () => []);
  kinds.forEach((kind, k) => {
    const m = kind.shards.length;
    let dealt = 0;
    for (let g = 0; g < groups; g++) {
      const keepers = keptIn(problem, kind, k, g, solution);
      const fresh = solution.fresh(k, g);
      for (let r = 0; r < keepers.length + fresh; r++) {
        const shard = kind.shards[dealt++ % m]!;
        if (r < keepers.length) table.add(shard, keepers[r]!);
        else waiting[g]!.push(shard);
      }
    }
  });
  for (let g = 0; g < groups; g++) {
    const shards = waiting[g]!.sort((a, b) => a - b);
    receivers(problem, solution, g).forEach((i, r) => table.add(shards[r]!, i));
  }
  return table;
}

/** A kind's kept copies in group g, one entry per shard keeping there. */
function keptIn(problem: PlacementProblem, kind: Kind, k: number, g: number, solution: Solution): number[] {
  const keepers: number[] = [];
  if (!kind.keepGroups.includes(g)) return keepers;
  for (const i of kind.keep) if (problem.groupOf[i] === g) for (let r = solution.kept(k, i); r > 0; r--) keepers.push(i);
  return keepers;
}

/**
 * Shared pool: kept copies dealt as above; then each shard's new copies go to groups it does not
 * use, the group with the most copies left first. Undefined when some copy cannot be dealt that way.
 */
function dealShared(problem: PlacementProblem, kinds: readonly Kind[], solution: Solution): CopyTable | undefined {
  const groups = problem.groupCount;
  const { groupOf } = problem;
  const table = tableWithFixedCopies(problem, kinds);
  const left = new Int32Array(groups);
  for (let g = 0; g < groups; g++) left[g] = solution.groupReceived(g);
  const needs = new Int32Array(problem.shards);
  kinds.forEach((kind, k) => {
    const m = kind.shards.length;
    let dealt = 0;
    const kept = new Int32Array(m);
    for (const g of kind.keepGroups) {
      for (const i of keptIn(problem, kind, k, g, solution)) {
        const at = dealt++ % m;
        table.add(kind.shards[at]!, i);
        kept[at]!++;
      }
    }
    // New copies level the shards up: round r gives one to each shard holding r or fewer.
    let fresh = solution.fresh(k, -1);
    for (let round = 0; fresh > 0 && round < kind.wanted; round++) {
      for (let at = 0; at < m && fresh > 0; at++) {
        if (kept[at]! > round) continue;
        needs[kind.shards[at]!]!++;
        kept[at]!++;
        fresh--;
      }
    }
  });
  const waiting: number[][] = Array.from({ length: groups }, () => []);
  // Shards using more groups have fewer choices: they pick first.
  const order: number[] = [];
  for (let s = 0; s < problem.shards; s++) if (needs[s]! > 0) order.push(s);
  order.sort((a, b) => table.count(b) - table.count(a) || a - b);
  const picked: number[] = [];
  for (const shard of order) {
    picked.length = 0;
    for (let c = 0; c < needs[shard]!; c++) {
      let best = -1;
      for (let g = 0; g < groups; g++) {
        if (left[g]! === 0 || (best >= 0 && left[g]! <= left[best]!) || picked.includes(g)) continue;
        let used = false;
        for (let k = 0; !used && k < table.count(shard); k++) used = groupOf[table.at(shard, k)] === g;
        if (!used) best = g;
      }
      if (best < 0) return undefined;
      left[best]!--;
      picked.push(best);
      waiting[best]!.push(shard);
    }
  }
  for (let g = 0; g < groups; g++) {
    const shards = waiting[g]!.sort((a, b) => a - b);
    receivers(problem, solution, g).forEach((i, r) => table.add(shards[r]!, i));
  }
  return table;
}
