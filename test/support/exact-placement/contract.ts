// The exact placement contract of issue 21, read off an input: which copies are fixed, which are
// frozen on absent nodes, how many each shard may still place and where; and the contract's
// measures of a map (validity, placed, violation, moves, spread). Written from the definition
// alone: nothing here comes from the strategy's code. The contract, as the checker applies it:
//
// - Present nodes P (no `absent: true`) and absent nodes A (away within their replacement delay:
//   they keep their copies and receive none). Groups: the distinct `group`s of P ∪ A;
//   c = min(RF, groups).
// - A held shard keeps exactly its current copies on listed nodes (even two in one group).
// - A non-held shard s keeps F_s, its copies frozen on absent nodes: the lowest id of each group
//   where it has no copy on a present node, then the c lowest of those. Its copies on present nodes N_s: groups of F_s ∪ N_s distinct,
//   |F_s| + |N_s| ≤ c.
// - Fair share over P: T = Σ_held (copies on P) + Σ_non-held (c − |F_s|); a group g holds at most
//   cap_g = Σ_held (copies on g's present nodes) + #{non-held s : |F_s| < c, F_s has no copy in g};
//   water-filled by weight (fair-shares.ts) into q_i, bounds lo_i = ⌊q_i⌋ and hi_i = ⌈q_i⌉.
// - While A is not empty (issue 33: an absence alone moves nothing), the bounds are instead those
//   of the shares as if every node of A were present (P ∪ A by weight, every non-held shard's c
//   copies to share, each group holding at most one of each, held copies where they are), read for
//   P, whenever some valid map placing the most copies violates none of them; else those over P.
// - Objective, lexicographic: placed = Σ|N_s| most; violation = Σ_i max(0, lo_i − load_i) +
//   max(0, load_i − hi_i) least; moves = Σ|N_s \ current_s| least; then (when violation is 0)
//   the weighted spread max − min of load_i·k/w_i, k = W_P/|P|, least.
// - Stable (its own output, asked again, moves nothing) and deterministic (any order of nodes or
//   copies); bad input (weights not finite and > 0, an id twice, `current` not numShards long, RF
//   not a positive integer) is refused with InvalidPlacementInput.
import type { NodeId } from '../../../src/core/ids.js';
import type { Placement, PlacementInput, PlacementNode } from '../../../src/core/placement/placement-types.js';
import { fairShares, type FairShare } from './fair-shares.js';

/** A node as the contract sees it; `absent` is the optional field of issue 21. */
export type ContractNode = PlacementNode & { readonly absent?: boolean };

export interface ContractView {
  readonly numShards: number;
  /** c = min(RF, groups over present and absent nodes). */
  readonly copies: number;
  /** Present nodes in id order; every per-node array below is indexed like this. */
  readonly present: readonly PlacementNode[];
  readonly presentIndex: ReadonlyMap<string, number>;
  readonly absent: ReadonlySet<string>;
  readonly groupOf: ReadonlyMap<string, string>;
  readonly held: readonly boolean[];
  /** Held shard: its copies on listed nodes (the output must be exactly these). */
  readonly heldCopies: readonly (readonly NodeId[])[];
  /** Non-held shard: F_s, its copies frozen on absent nodes (ascending ids). */
  readonly frozen: readonly (readonly NodeId[])[];
  /** Non-held shard: c − |F_s|, the copies it may have on present nodes. */
  readonly slots: readonly number[];
  /** Non-held shard: the groups its frozen copies use (no present copy may go there). */
  readonly blockedGroups: readonly ReadonlySet<string>[];
  /** The shard's copies in `current`, for counting moves. */
  readonly before: readonly ReadonlySet<string>[];
  /** Per present node: copies of held shards it holds (fixed load). */
  readonly heldLoad: readonly number[];
  /** T, the copies to share over present nodes. */
  readonly total: number;
  /** cap_g for every group with a present node. */
  readonly capacity: ReadonlyMap<string, number>;
  readonly shares: readonly FairShare[];
  /** While A is not empty: each present node's share as if A were present (see `withChosenBounds`). */
  readonly sharesAsIfPresent: readonly FairShare[] | undefined;
  /** k = W_P/|P|: a node's load scaled by k/w is comparable across weights. */
  readonly scale: number;
}

const byId = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/** Why the contract refuses the input (InvalidPlacementInput), or undefined when it is valid. */
export function invalidInputReason(input: PlacementInput): string | undefined {
  if (!Number.isInteger(input.replicationFactor) || input.replicationFactor < 1) return 'replication factor is not a positive integer';
  if (input.current.length !== input.numShards) return 'current does not have numShards entries';
  const seen = new Set<string>();
  for (const n of input.nodes) {
    if (seen.has(n.id)) return `node ${n.id} listed twice`;
    seen.add(n.id);
    if (typeof n.weight !== 'number' || !Number.isFinite(n.weight) || n.weight <= 0) return `node ${n.id} has weight ${n.weight}`;
  }
  return undefined;
}

