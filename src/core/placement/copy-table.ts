// Shard → node indices holding its copies, in one flat typed array: a decision over thousands of
// shards allocates nothing per shard (allocation, not arithmetic, dominated the decision time).
// Each shard's nodes are kept ascending, so ids come out sorted without a sort.

export class CopyTable {
  /** Shard s's nodes are `nodes[s * width .. s * width + count(s)]`, ascending. */
  readonly nodes: Int32Array;
  private readonly counts: Uint8Array;

  constructor(
    readonly shards: number,
    /** The most copies a shard can hold in this table. */
    readonly width: number,
  ) {
    this.nodes = new Int32Array(shards * width);
    this.counts = new Uint8Array(shards);
  }

  count(shard: number): number {
    return this.counts[shard]!;
  }

  at(shard: number, k: number): number {
    return this.nodes[shard * this.width + k]!;
  }

  has(shard: number, node: number): boolean {
    const base = shard * this.width;
    for (let k = 0; k < this.counts[shard]!; k++) if (this.nodes[base + k] === node) return true;
    return false;
  }

  /** Adds `node` in order; a node already there is not added twice. */
  add(shard: number, node: number): void {
    const base = shard * this.width;
    let k = this.counts[shard]!;
    if (this.has(shard, node)) return;
    if (k === this.width) throw new Error(`shard ${shard} already holds ${k} copies`);
    for (; k > 0 && this.nodes[base + k - 1]! > node; k--) this.nodes[base + k] = this.nodes[base + k - 1]!;
    this.nodes[base + k] = node;
    this.counts[shard]!++;
  }

  /** Sets a shard's copies to the `count` distinct nodes at `source[from..]`, in any order. */
  setRow(shard: number, source: Int32Array, from: number, count: number): void {
    const base = shard * this.width;
    for (let k = 0; k < count; k++) {
      const node = source[from + k]!;
      let j = k;
      for (; j > 0 && this.nodes[base + j - 1]! > node; j--) this.nodes[base + j] = this.nodes[base + j - 1]!;
      this.nodes[base + j] = node;
    }
    this.counts[shard] = count;
  }
}
