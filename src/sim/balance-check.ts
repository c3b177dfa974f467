// I2 and I9 for a balanced dataset at rest: every shard holds as many copies as the racks allow
// (min(RF, racks)), and the copies per node are spread no wider than the lower bound of
// placement-peers §3 (with racks: T* − t*).
import type { NodeId } from '../core/ids.js';
import { spreadLowerBound } from '../core/placement/placement-metrics.js';
import type { ShardMapper } from '../core/shard-mapper.js';

export interface BalanceProblem {
  readonly invariant: 'I2' | 'I9';
  readonly message: string;
}

/**
 * `nodes`: the members that may hold copies (not drained), with their racks. Skipped (undefined)
 * while a planned move is in flight: balance is judged once the dataset is quiet.
 */
/**
 * `cooling`: shards in their reassignment cooldown after a copy failed. One short of its copies
 * waits for the cooldown's end by design (as an errored shard without a copy does), and while one
 * does the spread is not judged.
 */
export function balanceViolation(
  map: ShardMapper,
  nodes: readonly { node: string; rack: string }[],
  replicationFactor: number,
  cooling: ReadonlySet<number> = new Set(),
): BalanceProblem | undefined {
  if (nodes.length === 0) return undefined;
  const racks = new Set(nodes.map((n) => n.rack)).size;
  const copies = Math.min(replicationFactor, racks);
  const short: number[] = [];
  let waiting = false;
  for (let s = 0; s < map.numShards; s++) {
    const assignments = map.recordForShard(s).assignments;
    if (assignments.some((a) => a.placement === 'Leaving')) return undefined;
    if (assignments.length < copies && cooling.has(s)) waiting = true;
    else if (assignments.length !== copies) short.push(s);
  }
  if (short.length > 0) return { invariant: 'I2', message: `shards ${short.join(',')} do not hold ${copies} copies` };
  if (waiting) return undefined;
  const loads = nodes.map((n) => map.numShardsForNode(n.node as never));
  const spread = Math.max(...loads) - Math.min(...loads);
  const bound = spreadLowerBound(
    map.numShards,
    copies,
    nodes.map((n) => ({ id: n.node as NodeId, group: n.rack, weight: 1 })),
  );
  if (spread > bound) {
    return {
      invariant: 'I9',
      message: `spread ${spread} (loads ${loads.join(',')} on ${nodes.map((n) => n.node).join(',')}) is above its lower bound ${bound}`,
    };
  }
  return undefined;
}
