// The best map under given per-node load bounds, by min-cost flow over a network with one vertex per
// shard and one per (shard, group): deliberately not aggregated by group or by load, so it shares
// no shortcut with an aggregated solver.
//
//   source ─(slots_s, −PLACE)→ shard s ─(1, 0)→ (s, g) ─(1, 0 if kept else MOVE)→ node i ─→ sink
//
// (s, g) exists only for groups g that s may still use (not a group of its frozen copies), so a
// shard gets at most one copy per group; slots_s = c − |F_s| caps its copies. A node's arcs to the
// sink price its load against its bounds [lo, hi] (loads of held shards come first, fixed):
//   the units that bring it up to lo: −VIOL each; up to hi: 0; beyond hi: +VIOL each.
// That is convex, so the flow fills them in that order, and with
//   MOVE = 1, VIOL > every possible move count, PLACE > every possible VIOL·violation + moves,
// the least-cost flow is the lexicographic optimum (placed ↑, violation ↓, moves ↓).
import type { NodeId } from '../../../src/core/ids.js';
import type { Placement } from '../../../src/core/placement/placement-types.js';
import type { ContractView } from './contract.js';
import { MinCostFlow } from './min-cost-flow.js';

export interface LoadBounds {
  readonly lo: number;
  readonly hi: number;
}

/** A map optimal for the contract's objective with `bounds` in place of the fair-share bounds. */
export function bestMapWithin(view: ContractView, bounds: readonly LoadBounds[]): Placement {
  const { present, numShards } = view;
  const shards = [...Array(numShards).keys()].filter((s) => !view.held[s] && view.slots[s]! > 0);
  const groups = [...new Set(present.map((n) => n.group))];
  const membersOf = groups.map((g) => present.flatMap((n, i) => (n.group === g ? [i] : [])));

  const openSlots = shards.reduce((sum, s) => sum + view.slots[s]!, 0);
  const heldCopies = view.heldLoad.reduce((sum, h) => sum + h, 0);
  const MOVE = 1;
  const VIOL = openSlots * MOVE + 1;
  // Violation never exceeds Σ lo (all deficits) + every copy held anywhere (all excesses).
  const maxViolation = bounds.reduce((sum, b) => sum + b.lo, 0) + heldCopies + openSlots;
  const PLACE = VIOL * (maxViolation + 1) + openSlots * MOVE + 1;
  if (PLACE * (openSlots + 1) * 4 > Number.MAX_SAFE_INTEGER) throw new Error('costs would not be exact integers');

  // Vertices: 0 source, 1 sink, then present nodes, then each shard followed by its (shard, group) pairs.
  const SOURCE = 0;
  const SINK = 1;
  const nodeVertex = (i: number): number => 2 + i;
  const vertices = 2 + present.length + shards.reduce((sum, s) => sum + 1 + groups.filter((g) => !view.blockedGroups[s]!.has(g)).length, 0);
  const flow = new MinCostFlow(vertices);

  const copyArcs: { shard: number; node: number; arc: number }[] = [];
  let nextVertex = 2 + present.length;
  for (const s of shards) {
    const shard = nextVertex++;
    flow.addArc(SOURCE, shard, view.slots[s]!, -PLACE);
    groups.forEach((g, k) => {
      if (view.blockedGroups[s]!.has(g)) return;
      const pair = nextVertex++;
      flow.addArc(shard, pair, 1, 0);
      for (const i of membersOf[k]!) {
        const kept = view.before[s]!.has(present[i]!.id);
        copyArcs.push({ shard: s, node: i, arc: flow.addArc(pair, nodeVertex(i), 1, kept ? 0 : MOVE) });
      }
    });
  }
  present.forEach((_, i) => {
    const { lo, hi } = bounds[i]!;
    const fixed = view.heldLoad[i]!;
    const upToLo = Math.max(0, lo - fixed);
    const upToHi = Math.max(0, hi - Math.max(lo, fixed));
    if (upToLo > 0) flow.addArc(nodeVertex(i), SINK, upToLo, -VIOL);
    if (upToHi > 0) flow.addArc(nodeVertex(i), SINK, upToHi, 0);
    flow.addArc(nodeVertex(i), SINK, openSlots, VIOL);
  });
  flow.solve(SOURCE, SINK);

  const placedOn: NodeId[][] = Array.from({ length: numShards }, () => []);
  for (const { shard, node, arc } of copyArcs) if (flow.flowOn(arc) > 0) placedOn[shard]!.push(present[node]!.id);
  return placedOn.map((ids, s) => {
    const all = view.held[s] ? [...view.heldCopies[s]!] : [...view.frozen[s]!, ...ids];
    return all.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  });
}
