/**
 * What the runtime benchmarks share: an embedded cluster (the real nodes, actors and core over the
 * in-memory adapters) with observation hooks that cost next to nothing, and waiting helpers.
 *
 * - A MetaStore proxy timestamps every successful `takeLease`: the moment a new singleton has won
 *   the compare-and-set.
 * - The memory bus's per-`produce` hook (its fault-injection hook, here always "deliver") sees every
 *   record as it is produced, synchronously, before it is appended and before anyone receives it:
 *   the moment a node or the singleton publishes.
 * - Warnings, errors and (at level `info`) the singleton's `singleton.takeover` lines of the log
 *   are handed over parsed; the rest of the log is dropped unparsed.
 *
 * Not a benchmark itself.
 */
import { pino } from 'pino';
import type { Clock } from '../src/cluster/clock.js';
import type { BusFault } from '../src/cluster/memory-bus.js';
import type { RuntimeOptions } from '../src/actors/settings.js';
import { EmbeddedCluster } from '../src/embedded/embedded-cluster.js';
import { MemoryMetaStore } from '../src/store/memory-meta-store.js';
import type { Lease, MetaStore } from '../src/store/meta-store.js';

/** A lease taken, and when (`performance.now()`). */
export interface LeaseTaken {
  readonly lease: Lease;
  readonly at: number;
}

/** A record as produced on the bus (the bus's own copy: do not change it), and when (`performance.now()`). */
export interface Produced {
  readonly topic: string;
  readonly value: unknown;
  readonly at: number;
}

/**
 * Wraps a MetaStore so that every successful `takeLease` is reported with its time, as soon as the
 * store has answered. Every other call passes through unchanged.
 */
export function recordingMetaStore(store: MetaStore, onLease: (lease: Lease, at: number) => void): MetaStore {
  return new Proxy(store, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver) as unknown;
      if (typeof value !== 'function') return value;
      if (prop !== 'takeLease') return (value as (...a: unknown[]) => unknown).bind(target);
      return async (...args: Parameters<MetaStore['takeLease']>) => {
        const lease = await target.takeLease(...args);
        if (lease) onLease(lease, performance.now());
        return lease;
      };
    },
  });
}

export interface ObservedClusterOptions {
  readonly name: string;
  readonly nodes: number;
  readonly clock?: Clock;
  readonly sessionTimeoutMs: number;
  readonly heartbeatIntervalMs: number;
  readonly settings: RuntimeOptions;
  /** The MemoryMetaStore's fault hook: true makes that operation fail, retriably. */
  readonly storeFaults?: (operation: string) => boolean;
  /** `info` to see the singleton's `singleton.takeover` lines (every info line is then serialized); default `warn`. */
  readonly logLevel?: 'info' | 'warn';
}

/** `n01`, `n02`, …: join order = name order. */
export const nodeName = (i: number): string => `n${String(i + 1).padStart(2, '0')}`;

/** An embedded cluster (not started) whose bus, MetaStore and log report to replaceable hooks. */
export class ObservedCluster {
  readonly cluster: EmbeddedCluster;
  onProduce: ((p: Produced) => void) | undefined;
  onLease: ((t: LeaseTaken) => void) | undefined;
  onLog: ((line: Record<string, unknown>) => void) | undefined;
  /** `performance.now()` of the last record produced, and how many so far. */
  lastProducedAt = 0;
  produced = 0;

  constructor(o: ObservedClusterOptions) {
    const metaStore = recordingMetaStore(new MemoryMetaStore(o.storeFaults ? { faults: o.storeFaults } : {}), (lease, at) => this.onLease?.({ lease, at }));
    const log = pino(
      { level: o.logLevel ?? 'warn' },
      {
        write: (line: string) => {
          if (this.onLog && (line.includes('"singleton.takeover"') || !/^\{"level":(10|20|30),/.test(line)))
            this.onLog(JSON.parse(line) as Record<string, unknown>);
        },
      },
    );
    const deliver: BusFault = { kind: 'deliver' };
    this.cluster = new EmbeddedCluster({
      name: o.name,
      nodes: Array.from({ length: o.nodes }, (_, i) => nodeName(i)),
      ...(o.clock ? { clock: o.clock } : {}),
      sessionTimeoutMs: o.sessionTimeoutMs,
      heartbeatIntervalMs: o.heartbeatIntervalMs,
      settings: o.settings,
      metaStore,
      log,
      bus: {
        faults: (topic, value) => {
          const at = performance.now();
          this.lastProducedAt = at;
          this.produced += 1;
          this.onProduce?.({ topic, value, at });
          return deliver;
        },
      },
    });
  }

  /** Actor messages sent and not yet handled on the running nodes (a crashed node's stay forever). */
  inFlight(): number {
    let n = 0;
    for (const node of this.cluster.nodes) if (node.state === 'running') n += node.actors?.inFlight ?? 0;
    return n;
  }

  /**
   * Waits (wall time) until the running nodes have at most `maxInFlight` actor messages pending
   * and nothing was produced on the bus for `quietMs` (ingestion polls keep a few messages in
   * flight at any time, so "none at all" would never come).
   */
  async quiet(maxMs: number, quietMs = 300, maxInFlight = 50): Promise<void> {
    await waitFor('a quiet cluster', () => this.inFlight() <= maxInFlight && performance.now() - this.lastProducedAt >= quietMs, maxMs, 10);
  }
}

/** Wall-clock sleep on the process's own timers. */
export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Polls `done` every `stepMs` of wall time until it holds; throws after `maxMs`. */
export async function waitFor(what: string, done: () => boolean | Promise<boolean>, maxMs: number, stepMs = 5): Promise<void> {
  const deadline = performance.now() + maxMs;
  for (;;) {
    if (await done()) return;
    if (performance.now() > deadline) throw new Error(`timed out after ${maxMs} ms waiting for ${what}`);
    await sleep(stepMs);
  }
}
