import type { AssignmentSpec, ShardAssignmentStrategy } from './assignment-strategy.js';
import { InvalidIdError } from './errors.js';
import type { NodeId, ShardNum } from './ids.js';
import type { ShardMapper } from './shard-mapper.js';

/**
 * The contiguous block of shards of ordinal `o`: `per = numShards / minNumNodes`,
 * `extra = numShards % minNumNodes`, first shard `o·per + min(o, extra)`, `per + (o < extra ? 1 : 0)`
 * shards. Throws when `ordinal >= minNumNodes` (FiloDB's `shardsForOrdinal`).
 */
export function shardsForOrdinal(ordinal: number, numShards: number, minNumNodes: number): ShardNum[] {
  if (!Number.isInteger(ordinal) || ordinal < 0 || ordinal >= minNumNodes) {
    throw new InvalidIdError('ordinal', ordinal, `must be an integer in 0..${minNumNodes - 1} (minNumNodes)`);
  }
  const per = Math.floor(numShards / minNumNodes);
  const extra = numShards % minNumNodes;
  const first = ordinal * per + Math.min(ordinal, extra);
  const count = per + (ordinal < extra ? 1 : 0);
  return Array.from({ length: count }, (_, i) => (first + i) as ShardNum);
}

/** The ordinal at the end of a StatefulSet-style node id (`filodb-3` → 3), or undefined. */
export function ordinalOf(node: NodeId): number | undefined {
  const m = /-(\d+)$/.exec(node);
  return m ? Number(m[1]) : undefined;
}

/**
 * FiloDB's `K8sStatefulSetShardAssignmentStrategy`: a node whose id ends in `-<ordinal>` owns the
 * fixed block of its ordinal and nothing else, so a restarted pod gets exactly its shards back.
 *
 * Gotchas: a node without an ordinal, or with one beyond `minNumNodes - 1`, gets no shards (FiloDB
 * retries the lookup with sleeps inside the singleton and then halts the JVM; we never block).
 */
export class OrdinalBlockShardAssignmentStrategy implements ShardAssignmentStrategy {
  shardAssignments(node: NodeId, spec: AssignmentSpec, mapper: ShardMapper): ShardNum[] {
    return this.block(node, spec).filter((s) => mapper.nodeForShard(s) === undefined && !spec.held?.has(s));
  }

  remainingCapacity(node: NodeId, spec: AssignmentSpec, mapper: ShardMapper): number {
    const block = this.block(node, spec);
    return Math.max(0, block.length - mapper.numShardsForNode(node));
  }

  private block(node: NodeId, spec: AssignmentSpec): ShardNum[] {
    const ordinal = ordinalOf(node);
    if (ordinal === undefined || ordinal >= spec.minNumNodes) return [];
    return shardsForOrdinal(ordinal, spec.numShards, spec.minNumNodes);
  }
}
