/**
 * Ingestion throughput on the real Kafka: one node owning all 16 shards of a dataset reads a
 * 16-partition topic through shardherd (KafkaIngestionSource → IngestionActor → sink, a Cassandra
 * checkpoint each second), against a bare kafkajs consumer reading the same partitions in the
 * same run. Both start from the beginning of a topic that already holds RECORDS records. Two
 * clocks stop at the last record delivered: one starts when the consumer has joined its group with
 * the 16 partitions (kafkajs's GROUP_JOIN for the bare consumer, the source's
 * `ingest.consumer-joined` for shardherd), so node start-up (membership, singleton, assignment) is
 * not counted but the first fetch is; the other (streaming) starts at the first delivery. Runs
 * alternate bare / shardherd, medians over SAMPLES each.
 */
import { Kafka, logLevel } from 'kafkajs';
import { pino } from 'pino';
import type { DatasetConfig } from '../src/core/dataset-config.js';
import type { ShardNum } from '../src/core/ids.js';
import type { RecordSink, SourceRecord } from '../src/ingest/ingestion-source.js';
import { kafkaSourceSettings } from '../src/ingest/kafka-source/settings.js';
import { parseNodeConfig } from '../src/node/node-config.js';
import { startNode } from '../src/node/run-node.js';
import { quantile, register, type Table } from './harness.js';
import { withRealServices, type BenchServices } from './real-services.js';

const PARTITIONS = 16;
const RECORDS = 1_000_000;
const SAMPLES = 5;
/** The smaller deployments, one sample each per shard count (records/s only). */
const SHARD_COUNTS = [1, 4, 16] as const;
const SMALL_RECORDS = 200_000;

/** Records a second, from the consumer's join and from its first delivery, to the last delivery. */
interface Rates {
  readonly fromJoin: number;
  readonly streaming: number;
}

/** From the consumer's join, and from its first delivery, to the delivery of the last of `total` records. */
class Stopwatch {
  count = 0;
  joined: number | undefined;
  /** The first delivery: when, and how many records it brought. */
  first: { at: number; count: number } | undefined;
  last = 0;
  private done!: () => void;
  readonly finished = new Promise<void>((r) => (this.done = r));

  constructor(private readonly total: number) {}

  join(): void {
    this.joined ??= performance.now();
  }

  add(n: number): void {
    this.count += n;
    this.last = performance.now();
    this.first ??= { at: this.last, count: n };
    if (this.count >= this.total) this.done();
  }

  /**
   * From the join: what a deployment sees, start-up of the fetch included (about a second for
   * either reader on this machine, so it weighs on short runs). Streaming: from the first delivery
   * on, the pipeline's own speed.
   */
  rates(): Rates {
    if (this.joined === undefined || this.first === undefined) throw new Error('the consumer never reported its join');
    return { fromJoin: (this.count * 1000) / (this.last - this.joined), streaming: ((this.count - this.first.count) * 1000) / (this.last - this.first.at) };
  }
}

/** `p`, or a failure after `ms`; the timer never outlives the race (it would keep the process up). */
async function timeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([p, new Promise<T>((_, fail) => (timer = setTimeout(() => fail(new Error(`${what} did not finish within ${ms} ms`)), ms)))]);
  } finally {
    clearTimeout(timer);
  }
}

async function fillTopic(kafka: Kafka, topic: string, partitions = PARTITIONS, records = RECORDS): Promise<void> {
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ topics: [{ topic, numPartitions: partitions, replicationFactor: 1 }], waitForLeaders: true });
  await admin.disconnect();
  const producer = kafka.producer({ allowAutoTopicCreation: false });
  await producer.connect();
  for (let n = 0; n < records; n += 2_000) {
    const messages = Array.from({ length: Math.min(2_000, records - n) }, (_, i) => ({ partition: (n + i) % partitions, key: `k${n + i}`, value: JSON.stringify({ n: n + i, at: 1_700_000_000_000 + n + i }) }));
    await producer.send({ topic, acks: -1, messages });
  }
  await producer.disconnect();
}

async function bare(kafka: Kafka, topic: string, sample: number): Promise<Rates> {
  // The same fetch sizes as shardherd's source: the comparison is of what each does with a fetch.
  const fetch = kafkaSourceSettings({ brokers: [], clientId: 'bench', log: pino({ enabled: false }), groupPrefix: 'bench' });
  const consumer = kafka.consumer({
    groupId: `${topic}.bare.${sample}`,
    allowAutoTopicCreation: false,
    maxWaitTimeInMs: fetch.maxWaitTimeMs,
    maxBytes: fetch.maxBytes,
    maxBytesPerPartition: fetch.maxBytesPerPartition,
    minBytes: fetch.minBytes,
  });
  const watch = new Stopwatch(RECORDS);
  consumer.on(consumer.events.GROUP_JOIN, () => watch.join());
  await consumer.connect();
  await consumer.subscribe({ topics: [topic], fromBeginning: true });
  await consumer.run({
    autoCommit: false,
    eachBatch: async ({ batch }) => {
      // The same work a sink does at minimum: decode every value.
      for (const m of batch.messages) JSON.parse(m.value!.toString());
      watch.add(batch.messages.length);
    },
  });
  await timeout(watch.finished, 120_000, 'the bare consumer');
  await consumer.disconnect();
  return watch.rates();
}

