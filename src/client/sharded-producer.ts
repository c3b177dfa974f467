// What a gateway embeds to write records into a Kafka dataset (docs/ARCHITECTURE.md §7): it computes each
// record's shard exactly as query routers compute where to look (`ingestionShard` of the shard-key
// hash, the partition-key hash and the spread) and writes to that partition by number, never through
// Kafka's key partitioner, which would scatter a shard key over partitions no router asks.
import { Partitioners, type Admin, type Producer } from 'kafkajs';
import { SharedAttempt } from '../cluster/shared-attempt.js';
import { createKafka, IDEMPOTENT_PRODUCER, type KafkaConnection } from '../cluster/kafka-client.js';
import type { DatasetConfig } from '../core/dataset-config.js';
import { partitionKeyHash, shardKeyHash } from '../core/hashing.js';
import type { DatasetRef, ShardNum } from '../core/ids.js';
import { ingestionShard } from '../core/spread.js';
import { checkKafkaTopic, kafkaTopicOf } from '../ingest/kafka-topic-check.js';
import type { ShardherdClient } from './shardherd-client.js';

/** One record for a dataset. */
export interface ShardedRecord {
  /** The columns that choose the shard group, e.g. `{ _ws_: 'demo', _ns_: 'app', _metric_: 'cpu' }`. */
  readonly shardKey: Readonly<Record<string, string>>;
  /** The series' full label set; chooses the shard within the group (`le` is ignored, see `partitionKeyHash`). */
  readonly partitionKey: Readonly<Record<string, string>>;
  /** Written as JSON (read back unchanged by `KafkaIngestionSource`); a `Uint8Array` is written as is. */
  readonly value: unknown;
  /** Overrides the dataset's spread for this record: 0..log2(numShards). */
  readonly spread?: number;
  /** The Kafka record key (UTF-8); none by default. It never chooses the partition. */
  readonly key?: string;
}

/** Where one record was written. */
export interface SentRecord {
  readonly shard: ShardNum;
  /** Always equal to `shard`: partition p is shard p. */
  readonly partition: number;
  readonly offset: number;
}

export interface ShardedProducerOptions extends KafkaConnection {
  /**
   * A client of the cluster: `send` then also takes a dataset by name and writes with the config the
   * cluster has (its shards, spread and topic), so a gateway needs no copy of it. Not closed by the producer.
   */
  readonly client?: Pick<ShardherdClient, 'datasetConfig'>;
}

/**
 * Writes records to the partitions of a Kafka dataset's topic that `ingestionShard` chooses, with
 * `acks: -1` (every in-sync replica has the record before `send` resolves).
 *
 * Gotchas: the first `send` for a dataset checks its topic (it must exist with exactly `numShards`
 * partitions, the same check as the ingestion source's); a passed check is remembered for the
 * producer's lifetime, a failed one is asked again. The producer is idempotent: a write kafkajs
 * retries after its answer was lost is written once. A `send` that fails and is called again by the
 * application is a new write and may be written twice.
 */
export class ShardedProducer {
  private readonly producer: Producer;
  private readonly admin: Admin;
  private readonly connection = new SharedAttempt(() => Promise.all([this.producer.connect(), this.admin.connect()]).then(() => undefined));
  /** Per dataset, topic and shard count; a failed check is not remembered: the topic may be created (or fixed) and the send retried. */
  private readonly checked = new Map<string, SharedAttempt<void>>();
  private closed = false;

  private readonly client: ShardedProducerOptions['client'];

  constructor(options: ShardedProducerOptions) {
    const { client, ...connection } = options;
    this.client = client;
    const kafka = createKafka(connection);
    // Topics are never auto-created: a typo in a topic name must fail, not create a 1-partition topic.
    // The partitioner is never used (every record names its partition); naming one keeps kafkajs from warning about its default.
    // Idempotent: a write retried after its answer was lost is written once.
    this.producer = kafka.producer({ allowAutoTopicCreation: false, createPartitioner: Partitioners.DefaultPartitioner, ...IDEMPOTENT_PRODUCER });
    this.admin = kafka.admin();
  }

