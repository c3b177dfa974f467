// A late write on real processes (docs/ARCHITECTURE.md §12): four `shardherd node` processes on
// the real Kafka and Cassandra, storing records with the fenced Cassandra sink. One shard owner's
// sink reaches Cassandra through a proxy that delays every packet, so its sink calls are long (one
// conditional write per record) and it is SIGSTOPped in the middle of one, past its session. Its
// shards move and their new owner writes them; on SIGCONT (before its sink's request timeout, set to
// 60 s here, which would fail the frozen call instead) the call goes on with the old token, and
// Cassandra refuses it. Then: every produced record is stored (0 lost), no record of an
// older token was stored after a newer token's (0 applied out of order), and the woken node counted
// the refusal (`shardherd_fenced_writes_total`).
import { Client } from 'cassandra-driver';
import { Kafka, logLevel, type Producer } from 'kafkajs';
import { beforeAll, describe, expect, it } from 'vitest';
import { compareTokens } from '../../src/core/fencing-token.js';
import { CassandraRecordSink } from '../../src/ingest/cassandra-record-sink.js';
import { CHAOS_RUNTIME, chaosTeardown, createTopics } from '../support/chaos-run.js';
import { missingRecords, NumberedProducer } from '../support/numbered-producer.js';
import { ProcessCluster, waitConverged } from '../support/process-cluster.js';
import { TcpProxy } from '../support/tcp-proxy.js';
import { valueWithin } from '../support/value-within.js';
import { processClusterBase } from './support.js';

const SHARDS = 8;
const DATASET = 'metrics';
const SESSION_MS = 6_000;
const KEYSPACE = 'shardherd_test';
const VICTIM = 'node-3';
/** The victim's sink waits this long for Cassandra: a frozen call outlives the takeover, however slow the machine. */
const VICTIM_REQUEST_TIMEOUT_MS = 60_000;

