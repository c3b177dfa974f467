// A general min-cost flow, kept apart from anything about placement so it can be trusted on its own.
//
// Primal-dual successive shortest paths: first Bellman-Ford (queue-based) gives potentials that make
// every reduced cost ≥ 0 (arc costs may be negative, the network must have no negative cycle); then
// each phase runs Dijkstra on reduced costs and pushes a blocking flow (Dinic) through the arcs of
// zero reduced cost, which are exactly the arcs on shortest paths. Augmenting only along shortest
// paths keeps the flow of least cost for its value, and a phase whose shortest path costs ≥ 0 ends
// the search: the result is the flow of least total cost (of any value), exact in integers.

export class MinCostFlow {
  private readonly head: Int32Array;
  private arcs = 0;
  private to = new Int32Array(64);
  private next = new Int32Array(64);
  private residual = new Int32Array(64);
  private cost = new Float64Array(64);

  constructor(readonly vertices: number) {
    this.head = new Int32Array(vertices).fill(-1);
  }

  /** Adds an arc and its reverse; returns the arc's index (for `flowOn`). Costs must be integers. */
  addArc(from: number, to: number, capacity: number, cost: number): number {
    if (!Number.isSafeInteger(cost) || !Number.isInteger(capacity) || capacity < 0 || capacity > 0x3fffffff)
      throw new Error(`bad arc ${from}→${to} (${capacity}, ${cost})`);
    const arc = this.arcs;
    this.push(from, to, capacity, cost);
    this.push(to, from, 0, -cost);
    return arc;
  }

  /** Flow on an arc returned by `addArc`: what its reverse arc can give back. */
  flowOn(arc: number): number {
    return this.residual[arc ^ 1]!;
  }

  /** Sends the flow of least total cost from `source` to `sink`; returns that cost. */
  solve(source: number, sink: number): number {
    const n = this.vertices;
    const potential = this.initialPotentials(source);
    let total = 0;
    const dist = new Float64Array(n);
    for (;;) {
      this.shortestReducedDistances(source, potential, dist);
      if (dist[sink] === Infinity) break;
      for (let v = 0; v < n; v++) if (dist[v] !== Infinity) potential[v]! += dist[v]!;
      // Every path pushed in this phase costs potential[sink] − potential[source] in true costs.
      const pathCost = potential[sink]! - potential[source]!;
      if (pathCost >= 0) break;
      total += pathCost * this.blockingFlow(source, sink, potential, dist);
    }
    return total;
  }

  private push(from: number, to: number, capacity: number, cost: number): void {
    if (this.arcs === this.to.length) this.grow();
    const a = this.arcs++;
    this.to[a] = to;
    this.residual[a] = capacity;
    this.cost[a] = cost;
    this.next[a] = this.head[from]!;
    this.head[from] = a;
  }

  private grow(): void {
    const size = this.to.length * 2;
    const copy = <T extends Int32Array | Float64Array>(old: T, fresh: T): T => (fresh.set(old), fresh);
    this.to = copy(this.to, new Int32Array(size));
    this.next = copy(this.next, new Int32Array(size));
    this.residual = copy(this.residual, new Int32Array(size));
    this.cost = copy(this.cost, new Float64Array(size));
  }

  /** Bellman-Ford with a queue from `source`; unreachable vertices get 0 (they stay unreachable). */
  private initialPotentials(source: number): Float64Array {
    const n = this.vertices;
    const dist = new Float64Array(n).fill(Infinity);
    const queued = new Uint8Array(n);
    const enqueued = new Int32Array(n);
    dist[source] = 0;
    const queue = [source];
    queued[source] = 1;
    for (let k = 0; k < queue.length; k++) {
      const u = queue[k]!;
      queued[u] = 0;
      for (let a = this.head[u]!; a >= 0; a = this.next[a]!) {
        if (this.residual[a]! <= 0) continue;
        const v = this.to[a]!;
        const d = dist[u]! + this.cost[a]!;
        if (d >= dist[v]!) continue;
        dist[v] = d;
        if (!queued[v]) {
          // Without a negative cycle a vertex enters the queue at most once per path length.
          if (++enqueued[v]! > n) throw new Error('negative cycle');
          queued[v] = 1;
          queue.push(v);
        }
      }
    }
    for (let v = 0; v < n; v++) if (dist[v] === Infinity) dist[v] = 0;
    return dist;
  }

