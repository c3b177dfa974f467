import { isShardInRange, type NodeId, type ShardNum } from './ids.js';
import type { ShardMapper } from './shard-mapper.js';

/** What a strategy needs to know about a dataset. */
export interface AssignmentSpec {
  readonly numShards: number;
  readonly minNumNodes: number;
  /**
   * Unassigned shards the strategy must not hand out now (e.g. shards inside their reassignment
   * cooldown). They count as neither free nor owned.
   */
  readonly held?: ReadonlySet<number>;
}

/**
 * Decides which unassigned shards one node should take. Stateless: the caller applies the answer
 * to the mapper before it asks about the next node, so answers depend only on the map.
 */
export interface ShardAssignmentStrategy {
  /** Shards `node` should start now, ascending; empty when it has no room or nothing is free. */
  shardAssignments(node: NodeId, spec: AssignmentSpec, mapper: ShardMapper): ShardNum[];
  /** How many more shards `node` may take now. */
  remainingCapacity(node: NodeId, spec: AssignmentSpec, mapper: ShardMapper): number;
}

/** Unassigned shards that are not held, ascending; at most `limit` of them. */
export function freeShards(mapper: ShardMapper, held: ReadonlySet<number> | undefined, limit = Infinity): ShardNum[] {
  if (!held || held.size === 0) return mapper.unassignedShards(limit);
  return mapper
    .unassignedShards(limit + held.size)
    .filter((s) => !held.has(s))
    .slice(0, limit);
}

/** How many unassigned shards are not held, without listing them. */
export function numFreeShards(mapper: ShardMapper, held: ReadonlySet<number> | undefined): number {
  let n = mapper.numUnassignedShards;
  if (held) for (const s of held) if (isShardInRange(s, mapper.numShards) && mapper.nodeForShard(s) === undefined) n -= 1;
  return n;
}

/**
 * FiloDB's `DefaultShardAssignmentStrategy`, exactly (FiloDB reference §4.1): a node's target is
 * `min(ceil((free + mine) / (minNumNodes − owners + (mine > 0 ? 1 : 0))), ceil(numShards / minNumNodes))`
 * and it takes the lowest-numbered free shards up to that target. It never moves an assigned shard.
 *
 * Gotchas: it sizes by `minNumNodes`, not by live nodes, so with fewer nodes some shards stay
 * unassigned, nodes beyond `minNumNodes` stay spare, and a lost node's shards stay unassigned when
 * the survivors are full.
 */
export class DefaultShardAssignmentStrategy implements ShardAssignmentStrategy {
  // Counts first, then list only the shards taken: a node with no room costs nothing, so asking
  // every member of a 1000-node cluster about a 65536-shard dataset stays cheap.
  shardAssignments(node: NodeId, spec: AssignmentSpec, mapper: ShardMapper): ShardNum[] {
    const n = this.remainingCapacity(node, spec, mapper);
    return n > 0 ? freeShards(mapper, spec.held, n) : [];
  }

  remainingCapacity(node: NodeId, spec: AssignmentSpec, mapper: ShardMapper): number {
    return this.capacity(node, spec, mapper, numFreeShards(mapper, spec.held));
  }

  private capacity(node: NodeId, spec: AssignmentSpec, mapper: ShardMapper, numFree: number): number {
    if (numFree === 0) return 0;
    const mine = mapper.numShardsForNode(node);
    const nodes = spec.minNumNodes - mapper.numAssignedNodes + (mine > 0 ? 1 : 0);
    // FiloDB divides doubles: no room left to size for (nodes = 0) means "take up to the cap";
    // more owners than minNumNodes (nodes < 0) means "take nothing".
    const want = nodes === 0 ? Infinity : Math.ceil((numFree + mine) / nodes);
    const cap = Math.ceil(spec.numShards / spec.minNumNodes);
    return Math.max(0, Math.min(want, cap) - mine);
  }
}
