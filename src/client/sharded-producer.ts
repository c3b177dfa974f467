// What a gateway embeds to write records into a Kafka dataset (docs/ARCHITECTURE.md §7): it computes each
// record's shard exactly as query routers compute where to look (`ingestionShard` of the shard-key
// hash, the partition-key hash and the spread) and writes to that partition by number, never through
// Kafka's key partitioner, which would scatter a shard key over partitions no router asks.
import type { KafkaConnection } from '../cluster/kafka-client.js';
import { kafkaClientSchema, type KafkaClientLibrary } from '../cluster/kafka-options.js';
import { configErrorOf } from '../cluster/config-error.js';
import { SharedAttempt } from '../cluster/shared-attempt.js';
import type { DatasetConfig } from '../core/dataset-config.js';
import { partitionKeyHash, shardKeyHash } from '../core/hashing.js';
import { ShardherdError } from '../core/errors.js';
import type { DatasetRef, ShardNum } from '../core/ids.js';
import { ingestionShard } from '../core/spread.js';
import { checkTopicPartitions, kafkaTopicOf } from '../ingest/kafka-topic-check.js';
import { KafkajsPartitionWriter } from './partition-writer/kafkajs-writer.js';
import { PlatformaticPartitionWriter } from './partition-writer/platformatic-writer.js';
import type { PartitionWriter } from './partition-writer/writer.js';
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
  /**
   * The Kafka client library (default `platformatic`, as a node config's `kafka.client`):
   * @platformatic/kafka, maintained, or kafkajs. Both write idempotently with `acks: -1`.
   */
  readonly kafkaClient?: KafkaClientLibrary;
}

/**
 * Writes records to the partitions of a Kafka dataset's topic that `ingestionShard` chooses, with
 * `acks: -1` (every in-sync replica has the record before `send` resolves).
 *
 * Gotchas: the first `send` for a dataset checks its topic (it must exist with exactly `numShards`
 * partitions, the same check as the ingestion source's); a passed check is remembered for the
 * producer's lifetime, a failed one is asked again. The producer is idempotent: a write the client
 * library retries after its answer was lost is written once. A `send` that fails and is called
 * again by the application is a new write and may be written twice.
 */
export class ShardedProducer {
  private readonly writer: PartitionWriter;
  /** Per dataset, topic and shard count; a failed check is not remembered: the topic may be created (or fixed) and the send retried. */
  private readonly checked = new Map<string, SharedAttempt<void>>();
  private closed = false;

  private readonly client: ShardedProducerOptions['client'];

  /** Throws a `ConfigError` naming `kafkaClient` for a library shardherd does not run on. */
  constructor(options: ShardedProducerOptions) {
    const { client, kafkaClient, ...connection } = options;
    this.client = client;
    const library = kafkaClientSchema.safeParse(kafkaClient);
    if (!library.success) throw configErrorOf(library.error, { prefix: 'kafkaClient', label: 'ShardedProducer: ' });
    this.writer = library.data === 'kafkajs' ? new KafkajsPartitionWriter(connection) : new PlatformaticPartitionWriter(connection);
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
    await this.checkTopic(dataset, topic);
    if (records.length === 0) return [];
    const base = await this.writer.write(topic, messages).catch((e: unknown) => this.explainFailedWrite(dataset, topic, e));
    // Each partition's records are written as one batch in the order given: offsets follow on from the base.
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
    await this.writer.close();
  }

  /**
   * A failed write's error, or the topic check's when the topic is what failed it (deleted, or its
   * partitions changed, since it was checked): the check's error says what to do, the client's may not.
   */
  private async explainFailedWrite(dataset: DatasetConfig, topic: string, writeError: unknown): Promise<never> {
    this.checked.delete(checkKey(dataset, topic));
    const checked = await this.checkTopic(dataset, topic).then(
      () => undefined,
      (e: unknown) => e,
    );
    if (checked instanceof ShardherdError) throw new ShardherdError(checked.code, checked.message, { dataset: dataset.ref, cause: writeError });
    throw writeError;
  }

  private checkTopic(dataset: DatasetConfig, topic: string): Promise<void> {
    const key = checkKey(dataset, topic);
    let check = this.checked.get(key);
    if (check === undefined) {
      check = new SharedAttempt(async () => checkTopicPartitions(dataset, topic, await this.writer.partitionCount(topic)));
      this.checked.set(key, check);
    }
    return check.get();
  }
}

function checkKey(dataset: DatasetConfig, topic: string): string {
  return `${dataset.ref}\u0000${topic}\u0000${dataset.numShards}`;
}

function encodeValue(value: unknown, index: number): Buffer {
  if (value instanceof Uint8Array) return Buffer.from(value.buffer, value.byteOffset, value.byteLength);
  const json = JSON.stringify(value);
  if (json === undefined) throw new TypeError(`record ${index}: value ${String(value)} cannot be written as JSON`);
  return Buffer.from(json, 'utf8');
}
