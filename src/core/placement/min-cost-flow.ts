// A min-cost flow solver for the placement network: primal-dual (Dijkstra on reduced costs, then a
// blocking flow over the edges whose reduced cost is 0). The placement network has few distinct
// path costs (keep, new copy, bound penalties), so a handful of phases route every unit, each phase
// pushing thousands of units at once; successive shortest paths one unit at a time would not.
//
// Vertices must be numbered in a topological order of the initial network (every edge goes from a
// lower to a higher vertex), which lets the first potentials come from one pass despite negative
// costs. Costs are integers well below 2^53, so every sum is exact.

export class MinCostFlow {
  private readonly head: Int32Array;
  private to: Int32Array = new Int32Array(64);
  private next: Int32Array = new Int32Array(64);
  private cap: Float64Array = new Float64Array(64);
  private cost: Float64Array = new Float64Array(64);
  private edges = 0;

  constructor(readonly vertices: number) {
    this.head = new Int32Array(vertices).fill(-1);
  }

  /** Adds an edge and its residual twin; returns the edge's id (its flow is `flow(id)`). */
  addEdge(from: number, to: number, capacity: number, cost: number): number {
    if (capacity <= 0) return -1;
    if (this.edges + 2 > this.to.length) this.grow();
    const e = this.edges;
    this.link(e, from, to, capacity, cost);
    this.link(e + 1, to, from, 0, -cost);
    this.edges += 2;
    return e;
  }

  /** Flow through edge `id` (0 for an edge that was never added). */
  flow(id: number): number {
    return id < 0 ? 0 : this.cap[id + 1]!;
  }

  /** Routes as much as possible from `source` to `sink` at least total cost; returns that cost. */
  solve(source: number, sink: number): number {
    const n = this.vertices;
    const potential = this.initialPotentials(source);
    const dist = new Float64Array(n);
    const level = new Int32Array(n);
    const arc = new Int32Array(n);
    let total = 0;
    for (;;) {
      if (!this.shortestPaths(source, potential, dist)) break;
      if (dist[sink] === Infinity) break;
      for (let v = 0; v < n; v++) if (dist[v] !== Infinity) potential[v]! += dist[v]!;
      // Blocking flows on the admissible subgraph until it has no path left.
      while (this.levels(source, sink, potential, level)) {
        for (let v = 0; v < n; v++) arc[v] = this.head[v]!;
        for (;;) {
          const pushed = this.augment(source, sink, Infinity, potential, level, arc);
          if (pushed === 0) break;
          total += pushed * (potential[sink]! - potential[source]!);
        }
      }
    }
    return total;
  }

  private link(e: number, from: number, to: number, capacity: number, cost: number): void {
    this.to[e] = to;
    this.cap[e] = capacity;
    this.cost[e] = cost;
    this.next[e] = this.head[from]!;
    this.head[from] = e;
  }

  private grow(): void {
    const size = this.to.length * 2;
    const resize = <T extends Int32Array | Float64Array>(a: T, make: (n: number) => T): T => {
      const b = make(size);
      b.set(a);
      return b;
    };
    this.to = resize(this.to, (k) => new Int32Array(k));
    this.next = resize(this.next, (k) => new Int32Array(k));
    this.cap = resize(this.cap, (k) => new Float64Array(k));
    this.cost = resize(this.cost, (k) => new Float64Array(k));
  }

  /** Shortest distances over the initial network, a DAG in vertex order. */
  private initialPotentials(source: number): Float64Array {
    const d = new Float64Array(this.vertices).fill(Infinity);
    d[source] = 0;
    for (let u = 0; u < this.vertices; u++) {
      if (d[u] === Infinity) continue;
      for (let e = this.head[u]!; e >= 0; e = this.next[e]!) {
        if (this.cap[e]! <= 0) continue;
        const v = this.to[e]!;
        if (d[u]! + this.cost[e]! < d[v]!) d[v] = d[u]! + this.cost[e]!;
      }
    }
    for (let v = 0; v < this.vertices; v++) if (d[v] === Infinity) d[v] = 0;
    return d;
  }

