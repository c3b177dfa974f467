// A broker of a three-broker Kafka cluster killed under real node processes: three KRaft nodes of a
// cluster of their own (each broker and controller), the bus topics, the members topic and the
// dataset's topic at replication factor 3 with min.insync.replicas 2, three `shardherd node`
// processes on the shared Cassandra, and an 8-shard dataset fed by a producer of numbered records
// that retries whatever the brokers refuse. The broker that leads the bus inbox (and some shards'
// partitions) is SIGKILLed, left down for twice the membership session, and started again on its
// ports and data directory. After it: the cluster converges (every shard Active on exactly one live
// node), no node process exits, the nodes logged their retries, and every acknowledged record was
// ingested at least once. Convergence times are printed (`[kafka-cluster-faults]`) for
// docs/BENCHMARKS.md. Run by `npm run chaos`, not by `npm test`.
import { mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigResourceTypes, Kafka, logLevel, type Admin, type Producer } from 'kafkajs';
import { beforeAll, describe, expect, it } from 'vitest';
import { topicsFor } from '../../src/protocol/wire.js';
import { CHAOS_SESSION_TIMEOUT_MS, chaosCluster, chaosTeardown, createTopics } from '../support/chaos-run.js';
import { restartService, startServices, stopInstance, type KafkaNode } from '../../scripts/services/services.js';
import { missingRecords, NumberedProducer } from '../support/numbered-producer.js';
import { waitConverged, type ProcessCluster } from '../support/process-cluster.js';
import { services, uniqueName } from '../integration/support.js';

const SHARDS = 8;
const SESSION_TIMEOUT_MS = CHAOS_SESSION_TIMEOUT_MS;
const DATASET = 'metrics';
const NODES = ['node-1', 'node-2', 'node-3'];
const BROKERS = 3;
const REPLICATION_FACTOR = 3;

const report = (line: string) => process.stderr.write(`[kafka-cluster-faults] ${line}\n`);

