/**
 * `npm run bench -- slow-store`: does a slow MetaStore slow a node's ingestion or its status? Four
 * `shardherd node` processes on real Kafka and Cassandra share an 8-shard dataset (two shards each)
 * fed at a steady rate; one node reaches Cassandra through a proxy that adds
 * SHARDHERD_SLOW_STORE_MS (default 1250) to every round trip (half each way). Over a window of
 * SHARDHERD_SLOW_STORE_WINDOW_S (default 30) seconds: each node's ingestion rate (from its
 * `shardherd_ingested_records_total`) and the latency of its `/status`, polled every 100 ms.
 * docs/ARCHITECTURE.md §12.4: the slow node should ingest within 10 % of the others and answer
 * `/status` with a p99 under 50 ms.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Kafka, logLevel } from 'kafkajs';
import { CHAOS_RUNTIME, createTopics } from '../test/support/chaos-run.js';
import { NumberedProducer } from '../test/support/numbered-producer.js';
import { ProcessCluster, waitConverged } from '../test/support/process-cluster.js';
import { TcpProxy } from '../test/support/tcp-proxy.js';
import { quantile, register, type Table } from './harness.js';
import { withRealServices } from './real-services.js';
import { sleep } from './runtime-support.js';

const SHARDS = 8;
const NODES = ['node-1', 'node-2', 'node-3', 'node-4'];
const SLOW = 'node-2';
const SLOW_MS = Number(process.env.SHARDHERD_SLOW_STORE_MS ?? 1_250);
const WINDOW_S = Number(process.env.SHARDHERD_SLOW_STORE_WINDOW_S ?? 30);

async function ingestedBy(cluster: ProcessCluster, name: string): Promise<number> {
  const text = await (await fetch(`${cluster.get(name).url}/metrics`)).text();
  return [...text.matchAll(/^shardherd_ingested_records_total\{[^}]*\} (\d+(?:\.\d+)?)/gm)].reduce((n, m) => n + Number(m[1]), 0);
}

async function run(): Promise<Table> {
  return withRealServices(async (s) => {
    const dir = await mkdtemp(join(tmpdir(), 'shardherd-slow-store-'));
    const name = `slowstore_${Date.now().toString(36)}`;
    const topic = `${name}.metrics`;
    const kafka = new Kafka({ clientId: 'slow-store-bench', brokers: s.kafkaBrokers, logLevel: logLevel.ERROR });
    await createTopics(kafka, [topic], SHARDS);
    const producer = kafka.producer({ allowAutoTopicCreation: false });
    await producer.connect();
    const proxy = await TcpProxy.start(s.cassandraContactPoints[0]!, { delayMs: SLOW_MS / 2 });
    const cluster = new ProcessCluster({
      dir,
      cluster: name,
      kafkaBrokers: s.kafkaBrokers,
      cassandraContactPoints: s.cassandraContactPoints,
      cassandraLocalDataCenter: s.cassandraLocalDataCenter,
      keyspace: 'shardherd_bench',
      sessionTimeoutMs: 6_000,
      heartbeatIntervalMs: 500,
      runtime: { ...CHAOS_RUNTIME },
      datasets: [{ ref: 'metrics', numShards: SHARDS, minNumNodes: NODES.length, source: { type: 'kafka', topic } }],
      cassandraOf: (node) => (node === SLOW ? [proxy.address] : undefined),
      sinkOf: () => ({ type: 'log' }),
    });
    const numbered = new NumberedProducer(producer, topic, SHARDS);
    try {
      for (const n of NODES) await cluster.start(n, 180_000);
      await waitConverged(cluster, 'metrics', SHARDS, 180_000);
      numbered.start();
      await sleep(5_000);
      const status: Record<string, number[]> = Object.fromEntries(NODES.map((n) => [n, []]));
      const start = await Promise.all(NODES.map((n) => ingestedBy(cluster, n)));
      const t0 = performance.now();
      let polling = true;
      const pollers = NODES.map(async (n) => {
        while (polling) {
          const a = performance.now();
          await fetch(`${cluster.get(n).url}/status`).then((r) => r.text());
          status[n]!.push(performance.now() - a);
          await sleep(100);
        }
      });
      await sleep(WINDOW_S * 1_000);
      polling = false;
      await Promise.all(pollers);
      const end = await Promise.all(NODES.map((n) => ingestedBy(cluster, n)));
      const seconds = (performance.now() - t0) / 1_000;
      const rates = NODES.map((_, i) => (end[i]! - start[i]!) / seconds);
      const others = rates.filter((_, i) => NODES[i] !== SLOW);
      const othersMean = others.reduce((a, b) => a + b, 0) / others.length;
      return {
        title: `Slow MetaStore on ${SLOW} (+${SLOW_MS} ms per Cassandra round trip), ${WINDOW_S} s window`,
        columns: ['node', 'MetaStore', 'records/s ingested', 'vs the others', '/status p50 ms', '/status p99 ms', '/status max ms'],
        rows: NODES.map((n, i) => [
          n,
          n === SLOW ? `+${SLOW_MS} ms` : 'direct',
          rates[i]!.toFixed(1),
          n === SLOW ? `${((rates[i]! / othersMean - 1) * 100).toFixed(1)} %` : '',
          quantile(status[n]!, 0.5).toFixed(1),
          quantile(status[n]!, 0.99).toFixed(1),
          Math.max(...status[n]!).toFixed(1),
        ]),
        notes: [`Two shards per node; the producer writes ${SHARDS} records per send, one per partition, as fast as the broker acknowledges (pausing 25 ms).`],
      };
    } finally {
      await numbered.stop().catch(() => undefined);
      await producer.disconnect().catch(() => undefined);
      await cluster.stopAll();
      await proxy.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
}

register({ name: 'slow-store', onDemand: true, run });