  /** Dijkstra over residual arcs with reduced costs cost + p(u) − p(v), all ≥ 0 by invariant. */
  private shortestReducedDistances(source: number, potential: Float64Array, dist: Float64Array): void {
    dist.fill(Infinity);
    dist[source] = 0;
    const heap = new DistanceHeap();
    heap.push(0, source);
    while (heap.size > 0) {
      const [d, u] = heap.pop();
      if (d > dist[u]!) continue;
      for (let a = this.head[u]!; a >= 0; a = this.next[a]!) {
        if (this.residual[a]! <= 0) continue;
        const v = this.to[a]!;
        const reduced = this.cost[a]! + potential[u]! - potential[v]!;
        if (reduced < 0) throw new Error(`negative reduced cost ${reduced} on ${u}→${v}`);
        const nd = d + reduced;
        if (nd < dist[v]!) {
          dist[v] = nd;
          heap.push(nd, v);
        }
      }
    }
  }

  /**
   * Dinic's blocking flow restricted to admissible arcs (residual > 0, reduced cost 0 under the
   * updated potentials): every path found is a shortest path. Returns the units pushed.
   */
  private blockingFlow(source: number, sink: number, potential: Float64Array, reached: Float64Array): number {
    const n = this.vertices;
    const admissible = (a: number, u: number): boolean => {
      const v = this.to[a]!;
      return this.residual[a]! > 0 && reached[v] !== Infinity && this.cost[a]! + potential[u]! - potential[v]! === 0;
    };
    let pushed = 0;
    const level = new Int32Array(n);
    const cursor = new Int32Array(n);
    for (;;) {
      level.fill(-1);
      level[source] = 0;
      const queue = [source];
      for (let k = 0; k < queue.length; k++) {
        const u = queue[k]!;
        for (let a = this.head[u]!; a >= 0; a = this.next[a]!) {
          const v = this.to[a]!;
          if (level[v] !== -1 || !admissible(a, u)) continue;
          level[v] = level[u]! + 1;
          queue.push(v);
        }
      }
      if (level[sink] === -1) return pushed;
      cursor.set(this.head);
      for (;;) {
        const f = this.augment(source, sink, Number.MAX_SAFE_INTEGER, level, cursor, admissible);
        if (f === 0) break;
        pushed += f;
      }
    }
  }

  private augment(u: number, sink: number, limit: number, level: Int32Array, cursor: Int32Array, admissible: (a: number, u: number) => boolean): number {
    if (u === sink) return limit;
    for (; cursor[u]! >= 0; cursor[u] = this.next[cursor[u]!]!) {
      const a = cursor[u]!;
      const v = this.to[a]!;
      if (level[v] !== level[u]! + 1 || !admissible(a, u)) continue;
      const f = this.augment(v, sink, Math.min(limit, this.residual[a]!), level, cursor, admissible);
      if (f > 0) {
        this.residual[a]! -= f;
        this.residual[a ^ 1]! += f;
        return f;
      }
    }
    return 0;
  }
}

/** A binary min-heap of (distance, vertex) pairs; stale entries are skipped by the caller. */
class DistanceHeap {
  private readonly keys: number[] = [];
  private readonly values: number[] = [];

  get size(): number {
    return this.keys.length;
  }

  push(key: number, value: number): void {
    const { keys, values } = this;
    let i = keys.length;
    keys.push(key);
    values.push(value);
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (keys[parent]! <= key) break;
      keys[i] = keys[parent]!;
      values[i] = values[parent]!;
      i = parent;
    }
    keys[i] = key;
    values[i] = value;
  }

  pop(): [number, number] {
    const { keys, values } = this;
    const top: [number, number] = [keys[0]!, values[0]!];
    const lastKey = keys.pop()!;
    const lastValue = values.pop()!;
    const n = keys.length;
    if (n > 0) {
      let i = 0;
      for (;;) {
        let child = 2 * i + 1;
        if (child >= n) break;
        if (child + 1 < n && keys[child + 1]! < keys[child]!) child++;
        if (keys[child]! >= lastKey) break;
        keys[i] = keys[child]!;
        values[i] = values[child]!;
        i = child;
      }
      keys[i] = lastKey;
      values[i] = lastValue;
    }
    return top;
  }
}
