// A node's answer to a query router asking it about a shard, with Garnet's redirections
// (placement-peers §4.2): the router learns that its map is stale from the node it asked, without
// waiting for the next snapshot.
import type { NodeId } from './ids.js';
import { isServingCopy } from './shard-record.js';
import type { ShardMapper } from './shard-mapper.js';

export type ShardCheck =
  /** This node serves the shard: ask away. */
  | { readonly type: 'ok'; readonly version: number }
  /**
   * A handoff is in progress and this node's copy is still catching up: ask `node` (a copy that
   * serves, the leaving one first) this once. The router's map is not wrong, so it keeps it.
   */
  | { readonly type: 'ask'; readonly node: NodeId; readonly version: number }
  /** The shard's copies changed after the router's map: these nodes serve it as of `version`. */
  | { readonly type: 'moved'; readonly nodes: readonly NodeId[]; readonly version: number }
  /** This node does not serve it, and its own map is no newer than the router's: retry shortly. */
  | { readonly type: 'tryagain'; readonly version: number }
  /** This node knows no such shard (no map of the dataset, or the shard is out of range). */
  | { readonly type: 'unknown'; readonly reason: string };

/**
 * What `self` answers about `shard` to a router whose map shows the shard at `routerVersion` (the
 * map version it holds; the shard's assignment version is compared against it).
 */
export function checkShard(map: ShardMapper | undefined, self: NodeId, shard: number, routerVersion: number): ShardCheck {
  if (!map) return { type: 'unknown', reason: 'this node holds no map of the dataset' };
  if (!Number.isInteger(shard) || shard < 0 || shard >= map.numShards) return { type: 'unknown', reason: `shard ${shard} is not in 0..${map.numShards - 1}` };
  const version = map.assignmentVersion(shard);
  const copies = map.recordForShard(shard).assignments;
  const mine = copies.find((a) => a.node === self);
  if (mine && isServingCopy(mine)) return { type: 'ok', version };
  const serving = copies.filter(isServingCopy);
  if (mine?.placement === 'Initializing' && serving.length > 0) {
    const leaving = serving.find((a) => a.placement === 'Leaving');
    return { type: 'ask', node: (leaving ?? serving[0]!).node, version };
  }
  // Only a map newer than the router's may send it elsewhere; otherwise this node may be the stale one.
  if (routerVersion < version && serving.length > 0) return { type: 'moved', nodes: serving.map((a) => a.node).sort(), version };
  return { type: 'tryagain', version };
}
