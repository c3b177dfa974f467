// The free room below target, as slots to hand out one copy at a time: always the slot of the node
// with the most room left, in a group the shard does not use yet. Per group, a node with room d has
// d slots valued d, d−1, …, 1, sorted once (value, then node index); the groups sit in a heap keyed
// by their next slot, so a pick costs O(log groups) plus one skipped group per group the shard uses.

import type { CopyTable } from './copy-table.js';

export class SlotQueues {
  private readonly room: Int32Array;
  private readonly slots: { node: Int32Array; value: Int32Array; next: number }[];
  private readonly heap: number[] = [];

  /** `load` is updated as slots are handed out. */
  constructor(
    private readonly groupOf: Int32Array,
    targets: Int32Array,
    private readonly load: Int32Array,
  ) {
    this.room = Int32Array.from(targets, (t, i) => Math.max(0, t - load[i]!));
    const groups = groupOf.reduce((max, g) => Math.max(max, g + 1), 0);
    const size = new Int32Array(groups);
    let most = 0;
    for (let i = 0; i < this.room.length; i++) {
      size[groupOf[i]!]! += this.room[i]!;
      most = Math.max(most, this.room[i]!);
    }
    this.slots = Array.from({ length: groups }, (_, g) => ({ node: new Int32Array(size[g]!), value: new Int32Array(size[g]!), next: 0 }));
    // Written already in order: value descending, then node index ascending.
    const filled = new Int32Array(groups);
    for (let v = most; v > 0; v--) {
      for (let i = 0; i < this.room.length; i++) {
        if (this.room[i]! < v) continue;
        const g = groupOf[i]!;
        const q = this.slots[g]!;
        q.node[filled[g]!] = i;
        q.value[filled[g]!++] = v;
      }
    }
    for (let g = 0; g < groups; g++) if (this.head(g) !== undefined) this.push(g);
  }

  /** A node with room in a group `shard` has no copy in (consumed), or undefined when none is left. */
  take(holders: CopyTable, shard: number): number | undefined {
    const skipped: number[] = [];
    let node: number | undefined;
    while (this.heap.length > 0) {
      const g = this.pop();
      if (this.head(g) === undefined) continue;
      if (holders.usesGroup(shard, g, this.groupOf)) {
        skipped.push(g);
        continue;
      }
      node = this.slots[g]!.node[this.slots[g]!.next++]!;
      this.consume(node);
      if (this.head(g) !== undefined) this.push(g);
      break;
    }
    for (const g of skipped) this.push(g);
    return node;
  }

  /** Uses one unit of `node`'s room outside the queue order (a repair swap). */
  consume(node: number): void {
    this.room[node]!--;
    this.load[node]!++;
  }

  /** Gives up one unit of `node`'s room (its target was lowered). */
  shrink(node: number): void {
    this.room[node]!--;
  }

  /** Nodes with room left, by index. */
  remainingNodes(): number[] {
    const out: number[] = [];
    for (let i = 0; i < this.room.length; i++) if (this.room[i]! > 0) out.push(i);
    return out;
  }

  /** The group's next valid slot; slots whose node's room was used out of order are skipped. */
  private head(g: number): number | undefined {
    const q = this.slots[g]!;
    while (q.next < q.node.length && q.value[q.next]! > this.room[q.node[q.next]!]!) q.next++;
    return q.next < q.node.length ? q.next : undefined;
  }

  // Max-heap of groups by their head slot: higher value first, then lower node index.
  private before(a: number, b: number): boolean {
    const qa = this.slots[a]!;
    const qb = this.slots[b]!;
    const va = qa.value[qa.next]!;
    const vb = qb.value[qb.next]!;
    return va !== vb ? va > vb : qa.node[qa.next]! < qb.node[qb.next]!;
  }

  private push(g: number): void {
    const h = this.heap;
    h.push(g);
    for (let i = h.length - 1; i > 0; ) {
      const parent = (i - 1) >> 1;
      if (!this.before(h[i]!, h[parent]!)) break;
      [h[i], h[parent]] = [h[parent]!, h[i]!];
      i = parent;
    }
  }

  private pop(): number {
    const h = this.heap;
    const top = h[0]!;
    const last = h.pop()!;
    if (h.length > 0) {
      h[0] = last;
      for (let i = 0; ; ) {
        const l = 2 * i + 1;
        const r = l + 1;
        let best = i;
        if (l < h.length && this.before(h[l]!, h[best]!)) best = l;
        if (r < h.length && this.before(h[r]!, h[best]!)) best = r;
        if (best === i) break;
        [h[i], h[best]] = [h[best]!, h[i]!];
        i = best;
      }
    }
    return top;
  }
}