describe('a late write on real processes', () => {
  let dir: string;
  let cluster: ProcessCluster;
  let producer: Producer;
  let numbered: NumberedProducer;
  let proxy: TcpProxy;
  let client: Client;
  let reader: CassandraRecordSink;
  const table = `late_${Date.now().toString(36)}`;

  beforeAll(async () => {
    const base = await processClusterBase('late', KEYSPACE);
    const s = base.services;
    dir = base.dir;
    const topic = `${base.name}.metrics`;
    const kafka = new Kafka({ clientId: 'late-write-test', brokers: s.kafkaBrokers, logLevel: logLevel.ERROR });
    await createTopics(kafka, [topic], SHARDS);
    producer = kafka.producer({ allowAutoTopicCreation: false });
    await producer.connect();
    // 30 ms each way: every conditional write of the victim's sink takes more than 60 ms.
    proxy = await TcpProxy.start(s.cassandraContactPoints[0]!, { delayMs: 30 });
    cluster = new ProcessCluster({
      ...base.options,
      sessionTimeoutMs: SESSION_MS,
      heartbeatIntervalMs: 500,
      runtime: { ...CHAOS_RUNTIME, batchSize: 40 },
      // minNumNodes 3: three nodes hold the shards, the fourth has room for the victim's.
      datasets: [{ ref: DATASET, numShards: SHARDS, minNumNodes: 3, source: { type: 'kafka', topic } }],
      sinkOf: (node) => ({
        type: 'cassandra',
        table,
        recordsPerBatch: 1,
        ...(node === VICTIM ? { contactPoints: [proxy.address], requestTimeoutMs: VICTIM_REQUEST_TIMEOUT_MS } : {}),
      }),
    });
    for (const n of ['node-1', 'node-2', 'node-3', 'node-4']) await cluster.start(n);
    client = new Client({ contactPoints: s.cassandraContactPoints, localDataCenter: s.cassandraLocalDataCenter });
    await client.connect();
    reader = await CassandraRecordSink.create({ client, keyspace: KEYSPACE, table });
    numbered = new NumberedProducer(producer, topic, SHARDS);
    numbered.start();
  }, 180_000);

  chaosTeardown('late-write', () => ({
    numbered,
    producer,
    cluster,
    dir,
    stopServices: async () => {
      await client?.shutdown();
      await proxy?.close();
    },
  }));

  it("the frozen owner's late write is refused by token: 0 lost, 0 applied out of order", async () => {
    const before = await waitConverged(cluster, DATASET, SHARDS, 90_000);
    const victimShards = before.statuses.get(VICTIM)?.running.map((r) => r.shard) ?? [];
    expect(victimShards.length).toBeGreaterThan(0);
    // The victim has written its shard before it is slowed: its token is the one a successor's
    // must beat. (Read once, 3 s after convergence, a shard the producer had not reached yet had
    // no record, and so no token.)
    await valueWithin(async () => (await reader.read(DATASET, victimShards[0]!)).token, 30_000).catch(() => {
      throw new Error(`the victim wrote no record of its shard ${victimShards[0]} within 30 s of convergence`);
    });
    // Let the victim's calls queue up behind the slow path, then freeze it in the middle of one. A
    // call is one write per record, so it is long only with a backlog: its link held for 2 s, the
    // records of those seconds wait for it, and it is frozen a little into the batch that takes
    // them (on a busy machine the producer can be slower than its sink, which then waits between
    // calls: frozen there, it woke to find itself no longer a member and wrote nothing late).
    await new Promise((r) => setTimeout(r, 1_000));
    proxy.hold();
    await new Promise((r) => setTimeout(r, 2_000));
    proxy.release();
    await new Promise((r) => setTimeout(r, 300));
    const frozenWith = (await reader.read(DATASET, victimShards[0]!)).token!;
    cluster.signal(VICTIM, 'SIGSTOP');
    // Past its session: the group drops it, its shards go to node-4, which writes them with a newer
    // token. Woken before its sink's request timeout, so that its call goes on, not fails.
    const frozenAt = Date.now();
    await new Promise((r) => setTimeout(r, SESSION_MS));
    for (;;) {
      const now = (await reader.read(DATASET, victimShards[0]!)).token!;
      if (compareTokens(now, frozenWith) > 0) break;
      if (Date.now() - frozenAt > VICTIM_REQUEST_TIMEOUT_MS - 10_000)
        throw new Error(
          `the victim's shard ${victimShards[0]} was not written by a newer owner within ${(VICTIM_REQUEST_TIMEOUT_MS - 10_000) / 1000} s of the SIGSTOP`,
        );
      await new Promise((r) => setTimeout(r, 100));
    }
    cluster.signal(VICTIM, 'SIGCONT');
    await waitConverged(cluster, DATASET, SHARDS, 90_000);
    await new Promise((r) => setTimeout(r, 3_000));
    await numbered.stop();

    // 0 lost.
    const stored = async () => (await Promise.all(Array.from({ length: SHARDS }, (_, shard) => reader.read(DATASET, shard)))).flatMap((s) => s.records);
    const missing = await missingRecords(numbered.acked, stored, 60_000);
    expect(numbered.acked.size).toBeGreaterThan(500);
    expect(missing.slice(0, 20), `${missing.length} of ${numbered.acked.size} records never stored`).toEqual([]);

    // 0 applied out of order: in each shard, in offset order, the token that stored a record never goes back.
    for (const shard of victimShards) {
      const { records, token } = await reader.read(DATASET, shard);
      for (let i = 1; i < records.length; i++) {
        const [a, b] = [records[i - 1]!.writtenWith!, records[i]!.writtenWith!];
        expect(
          compareTokens(b, a),
          `shard ${shard}: offset ${records[i]!.offset} stored with ${b.epoch}/${b.version} after ${a.epoch}/${a.version}`,
        ).toBeGreaterThanOrEqual(0);
      }
      expect(compareTokens(token!, records.at(-1)!.writtenWith!)).toBeGreaterThanOrEqual(0);
    }

    // The late write happened and was refused: the woken node counted it.
    const metrics = await (await fetch(`${cluster.get(VICTIM).url}/metrics`)).text();
    const refused = [...metrics.matchAll(/^shardherd_fenced_writes_total\{dataset="metrics",kind="sink",cause="stale-token"\} (\d+)/gm)].reduce(
      (n, m) => n + Number(m[1]),
      0,
    );
    expect(
      refused,
      metrics
        .split('\n')
        .filter((l) => l.includes('fenced'))
        .join('\n'),
    ).toBeGreaterThan(0);
  }, 300_000);
});