async function throughShardherd(s: BenchServices, topic: string, sample: number, partitions = PARTITIONS, records = RECORDS): Promise<Rates> {
  const watch = new Stopwatch(records);
  const sink: RecordSink = {
    accept: (_d: DatasetConfig, _s: ShardNum, records: readonly SourceRecord[]) => {
      // The same work as the bare consumer's: every value is looked at.
      for (const r of records) if (r.value === undefined) throw new Error(`record ${r.offset} has no value`);
      watch.add(records.length);
      return Promise.resolve();
    },
  };
  const config = parseNodeConfig({
    node: 'bench-node',
    cluster: `tp_${Date.now().toString(36)}_${sample}`,
    kafka: { brokers: s.kafkaBrokers, sessionTimeoutMs: 6_000 },
    cassandra: { contactPoints: s.cassandraContactPoints, localDataCenter: s.cassandraLocalDataCenter, keyspace: 'shardherd_bench' },
    datasets: [{ ref: 'metrics', numShards: partitions, minNumNodes: 1, source: { type: 'kafka', topic } }],
  });
  // The source logs `ingest.consumer-joined` when its consumer holds the partitions: the start.
  const log = pino({ level: 'info' }, { write: (line: string) => (line.includes('"ingest.consumer-joined"') ? watch.join() : undefined) });
  const node = await startNode(config, { sink, log });
  try {
    await timeout(watch.finished, 180_000, 'the shardherd node');
  } finally {
    await node.stop();
  }
  return watch.rates();
}

register({
  name: 'deploy-throughput',
  run: async (): Promise<Table> =>
    withRealServices(async (s) => {
      const kafka = new Kafka({ clientId: 'bench-throughput', brokers: s.kafkaBrokers, logLevel: logLevel.ERROR });
      const topic = `tp_${Date.now().toString(36)}.metrics`;
      await fillTopic(kafka, topic);
      const bareRates: Rates[] = [];
      const ourRates: Rates[] = [];
      for (let i = 0; i < SAMPLES; i++) {
        bareRates.push(await bare(kafka, topic, i));
        ourRates.push(await throughShardherd(s, topic, i));
      }
      const k = (x: number) => `${(x / 1000).toFixed(1)} k/s`;
      /** A row of medians and extremes of one reader, one measure; the ratio is of medians to the bare consumer's. */
      const row = (reader: string, rates: Rates[], of: keyof Rates) => {
        const xs = rates.map((r) => r[of]);
        const median = quantile(xs, 0.5);
        return [reader, k(median), k(Math.min(...xs)), k(Math.max(...xs)), SAMPLES, (median / quantile(bareRates.map((r) => r[of]), 0.5)).toFixed(2)];
      };
      const small: (string | number)[][] = [];
      for (const n of SHARD_COUNTS) {
        const t = `tp_${Date.now().toString(36)}_${n}.metrics`;
        await fillTopic(kafka, t, n, SMALL_RECORDS);
        const r = await throughShardherd(s, t, 100 + n, n, SMALL_RECORDS);
        small.push([`shardherd node owning ${n} shard${n === 1 ? '' : 's'} (${SMALL_RECORDS.toLocaleString('en')} records, one sample, from join)`, k(r.fromJoin), '', '', 1, '']);
      }
      return {
        title: `Ingestion throughput, one node reading ${PARTITIONS} partitions (${RECORDS.toLocaleString('en')} records of ~40 bytes)`,
        columns: ['reader', 'median', 'min', 'max', 'samples', 'ratio to bare kafkajs'],
        rows: [
          row('bare kafkajs consumer (eachBatch, JSON.parse of every value), streaming', bareRates, 'streaming'),
          row('shardherd node (source → actor → sink, checkpoint each second), streaming', ourRates, 'streaming'),
          row('bare kafkajs consumer, from join', bareRates, 'fromJoin'),
          row('shardherd node, from join', ourRates, 'fromJoin'),
          ...small,
        ],
        notes: [
          'Streaming: from the first record delivered to the last (the pipeline\'s speed). From join: from the consumer\'s group join to the last record, so the first fetch\'s start-up (about a second for either reader here) is counted. Runs alternate, fresh groups and a fresh cluster each time.',
          'Both fetch with the source\'s default sizes (1 MiB per partition, 8 MiB per fetch, 100 ms wait); shardherd\'s source keeps what it fetched in bounded buffers (30 000 records or 8 MiB per shard) and its actors read 2 000 records per sink call.',
        ],
      };
    }),
});
