// Reads that never fail while a copy lives, on real processes: three `shardherd node` processes in
// three racks serve a `balanced` dataset at replication factor 2 (the `serve` section of their
// configs), a router process (`connectKafkaClient`, the public entry) sends requests at a steady
// rate over random keys, and the node serving the most shards is SIGKILLed under load. Every
// request must succeed within its deadline: the dead node's shards are served by their other copy.
// And a client pointed at a wrong prefix or an unreachable broker fails typed, in time.
import { Kafka, logLevel } from 'kafkajs';
import { beforeAll, describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { connectKafkaClient } from '../../src/client/kafka-client.js';
import { ShardedProducer } from '../../src/client/sharded-producer.js';
import { partitionKeyHash, shardKeyHash } from '../../src/core/hashing.js';
import { datasetRef } from '../../src/core/ids.js';
import { ingestionShard } from '../../src/core/spread.js';
import { ShardherdClientError } from '../../src/client/client-errors.js';
import { chaosCluster, chaosTeardown, createTopics, CHAOS_SESSION_TIMEOUT_MS } from '../support/chaos-run.js';
import { ECHO_HANDLER, everyCopyActive, type ProcessCluster } from '../support/process-cluster.js';
import { figures, sentBetween, startRouter, type Outcome, type RouterRun } from '../support/router-run.js';
import { processClusterBase, services } from './support.js';
import { freePort as closedPort } from '../support/free-port.js';

const SHARDS = 8;
const RF = 2;
const DATASET = 'reads';
const RATE = 250;
const DEADLINE_MS = 2_000;
const NODES = ['node-1', 'node-2', 'node-3'];

describe('read availability: a router process and three serving node processes, SIGKILL under load', () => {
  let dir: string;
  let name: string;
  let cluster: ProcessCluster;
  let router: RouterRun | undefined;

  beforeAll(async () => {
    const base = await processClusterBase('reads');
    const s = base.services;
    ({ dir, name } = base);
    const topic = `${name}.reads`;
    await createTopics(new Kafka({ clientId: 'reads-test', brokers: s.kafkaBrokers, logLevel: logLevel.ERROR }), [topic], SHARDS);
    cluster = chaosCluster({
      ...base.options,
      datasets: [{ ref: DATASET, numShards: SHARDS, minNumNodes: 3, strategy: 'balanced', replicationFactor: RF, source: { type: 'kafka', topic } }],
      serve: [{ dataset: DATASET, handler: ECHO_HANDLER }],
    });
    await Promise.all(NODES.map((n) => cluster.start(n)));
    await waitUntil(() => everyCopyActive(cluster, DATASET, SHARDS * RF), 60_000, `not every one of the ${SHARDS * RF} copies became Active`);
  }, 120_000);

  chaosTeardown('read-availability', () => ({
    cluster,
    dir,
    stopServices: async () => router?.kill(),
  }));

  it('0 failed requests and none past the deadline at RF 2; the killed node’s shards served by their other copy', async () => {
    const s = services();
    router = await startRouter({ brokers: s.kafkaBrokers, topicPrefix: name, dataset: DATASET, rate: RATE, deadlineMs: DEADLINE_MS, attemptTimeoutMs: 500 });
    await sleep(5_000);
    // The node serving the most shards, as the map says.
    const view = await cluster.datasetView(NODES[0]!, DATASET);
    const count = new Map<string, number>();
    for (const shard of view!.shards) for (const o of shard.owners) count.set(o.node, (count.get(o.node) ?? 0) + 1);
    const [victim] = [...count].sort((a, b) => b[1] - a[1])[0]!;
    const victimShards = new Set(view!.shards.filter((sh) => sh.owners.some((o) => o.node === victim)).map((sh) => sh.shard));
    await cluster.kill(victim);
    // Once its exit is seen: a request sent while the SIGKILL was on its way may still have been
    // answered by the victim, and is not one its other copies had to serve.
    const killedAt = Date.now();
    // Past the session timeout: the killed node's copies are kept for it (the dataset's replacement
    // delay, 60 s), so its shards are served by their other copy throughout, nothing re-created.
    await sleep(CHAOS_SESSION_TIMEOUT_MS + 10_000);
    const outcomes = await router.stop();
    router = undefined;

    const before = figures(sentBetween(outcomes, 0, killedAt), DEADLINE_MS);
    const failover = figures(sentBetween(outcomes, killedAt, killedAt + CHAOS_SESSION_TIMEOUT_MS + 2_000), DEADLINE_MS);
    const after = figures(sentBetween(outcomes, killedAt + CHAOS_SESSION_TIMEOUT_MS + 2_000, Number.POSITIVE_INFINITY), DEADLINE_MS);
    const all = figures(outcomes, DEADLINE_MS);
    const row = (label: string, f: typeof all) =>
      `${label.padEnd(10)} ${String(f.requests).padStart(6)} requests, ${f.failed} failed, ${f.pastDeadline} past ${DEADLINE_MS} ms, p50 ${f.p50?.toFixed(1)} ms, p99 ${f.p99?.toFixed(1)} ms, max ${f.max?.toFixed(1)} ms`;
    process.stdout.write(
      `[read-availability] SIGKILL of ${victim} (${victimShards.size} of ${SHARDS} shards) at RF ${RF}, ${RATE} requests/s\n${[row('before', before), row('failover', failover), row('after', after), row('all', all)].map((l) => `  ${l}`).join('\n')}\n`,
    );

    const failures = outcomes.filter((o): o is Extract<Outcome, { ok: false }> => !o.ok);
    expect(
      failures.slice(0, 5).map((f) => `${f.code}: ${f.message}`),
      `${failures.length} of ${outcomes.length} requests failed`,
    ).toEqual([]);
    expect(all.pastDeadline).toBe(0);
    // A steady load: at least 80 % of the rate over the run (on 2 shared cores).
    expect(all.requests).toBeGreaterThan(RATE * 15 * 0.8);
    // The victim served before it died, and its shards were served by their other copies right after.
    expect(sentBetween(outcomes, 0, killedAt).some((o) => o.ok && o.node === victim)).toBe(true);
    const servedByOthers = sentBetween(outcomes, killedAt, killedAt + CHAOS_SESSION_TIMEOUT_MS).filter((o) => o.ok && victimShards.has(o.shard));
    expect(servedByOthers.length).toBeGreaterThan(0);
    expect(servedByOthers.every((o) => o.ok && o.node !== victim)).toBe(true);
    expect(sentBetween(outcomes, killedAt, Number.POSITIVE_INFINITY).some((o) => o.ok && o.node === victim)).toBe(false);
  }, 90_000);

  it('a gateway built on a client writes by dataset name, to the partitions the cluster’s config chooses', async () => {
    const client = await connectKafkaClient({ brokers: services().kafkaBrokers, topicPrefix: name, connectTimeoutMs: 20_000 });
    const producer = new ShardedProducer({ brokers: services().kafkaBrokers, clientId: 'reads-gateway', log: pino({ level: 'silent' }), client });
    try {
      const records = Array.from({ length: 20 }, (_, i) => ({
        shardKey: { _ws_: 'gw', _ns_: `ns-${i % 4}` },
        partitionKey: { series: `s-${i}` },
        value: { i },
      }));
      const sent = await producer.send(datasetRef(DATASET), records);
      // Where the cluster's dataset (8 shards, the default spread 1) puts each record, computed here.
      expect(sent.map((r) => r.partition)).toEqual(records.map((r) => ingestionShard(SHARDS, shardKeyHash(r.shardKey), partitionKeyHash(r.partitionKey), 1)));
      expect(new Set(sent.map((r) => r.partition)).size).toBeGreaterThan(1);
      const unknown = await producer.send(datasetRef('no_such_dataset'), records).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect((unknown as ShardherdClientError).code).toBe('UNKNOWN_DATASET');
    } finally {
      await producer.close();
      await client.close();
    }
  });

  it('a client pointed at a wrong prefix fails with CONNECT_FAILED within its connect timeout', async () => {
    const t0 = Date.now();
    const e = await connectKafkaClient({ brokers: services().kafkaBrokers, topicPrefix: `${name}_wrong`, connectTimeoutMs: 3_000 }).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(e).toBeInstanceOf(ShardherdClientError);
    expect((e as ShardherdClientError).code).toBe('CONNECT_FAILED');
    expect(Date.now() - t0).toBeLessThan(3_000 + 2_000);
    // Nothing changed in the cluster: the client created none of the wrong prefix's topics.
    const admin = new Kafka({ clientId: 'reads-test', brokers: services().kafkaBrokers, logLevel: logLevel.NOTHING }).admin();
    await admin.connect();
    try {
      expect((await admin.listTopics()).filter((t) => t.startsWith(`${name}_wrong`))).toEqual([]);
    } finally {
      await admin.disconnect();
    }
  });

  it('a client pointed at an unreachable broker fails with CONNECT_FAILED, never hangs', async () => {
    const port = await closedPort();
    const t0 = Date.now();
    const e = await connectKafkaClient({ brokers: [`127.0.0.1:${port}`], topicPrefix: name, connectTimeoutMs: 3_000 }).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(e).toBeInstanceOf(ShardherdClientError);
    expect((e as ShardherdClientError).code).toBe('CONNECT_FAILED');
    expect(Date.now() - t0).toBeLessThan(3_000 + 2_000);
  });
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function waitUntil(probe: () => Promise<boolean>, timeoutMs: number, message: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error(message);
    await sleep(250);
  }
}
