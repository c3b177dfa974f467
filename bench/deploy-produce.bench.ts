/**
 * The gateway's side on the real Kafka: the ShardedProducer on each client library, writing to a
 * 16-partition topic with `acks: -1` and idempotence, as it always does. Two loads: batches of
 * BATCH records (a gateway that gathers its writes), and one record per `send` with CONCURRENT sends
 * in flight (a gateway that writes as requests come). Runs alternate kafkajs / platformatic in one
 * process, each on a fresh producer and topic; records/s and this process's CPU per record
 * (the broker's CPU is not counted), medians over SAMPLES each.
 */
import { Kafka, logLevel } from 'kafkajs';
import { pino } from 'pino';
import { ShardedProducer, type ShardedRecord } from '../src/client/sharded-producer.js';
import { createTopicsWithLeaders } from '../src/cluster/kafka-client.js';
import { KAFKA_CLIENT_LIBRARIES, type KafkaClientLibrary } from '../src/cluster/kafka-options.js';
import { validateDatasetConfig, type DatasetConfig } from '../src/core/dataset-config.js';
import { quantile, register, type Table } from './harness.js';
import { withRealServices } from './real-services.js';

const PARTITIONS = 16;
const BATCHED_RECORDS = 200_000;
const BATCH = 1_000;
const SINGLE_RECORDS = 5_000;
const CONCURRENT = 16;
const SAMPLES = 5;

interface Run {
  readonly perSecond: number;
  /** This process's CPU (user + system) per record, µs. */
  readonly cpuMicros: number;
}

function record(n: number): ShardedRecord {
  return {
    shardKey: { _ws_: 'bench', _ns_: `ns${n % 7}`, _metric_: `m${n % 101}` },
    partitionKey: { host: `h${n % 997}` },
    value: { n, at: 1_700_000_000_000 + n },
  };
}

/** Times `write` over `records` records: wall clock and this process's CPU. */
async function timed(records: number, write: () => Promise<void>): Promise<Run> {
  const cpu = process.cpuUsage();
  const started = performance.now();
  await write();
  const wallMs = performance.now() - started;
  const used = process.cpuUsage(cpu);
  return { perSecond: (records * 1000) / wallMs, cpuMicros: (used.user + used.system) / records };
}

async function batched(producer: ShardedProducer, dataset: DatasetConfig): Promise<Run> {
  return timed(BATCHED_RECORDS, async () => {
    for (let n = 0; n < BATCHED_RECORDS; n += BATCH)
      await producer.send(
        dataset,
        Array.from({ length: BATCH }, (_, i) => record(n + i)),
      );
  });
}

async function oneByOne(producer: ShardedProducer, dataset: DatasetConfig): Promise<Run> {
  let next = 0;
  const worker = async (): Promise<void> => {
    for (let n = next++; n < SINGLE_RECORDS; n = next++) await producer.send(dataset, [record(n)]);
  };
  return timed(SINGLE_RECORDS, () => Promise.all(Array.from({ length: CONCURRENT }, worker)).then(() => undefined));
}

register({
  name: 'deploy-produce',
  run: async (): Promise<Table> =>
    withRealServices(async (s) => {
      const admin = new Kafka({ clientId: 'bench-produce', brokers: s.kafkaBrokers, logLevel: logLevel.NOTHING }).admin();
      await admin.connect();
      const runs = new Map<string, Run[]>();
      const add = (key: string, run: Run) => runs.set(key, [...(runs.get(key) ?? []), run]);
      const onFreshTopic = async (kafkaClient: KafkaClientLibrary, sample: number, load: 'batched' | 'single') => {
        const topic = `produce_${Date.now().toString(36)}_${kafkaClient}_${load}_${sample}`;
        await createTopicsWithLeaders(admin, [{ topic, numPartitions: PARTITIONS }]);
        const validated = validateDatasetConfig({ ref: 'produce', numShards: PARTITIONS, spread: 2, minNumNodes: 1, source: { type: 'kafka', topic } });
        if (!validated.ok) throw new Error(validated.error.message);
        const producer = new ShardedProducer({ brokers: s.kafkaBrokers, clientId: 'bench-produce', log: pino({ enabled: false }), kafkaClient });
        try {
          // The first send connects and checks the topic: not counted.
          await producer.send(validated.value, [record(-1)]);
          add(`${kafkaClient} ${load}`, await (load === 'batched' ? batched : oneByOne)(producer, validated.value));
        } finally {
          await producer.close();
        }
      };
      try {
        for (let i = 0; i < SAMPLES; i++) {
          for (const load of ['batched', 'single'] as const) for (const client of KAFKA_CLIENT_LIBRARIES) await onFreshTopic(client, i, load);
        }
      } finally {
        await admin.disconnect();
      }
      const median = (key: string, of: keyof Run) =>
        quantile(
          (runs.get(key) ?? []).map((r) => r[of]),
          0.5,
        );
      const row = (load: 'batched' | 'single', client: KafkaClientLibrary, what: string) => [
        `ShardedProducer on ${client === 'kafkajs' ? 'kafkajs' : '@platformatic/kafka'}, ${what}`,
        `${(median(`${client} ${load}`, 'perSecond') / 1000).toFixed(1)} k/s`,
        (median(`${client} ${load}`, 'perSecond') / median(`kafkajs ${load}`, 'perSecond')).toFixed(2),
        `${median(`${client} ${load}`, 'cpuMicros').toFixed(1)} µs`,
        SAMPLES,
      ];
      const batchedWhat = `sends of ${BATCH.toLocaleString('en')} records (${BATCHED_RECORDS.toLocaleString('en')} records)`;
      const singleWhat = `one record per send, ${CONCURRENT} sends in flight (${SINGLE_RECORDS.toLocaleString('en')} records)`;
      return {
        title: `Produce through the ShardedProducer, ${PARTITIONS} partitions, acks -1, idempotent`,
        columns: ['producer and load', 'median records/s', 'ratio to kafkajs, same load', 'CPU per record (this process)', 'samples'],
        rows: [
          row('batched', 'kafkajs', batchedWhat),
          row('batched', 'platformatic', batchedWhat),
          row('single', 'kafkajs', singleWhat),
          row('single', 'platformatic', singleWhat),
        ],
        notes: [
          'Each sample on a fresh producer and topic; the first send (connection and topic check) is not counted. Runs alternate the two libraries in one process.',
          'kafkajs keeps one produce request in flight per broker (its idempotence needs it); @platformatic/kafka pipelines requests on its connection.',
        ],
      };
    }),
});
