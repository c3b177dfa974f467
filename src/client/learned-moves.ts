// What MOVED answers taught a client or router: a shard's serving copies as of a map version newer
// than its own map. Used until its map reaches that version (then the map knows better).
import type { NodeId } from '../core/ids.js';

export class LearnedMoves {
  private readonly moved = new Map<number, { nodes: readonly NodeId[]; version: number }>();

  learn(shard: number, nodes: readonly NodeId[], version: number, mapVersion: number): void {
    if (version > mapVersion && version > (this.moved.get(shard)?.version ?? -1)) this.moved.set(shard, { nodes, version });
  }

  /** What was learned for `shard`, unless the map at `mapVersion` has caught up. */
  nodes(shard: number, mapVersion: number): readonly NodeId[] | undefined {
    const learned = this.moved.get(shard);
    if (!learned) return undefined;
    if (mapVersion >= learned.version) {
      this.moved.delete(shard);
      return undefined;
    }
    return learned.nodes;
  }

  clear(): void {
    this.moved.clear();
  }
}
