// An embedded cluster of four nodes over two racks on a simulated clock, quiet logs and short
// timeouts: the setting of the tests of replicas, planned moves and routing.
import { pino } from 'pino';
import type { RuntimeOptions } from '../../src/actors/settings.js';
import { SimulatedClock } from '../../src/cluster/clock.js';
import type { DatasetConfigInput } from '../../src/core/dataset-config.js';
import { ShardMapper } from '../../src/core/shard-mapper.js';
import { EmbeddedCluster } from '../../src/embedded/embedded-cluster.js';
import { CountingSink } from '../../src/ingest/counting-sink.js';
import type { SimDriver } from '../../src/sim/driver.js';
import { startWithDataset } from './dataset-setup.js';

export interface RackedClusterOptions {
  /** One sink for all nodes (the default: a fresh one), or a sink per node. */
  readonly sink?: CountingSink | 'per-node';
  /** Runtime settings over the short defaults below. */
  readonly settings?: Partial<RuntimeOptions>;
}

export function rackedCluster(prefix: string, sink: CountingSink | 'per-node' = new CountingSink(), settings: Partial<RuntimeOptions> = {}): EmbeddedCluster {
  return new EmbeddedCluster({
    name: `${prefix}-${Math.floor(performance.now() * 1000)}`,
    clock: new SimulatedClock(0),
    nodes: [
      { name: 'n1', rack: 'rackA' },
      { name: 'n2', rack: 'rackB' },
      { name: 'n3', rack: 'rackA' },
      { name: 'n4', rack: 'rackB' },
    ],
    // Each node writing to a sink of its own lets a test count every copy's records apart.
    sink: sink === 'per-node' ? () => new CountingSink() : sink,
    log: pino({ level: 'silent' }),
    sessionTimeoutMs: 1_000,
    heartbeatIntervalMs: 250,
    settings: { publishIntervalMs: 1_000, recoveryReplyTimeoutMs: 500, pollIntervalMs: 250, reportResendMs: 500, ...settings },
  });
}

/** A racked cluster with a sink per node, started on its simulated clock with `dataset` set up and settled. */
export async function startRackedWithDataset(
  prefix: string,
  dataset: DatasetConfigInput,
  settings: Partial<RuntimeOptions> = {},
): Promise<{ cluster: EmbeddedCluster; driver: SimDriver }> {
  const cluster = rackedCluster(prefix, 'per-node', { checkpointIntervalMs: 200, ...settings });
  const driver = await startWithDataset(cluster, dataset, 3_000);
  return { cluster, driver };
}

/** The dataset's map as the MetaStore holds it. */
export async function storedMap(cluster: EmbeddedCluster, dataset: string): Promise<ShardMapper> {
  const snapshot = (await cluster.metaStore.shardMaps()).find((s) => s.dataset === dataset);
  if (!snapshot) throw new Error(`no stored map of ${dataset}`);
  return ShardMapper.fromSnapshot(snapshot);
}
