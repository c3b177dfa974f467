// When each planned handoff of a single-copy dataset ran, as the persisted maps show it: from the
// first map that names a shard's copy `Leaving` beside the copy taking over, to the first map
// without the leaving copy, and after it the time the leaving copy's node may take to hear of it.
// I15 (`sink-calls.ts`) leaves the writes of a handoff's two copies within that window to the
// fencing token: the map names both, and the leaving node may still act on the map before it.
import type { ShardMapper } from '../core/shard-mapper.js';

interface Handoff {
  readonly dataset: string;
  readonly shard: number;
  readonly nodes: ReadonlySet<string>;
  readonly from: number;
  /** When a map first left the leaving copy out; undefined while it has not. */
  to: number | undefined;
}

export class HandoffWindows {
  private readonly handoffs: Handoff[] = [];
  /** `dataset/shard` → the handoff under way. */
  private readonly open = new Map<string, Handoff>();

  /** `tailMs`: how long after the map that ends a handoff the leaving copy's node may still act on the one before. */
  constructor(private readonly tailMs: number) {}

  /** A map of `dataset` was persisted at `now`. */
  noteMap(dataset: string, map: Pick<ShardMapper, 'numShards' | 'recordForShard'>, now: number): void {
    for (let shard = 0; shard < map.numShards; shard++) {
      const key = `${dataset}/${shard}`;
      const copies = map.recordForShard(shard).assignments;
      const leaving = copies.some((a) => a.placement === 'Leaving');
      const current = this.open.get(key);
      // Over once the leaving copy is gone (no copy leaves any more), or the copies are others.
      if (current && (!leaving || !copies.every((a) => current.nodes.has(a.node)))) {
        current.to = now;
        this.open.delete(key);
      }
      if (leaving && !this.open.has(key)) {
        const h: Handoff = { dataset, shard, nodes: new Set(copies.map((a) => a.node as string)), from: now, to: undefined };
        this.handoffs.push(h);
        this.open.set(key, h);
      }
    }
  }

  /** Whether nodes `a` and `b` were the two copies of one handoff of the shard, and `from .. to` lies within its window. */
  covers(dataset: string, shard: number, a: string, b: string, from: number, to: number): boolean {
    return this.handoffs.some(
      (h) =>
        h.dataset === dataset &&
        h.shard === shard &&
        h.nodes.has(a) &&
        h.nodes.has(b) &&
        from >= h.from &&
        to <= (h.to ?? Number.POSITIVE_INFINITY) + this.tailMs,
    );
  }
}
