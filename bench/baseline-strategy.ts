/**
 * The baseline the default strategy is measured against: FiloDB's algorithm computed the way
 * FiloDB's `DefaultShardAssignmentStrategy` computes it, by scanning the map on every call
 * (distinct owners, the node's shards, the unassigned shards). Same answers, different cost.
 */
import type { NodeId, ShardMapper, ShardNum } from '../src/index.js';
import type { AssignmentSpec, ShardAssignmentStrategy } from '../src/entries/core.js';

export class ScanningFiloDbStrategy implements ShardAssignmentStrategy {
  shardAssignments(node: NodeId, spec: AssignmentSpec, mapper: ShardMapper): ShardNum[] {
    const free = this.scanFree(mapper, spec);
    return free.slice(0, this.capacity(node, spec, mapper, free.length));
  }

  remainingCapacity(node: NodeId, spec: AssignmentSpec, mapper: ShardMapper): number {
    return this.capacity(node, spec, mapper, this.scanFree(mapper, spec).length);
  }

  private scanFree(mapper: ShardMapper, spec: AssignmentSpec): ShardNum[] {
    const free: ShardNum[] = [];
    for (let s = 0; s < mapper.numShards; s++) if (mapper.nodeForShard(s) === undefined && !spec.held?.has(s)) free.push(s as ShardNum);
    return free;
  }

  private capacity(node: NodeId, spec: AssignmentSpec, mapper: ShardMapper, numFree: number): number {
    if (numFree === 0) return 0;
    const owners = new Set<NodeId>();
    let mine = 0;
    for (let s = 0; s < mapper.numShards; s++) {
      const owner = mapper.nodeForShard(s);
      if (owner === undefined) continue;
      owners.add(owner);
      if (owner === node) mine++;
    }
    const nodes = spec.minNumNodes - owners.size + (mine > 0 ? 1 : 0);
    const want = nodes === 0 ? Infinity : Math.ceil((numFree + mine) / nodes);
    return Math.max(0, Math.min(want, Math.ceil(spec.numShards / spec.minNumNodes)) - mine);
  }
}