describe('Kafka cluster faults: real node processes while the broker leading their inbox is killed', () => {
  const instance = `kafka-cluster-faults-${process.pid}`;
  let brokers: KafkaNode[];
  let dir: string;
  let cluster: ProcessCluster;
  let kafka: Kafka;
  let producer: Producer;
  let numbered: NumberedProducer;
  let name: string;
  let topic: string;

  /** The admin client for one call. */
  const withAdmin = async <T>(f: (admin: Admin) => Promise<T>): Promise<T> => {
    const admin = kafka.admin();
    await admin.connect();
    try {
      return await f(admin);
    } finally {
      await admin.disconnect();
    }
  };

  /** Every topic of the nodes (the bus's and the members topic) and the dataset's. */
  const allTopics = () => [...Object.values(topicsFor(name)), `${name}.members`, topic];

  /** Waits for convergence and says how long it took from `since`, when `sinceWhat` happened. */
  const convergedAfter = async (what: string, since: number, sinceWhat: string, extra = ''): Promise<number> => {
    await waitConverged(cluster, DATASET, SHARDS, 120_000).catch((e: unknown) => {
      throw new Error(`after ${what}: ${e instanceof Error ? e.message : String(e)}`);
    });
    const ms = Date.now() - since;
    report(`${what}: converged ${(ms / 1000).toFixed(1)} s after ${sinceWhat}${extra}`);
    return ms;
  };

  /** Waits until `more` records more were acknowledged: the producer runs on either side of the fault. */
  const acknowledged = async (more: number) => {
    const target = numbered.acked.size + more;
    await expect.poll(() => numbered.acked.size, { timeout: 60_000, interval: 200 }).toBeGreaterThanOrEqual(target);
  };

  const noProcessExited = () =>
    expect(
      NODES.filter((n) => !cluster.get(n).alive),
      'node processes that exited',
    ).toEqual([]);

  beforeAll(async () => {
    const s = services();
    const started = await startServices({ instance, kafka: true, kafkaNodes: BROKERS, cassandra: false, owned: true, log: report });
    brokers = [...started.kafka!.nodes!];
    report(`${BROKERS} brokers ready in ${(started.startMs / 1000).toFixed(1)} s`);
    dir = await mkdtemp(join(tmpdir(), 'shardherd-kafka-cluster-faults-'));
    name = uniqueName('kafkacluster').replace(/-/g, '_');
    topic = `${name}.metrics`;
    kafka = new Kafka({ clientId: 'kafka-cluster-faults-test', brokers: started.kafka!.brokers, logLevel: logLevel.NOTHING });
    await createTopics(kafka, [topic], SHARDS, REPLICATION_FACTOR);
    producer = kafka.producer({ allowAutoTopicCreation: false, idempotent: true, maxInFlightRequests: 1 });
    await producer.connect();
    cluster = chaosCluster({
      dir,
      cluster: name,
      kafkaBrokers: started.kafka!.brokers,
      topicReplicationFactor: REPLICATION_FACTOR,
      cassandraContactPoints: s.cassandraContactPoints,
      cassandraLocalDataCenter: s.cassandraLocalDataCenter,
      keyspace: 'shardherd_test',
      datasets: [{ ref: DATASET, numShards: SHARDS, minNumNodes: 2, source: { type: 'kafka', topic } }],
    });
    for (const n of NODES) await cluster.start(n);
    numbered = new NumberedProducer(producer, topic, SHARDS);
    numbered.start();
  }, 240_000);

  chaosTeardown('kafka-cluster-faults', () => ({ numbered, producer, cluster, dir, stopServices: () => stopInstance(instance, report) }));

  it('converges on the cluster of its own, with every topic at replication factor 3 and min.insync.replicas 2', async () => {
    await convergedAfter('start', Date.now(), 'the nodes were up');
    const topics = allTopics();
    const metadata = await withAdmin((admin) => admin.fetchTopicMetadata({ topics }));
    for (const t of topics) {
      const partitions = metadata.topics.find((m) => m.name === t)?.partitions ?? [];
      expect(partitions.length, t).toBe(t === topic ? SHARDS : 1);
      for (const p of partitions) expect(p.replicas.length, `${t} partition ${p.partitionId}`).toBe(REPLICATION_FACTOR);
    }
    const configs = await withAdmin((admin) =>
      admin.describeConfigs({
        includeSynonyms: false,
        resources: topics.map((t) => ({ type: ConfigResourceTypes.TOPIC, name: t, configNames: ['min.insync.replicas'] })),
      }),
    );
    for (const r of configs.resources) expect(r.configEntries.find((e) => e.configName === 'min.insync.replicas')?.configValue, r.resourceName).toBe('2');
  }, 180_000);

  it('SIGKILL of the broker leading the inbox and some shards, restarted on its ports and data directory: the cluster converges, no node exits, the nodes said they retried', async () => {
    await acknowledged(200);
    const inbox = topicsFor(name).inbox;
    const { metadata, controller } = await withAdmin(async (admin) => ({
      metadata: await admin.fetchTopicMetadata({ topics: [inbox, topic] }),
      controller: (await admin.describeCluster()).controller,
    }));
    const leaderOf = (t: string) => metadata.topics.find((m) => m.name === t)!.partitions;
    const leader = leaderOf(inbox)[0]!.leader;
    const shardsLed = leaderOf(topic)
      .filter((p) => p.leader === leader)
      .map((p) => p.partitionId)
      .sort((a, b) => a - b);
    expect(shardsLed.length, `shards whose partition broker ${leader} leads`).toBeGreaterThan(0);
    const victim = brokers.find((b) => b.nodeId === leader)!;
    report(
      `killing broker ${leader} (PID ${victim.pid}): it leads the inbox and shards ${shardsLed.join(', ')}; the active controller is ${String(controller)}`,
    );

    const killed = Date.now();
    process.kill(victim.pid, 'SIGKILL');
    await new Promise((r) => setTimeout(r, 2 * SESSION_TIMEOUT_MS));
    const restarting = Date.now();
    const endpoint = await restartService(instance, 'kafka', { owned: true, kafkaNode: leader });
    brokers = [...endpoint.nodes!];
    const back = Date.now();
    report(`broker ${leader} restarted in ${((back - restarting) / 1000).toFixed(1)} s`);
    await convergedAfter(
      `SIGKILL of broker ${leader}, ${(2 * SESSION_TIMEOUT_MS) / 1000} s down, restart`,
      back,
      'the broker was back',
      ` (${((Date.now() - killed) / 1000).toFixed(1)} s after the kill)`,
    );
    noProcessExited();
    await acknowledged(200);
    // Each node says what failed and that it goes on (kafkajs's reconnects, the bus's retries).
    for (const n of NODES) {
      const log = await readFile(join(dir, `${n}.log`), 'utf8');
      expect(log, `${n}.log`).toMatch(/"level":(40|50)[^\n]*(retry|reconnect|connection|broker)/i);
    }
  }, 240_000);

  it('every acknowledged record was ingested at least once', async () => {
    await numbered.stop();
    expect(numbered.acked.size).toBeGreaterThanOrEqual(400);
    const missing = await missingRecords(numbered.acked, () => cluster.ingested(), 90_000);
    expect(missing.slice(0, 20), `${missing.length} of ${numbered.acked.size} records never reached a sink`).toEqual([]);
    report(`${numbered.acked.size} records acknowledged, all ingested; ${numbered.failedSends} producer sends retried while the broker was away`);
  }, 120_000);
});
