/**
 * Ingestion throughput on the real Kafka: one node owning all 16 shards of a dataset reads a
 * 16-partition topic through shardherd (KafkaIngestionSource → IngestionActor → sink, a Cassandra
 * checkpoint each second) on each client library, against a bare consumer of each library reading
 * the same partitions in the same run. Both start from the beginning of a topic that already holds RECORDS records. Two
 * clocks stop at the last record delivered: one starts when the consumer has joined its group with
 * the 16 partitions (kafkajs's GROUP_JOIN for the bare consumer, the source's
 * `ingest.consumer-joined` for shardherd), so node start-up (membership, singleton, assignment) is
 * not counted but the first fetch is; the other (streaming) starts at the first delivery. Runs
 * alternate bare kafkajs / shardherd on kafkajs / bare platformatic / shardherd on platformatic, each in a process of its own (throughput-reader.ts), medians over SAMPLES each.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import { Kafka, logLevel } from 'kafkajs';
import { quantile, register, type Table } from './harness.js';
import { withRealServices } from './real-services.js';
import type { Rates, ReaderJob } from './throughput-reader.js';

const PARTITIONS = 16;
const RECORDS = 1_000_000;
const SAMPLES = 5;
/** The smaller deployments, one sample each per shard count (records/s only). */
const SHARD_COUNTS = [1, 4, 16] as const;
const SMALL_RECORDS = 200_000;
const READER = join(import.meta.dirname, 'throughput-reader.ts');

async function fillTopic(kafka: Kafka, topic: string, partitions = PARTITIONS, records = RECORDS): Promise<void> {
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ topics: [{ topic, numPartitions: partitions, replicationFactor: 1 }], waitForLeaders: true });
  await admin.disconnect();
  const producer = kafka.producer({ allowAutoTopicCreation: false });
  await producer.connect();
  for (let n = 0; n < records; n += 2_000) {
    const messages = Array.from({ length: Math.min(2_000, records - n) }, (_, i) => ({
      partition: (n + i) % partitions,
      key: `k${n + i}`,
      value: JSON.stringify({ n: n + i, at: 1_700_000_000_000 + n + i }),
    }));
    await producer.send({ topic, acks: -1, messages });
  }
  await producer.disconnect();
}

