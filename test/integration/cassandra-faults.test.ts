// Faults of Cassandra itself, on real node processes: three `shardherd node` processes on a
// Cassandra of their own (a second instance, so the other tests' database is never touched) and the
// shared Kafka, a dataset fed by a producer of numbered records. Cassandra is killed (SIGKILL) and
// started again on its ports and data: once while a dataset is being set up, once while the
// singleton fails over. After each: the cluster converges, no node process exits (MetaStore calls
// are retried with backoff and logged), and in the end every acknowledged record was ingested at
// least once. Convergence times are printed (`[cassandra-faults]`) for docs/BENCHMARKS.md.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Kafka, logLevel, type Producer } from 'kafkajs';
import { beforeAll, describe, expect, it } from 'vitest';
import { CHAOS_SESSION_TIMEOUT_MS, chaosCluster, chaosTeardown, createTopics } from '../support/chaos-run.js';
import { restartService, startServices, stopInstance } from '../../scripts/services/services.js';
import { missingRecords, NumberedProducer } from '../support/numbered-producer.js';
import { waitConverged, type Convergence, type ProcessCluster } from '../support/process-cluster.js';
import { processClusterBase, services } from './support.js';

const SHARDS = 4;
const SESSION_TIMEOUT_MS = CHAOS_SESSION_TIMEOUT_MS;
const NODES = ['node-1', 'node-2', 'node-3'];

const report = (line: string) => process.stderr.write(`[cassandra-faults] ${line}\n`);

describe('Cassandra faults: real node processes while their database is killed and restarted', () => {
  const instance = `cassandra-faults-${process.pid}`;
  let cassandraPid: number;
  let dir: string;
  let cluster: ProcessCluster;
  let producer: Producer;
  let numbered: NumberedProducer;
  let topics: { first: string; second: string };

  const converge = async (dataset: string, what: string, since: number): Promise<Convergence> => {
    const c = await waitConverged(cluster, dataset, SHARDS, 180_000).catch((e: unknown) => {
      throw new Error(`after ${what}: ${e instanceof Error ? e.message : String(e)}`);
    });
    report(`${what}: ${dataset} converged ${((Date.now() - since) / 1000).toFixed(1)} s after Cassandra was back`);
    return c;
  };

  const killCassandra = () => process.kill(cassandraPid, 'SIGKILL');
  const restartCassandra = async () => {
    const started = Date.now();
    cassandraPid = (await restartService(instance, 'cassandra', { owned: true })).pid!;
    report(`Cassandra restarted in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  };
  const noProcessExited = () =>
    expect(
      NODES.filter((n) => cluster.get(n).alive === false && !killed.has(n)),
      'node processes that exited',
    ).toEqual([]);
  const killed = new Set<string>();

  beforeAll(async () => {
    const s = services();
    const started = await startServices({ instance, kafka: false, cassandra: true, owned: true, durableSchema: true, log: report });
    cassandraPid = started.cassandra!.pid!;
    const base = await processClusterBase('cassandra-faults', 'shardherd_faults');
    dir = base.dir;
    topics = { first: `${base.name}.first`, second: `${base.name}.second` };
    const kafka = new Kafka({ clientId: 'cassandra-faults-test', brokers: s.kafkaBrokers, logLevel: logLevel.NOTHING });
    await createTopics(kafka, Object.values(topics), SHARDS);
    producer = kafka.producer({ allowAutoTopicCreation: false });
    await producer.connect();
    cluster = chaosCluster({
      ...base.options,
      // This file's own database, which it kills.
      cassandraContactPoints: started.cassandra!.contactPoints,
      cassandraLocalDataCenter: started.cassandra!.localDataCenter,
      datasets: [{ ref: 'first', numShards: SHARDS, minNumNodes: 2, source: { type: 'kafka', topic: topics.first } }],
    });
    for (const n of NODES) await cluster.start(n);
    numbered = new NumberedProducer(producer, topics.first, SHARDS);
    numbered.start();
    await converge('first', 'start', Date.now());
  }, 300_000);

  chaosTeardown('cassandra-faults', () => ({ numbered, producer, cluster, dir, stopServices: () => stopInstance(instance, report) }));

  it('SIGKILL of Cassandra while a dataset is being set up: the setup completes once it is back, and no node exits', async () => {
    killCassandra();
    const node = NODES[1]!;
    const url = `${cluster.get(node).url}/api/v1/datasets`;
    // The singleton cannot persist the dataset now: the request waits, and the client may time out.
    const asked = fetch(url, {
      method: 'POST',
      headers: { authorization: `Bearer ${cluster.token(node)}`, 'content-type': 'application/json' },
      body: JSON.stringify({ ref: 'second', numShards: SHARDS, minNumNodes: 2, source: { type: 'kafka', topic: topics.second } }),
    }).then(
      (r) => r.status,
      () => 0,
    );
    await new Promise((r) => setTimeout(r, 3_000));
    await restartCassandra();
    const back = Date.now();
    report(`the setup request answered ${await asked} (503: the singleton was still retrying the write when the client gave up)`);
    await converge('second', 'SIGKILL during a dataset setup', back);
    await converge('first', 'SIGKILL during a dataset setup', back);
    noProcessExited();
  }, 300_000);

  it('SIGKILL of Cassandra, then of the singleton: the next singleton takes the lease and recovers once Cassandra is back', async () => {
    const before = await waitConverged(cluster, 'first', SHARDS, 60_000);
    const singleton = before.singleton!.name;
    killCassandra();
    await cluster.kill(singleton);
    killed.add(singleton);
    await new Promise((r) => setTimeout(r, 2 * SESSION_TIMEOUT_MS));
    await restartCassandra();
    const back = Date.now();
    const after = await converge('first', 'SIGKILL during a failover', back);
    expect(after.singleton!.name).not.toBe(singleton);
    expect(after.singleton!.status.singleton!.epoch).toBeGreaterThan(before.singleton!.status.singleton!.epoch);
    await converge('second', 'SIGKILL during a failover', back);
    noProcessExited();
    // The survivors said what failed: shard owners that checkpoints failed (once per outage, not
    // per batch), the new singleton that it retried taking over.
    const logs = (await Promise.all(NODES.filter((x) => x !== singleton).map((n) => readFile(join(dir, `${n}.log`), 'utf8')))).join('\n');
    expect(logs).toMatch(/"event":"checkpoint\.failed"[^\n]*METASTORE_UNAVAILABLE/);
    expect(logs).toMatch(/"event":"retry"/);
  }, 300_000);

  it('every acknowledged record was ingested at least once', async () => {
    await numbered.stop();
    expect(numbered.acked.size).toBeGreaterThan(200);
    const missing = await missingRecords(numbered.acked, () => cluster.ingested(), 90_000);
    expect(missing.slice(0, 20), `${missing.length} of ${numbered.acked.size} records never reached a sink`).toEqual([]);
    report(`${numbered.acked.size} records acknowledged, all ingested`);
  }, 120_000);
});
