// Each present node's fair share q of the copies, and the loads the strategy may give it: ⌊q⌋ or
// ⌈q⌉. Shares are by weight, water-filled under the isolation cap: a group holds at most one copy
// of each shard, so a group whose share exceeds that capacity is capped at exactly its capacity and
// the other groups share the rest (docs/PLACEMENT.md, "What exact means").

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

/**
 * Shares of `total` copies over nodes of groups `groupOf` and weights `weight` (0 for a node that
 * takes no share), at most `groupCapacity[g]` copies in group g.
 */
export function fairShares(groupOf: Int32Array, weight: Float64Array, total: number, groupCapacity: ArrayLike<number>): FairShares {
  const count = groupOf.length;
  const share = new Float64Array(count);
  const groupCount = groupCapacity.length;
  const groupWeight = new Float64Array(groupCount);
  for (let i = 0; i < count; i++) groupWeight[groupOf[i]!]! += weight[i]!;
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
  const lo = new Int32Array(count);
  const hi = new Int32Array(count);
  for (let i = 0; i < count; i++) {
    const g = groupOf[i]!;
    const w = weight[i]!;
    if (w === 0) continue;
    const q = capped[g] ? (groupCapacity[g]! * w) / groupWeight[g]! : openWeight > 0 ? (remaining * w) / openWeight : 0;
    share[i] = q;
    lo[i] = Math.floor(q + TOLERANCE);
    hi[i] = Math.ceil(q - TOLERANCE);
  }
  return { share, lo, hi };
}
