// The per-node limit of a load decision (`LoadProblem.maxMovesPerNode`): the copies each node gains
// or sheds against the map before the decision. Without it one decision may pile all its moves on
// one node, which then catches up every new copy at once (Cruise Control moves at most 10
// partitions per broker at a time, TiKV at most 4 hot regions).

/**
 * Per node: copies added plus copies removed against the map before the decision, and whether a
 * move or a swap keeps every node it touches within the limit. A node already past it when the
 * balancing starts (the copy-count strategy re-created lost copies there: they are placed, limit or
 * not, since recovery must not wait) may only come down.
 */
export class NodeMoveBudget {
  private readonly changed: Int32Array;

  /**
   * `before`: per shard, the nodes that held it before the decision; `start`: per shard, the nodes
   * the balancing starts from; `nodes`: how many nodes there are.
   */
  constructor(
    private readonly before: readonly ReadonlySet<number>[],
    start: readonly (readonly number[])[],
    nodes: number,
    readonly limit: number,
  ) {
    this.changed = new Int32Array(nodes);
    start.forEach((copies, s) => {
      for (const i of copies) if (!before[s]!.has(i)) this.changed[i]! += 1;
    });
    before.forEach((held, s) => {
      for (const i of held) if (!start[s]!.includes(i)) this.changed[i]! += 1;
    });
  }

  /** Whether node i may still gain a copy it did not hold before. */
  hasRoom(i: number): boolean {
    return this.changed[i]! < this.limit;
  }

  /** Whether moving shard s's copy from `from` to `to` keeps both nodes within the limit. */
  fitsMove(s: number, from: number, to: number): boolean {
    return this.within(from, this.leaving(s, from)) && this.within(to, this.arriving(s, to));
  }

  /** Whether swapping shard a's copy on node i with shard b's on node j keeps both within the limit. */
  fitsSwap(a: number, b: number, i: number, j: number): boolean {
    return this.within(i, this.leaving(a, i) + this.arriving(b, i)) && this.within(j, this.leaving(b, j) + this.arriving(a, j));
  }

  /** Counts a move taken (or taken back: the reverse move undoes it exactly). */
  apply(s: number, from: number, to: number): void {
    this.changed[from]! += this.leaving(s, from);
    this.changed[to]! += this.arriving(s, to);
  }

  /** +1 when node i sheds a copy it held before the decision, −1 when it sheds one it gained in it. */
  private leaving(s: number, i: number): number {
    return this.before[s]!.has(i) ? 1 : -1;
  }

  /** −1 when node i takes back a copy it held before the decision, +1 when it gains a new one. */
  private arriving(s: number, i: number): number {
    return this.before[s]!.has(i) ? -1 : 1;
  }

  private within(i: number, change: number): boolean {
    return change <= 0 || this.changed[i]! + change <= this.limit;
  }
}
