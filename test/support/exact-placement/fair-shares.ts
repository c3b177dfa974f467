// Each present node's fair share q of the copies, written from issue 21's contract (contract.ts):
// water-filling by weight under each isolation group's capacity.
//
// q_i = w_i·λ, with λ the level that shares the total T; a group whose share would exceed its
// capacity (the copies it may hold at most) is capped at exactly that capacity, split inside the
// group by weight, and λ is recomputed over the groups still open for what is left of T. Capping
// only ever raises λ, so the groups capped along the way are the groups capped at the end: the
// result is the unique solution of Σ_g min(cap_g, W_g·λ) = T (or every group at its capacity when
// the capacities cannot hold T).

/** Tolerance of the contract: a share within 1e-9 of an integer is that integer (lo = hi). */
export const SHARE_TOLERANCE = 1e-9;

export interface ShareNode {
  readonly group: string;
  readonly weight: number;
}

export interface FairShare {
  readonly q: number;
  readonly lo: number;
  readonly hi: number;
}

export function fairShares(nodes: readonly ShareNode[], total: number, capacity: ReadonlyMap<string, number>): FairShare[] {
  const weightOf = new Map<string, number>();
  for (const n of nodes) weightOf.set(n.group, (weightOf.get(n.group) ?? 0) + n.weight);
  const q = new Array<number>(nodes.length).fill(0);
  const capped = new Set<string>();
  let remaining = total;
  for (;;) {
    const open = [...weightOf.keys()].filter((g) => !capped.has(g));
    if (open.length === 0) break;
    const openWeight = open.reduce((sum, g) => sum + weightOf.get(g)!, 0);
    const level = remaining / openWeight;
    const over = open.filter((g) => weightOf.get(g)! * level > capOf(capacity, g) + SHARE_TOLERANCE);
    if (over.length === 0) {
      nodes.forEach((n, i) => {
        if (!capped.has(n.group)) q[i] = n.weight * level;
      });
      break;
    }
    for (const g of over) {
      capped.add(g);
      remaining -= capOf(capacity, g);
      nodes.forEach((n, i) => {
        if (n.group === g) q[i] = (capOf(capacity, g) * n.weight) / weightOf.get(g)!;
      });
    }
  }
  return q.map((share) => ({ q: share, lo: Math.floor(share + SHARE_TOLERANCE), hi: Math.ceil(share - SHARE_TOLERANCE) }));
}

function capOf(capacity: ReadonlyMap<string, number>, group: string): number {
  const cap = capacity.get(group);
  if (cap === undefined) throw new Error(`no capacity for group ${group}`);
  return cap;
}
