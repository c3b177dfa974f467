// The placement metrics and lower bounds of placement-peers §2–§3, computed the same way for every
// strategy and peer (the benchmark, the simulator's I8/I9 checks and the tests use this one module).
// The bounds assume equal weights, as the standard scenarios do.
import type { NodeId } from '../ids.js';
import type { Placement, PlacementNode } from './placement-types.js';

export interface PlacementMetrics {
  /** Copies in `after` that were not in `before` (M1). */
  readonly moves: number;
  /** Copies of `before` on nodes no longer live (M1f = LB_forced). */
  readonly forced: number;
  /** The fewest moves that reach a balanced map (§3.3). */
  readonly lbMoves: number;
  /** Max − min copies per live node (M2); weighted loads when weights differ. */
  readonly spread: number;
  /** The narrowest spread any placement can reach (§3.2: T* − t*). */
  readonly lbSpread: number;
  /** Shards whose copies share an isolation group while enough groups exist (M3). */
  readonly isoViolations: number;
  /** Shards with two copies on one node (M3d). */
  readonly duplicates: number;
  /** Copies missing: min(RF, groups) per shard minus the shard's copies on live nodes (M4). */
  readonly uncovered: number;
  /** Most copies moved into one node, and out of one node (M8). */
  readonly maxIn: number;
  readonly maxOut: number;
}

/** Copies per shard that isolation allows: min(RF, groups among `nodes`). */
export function copiesPerShard(replicationFactor: number, nodes: readonly PlacementNode[]): number {
  return Math.min(replicationFactor, new Set(nodes.map((n) => n.group)).size);
}

/**
 * §3.2: T* = the least T with Σ_k min(S, n_k·T) ≥ R (the lowest possible maximum load), t* =
 * min(⌊R/N⌋, min_k ⌊S/n_k⌋) (the highest possible minimum); spread_LB = T* − t*. Without racks
 * (every node its own group, or RF 1) this is 0 when N divides R and 1 otherwise.
 */
export function spreadLowerBound(numShards: number, replicationFactor: number, nodes: readonly PlacementNode[]): number {
  if (nodes.length === 0) return 0;
  const total = numShards * copiesPerShard(replicationFactor, nodes);
  const sizes = [...groupSizes(nodes).values()];
  let low = 0;
  let high = total;
  while (low < high) {
    const mid = (low + high) >> 1;
    if (sizes.reduce((sum, n) => sum + Math.min(numShards, n * mid), 0) >= total) high = mid;
    else low = mid + 1;
  }
  const floor = Math.min(Math.floor(total / nodes.length), ...sizes.map((n) => Math.floor(numShards / n)));
  return low - floor;
}

/**
 * §3.3: every copy a shard lacks on live nodes (Σ a_x after a removal), plus every copy above its
 * node's balanced target: the e heaviest nodes at q+1, the rest at q (ties by id). A group that
 * cannot take its share under isolation (it would exceed one copy per shard) holds exactly S,
 * shared the same way among its nodes, and the others share the rest: with copies = groups every
 * group is such a group (§3.3's per-group rule); without binding racks it is §3.3's global rule.
 */
export function movesLowerBound(before: Placement, replicationFactor: number, nodes: readonly PlacementNode[]): number {
  const live = new Set(nodes.map((n) => n.id));
  const loads = loadsOn(before, nodes);
  const copies = copiesPerShard(replicationFactor, nodes);
  let missing = 0;
  for (const ids of before) missing += Math.max(0, copies - new Set(ids.filter((id) => live.has(id))).size);
  const S = before.length;
  const sizes = groupSizes(nodes);
  let open = [...sizes.keys()];
  let perShard = copies;
  const parts: { members: PlacementNode[]; total: number }[] = [];
  while (open.length > 0) {
    const members = nodes.filter((n) => open.includes(n.group));
    // A full group holds one copy of every shard: all of them when each copy needs its own group.
    const full = perShard >= open.length ? open : open.filter((g) => (sizes.get(g)! * S * perShard) / members.length > S);
    if (full.length === 0) {
      parts.push({ members, total: S * perShard });
      break;
    }
    for (const g of full) parts.push({ members: nodes.filter((n) => n.group === g), total: S });
    perShard -= full.length;
    open = open.filter((g) => !full.includes(g));
  }
  let excess = 0;
  for (const { members, total } of parts) excess += excessAbove(members, total, loads);
  return missing + excess;
}

