// Which copy of a shard to ask first: copies of nodes that failed lately last, the caller's rack
// first, and load spread over the rest (round-robin, or the copy with the fewest requests in
// flight). Suspicion lasts until a probe finds the node back (or, without a probe, lapses).
import type { Cancel, Clock } from '../cluster/clock.js';
import type { NodeId } from '../core/ids.js';

/** How reads spread over a shard's serving copies. `first`: always the map's first copy (no spreading). */
export type SpreadPolicy = 'round-robin' | 'least-outstanding' | 'first';

export interface SuspicionOptions {
  /** First probe this long after a failure, then doubling. Default 100 ms. */
  readonly probeInitialMs?: number;
  /** Longest wait between probes. Default 5000 ms. */
  readonly probeMaxMs?: number;
}

/**
 * Nodes that failed a request (a transport error or a timeout): suspected for all their shards,
 * asked last, until `probe` answers true (tried after `probeInitialMs`, backing off to
 * `probeMaxMs`). Without a probe a suspicion lapses after the backoff delay, doubling each time the
 * node fails again while suspected. A request that succeeds on a node clears it at once.
 */
export class Suspicions {
  private readonly suspected = new Map<NodeId, { delayMs: number; cancel: Cancel }>();
  private readonly initialMs: number;
  private readonly maxMs: number;
  private closed = false;

  constructor(
    private readonly clock: Clock,
    private readonly probe: ((node: NodeId) => Promise<boolean>) | undefined,
    options: SuspicionOptions = {},
  ) {
    this.initialMs = options.probeInitialMs ?? 100;
    this.maxMs = options.probeMaxMs ?? 5_000;
  }

  isSuspected(node: NodeId): boolean {
    return this.suspected.has(node);
  }

  /** The nodes suspected now. */
  list(): NodeId[] {
    return [...this.suspected.keys()];
  }

  suspect(node: NodeId): void {
    if (this.closed || this.suspected.has(node)) return;
    this.schedule(node, this.initialMs);
  }

  /** The node answered: it is not suspected any more. */
  cleared(node: NodeId): void {
    this.suspected.get(node)?.cancel();
    this.suspected.delete(node);
  }

  close(): void {
    this.closed = true;
    for (const node of [...this.suspected.keys()]) this.cleared(node);
  }

  private schedule(node: NodeId, delayMs: number): void {
    const cancel = this.clock.schedule(delayMs, () => void this.check(node, delayMs));
    this.suspected.set(node, { delayMs, cancel });
  }

  private async check(node: NodeId, delayMs: number): Promise<void> {
    const entry = this.suspected.get(node);
    if (!entry || entry.delayMs !== delayMs) return;
    if (!this.probe) return this.cleared(node);
    const back = await this.probe(node).catch(() => false);
    if (this.suspected.get(node) !== entry) return; // cleared (or suspected anew) meanwhile
    if (back) this.cleared(node);
    else this.schedule(node, Math.min(delayMs * 2, this.maxMs));
  }
}

export interface ReplicaChoiceOptions {
  readonly spread?: SpreadPolicy;
  /** The caller's rack: copies in it are asked first. */
  readonly rack?: string;
}

/** Orders a shard's serving copies for one request. */
export class ReplicaChoice {
  private turn = 0;
  private readonly outstanding = new Map<NodeId, number>();
  readonly spread: SpreadPolicy;

  constructor(
    private readonly suspicions: Suspicions,
    private readonly rackOf: (node: NodeId) => string | undefined,
    private readonly options: ReplicaChoiceOptions = {},
  ) {
    this.spread = options.spread ?? 'round-robin';
  }

  /** The copies in the order to ask them: not suspected before suspected, then the caller's rack, then the spread. */
  order(nodes: readonly NodeId[]): NodeId[] {
    if (nodes.length <= 1) return [...nodes];
    const n = nodes.length;
    const shift = this.spread === 'first' ? 0 : this.turn++ % n;
    const rotated = nodes.map((_, i) => nodes[(i + shift) % n]!);
    const rank = (node: NodeId) =>
      (this.suspicions.isSuspected(node) ? 2 : 0) + (this.options.rack !== undefined && this.rackOf(node) !== this.options.rack ? 1 : 0);
    const load = (node: NodeId) => (this.spread === 'least-outstanding' ? (this.outstanding.get(node) ?? 0) : 0);
    // Array.prototype.sort is stable: equal copies keep the rotation's order.
    return rotated.sort((a, b) => rank(a) - rank(b) || load(a) - load(b));
  }

  started(node: NodeId): void {
    this.outstanding.set(node, (this.outstanding.get(node) ?? 0) + 1);
  }

  finished(node: NodeId): void {
    const left = (this.outstanding.get(node) ?? 1) - 1;
    if (left <= 0) this.outstanding.delete(node);
    else this.outstanding.set(node, left);
  }
}

/** The recent latencies of a dataset's requests, for the hedging delay (their p95). */
export class LatencyWindow {
  private readonly samples: number[] = [];
  private next = 0;
  private cached: number | undefined;

  constructor(private readonly size = 512) {}

  add(ms: number): void {
    if (this.samples.length < this.size) this.samples.push(ms);
    else this.samples[this.next] = ms;
    this.next = (this.next + 1) % this.size;
    // Recomputed every 32 samples: a sort per request would cost more than the request.
    if (this.next % 32 === 0) this.cached = undefined;
  }

  /** The p95 of the recent samples, or undefined before there are 20. */
  p95(): number | undefined {
    if (this.samples.length < 20) return undefined;
    if (this.cached === undefined) {
      const sorted = [...this.samples].sort((a, b) => a - b);
      this.cached = sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.95))]!;
    }
    return this.cached;
  }
}
