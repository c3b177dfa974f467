// The ShardedProducer against a real broker: each record lands on the partition ingestionShard
// computes, checked by reading the topic back with a plain kafkajs consumer.
import { Kafka, logLevel, type Admin } from 'kafkajs';
import { pino } from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { ShardedProducer, type ShardedRecord } from '../../src/client/sharded-producer.js';
import { createTopicsWithLeaders } from '../../src/cluster/kafka-client.js';
import { KAFKA_CLIENT_LIBRARIES, type KafkaClientLibrary } from '../../src/cluster/kafka-options.js';
import { validateDatasetConfig, type DatasetConfig } from '../../src/core/dataset-config.js';
import { partitionKeyHash, shardKeyHash } from '../../src/core/hashing.js';
import { ingestionShard, queryShards } from '../../src/core/spread.js';
import { services, uniqueName } from './support.js';

const log = pino({ level: 'silent' });
let client: { kafka: Kafka; admin: Admin } | undefined;
const toClose: { close(): Promise<void> }[] = [];

async function checker(): Promise<{ kafka: Kafka; admin: Admin }> {
  if (client === undefined) {
    const kafka = new Kafka({ clientId: 'shardherd-it-producer-check', brokers: services().kafkaBrokers, logLevel: logLevel.NOTHING });
    const admin = kafka.admin();
    await admin.connect();
    client = { kafka, admin };
  }
  return client;
}

afterAll(async () => {
  for (const c of toClose.reverse()) await c.close();
  await client?.admin.disconnect();
});

async function createTopic(numPartitions: number, topic = uniqueName('sp')): Promise<string> {
  await createTopicsWithLeaders((await checker()).admin, [{ topic, numPartitions }]);
  return topic;
}

function dataset(config: Record<string, unknown>): DatasetConfig {
  const r = validateDatasetConfig({ ref: uniqueName('ds').replace(/[^A-Za-z0-9_-]/g, '_'), minNumNodes: 1, ...config });
  if (!r.ok) throw new Error(r.error.message);
  return r.value;
}

function newProducer(kafkaClient: KafkaClientLibrary): ShardedProducer {
  const producer = new ShardedProducer({ brokers: services().kafkaBrokers, clientId: 'shardherd-it-producer', log, kafkaClient });
  toClose.push(producer);
  return producer;
}

/** Every record of the topic as `partition/offset -> value`, read independently of shardherd. */
async function readTopic(topic: string, expected: number): Promise<Map<string, unknown>> {
  const { kafka } = await checker();
  const consumer = kafka.consumer({ groupId: uniqueName('sp-check'), maxWaitTimeInMs: 100 });
  const seen = new Map<string, unknown>();
  try {
    await consumer.connect();
    await consumer.subscribe({ topics: [topic], fromBeginning: true });
    await consumer.run({
      eachMessage: async ({ partition, message }) => {
        seen.set(`${partition}/${message.offset}`, JSON.parse(message.value?.toString('utf8') ?? 'null'));
      },
    });
    await expect.poll(() => seen.size, { timeout: 30_000, interval: 100 }).toBe(expected);
  } finally {
    await consumer.disconnect();
  }
  return seen;
}

