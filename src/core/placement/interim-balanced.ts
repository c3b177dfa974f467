// Interim greedy balanced placement, used until the minimal-movement strategy lands. Not exported.
import type { NodeId } from '../ids.js';
import { ok, type Result } from '../result.js';
import type { Placement, PlacementError, PlacementInput, PlacementStrategy } from './placement-types.js';

export class InterimBalancedStrategy implements PlacementStrategy {
  readonly name = 'balanced';

  place(input: PlacementInput): Result<Placement, PlacementError> {
    const nodes = [...input.nodes].sort((a, b) => (a.id < b.id ? -1 : 1));
    const groupOf = new Map(nodes.map((n) => [n.id, n.group]));
    const copies = Math.min(input.replicationFactor, new Set(nodes.map((n) => n.group)).size);
    const load = new Map<NodeId, number>(nodes.map((n) => [n.id, 0]));
    const out: NodeId[][] = input.current.map((c) => {
      const kept: NodeId[] = [];
      for (const id of [...c].sort()) {
        if (!groupOf.has(id) || kept.length >= copies || kept.some((k) => groupOf.get(k) === groupOf.get(id))) continue;
        kept.push(id);
      }
      for (const k of kept) load.set(k, load.get(k)! + 1);
      return kept;
    });
    const total = copies * input.numShards;
    const q = Math.floor(total / nodes.length);
    let e = total - q * nodes.length;
    const target = new Map<NodeId, number>();
    for (const n of [...nodes].sort((a, b) => load.get(b.id)! - load.get(a.id)! || (a.id < b.id ? -1 : 1))) target.set(n.id, q + (e-- > 0 ? 1 : 0));
    // Drop the excess of overloaded nodes.
    for (let s = out.length - 1; s >= 0; s--) {
      if (input.held?.has(s)) continue;
      out[s] = out[s]!.filter((id) => {
        if (load.get(id)! > target.get(id)!) {
          load.set(id, load.get(id)! - 1);
          return false;
        }
        return true;
      });
    }
    for (let s = 0; s < out.length; s++) {
      if (input.held?.has(s)) continue;
      while (out[s]!.length < copies) {
        const used = new Set(out[s]!.map((id) => groupOf.get(id)));
        const pick = nodes
          .filter((n) => !used.has(n.group))
          .sort((a, b) => load.get(a.id)! - target.get(a.id)! - (load.get(b.id)! - target.get(b.id)!) || (a.id < b.id ? -1 : 1))[0];
        if (!pick) break;
        out[s]!.push(pick.id);
        load.set(pick.id, load.get(pick.id)! + 1);
      }
      out[s]!.sort();
    }
    return ok(out);
  }
}