/** Copies above target when `total` is shared q/q+1 among `members`, the heaviest at q+1. */
function excessAbove(members: readonly PlacementNode[], total: number, loads: ReadonlyMap<NodeId, number>): number {
  const q = Math.floor(total / members.length);
  const e = total - q * members.length;
  const heaviestFirst = members.map((n) => ({ id: n.id, load: loads.get(n.id)! })).sort((a, b) => b.load - a.load || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  return heaviestFirst.reduce((sum, n, k) => sum + Math.max(0, n.load - (k < e ? q + 1 : q)), 0);
}

/** Every metric of one decision: `before` → `after` with `nodes` live after it. */
export function placementMetrics(before: Placement, after: Placement, replicationFactor: number, nodes: readonly PlacementNode[]): PlacementMetrics {
  const live = new Map(nodes.map((n) => [n.id as string, n]));
  const copies = copiesPerShard(replicationFactor, nodes);
  const into = new Map<NodeId, number>();
  const outOf = new Map<NodeId, number>();
  let moves = 0;
  let forced = 0;
  let isoViolations = 0;
  let duplicates = 0;
  let uncovered = 0;
  after.forEach((now, s) => {
    const was = before[s] ?? [];
    for (const id of now) {
      if (was.includes(id)) continue;
      moves++;
      into.set(id, (into.get(id) ?? 0) + 1);
    }
    for (const id of was) {
      if (!live.has(id)) forced++;
      if (!now.includes(id)) outOf.set(id, (outOf.get(id) ?? 0) + 1);
    }
    const onLive = now.filter((id) => live.has(id));
    const distinctNodes = new Set(onLive);
    if (distinctNodes.size < onLive.length) duplicates++;
    const groups = new Set([...distinctNodes].map((id) => live.get(id)!.group));
    if (groups.size < Math.min(distinctNodes.size, copies)) isoViolations++;
    uncovered += Math.max(0, copies - distinctNodes.size);
  });
  return {
    moves,
    forced,
    lbMoves: movesLowerBound(before, replicationFactor, nodes),
    spread: spreadOf(after, nodes),
    lbSpread: spreadLowerBound(after.length, replicationFactor, nodes),
    isoViolations,
    duplicates,
    uncovered,
    maxIn: Math.max(0, ...into.values()),
    maxOut: Math.max(0, ...outOf.values()),
  };
}

/** Max − min load over `nodes`; with unequal weights, loads are scaled to load_i / w_i × W/N (§2 M2). */
export function spreadOf(placement: Placement, nodes: readonly PlacementNode[]): number {
  if (nodes.length === 0) return 0;
  const loads = loadsOn(placement, nodes);
  const meanWeight = nodes.reduce((sum, n) => sum + n.weight, 0) / nodes.length;
  const scaled = nodes.map((n) => (loads.get(n.id)! * meanWeight) / n.weight);
  return Math.max(...scaled) - Math.min(...scaled);
}

function loadsOn(placement: Placement, nodes: readonly PlacementNode[]): Map<NodeId, number> {
  const loads = new Map<NodeId, number>(nodes.map((n) => [n.id, 0]));
  for (const copies of placement) for (const id of copies) if (loads.has(id)) loads.set(id, loads.get(id)! + 1);
  return loads;
}

function groupSizes(nodes: readonly PlacementNode[]): Map<string, number> {
  const sizes = new Map<string, number>();
  for (const n of nodes) sizes.set(n.group, (sizes.get(n.group) ?? 0) + 1);
  return sizes;
}