/** Runs one reader in a process of its own (see throughput-reader.ts) and returns its rates. */
async function runReader(job: ReaderJob): Promise<Rates> {
  const child = spawn(process.execPath, ['--import', 'tsx', READER, JSON.stringify(job)], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
  const [code] = (await once(child, 'exit')) as [number | null];
  const last = out.trim().split('\n').pop() ?? '';
  if (code !== 0) throw new Error(`the ${job.reader.kind} reader exited with ${code}: ${last}`);
  return JSON.parse(last) as Rates;
}

register({
  name: 'deploy-throughput',
  run: async (): Promise<Table> =>
    withRealServices(async (s) => {
      const kafka = new Kafka({ clientId: 'bench-throughput', brokers: s.kafkaBrokers, logLevel: logLevel.ERROR });
      const topic = `tp_${Date.now().toString(36)}.metrics`;
      await fillTopic(kafka, topic);
      const job = (reader: ReaderJob['reader'], sample: number, t = topic, partitions = PARTITIONS, records = RECORDS): ReaderJob => ({
        reader,
        services: s,
        topic: t,
        partitions,
        records,
        sample,
      });
      /** The readers, alternating within each sample; a node reader names its bare consumer (same client and decoder). */
      const readers: { name: string; reader: ReaderJob['reader']; bare?: string }[] = [
        { name: 'bare kafkajs consumer (eachBatch, JSON.parse of every value)', reader: { kind: 'bare' } },
        { name: 'shardherd node on kafkajs, fetch thread', reader: { kind: 'shardherd', client: 'kafkajs', fetchThread: 'worker' }, bare: 'kafkajs' },
        { name: 'shardherd node on kafkajs, main thread', reader: { kind: 'shardherd', client: 'kafkajs', fetchThread: 'main' }, bare: 'kafkajs' },
        { name: 'bare @platformatic/kafka consumer (a stream of messages, JSON.parse of every value)', reader: { kind: 'bare-platformatic' } },
        {
          name: 'shardherd node on @platformatic/kafka, fetch thread',
          reader: { kind: 'shardherd', client: 'platformatic', fetchThread: 'worker' },
          bare: 'platformatic',
        },
        {
          name: 'shardherd node on @platformatic/kafka, main thread',
          reader: { kind: 'shardherd', client: 'platformatic', fetchThread: 'main' },
          bare: 'platformatic',
        },
      ];
      const rates = readers.map(() => [] as Rates[]);
      for (let i = 0; i < SAMPLES; i++) for (const [r, { reader }] of readers.entries()) rates[r]!.push(await runReader(job(reader, i)));
      const bareOf = (client: string) => rates[readers.findIndex((r) => r.reader.kind === (client === 'kafkajs' ? 'bare' : 'bare-platformatic'))]!;
      const k = (x: number) => `${(x / 1000).toFixed(1)} k/s`;
      const medianOf = (of: Rates[], m: keyof Rates) =>
        quantile(
          of.map((r) => r[m]),
          0.5,
        );
      /**
       * The median of a reader's rate over a bare consumer's, sample by sample: each sample's runs
       * follow each other within seconds, so a machine that speeds up or slows down over the run
       * (this one does, by a fifth) moves both sides of a ratio alike.
       */
      const ratioTo = (r: number, bare: Rates[], of: 'streaming' | 'fromJoin') =>
        quantile(
          rates[r]!.map((x, i) => x[of] / bare[i]![of]),
          0.5,
        ).toFixed(2);
      /** A row of medians and extremes of one reader, one measure, and its ratios to the bare consumers. */
      const row = (r: number, of: 'streaming' | 'fromJoin') => {
        const xs = rates[r]!.map((x) => x[of]);
        const median = quantile(xs, 0.5);
        const sameClient = readers[r]!.bare;
        return [
          `${readers[r]!.name}, ${of === 'streaming' ? 'streaming' : 'from join'}`,
          k(median),
          k(Math.min(...xs)),
          k(Math.max(...xs)),
          SAMPLES,
          ratioTo(r, bareOf('kafkajs'), of),
          sameClient === undefined ? '' : ratioTo(r, bareOf(sameClient), of),
          of === 'streaming' ? `${medianOf(rates[r]!, 'cpuMicrosPerRecord').toFixed(2)} µs` : '',
          of === 'streaming' ? `${medianOf(rates[r]!, 'loopDelayP99Ms').toFixed(0)} / ${medianOf(rates[r]!, 'loopDelayMaxMs').toFixed(0)} ms` : '',
        ];
      };
      const small: (string | number)[][] = [];
      for (const n of SHARD_COUNTS) {
        const t = `tp_${Date.now().toString(36)}_${n}.metrics`;
        await fillTopic(kafka, t, n, SMALL_RECORDS);
        const r = await runReader(job({ kind: 'shardherd' }, 100 + n, t, n, SMALL_RECORDS));
        small.push([
          `shardherd node owning ${n} shard${n === 1 ? '' : 's'}, default client (${SMALL_RECORDS.toLocaleString('en')} records, one sample, from join)`,
          k(r.fromJoin),
          '',
          '',
          1,
          '',
          '',
          '',
          '',
        ]);
      }
      return {
        title: `Ingestion throughput, one node reading ${PARTITIONS} partitions (${RECORDS.toLocaleString('en')} records of ~40 bytes)`,
        columns: [
          'reader',
          'median',
          'min',
          'max',
          'samples',
          'ratio to bare kafkajs',
          'ratio to bare, same client and decoder',
          "CPU per record (the reader's process, streaming)",
          'event-loop delay p99 / max (main thread, streaming)',
        ],
        rows: [...readers.map((_, r) => row(r, 'streaming')), ...readers.map((_, r) => row(r, 'fromJoin')), ...small],
        notes: [
          "Streaming: from the first record delivered to the last (the pipeline's speed). From join: from the consumer's group join to the last record, so the first fetch's start-up (about a second for either reader here) is counted. Runs alternate, each reader in a fresh process, with fresh groups and a fresh cluster each time.",
          'Ratios: the median over the samples of the ratio within each sample (the runs of one sample follow each other), not a ratio of medians.',
          "Each client decodes the fetched record batches with its own decoder, bare or in the node: the last column, the node's rate over its own client's bare consumer, is what shardherd's pipeline costs.",
          "Both fetch with the source's default sizes (1 MiB per partition, 8 MiB per fetch, 100 ms wait); shardherd's source keeps what it fetched in bounded buffers (30 000 records or 8 MiB per shard) and its actors read 2 000 records per sink call.",
        ],
      };
    }),
});
