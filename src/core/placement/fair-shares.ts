// Each present node's fair share q of the copies, and the loads the strategy may give it: ⌊q⌋ or
// ⌈q⌉. Shares are by weight, water-filled under the isolation cap: a group holds at most one copy
// of each shard, so a group whose share exceeds that capacity is capped at exactly its capacity and
// the other groups share the rest (docs/PLACEMENT.md, "What exact means").

/** A present node as the share computation sees it. */
export interface ShareNode {
  readonly group: number;
  readonly weight: number;
}

export interface FairShares {
  /** Fair share of each node (real-valued). */
  readonly share: Float64Array;
  /** ⌊share⌋ and ⌈share⌉, with a tolerance so that an integral share gives lo = hi. */
  readonly lo: Int32Array;
  readonly hi: Int32Array;
}

// Shares are computed in floating point; a share within this of an integer is that integer, so
// that equal weights give exactly equal bounds and 41.000000000001 does not become 41..42.
const TOLERANCE = 1e-9;

/** Shares of `total` copies over `nodes`, at most `groupCapacity[g]` copies in group g. */
export function fairShares(nodes: readonly ShareNode[], total: number, groupCapacity: ArrayLike<number>): FairShares {
  const share = new Float64Array(nodes.length);
  const groupCount = groupCapacity.length;
  const groupWeight = new Float64Array(groupCount);
  for (const n of nodes) groupWeight[n.group]! += n.weight;
  const capped = new Uint8Array(groupCount);
  let remaining = Math.max(0, total);
  let openWeight = 0;
  for (let g = 0; g < groupCount; g++) openWeight += groupWeight[g]!;
  // Capping a group never un-caps another (the rest only grows per unit of weight), so one pass per
  // round until no open group is over reaches the unique water level.
  for (;;) {
    if (openWeight <= 0) break;
    let changed = false;
    for (let g = 0; g < groupCount; g++) {
      if (capped[g] || groupWeight[g] === 0) continue;
      if ((remaining * groupWeight[g]!) / openWeight > groupCapacity[g]! + TOLERANCE) {
        capped[g] = 1;
        changed = true;
      }
    }
    if (!changed) break;
    remaining = Math.max(0, total);
    openWeight = 0;
    for (let g = 0; g < groupCount; g++) {
      if (capped[g]) remaining -= groupCapacity[g]!;
      else openWeight += groupWeight[g]!;
    }
    remaining = Math.max(0, remaining);
  }
  for (let i = 0; i < nodes.length; i++) {
    const { group, weight } = nodes[i]!;
    share[i] = capped[group] ? (groupCapacity[group]! * weight) / groupWeight[group]! : openWeight > 0 ? (remaining * weight) / openWeight : 0;
  }
  const lo = Int32Array.from(share, (q) => Math.floor(q + TOLERANCE));
  const hi = Int32Array.from(share, (q) => Math.ceil(q - TOLERANCE));
  return { share, lo, hi };
}
