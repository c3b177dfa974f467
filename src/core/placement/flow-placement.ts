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
  /** Groups of its frozen copies (no new copy goes there). */
  readonly frozenGroups: ReadonlySet<number>;
  readonly wanted: number;
}

export function placeByFlow(problem: PlacementProblem, bounds: LoadBounds = problem): CopyTable {
  const kinds = kindsOf(problem);
  const { groupCount: groups, groupOf, present } = problem;
  const nodeCount = problem.nodes.length;
  const groupHasNodes = new Uint8Array(groups);
  for (let i = 0; i < nodeCount; i++) if (present[i]) groupHasNodes[groupOf[i]!] = 1;

  // Vertex numbering: source, kinds, (kind, group) pairs, pools, nodes, sink.
  const pairBase: number[] = [];
  let vertices = 1 + kinds.length;
  const pairGroups: number[][] = kinds.map((kind) => {
    const withKeep = [...new Set(Array.from(kind.keep, (i) => groupOf[i]!))].filter((g) => !kind.frozenGroups.has(g)).sort((a, b) => a - b);
    pairBase.push(vertices);
    vertices += withKeep.length;
    return withKeep;
  });
  const poolBase = vertices;
  vertices += groups;
  const nodeBase = vertices;
  vertices += nodeCount;
  const sink = vertices++;
  const flow = new MinCostFlow(vertices);

  const wantedTotal = kinds.reduce((sum, k) => sum + k.shards.length * k.wanted, 0);
  const BOUND = wantedTotal + 1;
  const UNPLACED = BOUND * (2 * (wantedTotal + problem.presentTotal) + 2);

  // Edge ids, to read the flows back.
  const keepEdge: number[][] = [];
  const newEdge: number[][] = [];
  kinds.forEach((kind, k) => {
    const v = 1 + k;
    const m = kind.shards.length;
    flow.addEdge(0, v, m * kind.wanted, 0);
    flow.addEdge(v, sink, m * kind.wanted, UNPLACED);
    const keeps: number[] = [];
    const news: number[] = new Array(groups).fill(-1);
    pairGroups[k]!.forEach((g, p) => {
      const pair = pairBase[k]! + p;
      flow.addEdge(v, pair, m, 0);
      for (const i of kind.keep) if (groupOf[i] === g) keeps[i] = flow.addEdge(pair, nodeBase + i, m, 0);
      if (groupHasNodes[g]) news[g] = flow.addEdge(pair, poolBase + g, m, 1);
    });
    for (let g = 0; g < groups; g++) {
      if (!groupHasNodes[g] || kind.frozenGroups.has(g) || pairGroups[k]!.includes(g)) continue;
      news[g] = flow.addEdge(v, poolBase + g, m, 1);
    }
    keepEdge.push(keeps);
    newEdge.push(news);
  });
  const poolEdge = new Int32Array(nodeCount).fill(-1);
  for (let i = 0; i < nodeCount; i++) {
    if (!present[i]) continue;
    poolEdge[i] = flow.addEdge(poolBase + groupOf[i]!, nodeBase + i, wantedTotal, 0);
    const held = problem.heldLoad[i]!;
    const lo = bounds.lo[i]!;
    const hi = bounds.hi[i]!;
    const rewarded = Math.max(0, lo - held);
    const free = Math.max(0, hi - Math.max(lo, held));
    flow.addEdge(nodeBase + i, sink, rewarded, -BOUND);
    flow.addEdge(nodeBase + i, sink, free, 0);
    flow.addEdge(nodeBase + i, sink, wantedTotal, BOUND);
  }
  flow.solve(0, sink);
  return decompose(problem, kinds, pairGroups, (k, i) => flow.flow(keepEdge[k]![i] ?? -1), (k, g) => flow.flow(newEdge[k]![g]!), (i) => flow.flow(poolEdge[i]!));
}

/** Groups the non-held shards by their current copies (present ones kept as candidates, frozen ones). */
function kindsOf(problem: PlacementProblem): Kind[] {
  const byKey = new Map<string, Kind>();
  const kinds: Kind[] = [];
  const { currentStart, currentNode, frozenStart, frozenNode } = problem;
  for (let s = 0; s < problem.shards; s++) {
    if (problem.held.has(s)) continue;
    const keep = currentNode.subarray(currentStart[s]!, currentStart[s + 1]!);
    const frozen = frozenNode.subarray(frozenStart[s]!, frozenStart[s + 1]!);
    const key = `${keep.join(',')}|${frozen.join(',')}`;
    let kind = byKey.get(key);
    if (!kind) {
      kind = { shards: [], keep: Int32Array.from(keep), frozenGroups: new Set(Array.from(frozen, (i) => problem.groupOf[i]!)), wanted: problem.copies - frozen.length };
      byKey.set(key, kind);
      kinds.push(kind);
    }
    kind.shards.push(s);
  }
  return kinds;
}

/**
 * Turns the flows back into copies: each kind's group counts dealt round-robin over its shards,
 * kept copies first, then new copies handed out per group to the nodes the pool sent them to.
 */
function decompose(
  problem: PlacementProblem,
  kinds: readonly Kind[],
  pairGroups: readonly number[][],
  keptFlow: (kind: number, node: number) => number,
  newFlow: (kind: number, group: number) => number,
  poolFlow: (node: number) => number,
): CopyTable {
  const { groupCount: groups, groupOf } = problem;
  let width = problem.copies;
  for (let s = 0; s < problem.shards; s++) width = Math.max(width, problem.currentStart[s + 1]! - problem.currentStart[s]!);
  const table = new CopyTable(problem.shards, width);
  const waiting: number[][] = Array.from({ length: groups }, () => []);
  kinds.forEach((kind, k) => {
    const m = kind.shards.length;
    let dealt = 0;
    for (let g = 0; g < groups; g++) {
      const keepers: number[] = [];
      if (pairGroups[k]!.includes(g)) for (const i of kind.keep) if (groupOf[i] === g) for (let r = keptFlow(k, i); r > 0; r--) keepers.push(i);
      const fresh = newFlow(k, g);
      for (let r = 0; r < keepers.length + fresh; r++) {
        const shard = kind.shards[dealt++ % m]!;
        if (r < keepers.length) table.add(shard, keepers[r]!);
        else waiting[g]!.push(shard);
      }
    }
    for (const s of kind.shards) for (let f = problem.frozenStart[s]!; f < problem.frozenStart[s + 1]!; f++) table.add(s, problem.frozenNode[f]!);
  });
  for (let g = 0; g < groups; g++) {
    const shards = waiting[g]!.sort((a, b) => a - b);
    let next = 0;
    for (let i = 0; i < problem.nodes.length; i++) {
      if (groupOf[i] !== g || !problem.present[i]) continue;
      for (let r = poolFlow(i); r > 0; r--) table.add(shards[next++]!, i);
    }
  }
  for (const s of problem.held) {
    if (s < 0 || s >= problem.shards) continue;
    for (let k = problem.currentStart[s]!; k < problem.currentStart[s + 1]!; k++) table.add(s, problem.currentNode[k]!);
  }
  return table;
}
