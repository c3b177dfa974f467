// The demo's cluster: an EmbeddedCluster with snappy settings, its datasets, a CountingSink, and a
// switch that turns one record of one shard into a poison record.
import type { Logger } from 'pino';
import type { Clock } from '../../cluster/clock.js';
import { validateDatasetConfig, type DatasetConfig } from '../../core/dataset-config.js';
import type { ShardNum } from '../../core/ids.js';
import type { RuntimeOptions } from '../../actors/settings.js';
import { EmbeddedCluster } from '../../embedded/embedded-cluster.js';
import { CountingSink } from '../../ingest/counting-sink.js';

export const DATASET_NAMES = ['metrics', 'logs', 'traces', 'events'] as const;

export interface DemoShape {
  readonly nodes: number;
  readonly datasets: number;
  readonly shards: number;
}

/** Timings short enough to watch: failures are noticed in 3 s, maps republished every 2 s. */
export const DEMO_TIMINGS = {
  sessionTimeoutMs: 3_000,
  heartbeatIntervalMs: 500,
  /** Records per second per shard. */
  recordsPerSecond: 200,
  settings: {
    publishIntervalMs: 2_000,
    recoveryReplyTimeoutMs: 1_000,
    pollIntervalMs: 200,
    // Long enough that the poisoned shard is still held when the story ends.
    reassignmentCooldownMs: 60_000,
  } satisfies RuntimeOptions,
} as const;

/** One poison record: reading it throws, on whichever node reads it. */
export interface PoisonTarget {
  readonly dataset: string;
  readonly shard: number;
  readonly offset: number;
}

/**
 * The SyntheticSource's `failAt` is asked about every record on every read, so flipping this
 * switch poisons a record from then on, everywhere.
 */
export class PoisonSwitch {
  private target: PoisonTarget | undefined;

  arm(target: PoisonTarget): void {
    this.target = target;
  }

  get armed(): PoisonTarget | undefined {
    return this.target;
  }

  readonly failAt = (dataset: string, shard: number, offset: number): string | undefined => {
    const t = this.target;
    return t && t.dataset === dataset && t.shard === shard && t.offset === offset ? `poison record at offset ${offset}` : undefined;
  };
}

export interface DemoCluster {
  readonly cluster: EmbeddedCluster;
  readonly sink: CountingSink;
  readonly poison: PoisonSwitch;
  readonly datasets: readonly DatasetConfig[];
  readonly shape: DemoShape;
}

/** Node names `node-1` … `node-N`, in join order: node-1 is the oldest, so it hosts the first singleton. */
export const nodeNames = (n: number): string[] => Array.from({ length: n }, (_, i) => `node-${i + 1}`);

/**
 * The datasets. `minNumNodes` is one less than the nodes, so every node but one takes an equal
 * block (the oldest, asked last, stays spare) and the survivors of a failure have room for its shards.
 */
export function demoDatasets(shape: DemoShape, recordsPerSecond: number = DEMO_TIMINGS.recordsPerSecond): DatasetConfig[] {
  return DATASET_NAMES.slice(0, shape.datasets).map((ref) => {
    const r = validateDatasetConfig({
      ref,
      numShards: shape.shards,
      minNumNodes: Math.max(1, shape.nodes - 1),
      source: { type: 'synthetic', recordsPerSecond },
    });
    if (!r.ok) throw new Error(`demo dataset ${ref}: ${r.error.message}`);
    return r.value;
  });
}

export interface DemoClusterOptions {
  readonly clock: Clock;
  readonly log: Logger;
  /** Overrides for tests; the demo uses DEMO_TIMINGS. */
  readonly settings?: RuntimeOptions;
  readonly recordsPerSecond?: number;
}

export function createDemoCluster(shape: DemoShape, options: DemoClusterOptions): DemoCluster {
  const sink = new CountingSink();
  const poison = new PoisonSwitch();
  const cluster = new EmbeddedCluster({
    name: 'demo',
    nodes: nodeNames(shape.nodes),
    clock: options.clock,
    log: options.log,
    sessionTimeoutMs: DEMO_TIMINGS.sessionTimeoutMs,
    heartbeatIntervalMs: DEMO_TIMINGS.heartbeatIntervalMs,
    settings: { ...DEMO_TIMINGS.settings, ...options.settings },
    source: { failAt: poison.failAt },
    sink,
  });
  return { cluster, sink, poison, datasets: demoDatasets(shape, options.recordsPerSecond), shape };
}

/** The source's end offset of a shard now: every record below it exists. */
export async function endOffset(demo: DemoCluster, config: DatasetConfig, shard: number): Promise<number> {
  const reader = await demo.cluster.source.open(config, shard as ShardNum);
  try {
    return await reader.endOffset();
  } finally {
    await reader.close();
  }
}