  /** Dijkstra on reduced costs; false when the source has no residual edge left. */
  private shortestPaths(source: number, potential: Float64Array, dist: Float64Array): boolean {
    dist.fill(Infinity);
    dist[source] = 0;
    const heap = new BinaryHeap(this.vertices);
    const settled = new Uint8Array(this.vertices);
    heap.push(source, 0);
    let reached = false;
    while (heap.size > 0) {
      const u = heap.pop();
      if (settled[u]) continue;
      settled[u] = 1;
      const du = dist[u]!;
      for (let e = this.head[u]!; e >= 0; e = this.next[e]!) {
        if (this.cap[e]! <= 0) continue;
        const v = this.to[e]!;
        const nd = du + this.cost[e]! + potential[u]! - potential[v]!;
        if (nd < dist[v]!) {
          dist[v] = nd;
          heap.push(v, nd);
          reached = true;
        }
      }
    }
    return reached;
  }

  /** BFS levels over admissible edges (residual, reduced cost 0); true when the sink is reached. */
  private levels(source: number, sink: number, potential: Float64Array, level: Int32Array): boolean {
    level.fill(-1);
    level[source] = 0;
    const queue = new Int32Array(this.vertices);
    let headAt = 0;
    let tail = 0;
    queue[tail++] = source;
    while (headAt < tail) {
      const u = queue[headAt++]!;
      for (let e = this.head[u]!; e >= 0; e = this.next[e]!) {
        const v = this.to[e]!;
        if (level[v]! >= 0 || this.cap[e]! <= 0 || this.cost[e]! + potential[u]! - potential[v]! !== 0) continue;
        level[v] = level[u]! + 1;
        queue[tail++] = v;
      }
    }
    return level[sink]! >= 0;
  }

  private augment(u: number, sink: number, limit: number, potential: Float64Array, level: Int32Array, arc: Int32Array): number {
    if (u === sink) return limit;
    for (; arc[u]! >= 0; arc[u] = this.next[arc[u]!]!) {
      const e = arc[u]!;
      const v = this.to[e]!;
      if (this.cap[e]! <= 0 || level[v] !== level[u]! + 1 || this.cost[e]! + potential[u]! - potential[v]! !== 0) continue;
      const pushed = this.augment(v, sink, Math.min(limit, this.cap[e]!), potential, level, arc);
      if (pushed > 0) {
        this.cap[e]! -= pushed;
        this.cap[e ^ 1]! += pushed;
        return pushed;
      }
    }
    return 0;
  }
}

/** A binary min-heap of (vertex, key) with lazy deletion: the caller skips vertices already settled. */
class BinaryHeap {
  private vertex: Int32Array;
  private key: Float64Array;
  size = 0;

  constructor(capacity: number) {
    this.vertex = new Int32Array(Math.max(16, capacity * 2));
    this.key = new Float64Array(this.vertex.length);
  }

  push(v: number, k: number): void {
    if (this.size === this.vertex.length) {
      const vertex = new Int32Array(this.size * 2);
      vertex.set(this.vertex);
      const key = new Float64Array(this.size * 2);
      key.set(this.key);
      this.vertex = vertex;
      this.key = key;
    }
    let i = this.size++;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (this.key[parent]! <= k) break;
      this.vertex[i] = this.vertex[parent]!;
      this.key[i] = this.key[parent]!;
      i = parent;
    }
    this.vertex[i] = v;
    this.key[i] = k;
  }

  pop(): number {
    const top = this.vertex[0]!;
    const lastV = this.vertex[--this.size]!;
    const lastK = this.key[this.size]!;
    let i = 0;
    for (;;) {
      let child = 2 * i + 1;
      if (child >= this.size) break;
      if (child + 1 < this.size && this.key[child + 1]! < this.key[child]!) child++;
      if (this.key[child]! >= lastK) break;
      this.vertex[i] = this.vertex[child]!;
      this.key[i] = this.key[child]!;
      i = child;
    }
    this.vertex[i] = lastV;
    this.key[i] = lastK;
    return top;
  }
}