export function readContract(input: PlacementInput): ContractView {
  const invalid = invalidInputReason(input);
  if (invalid) throw new Error(`not a valid placement input: ${invalid}`);
  const nodes = [...(input.nodes as readonly ContractNode[])].sort((a, b) => byId(a.id, b.id));
  const present = nodes.filter((n) => n.absent !== true).map(({ id, group, weight }) => ({ id, group, weight }));
  const absent = new Set<string>(nodes.filter((n) => n.absent === true).map((n) => n.id));
  const groupOf = new Map<string, string>(nodes.map((n) => [n.id, n.group]));
  const presentIndex = new Map<string, number>(present.map((n, i) => [n.id, i]));
  const copies = Math.min(input.replicationFactor, new Set(nodes.map((n) => n.group)).size);
  const heldSet = input.held ?? new Set<number>();

  const held: boolean[] = [];
  const heldCopies: NodeId[][] = [];
  const frozen: NodeId[][] = [];
  const slots: number[] = [];
  const blockedGroups: Set<string>[] = [];
  const before: Set<string>[] = [];
  const heldLoad = new Array<number>(present.length).fill(0);
  const presentGroups = new Set(present.map((n) => n.group));
  const capacity = new Map<string, number>([...presentGroups].map((g) => [g, 0]));
  let total = 0;

  input.current.forEach((ids, s) => {
    const listed = [...new Set(ids)].filter((id) => groupOf.has(id)).sort(byId);
    before.push(new Set(ids));
    const isHeld = heldSet.has(s);
    held.push(isHeld);
    if (isHeld) {
      heldCopies.push(listed);
      frozen.push([]);
      slots.push(0);
      blockedGroups.push(new Set());
      for (const id of listed) {
        const i = presentIndex.get(id);
        if (i === undefined) continue;
        heldLoad[i]!++;
        total++;
        capacity.set(present[i]!.group, capacity.get(present[i]!.group)! + 1);
      }
      return;
    }
    // F_s: the lowest absent id of each group where no present node holds a copy, then the c lowest of those.
    const servedGroups = new Set(listed.filter((id) => !absent.has(id)).map((id) => groupOf.get(id)!));
    const perGroup = new Map<string, NodeId>();
    for (const id of listed) if (absent.has(id) && !servedGroups.has(groupOf.get(id)!) && !perGroup.has(groupOf.get(id)!)) perGroup.set(groupOf.get(id)!, id);
    const kept = [...perGroup.values()].sort(byId).slice(0, copies);
    const blocked = new Set(kept.map((id) => groupOf.get(id)!));
    heldCopies.push([]);
    frozen.push(kept);
    slots.push(copies - kept.length);
    blockedGroups.push(blocked);
    total += copies - kept.length;
    // A shard whose frozen copies fill its c slots can take no copy anywhere.
    if (kept.length < copies) for (const g of presentGroups) if (!blocked.has(g)) capacity.set(g, capacity.get(g)! + 1);
  });

  const weightSum = present.reduce((sum, n) => sum + n.weight, 0);
  return {
    numShards: input.numShards,
    copies,
    present,
    presentIndex,
    absent,
    groupOf,
    held,
    heldCopies,
    frozen,
    slots,
    blockedGroups,
    before,
    heldLoad,
    total,
    capacity,
    shares: fairShares(present, total, capacity),
    sharesAsIfPresent: absent.size === 0 ? undefined : asIfPresent(input, nodes, present),
    scale: present.length === 0 ? 1 : weightSum / present.length,
  };
}

/** Each present node's share with every node present: c copies of each non-held shard, held copies where they are. */
function asIfPresent(input: PlacementInput, nodes: readonly ContractNode[], present: readonly PlacementNode[]): FairShare[] {
  const all = nodes.map(({ id, group, weight }) => ({ id, group, weight }));
  const groups = new Set(all.map((n) => n.group));
  const copies = Math.min(input.replicationFactor, groups.size);
  const listed = new Set(all.map((n) => n.id as string));
  const held = input.held ?? new Set<number>();
  let open = 0;
  let total = 0;
  const heldIn = new Map<string, number>([...groups].map((g) => [g, 0]));
  input.current.forEach((ids, s) => {
    if (!held.has(s)) {
      open++;
      total += copies;
      return;
    }
    for (const id of new Set(ids)) {
      if (!listed.has(id)) continue;
      const g = all.find((n) => n.id === id)!.group;
      heldIn.set(g, heldIn.get(g)! + 1);
      total++;
    }
  });
  const capacity = new Map<string, number>([...groups].map((g) => [g, open + heldIn.get(g)!]));
  const shares = fairShares(all, total, capacity);
  return present.map((n) => shares[all.findIndex((m) => m.id === n.id)]!);
}

/**
 * The contract's bounds: while A is not empty, the shares as if A were present when
 * `violationFree(those shares)` (some valid map placing the most copies violates none of them),
 * else the shares over P. Deciding it needs a solver, which the caller brings.
 */
