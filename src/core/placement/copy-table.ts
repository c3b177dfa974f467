// Shard → node indices holding its copies, in one flat typed array: a decision over thousands of
// shards allocates nothing per shard (allocation, not arithmetic, dominated the decision time).
// Each shard's nodes are kept ascending, so ids come out sorted without a sort.

export class CopyTable {
  private readonly nodes: Int32Array;
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

  /** Whether a copy other than the one on `except` lies in group `group`. */
  usesGroup(shard: number, group: number, groupOf: Int32Array, except = -1): boolean {
    const base = shard * this.width;
    for (let k = 0; k < this.counts[shard]!; k++) {
      const node = this.nodes[base + k]!;
      if (node !== except && groupOf[node] === group) return true;
    }
    return false;
  }

  list(shard: number): number[] {
    const base = shard * this.width;
    return Array.from(this.nodes.subarray(base, base + this.counts[shard]!));
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

  remove(shard: number, node: number): void {
    const base = shard * this.width;
    const n = this.counts[shard]!;
    let k = 0;
    while (k < n && this.nodes[base + k] !== node) k++;
    if (k === n) return;
    for (; k < n - 1; k++) this.nodes[base + k] = this.nodes[base + k + 1]!;
    this.counts[shard]!--;
  }

  /** Keeps, in order, the first copy in each group, at most `max` of them. */
  keepOnePerGroup(shard: number, groupOf: Int32Array, max: number): void {
    const base = shard * this.width;
    let kept = 0;
    for (let k = 0; k < this.counts[shard]! && kept < max; k++) {
      const node = this.nodes[base + k]!;
      let clash = false;
      for (let j = 0; j < kept && !clash; j++) clash = groupOf[this.nodes[base + j]!] === groupOf[node];
      if (!clash) this.nodes[base + kept++] = node;
    }
    this.counts[shard] = kept;
  }
}
