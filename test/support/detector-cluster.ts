// An embedded cluster of four nodes with the failure detector, on a simulated clock, a dataset of
// eight RF-1 shards set up and ingesting: the start the embedded detector tests share.
import { pino } from 'pino';
import { SimulatedClock } from '../../src/cluster/clock.js';
import type { RuntimeOptions } from '../../src/actors/settings.js';
import type { FailureDetectorOptions } from '../../src/cluster/failure-detector/settings.js';
import type { NodeId } from '../../src/core/ids.js';
import { ShardMapper } from '../../src/core/shard-mapper.js';
import { EmbeddedCluster, type EmbeddedClusterOptions } from '../../src/embedded/embedded-cluster.js';
import type { RecordSink } from '../../src/ingest/ingestion-source.js';
import type { MetaStore } from '../../src/store/meta-store.js';
import { startWithDataset } from './dataset-setup.js';

/** A Kafka-like session: the detector must beat it by far. */
export const SESSION_MS = 10_000;
export const DATASET = { ref: 'alpha', numShards: 8, minNumNodes: 2, source: { type: 'synthetic', recordsPerSecond: 50 } } as const;

export interface DetectorClusterOptions {
  readonly failureDetector: FailureDetectorOptions;
  readonly sink: (node: NodeId, clock: SimulatedClock) => RecordSink;
  /** Runtime settings beyond the tests' fast defaults. */
  readonly settings?: Omit<RuntimeOptions, 'failureDetector'>;
  /** The detector network's faults and partitions (the pick of helpers is always the first). */
  readonly detector?: Omit<NonNullable<EmbeddedClusterOptions['detector']>, 'pick'>;
  readonly metaStore?: MetaStore;
}

/** Starts the cluster, sets the dataset up and lets it ingest for 2 s; the caller stops the cluster. */
export async function startDetectorCluster(o: DetectorClusterOptions) {
  const clock = new SimulatedClock(0);
  const cluster = new EmbeddedCluster({
    name: `fd-${Math.random().toString(36).slice(2)}`,
    clock,
    metrics: false,
    nodes: ['n1', 'n2', 'n3', 'n4'],
    sessionTimeoutMs: SESSION_MS,
    heartbeatIntervalMs: 1_000,
    sink: (node) => o.sink(node, clock),
    log: pino({ level: process.env.TEST_LOG ?? 'silent' }),
    settings: {
      publishIntervalMs: 1_000,
      recoveryReplyTimeoutMs: 500,
      pollIntervalMs: 50,
      reportResendMs: 500,
      retryInitialMs: 50,
      retryMaxMs: 400,
      ...o.settings,
      failureDetector: o.failureDetector,
    },
    detector: { pick: () => 0, ...o.detector },
    ...(o.metaStore ? { metaStore: o.metaStore } : {}),
  });
  const driver = await startWithDataset(cluster, DATASET, 2_000);
  /** The singleton's stored map of the dataset. */
  const map = async () => ShardMapper.fromSnapshot((await cluster.metaStore.shardMaps()).find((m) => m.dataset === DATASET.ref)!);
  return { cluster, clock, driver, map };
}