  /** The shard (= partition) a record goes to; throws `InvalidSpreadError` for a spread out of range. */
  static shardOf(dataset: DatasetConfig, record: Pick<ShardedRecord, 'shardKey' | 'partitionKey' | 'spread'>): ShardNum {
    return ingestionShard(dataset.numShards, shardKeyHash(record.shardKey), partitionKeyHash(record.partitionKey), record.spread ?? dataset.spread);
  }

  /**
   * Writes the records (in one request per broker) and says where each one went, in the order given.
   * Records of one shard keep their order. Refuses, before writing anything, a dataset whose source
   * is not Kafka or whose topic does not match it (`SOURCE_MISMATCH`), and a bad spread. A dataset
   * by name is looked up through the producer's `client` (the cluster's config of it).
   */
  async send(datasetOrRef: DatasetConfig | DatasetRef, records: readonly ShardedRecord[]): Promise<SentRecord[]> {
    if (this.closed) throw new Error('the ShardedProducer is closed');
    const dataset = typeof datasetOrRef === 'string' ? await this.configOf(datasetOrRef) : datasetOrRef;
    const topic = kafkaTopicOf(dataset, 'the ShardedProducer');
    // Everything that can be refused is refused before anything is written.
    const shards = records.map((r) => ShardedProducer.shardOf(dataset, r));
    const messages = records.map((r, i) => ({ partition: shards[i]!, key: r.key ?? null, value: encodeValue(r.value, i) }));
    await this.connection.get();
    await this.checkTopic(dataset);
    if (records.length === 0) return [];
    const written = await this.producer.send({ topic, acks: -1, messages });
    const base = new Map<number, number>();
    for (const r of written) {
      if (r.baseOffset === undefined) throw new Error(`Kafka did not return the offset of the records written to ${topic} partition ${r.partition}`);
      base.set(r.partition, Number(r.baseOffset));
    }
    // kafkajs writes each partition's records as one batch in the order given: offsets follow on from the base.
    const next = new Map<number, number>();
    return shards.map((shard) => {
      const k = next.get(shard) ?? 0;
      next.set(shard, k + 1);
      const b = base.get(shard);
      if (b === undefined) throw new Error(`Kafka did not acknowledge the records written to ${topic} partition ${shard}`);
      return { shard, partition: shard, offset: b + k };
    });
  }

  private configOf(dataset: DatasetRef): Promise<DatasetConfig> {
    if (!this.client) throw new Error(`a dataset by name (${dataset}) needs the ShardedProducer's client option: pass its DatasetConfig, or a ShardherdClient`);
    return this.client.datasetConfig(dataset);
  }

  /** Waits for nothing in flight; later sends fail. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const connecting = this.connection.take();
    if (connecting === undefined) return;
    await connecting.catch(() => {});
    await Promise.all([this.producer.disconnect(), this.admin.disconnect()]);
  }

  private checkTopic(dataset: DatasetConfig): Promise<void> {
    const key = `${dataset.ref}\u0000${kafkaTopicOf(dataset, 'the ShardedProducer')}\u0000${dataset.numShards}`;
    let check = this.checked.get(key);
    if (check === undefined) {
      check = new SharedAttempt(() => checkKafkaTopic(this.admin, dataset, 'the ShardedProducer'));
      this.checked.set(key, check);
    }
    return check.get();
  }
}

function encodeValue(value: unknown, index: number): Buffer {
  if (value instanceof Uint8Array) return Buffer.from(value.buffer, value.byteOffset, value.byteLength);
  const json = JSON.stringify(value);
  if (json === undefined) throw new TypeError(`record ${index}: value ${String(value)} cannot be written as JSON`);
  return Buffer.from(json, 'utf8');
}
