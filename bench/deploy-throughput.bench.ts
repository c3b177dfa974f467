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
      const bareRates: Rates[] = [];
      const ourRates: Rates[] = [];
      const barePlatformaticRates: Rates[] = [];
      const ourPlatformaticRates: Rates[] = [];
      for (let i = 0; i < SAMPLES; i++) {
        bareRates.push(await runReader(job({ kind: 'bare' }, i)));
        ourRates.push(await runReader(job({ kind: 'shardherd', client: 'kafkajs' }, i)));
        barePlatformaticRates.push(await runReader(job({ kind: 'bare-platformatic' }, i)));
        ourPlatformaticRates.push(await runReader(job({ kind: 'shardherd', client: 'platformatic' }, i)));
      }
      const k = (x: number) => `${(x / 1000).toFixed(1)} k/s`;
      /** A row of medians and extremes of one reader, one measure; the ratio is of medians to the bare consumer's. */
      const medianOf = (rates: Rates[], of: keyof Rates) =>
        quantile(
          rates.map((r) => r[of]),
          0.5,
        );
      /** Also the ratio to the bare consumer of the same client (with the same decoder), when there is one. */
      const row = (reader: string, rates: Rates[], of: 'streaming' | 'fromJoin', sameClient?: Rates[]) => {
        const xs = rates.map((r) => r[of]);
        const median = quantile(xs, 0.5);
        return [
          reader,
          k(median),
          k(Math.min(...xs)),
          k(Math.max(...xs)),
          SAMPLES,
          (median / medianOf(bareRates, of)).toFixed(2),
          sameClient === undefined ? '' : (median / medianOf(sameClient, of)).toFixed(2),
          of === 'streaming' ? `${medianOf(rates, 'cpuMicrosPerRecord').toFixed(2)} µs` : '',
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
        ],
        rows: [
          row('bare kafkajs consumer (eachBatch, JSON.parse of every value), streaming', bareRates, 'streaming'),
          row('shardherd node on kafkajs (source → actor → sink, checkpoint each second), streaming', ourRates, 'streaming', bareRates),
          row('bare @platformatic/kafka consumer (a stream of messages, JSON.parse of every value), streaming', barePlatformaticRates, 'streaming'),
          row('shardherd node on @platformatic/kafka, streaming', ourPlatformaticRates, 'streaming', barePlatformaticRates),
          row('bare kafkajs consumer, from join', bareRates, 'fromJoin'),
          row('shardherd node on kafkajs, from join', ourRates, 'fromJoin', bareRates),
          row('bare @platformatic/kafka consumer, from join', barePlatformaticRates, 'fromJoin'),
          row('shardherd node on @platformatic/kafka, from join (from its first fetch)', ourPlatformaticRates, 'fromJoin', barePlatformaticRates),
          ...small,
        ],
        notes: [
          "Streaming: from the first record delivered to the last (the pipeline's speed). From join: from the consumer's group join to the last record, so the first fetch's start-up (about a second for either reader here) is counted. Runs alternate, each reader in a fresh process, with fresh groups and a fresh cluster each time.",
          "Each client decodes the fetched record batches with its own decoder, bare or in the node: the last column, the node's rate over its own client's bare consumer, is what shardherd's pipeline costs.",
          "Both fetch with the source's default sizes (1 MiB per partition, 8 MiB per fetch, 100 ms wait); shardherd's source keeps what it fetched in bounded buffers (30 000 records or 8 MiB per shard) and its actors read 2 000 records per sink call.",
        ],
      };
    }),
});
