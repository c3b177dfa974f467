/**
 * Failover of real `shardherd node` processes on real Kafka and Cassandra (three nodes, one 16-shard
 * dataset on a 16-partition topic), at two session timeouts, on each Kafka client library
 * (`kafka.client`: the bus, membership and ingestion of every node):
 * - start: three nodes started one after another → every shard Active (joins and rebalances);
 * - singleton: SIGKILL of the singleton's process → a surviving node hosts an active singleton
 *   under a newer epoch (recovered, its snapshots published), and → every shard Active again;
 * - owner: SIGKILL of a node that owns shards (not the singleton) → every shard Active on exactly
 *   one live node.
 * After each sample the killed node is restarted (a new incarnation) and the cluster converges
 * before the next one. Times are wall ms from the kill, observed by polling `/status` every 25 ms.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Kafka, logLevel } from 'kafkajs';
import { KAFKA_CLIENT_LIBRARIES, type KafkaClientLibrary } from '../src/cluster/kafka-options.js';
import { converged, ProcessCluster, waitConverged } from '../test/support/process-cluster.js';
import { ms, quantile, register, type Table } from './harness.js';
import { waitFor } from './runtime-support.js';
import { withRealServices, type BenchServices } from './real-services.js';

const SHARDS = 16;
const DATASET = 'metrics';
const NODES = ['node-1', 'node-2', 'node-3'];
const CASES = [
  { sessionTimeoutMs: 3_000, samples: 5 },
  { sessionTimeoutMs: 6_000, samples: 3 },
] as const;

interface CaseResult {
  readonly sessionTimeoutMs: number;
  readonly started: number[];
  readonly singletonActive: number[];
  readonly singletonAllActive: number[];
  readonly ownerAllActive: number[];
}

async function runCase(s: BenchServices, client: KafkaClientLibrary, sessionTimeoutMs: number, samples: number): Promise<CaseResult> {
  const dir = await mkdtemp(join(tmpdir(), 'shardherd-bench-'));
  const name = `bench_${Date.now().toString(36)}_${client}_${sessionTimeoutMs}`;
  const topic = `${name}.metrics`;
  const admin = new Kafka({ clientId: 'bench', brokers: s.kafkaBrokers, logLevel: logLevel.ERROR }).admin();
  await admin.connect();
  await admin.createTopics({ topics: [{ topic, numPartitions: SHARDS, replicationFactor: 1 }], waitForLeaders: true });
  await admin.disconnect();
  const cluster = new ProcessCluster({
    dir,
    cluster: name,
    ...s, // the real Kafka and Cassandra
    keyspace: 'shardherd_bench',
    kafkaClient: client,
    sessionTimeoutMs,
    runtime: { publishIntervalMs: 1_000, reportResendMs: 500, recoveryReplyTimeoutMs: 2_000, pollIntervalMs: 50 },
    datasets: [{ ref: DATASET, numShards: SHARDS, minNumNodes: 2, source: { type: 'kafka', topic } }],
  });
  const result: CaseResult = { sessionTimeoutMs, started: [], singletonActive: [], singletonAllActive: [], ownerAllActive: [] };
  try {
    const startedAt = Date.now();
    for (const n of NODES) await cluster.start(n);
    await waitFor('every shard Active after the start', async () => (await converged(cluster, DATASET, SHARDS)).ok, 120_000, 25);
    result.started.push(Date.now() - startedAt);
    for (let i = 0; i < samples; i++) {
      // Singleton failover.
      let c = await waitConverged(cluster, DATASET, SHARDS, 120_000);
      const victim = c.singleton!.name;
      const epoch = c.singleton!.status.singleton!.epoch;
      const t0 = Date.now();
      await cluster.kill(victim);
      await waitFor(
        'a new singleton',
        async () => {
          for (const p of cluster.live()) {
            const st = await cluster.status(p.name, 500);
            if (st?.singleton && st.singleton.epoch > epoch) return true;
          }
          return false;
        },
        120_000,
        25,
      );
      result.singletonActive.push(Date.now() - t0);
      await waitFor('convergence after the singleton died', async () => (await converged(cluster, DATASET, SHARDS)).ok, 120_000, 25);
      result.singletonAllActive.push(Date.now() - t0);
      await cluster.start(victim);

      // Owner failover.
      c = await waitConverged(cluster, DATASET, SHARDS, 120_000);
      const owner = [...c.statuses.values()].find((st) => st.node !== c.singleton!.name && st.running.length > 0);
      if (!owner) throw new Error('no owner other than the singleton');
      const t1 = Date.now();
      await cluster.kill(owner.node);
      await waitFor('convergence after an owner died', async () => (await converged(cluster, DATASET, SHARDS)).ok, 120_000, 25);
      result.ownerAllActive.push(Date.now() - t1);
      await cluster.start(owner.node);
    }
  } finally {
    await cluster.stopAll();
    await rm(dir, { recursive: true, force: true });
  }
  return result;
}

register({
  name: 'deploy-failover',
  run: async (): Promise<Table> =>
    withRealServices(async (s) => {
      const rows: (string | number)[][] = [];
      for (const client of KAFKA_CLIENT_LIBRARIES) {
        for (const { sessionTimeoutMs, samples } of CASES) {
          const r = await runCase(s, client, sessionTimeoutMs, samples);
          const row = (what: string, xs: number[]) => [
            client,
            what,
            ms(sessionTimeoutMs),
            ms(quantile(xs, 0.5)),
            ms(quantile(xs, 0.9)),
            ms(Math.min(...xs)),
            xs.length,
            (quantile(xs, 0.5) / sessionTimeoutMs).toFixed(2),
          ];
          rows.push(row('3 nodes started one after another → every shard Active', r.started));
          rows.push(row('SIGKILL singleton → new singleton active (new epoch)', r.singletonActive));
          rows.push(row('SIGKILL singleton → every shard Active', r.singletonAllActive));
          rows.push(row('SIGKILL owner → every shard Active elsewhere', r.ownerAllActive));
        }
      }
      return {
        title: `Failover of real node processes: ${NODES.length} nodes, 1 dataset × ${SHARDS} shards, Kafka + Cassandra on this machine`,
        columns: ['kafka.client', 'measure', 'session timeout', 'median', 'p90', 'min', 'samples', 'median / timeout'],
        rows,
        notes: [
          'Wall time from the SIGKILL (from the first start for the start row); failure detection is the Kafka session timeout, so the ratio to it is the figure that carries over.',
          "Observed by polling each live node's /status every 25 ms (adds up to ~25 ms plus one HTTP round trip).",
        ],
      };
    }),
});
