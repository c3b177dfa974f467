// Faults of the Kafka broker itself, on real node processes: three `shardherd node` processes on a
// broker of their own (a second single-node KRaft instance, so the other tests' broker is never
// touched) and the shared Cassandra, an 8-shard dataset fed by a producer of numbered records that
// retries whatever the broker refuses. The broker is frozen past the membership session (SIGSTOP,
// SIGCONT), then killed and started again on its port and data directory. After each: the cluster
// converges (every shard Active on exactly one live node), no node process exits (each retries with
// backoff and logs it), and in the end every acknowledged record was ingested at least once.
// Convergence times are printed (`[broker-faults]`) for docs/BENCHMARKS.md.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Kafka, logLevel, type Producer } from 'kafkajs';
import { beforeAll, describe, expect, it } from 'vitest';
import { CHAOS_SESSION_TIMEOUT_MS, chaosCluster, chaosTeardown, createTopics } from '../support/chaos-run.js';
import { restartService, startServices, stopInstance } from '../../scripts/services/services.js';
import { missingRecords, NumberedProducer } from '../support/numbered-producer.js';
import { waitConverged, type ProcessCluster } from '../support/process-cluster.js';
import { processClusterBase } from './support.js';

const SHARDS = 8;
const SESSION_TIMEOUT_MS = CHAOS_SESSION_TIMEOUT_MS;
const DATASET = 'metrics';
const NODES = ['node-1', 'node-2', 'node-3'];

const report = (line: string) => process.stderr.write(`[broker-faults] ${line}\n`);

describe('broker faults: real node processes while their Kafka broker is frozen or killed', () => {
  const instance = `broker-faults-${process.pid}`;
  let brokerPid: number;
  let dir: string;
  let cluster: ProcessCluster;
  let producer: Producer;
  let numbered: NumberedProducer;

  /** Waits for convergence and says how long it took from `since`. */
  const convergedAfter = async (what: string, since: number): Promise<number> => {
    await waitConverged(cluster, DATASET, SHARDS, 120_000).catch((e: unknown) => {
      throw new Error(`after ${what}: ${e instanceof Error ? e.message : String(e)}`);
    });
    const ms = Date.now() - since;
    report(`${what}: converged ${(ms / 1000).toFixed(1)} s after the broker was back`);
    return ms;
  };

  const noProcessExited = () =>
    expect(
      NODES.filter((n) => !cluster.get(n).alive),
      'node processes that exited',
    ).toEqual([]);

  beforeAll(async () => {
    const started = await startServices({ instance, kafka: true, cassandra: false, owned: true, log: report });
    const brokers = started.kafka!.brokers;
    brokerPid = started.kafka!.pid!;
    const base = await processClusterBase('broker-faults');
    dir = base.dir;
    const topic = `${base.name}.metrics`;
    const kafka = new Kafka({ clientId: 'broker-faults-test', brokers, logLevel: logLevel.NOTHING });
    await createTopics(kafka, [topic], SHARDS);
    producer = kafka.producer({ allowAutoTopicCreation: false, idempotent: true, maxInFlightRequests: 1 });
    await producer.connect();
    cluster = chaosCluster({
      ...base.options,
      kafkaBrokers: brokers, // this file's own broker, which it kills
      datasets: [{ ref: DATASET, numShards: SHARDS, minNumNodes: 2, source: { type: 'kafka', topic } }],
    });
    for (const n of NODES) await cluster.start(n);
    numbered = new NumberedProducer(producer, topic, SHARDS);
    numbered.start();
  }, 240_000);

  chaosTeardown('broker-faults', () => ({ numbered, producer, cluster, dir, stopServices: () => stopInstance(instance, report) }));

  it('converges on the broker of its own', async () => {
    await convergedAfter('start', Date.now());
  }, 180_000);

  it('SIGSTOP of the broker for twice the session timeout, then SIGCONT: the cluster converges and no node exits', async () => {
    process.kill(brokerPid, 'SIGSTOP');
    await new Promise((r) => setTimeout(r, 2 * SESSION_TIMEOUT_MS));
    process.kill(brokerPid, 'SIGCONT');
    await convergedAfter(`SIGSTOP ${(2 * SESSION_TIMEOUT_MS) / 1000} s, SIGCONT`, Date.now());
    noProcessExited();
  }, 180_000);

  it('SIGKILL of the broker, restarted on its port and data directory: the cluster converges, the nodes said they retried', async () => {
    process.kill(brokerPid, 'SIGKILL');
    await new Promise((r) => setTimeout(r, 2 * SESSION_TIMEOUT_MS));
    const down = Date.now();
    const kafka = await restartService(instance, 'kafka', { owned: true });
    brokerPid = kafka.pid!;
    report(`broker restarted in ${((Date.now() - down) / 1000).toFixed(1)} s`);
    await convergedAfter('SIGKILL and restart', Date.now());
    noProcessExited();
    // Each node says what failed and that it goes on (kafkajs's reconnects, the bus's retries).
    for (const n of NODES) {
      const log = await readFile(join(dir, `${n}.log`), 'utf8');
      expect(log, `${n}.log`).toMatch(/"level":(40|50)[^\n]*(retry|reconnect|connection|broker)/i);
    }
  }, 240_000);

  it('every acknowledged record was ingested at least once', async () => {
    await numbered.stop();
    expect(numbered.acked.size).toBeGreaterThan(500);
    const missing = await missingRecords(numbered.acked, () => cluster.ingested(), 90_000);
    expect(missing.slice(0, 20), `${missing.length} of ${numbered.acked.size} records never reached a sink`).toEqual([]);
    report(`${numbered.acked.size} records acknowledged, all ingested; ${numbered.failedSends} producer sends retried while the broker was away`);
  }, 120_000);
});
