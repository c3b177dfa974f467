// How many copies each node should hold: proportional to weight, never more than one copy of a
// shard per isolation group (a group holds at most `numShards` copies), and the rounding remainder
// given to the nodes that already hold the most, so that reaching the targets moves as few copies as
// possible (placement-peers §3.3: the e heaviest nodes keep q+1).

/** A node as the target computation sees it: indices into the strategy's sorted node list. */
export interface TargetNode {
  readonly group: number;
  readonly weight: number;
  /** Copies it holds now (that stay candidates to keep). */
  readonly load: number;
}

/**
 * Targets for `total` copies over `nodes`, at most `groupCapacity[g]` in group g. Water-filling: share
 * the copies by weight; a group whose share exceeds its capacity is capped at exactly its capacity
 * and the rest is shared again among the other groups, until no group is over.
 */
export function nodeTargets(nodes: readonly TargetNode[], total: number, groupCapacity: Int32Array): Int32Array {
  const targets = new Int32Array(nodes.length);
  const groupCount = nodes.reduce((max, n) => Math.max(max, n.group + 1), 0);
  const capped = new Uint8Array(groupCount);
  let remaining = total;
  for (;;) {
    const open = indicesWhere(nodes, (n) => capped[n.group] === 0);
    if (open.length === 0) break;
    share(nodes, open, remaining, targets);
    const perGroup = new Float64Array(groupCount);
    for (const i of open) perGroup[nodes[i]!.group]! += targets[i]!;
    const over = [...perGroup.keys()].filter((k) => capped[k] === 0 && perGroup[k]! > groupCapacity[k]!);
    if (over.length === 0) break;
    for (const k of over) {
      capped[k] = 1;
      share(nodes, indicesWhere(nodes, (n) => n.group === k), groupCapacity[k]!, targets);
      remaining -= groupCapacity[k]!;
    }
  }
  return targets;
}

function indicesWhere(nodes: readonly TargetNode[], keep: (n: TargetNode) => boolean): number[] {
  const out: number[] = [];
  for (let i = 0; i < nodes.length; i++) if (keep(nodes[i]!)) out.push(i);
  return out;
}

/**
 * Largest-remainder share of `total` over `members` by weight. Ties in the remainder go to the node
 * holding more now, then to the lower index (the strategy's nodes are sorted by id), so the choice
 * does not depend on input order.
 */
function share(nodes: readonly TargetNode[], members: readonly number[], total: number, into: Int32Array): void {
  const weight = members.reduce((sum, i) => sum + nodes[i]!.weight, 0);
  const fraction = new Float64Array(nodes.length);
  let given = 0;
  for (const i of members) {
    const ideal = (Math.max(0, total) * nodes[i]!.weight) / weight;
    // Rounded so that equal weights give exactly equal fractions (no float noise between nodes).
    const base = Math.floor(ideal + 1e-9);
    into[i] = base;
    fraction[i] = Math.round((ideal - base) * 1e9);
    given += base;
  }
  const order = [...members].sort((a, b) => fraction[b]! - fraction[a]! || nodes[b]!.load - nodes[a]!.load || a - b);
  for (let k = 0; k < Math.max(0, total) - given && k < order.length; k++) into[order[k]!]!++;
}
