// What "converged" means for an embedded cluster's callers: every shard of a dataset holds as many
// copies as its replication factor asks, each Active and Available on a live member. A pure check on
// the singleton's map, so the wait in `EmbeddedCluster.whenConverged` only polls and reports.
import type { DatasetConfig } from '../core/dataset-config.js';
import type { NodeId } from '../core/ids.js';
import type { ShardMapper } from '../core/shard-mapper.js';

/** The shards of one dataset that are not converged yet, grouped by why (empty when converged). */
export function unconvergedShards(config: DatasetConfig, map: ShardMapper, isLive: (node: NodeId) => boolean): Map<string, number[]> {
  const why = new Map<string, number[]>();
  const note = (reason: string, shard: number) => why.set(reason, [...(why.get(reason) ?? []), shard]);
  for (let shard = 0; shard < config.numShards; shard++) {
    const copies = map.recordForShard(shard).assignments;
    if (copies.length !== config.replicationFactor) note(`${copies.length} of ${config.replicationFactor} copies`, shard);
    for (const copy of copies) {
      // A balanced dataset keeps a lost node's copy (Down) for its replacement delay: it converges
      // when the node comes back, or when the copy is re-created after the delay.
      if (!isLive(copy.node))
        note(
          copy.status.type === 'Down'
            ? `a copy kept for ${copy.node}, lost, until it comes back or its replacement delay ends`
            : `a copy on ${copy.node}, not a live member`,
          shard,
        );
      else if (copy.status.type !== 'Active') note(`${copy.status.type} on ${copy.node}`, shard);
      else if (copy.placement !== 'Available') note(`${copy.placement} on ${copy.node}`, shard);
    }
  }
  return why;
}

/** `a/0-3,7: 1 of 2 copies; ...`, for a timeout's message. */
export function describeUnconverged(dataset: string, why: ReadonlyMap<string, readonly number[]>): string[] {
  return [...why].map(([reason, shards]) => `${dataset} shards ${ranges(shards)}: ${reason}`);
}

function ranges(shards: readonly number[]): string {
  const out: string[] = [];
  for (let i = 0; i < shards.length;) {
    let j = i;
    while (j + 1 < shards.length && shards[j + 1] === shards[j]! + 1) j++;
    out.push(i === j ? `${shards[i]}` : `${shards[i]}-${shards[j]}`);
    i = j + 1;
  }
  return out.join(',');
}