export function withChosenBounds(view: ContractView, violationFree: (view: ContractView) => boolean): ContractView {
  if (view.sharesAsIfPresent === undefined) return view;
  const asIf = { ...view, shares: view.sharesAsIfPresent };
  return violationFree(asIf) ? asIf : view;
}

/** The contract's lexicographic objective, best first: placed ↑, then violation ↓, then moves ↓. */
export interface Objective {
  readonly placed: number;
  readonly violation: number;
  readonly moves: number;
}

export interface MapScore extends Objective {
  readonly loads: readonly number[];
  /** max − min of load·k/w over present nodes. */
  readonly spread: number;
}

/** The node's load scaled to a node of average weight (comparable across weights). */
export function scaledLoad(view: ContractView, node: number, load: number): number {
  return (load * view.scale) / view.present[node]!.weight;
}

/** Measures a map as the contract does; copies on unknown or absent nodes add no load. */
export function scoreMap(view: ContractView, map: Placement): MapScore {
  const loads = new Array<number>(view.present.length).fill(0);
  let placed = 0;
  let moves = 0;
  map.forEach((ids, s) => {
    for (const id of new Set(ids)) {
      const i = view.presentIndex.get(id);
      if (i === undefined) continue;
      loads[i]!++;
      if (view.held[s]) continue;
      placed++;
      if (!view.before[s]!.has(id)) moves++;
    }
  });
  let violation = 0;
  loads.forEach((load, i) => {
    const { lo, hi } = view.shares[i]!;
    violation += Math.max(0, lo - load) + Math.max(0, load - hi);
  });
  const scaled = loads.map((load, i) => scaledLoad(view, i, load));
  const spread = scaled.length === 0 ? 0 : Math.max(...scaled) - Math.min(...scaled);
  return { placed, violation, moves, loads, spread };
}

/** A hard rule of the contract that a map breaks. */
export type ProblemKind = 'shard-count' | 'duplicate' | 'order' | 'unlisted' | 'held-changed' | 'absent-given' | 'frozen-dropped' | 'isolation' | 'too-many';

export interface Problem {
  readonly kind: ProblemKind;
  readonly detail: string;
}

/** Every way `map` breaks the contract's hard rules for this input; empty when it is valid. */
export function validityProblems(view: ContractView, map: Placement): Problem[] {
  if (map.length !== view.numShards) return [{ kind: 'shard-count', detail: `${map.length} shards in the map, ${view.numShards} expected` }];
  return map.flatMap((ids, s) => shardProblems(view, s, ids));
}

/** Every way one shard's copies break the contract's hard rules. */
export function shardProblems(view: ContractView, s: number, ids: readonly NodeId[]): Problem[] {
  const problems: Problem[] = [];
  const problem = (kind: ProblemKind, detail: string): void => void problems.push({ kind, detail: `shard ${s}: ${detail}` });
  if (new Set(ids).size !== ids.length) problem('duplicate', `a node twice in [${ids.join(',')}]`);
  for (let k = 1; k < ids.length; k++) if (ids[k - 1]! > ids[k]!) problem('order', `copies not ascending by id [${ids.join(',')}]`);
  const unknown = ids.filter((id) => !view.groupOf.has(id));
  if (unknown.length > 0) problem('unlisted', `copies on unlisted nodes ${unknown.join(',')}`);
  const distinct = [...new Set(ids)].filter((id) => view.groupOf.has(id)).sort(byId);
  if (view.held[s]) {
    if (distinct.join(',') !== view.heldCopies[s]!.join(','))
      problem('held-changed', `held, [${view.heldCopies[s]!.join(',')}] became [${distinct.join(',')}]`);
    return problems;
  }
  const onAbsent = distinct.filter((id) => view.absent.has(id));
  const frozen = view.frozen[s]!;
  const given = onAbsent.filter((id) => !frozen.includes(id));
  const dropped = frozen.filter((id) => !onAbsent.includes(id));
  if (given.length > 0) problem('absent-given', `absent nodes given a copy: ${given.join(',')}`);
  if (dropped.length > 0) problem('frozen-dropped', `frozen copies dropped: ${dropped.join(',')}`);
  const groups = distinct.map((id) => view.groupOf.get(id)!);
  if (new Set(groups).size !== groups.length)
    problem('isolation', `two copies in one group [${distinct.map((id) => `${id}@${view.groupOf.get(id)}`).join(',')}]`);
  if (distinct.length > view.copies) problem('too-many', `${distinct.length} copies, at most ${view.copies}`);
  return problems;
}

/** Strictly better in the contract's order (placed, then violation, then moves). */
export function betterObjective(a: Objective, b: Objective): boolean {
  if (a.placed !== b.placed) return a.placed > b.placed;
  if (a.violation !== b.violation) return a.violation < b.violation;
  return a.moves < b.moves;
}

export const sameObjective = (a: Objective, b: Objective): boolean => a.placed === b.placed && a.violation === b.violation && a.moves === b.moves;