describe.each(KAFKA_CLIENT_LIBRARIES)('ShardedProducer on %s', (kafkaClient) => {
  it('writes each record to the partition ingestionShard computes, and says at which offset', async () => {
    const topic = await createTopic(16);
    const ds = dataset({ numShards: 16, spread: 2, source: { type: 'kafka', topic } });
    const records: ShardedRecord[] = Array.from({ length: 200 }, (_, i) => ({
      shardKey: { _ws_: 'demo', _ns_: `ns${i % 5}`, _metric_: `m${i % 13}` },
      partitionKey: { host: `h${i}`, region: i % 2 === 0 ? 'eu' : 'us' },
      value: { i, text: `record ${i}` },
      ...(i % 10 === 0 ? { spread: 0 } : {}),
    }));
    const producer = newProducer(kafkaClient);
    const sent = await producer.send(ds, records);

    const expectedShards = records.map((r) => ingestionShard(16, shardKeyHash(r.shardKey), partitionKeyHash(r.partitionKey), r.spread ?? 2));
    expect(sent.map((s) => s.shard)).toEqual(expectedShards);
    expect(sent.every((s) => s.partition === s.shard)).toBe(true);
    // The records spread over many partitions (not one, not Kafka's choice).
    expect(new Set(expectedShards).size).toBeGreaterThan(8);

    // Read back independently: each record is at exactly the partition and offset reported.
    const onKafka = await readTopic(topic, records.length);
    for (const [i, s] of sent.entries()) expect(onKafka.get(`${s.partition}/${s.offset}`)).toEqual(records[i]!.value);
  });

  it('sends records with the same shard key and partition key to the same shard, and a shard key within its queryShards', async () => {
    const topic = await createTopic(8);
    const ds = dataset({ numShards: 8, spread: 1, source: { type: 'kafka', topic } });
    const producer = newProducer(kafkaClient);
    const shardKey = { _ws_: 'demo', _ns_: 'app', _metric_: 'cpu' };
    const series = (host: string) => ({ shardKey, partitionKey: { host, le: '0.5' }, value: host });
    const sent = await producer.send(ds, [series('a'), series('b'), series('a'), series('c'), { ...series('a'), partitionKey: { host: 'a', le: '+Inf' } }]);
    expect(sent[2]!.shard).toBe(sent[0]!.shard);
    // `le` is not part of a series' identity: every bucket of a histogram lands on one shard.
    expect(sent[4]!.shard).toBe(sent[0]!.shard);
    // Offsets follow on within a shard.
    expect(sent[2]!.offset).toBe(sent[0]!.offset + (sent[1]!.shard === sent[0]!.shard ? 2 : 1));
    const routers = queryShards(8, shardKeyHash(shardKey), 1);
    for (const s of sent) expect(routers).toContain(s.shard);
  });

  it('refuses a dataset whose source is not Kafka, a topic with the wrong partition count and a missing one, writing nothing', async () => {
    const producer = newProducer(kafkaClient);
    const record = { shardKey: { _metric_: 'cpu' }, partitionKey: { host: 'a' }, value: 1 };

    const synthetic = dataset({ numShards: 4, source: { type: 'synthetic' } });
    await expect(producer.send(synthetic, [record])).rejects.toMatchObject({
      code: 'SOURCE_MISMATCH',
      message: `dataset ${synthetic.ref}: the ShardedProducer needs a dataset whose source type is kafka, but its source type is synthetic`,
    });

    const six = await createTopic(6);
    const wrong = dataset({ numShards: 8, source: { type: 'kafka', topic: six } });
    await expect(producer.send(wrong, [record])).rejects.toMatchObject({
      code: 'SOURCE_MISMATCH',
      message: `dataset ${wrong.ref}: Kafka topic "${six}" has 6 partitions but numShards is 8 (partition p is shard p)`,
    });
    const { admin } = await checker();
    expect((await admin.fetchTopicOffsets(six)).every((p) => p.high === '0')).toBe(true);

    // A missing topic is refused (never created); once it exists, the same producer writes to it.
    const later = uniqueName('sp-later');
    const missing = dataset({ numShards: 4, source: { type: 'kafka', topic: later } });
    await expect(producer.send(missing, [record])).rejects.toThrow(`Kafka topic "${later}" does not exist; create it with 4 partitions`);
    expect(await admin.listTopics()).not.toContain(later);
    await createTopic(4, later);
    const [ok] = await producer.send(missing, [record]);
    expect(ok).toMatchObject({ offset: 0 });

    // A spread beyond log2(numShards) is refused before anything is written.
    await expect(producer.send(missing, [{ ...record, spread: 3 }])).rejects.toThrow('Invalid spread 3');
    expect((await admin.fetchTopicOffsets(later)).reduce((n, p) => n + Number(p.high), 0)).toBe(1);
  });

  it('fails a send, naming the topic, once the topic was deleted after a send went through', async () => {
    const topic = await createTopic(2);
    const ds = dataset({ numShards: 2, source: { type: 'kafka', topic } });
    const producer = newProducer(kafkaClient);
    const record = { shardKey: { _metric_: 'cpu' }, partitionKey: { host: 'a' }, value: 1 };
    await producer.send(ds, [record]);
    const { admin } = await checker();
    await admin.deleteTopics({ topics: [topic] });
    // The controller answers before the broker has applied the deletion; a send in between is
    // accepted by Kafka itself (seen on Kafka 3.9), so wait until the broker's metadata drops it.
    await expect.poll(async () => (await admin.listTopics()).includes(topic), { timeout: 10_000, interval: 100 }).toBe(false);
    const started = Date.now();
    await expect(producer.send(ds, [record])).rejects.toThrow(topic);
    expect(Date.now() - started).toBeLessThan(30_000);
  }, 60_000);
});
