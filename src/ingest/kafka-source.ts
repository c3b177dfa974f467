// Kafka behind the IngestionSource port (docs/ARCHITECTURE.md §7): partition p of a dataset's topic is shard p.
//
// kafkajs has no assign(). So per dataset this process runs ONE consumer, in a consumer group of
// its own, whose assigner hands it exactly the partitions of the shards open here (it is the
// group's only member, hence its leader). kafkajs cannot change an assignment while it runs, so
// opening or closing a shard recreates the consumer, once per burst of changes. Records go into a
// bounded buffer per partition that `read` drains; a full buffer pauses its partition. The
// checkpoints in the MetaStore are the source of truth: every consumer starts where the buffers end
// (`seek`), so a recreate loses and repeats nothing. Checkpointed offsets are also committed in the
// consumer's group, only so that Kafka's own lag tools see each shard.
import type { Admin, Consumer, Kafka } from 'kafkajs';
import type { Logger } from 'pino';
import { createKafka } from '../cluster/kafka-client.js';
import { SharedAttempt } from '../cluster/shared-attempt.js';
import type { DatasetConfig } from '../core/dataset-config.js';
import { ShardOutOfRangeError } from '../core/errors.js';
import { isShardInRange, type ShardNum } from '../core/ids.js';
import type { IngestionSource, ShardReader } from './ingestion-source.js';
import { DatasetFeed, type FeedContext, type KafkaFeedStats } from './kafka-source/feed.js';
import { installFetchDecoder } from './kafka-source/fetch-decoding.js';
import { KafkaShardReader } from './kafka-source/reader.js';
import { kafkaSourceSettings, type KafkaIngestionSourceOptions, type KafkaSourceSettings } from './kafka-source/settings.js';
import { checkKafkaTopic, createKafkaTopic, kafkaTopicOf } from './kafka-topic-check.js';

export { decodeKafkaValue, type KafkaValueDecoder } from './kafka-source/decode.js';
export type { KafkaFeedStats } from './kafka-source/feed.js';
export type { KafkaFetchOptions, KafkaIngestionSourceOptions } from './kafka-source/settings.js';

/**
 * The `IngestionSource` for datasets whose source is Kafka: shard p reads partition p of
 * `source.topic`. One per process; `open` and the readers are cheap, `close` ends everything.
 *
 * - One consumer per dataset, in a group of its own (`<groupPrefix>.<dataset>.<instanceId>.<generation>`),
 *   assigned exactly the partitions of the open shards. Opening or closing shards recreates it once
 *   per `recreateDelayMs` window; reads of the other shards go on from their buffers meanwhile and
 *   the new consumer continues where each buffer ends.
 * - `read(offset, max)` drains the shard's buffer; a read at any other offset than the buffer's
 *   continues from that offset (a seek), and returns nothing until the consumer fetched it.
 * - A full buffer (`bufferRecords` or `bufferBytes`) pauses its partition until reads drain it to
 *   half, so memory stays bounded however far behind the reader is.
 * - `earliestOffset`/`endOffset` are the partition's low and high watermarks (admin `fetchTopicOffsets`).
 * - The MetaStore checkpoints are the source of truth; checkpointed offsets are also committed in
 *   the consumer's group (`commitOffsets`) so that `kafka-consumer-groups --describe` shows the lag.
 *
 * Gotchas: a new consumer group waits the broker's `group.initial.rebalance.delay.ms` (3 s by
 * default; set it to 0 on brokers that only serve shardherd) before its first join, so a shard
 * opened later starts that much later. With transactional producers the high watermark counts the
 * commit markers, which no read returns. A consumer that stops for good (an error kafkajs does not
 * retry, or a deleted topic) fails every read of the dataset with that error until a shard is opened again.
 */
export class KafkaIngestionSource implements IngestionSource {
  /** Names this source's consumer groups (see `instanceId` in the options). */
  readonly instanceId: string;
  private readonly settings: KafkaSourceSettings;
  private readonly kafka: Kafka;
  private readonly log: Logger;
  private readonly feeds = new Map<string, DatasetFeed>();
  private readonly retiring = new Set<Promise<void>>();
  private readonly adminConnection: SharedAttempt<Admin>;
  private closed = false;

  constructor(options: KafkaIngestionSourceOptions) {
    this.settings = kafkaSourceSettings(options);
    this.instanceId = this.settings.instanceId;
    this.log = options.log;
    if (this.settings.fetchDecoder === 'shardherd') installFetchDecoder(this.log);
    this.kafka = createKafka(options);
    this.adminConnection = new SharedAttempt(() => {
      const admin = this.kafka.admin();
      return admin.connect().then(() => admin);
    });
  }

  /** Resolves when the dataset's topic exists with exactly `numShards` partitions; see `checkKafkaTopic`. */
  async validate(dataset: DatasetConfig): Promise<void> {
    this.assertOpen();
    kafkaTopicOf(dataset, 'the Kafka ingestion source');
    await checkKafkaTopic(await this.admin(), dataset, 'the Kafka ingestion source');
  }

  /** Creates the dataset's topic with `numShards` partitions unless it exists with that count; see `createKafkaTopic`. */
  async createTopic(dataset: DatasetConfig): Promise<'created' | 'exists'> {
    this.assertOpen();
    return createKafkaTopic(await this.admin(), dataset, this.settings.topicReplicationFactor, 'the Kafka ingestion source');
  }

  /**
   * A reader of partition `shard` of the dataset's topic. The first open of a dataset checks its
   * topic (as `validate` does). Opening a shard that is already open here hands the shard's buffer
   * to the new reader; the old one fails its reads from then on.
   */
  async open(dataset: DatasetConfig, shard: ShardNum): Promise<ShardReader> {
    this.assertOpen();
    const topic = kafkaTopicOf(dataset, 'the Kafka ingestion source');
    if (!isShardInRange(shard, dataset.numShards)) throw new ShardOutOfRangeError(shard, dataset.numShards, dataset.ref);
    const key = `${dataset.ref}\u0000${topic}\u0000${dataset.numShards}`;
    let feed = this.feeds.get(key);
    if (feed === undefined) {
      feed = new DatasetFeed(dataset, topic, this.feedContext());
      this.feeds.set(key, feed);
    }
    await feed.checkTopic();
    this.assertOpen();
    const reader = new KafkaShardReader(feed, dataset.ref, shard);
    feed.open(shard, reader);
    return reader;
  }

  /** What the source does for a dataset (the newest of its configs), or undefined if no shard of it was opened. */
  stats(dataset: string): KafkaFeedStats | undefined {
    let found: DatasetFeed | undefined;
    for (const feed of this.feeds.values()) if (feed.dataset.ref === dataset) found = feed;
    return found?.stats();
  }

  /** Stops every consumer (each leaves and deletes its group) and disconnects. Readers fail afterwards. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await Promise.all([...this.feeds.values()].map((feed) => feed.shutdown()));
    await Promise.all([...this.retiring]);
    const admin = this.adminConnection.take();
    if (admin !== undefined)
      await admin.then((a) => a.disconnect()).catch((e: unknown) => this.log.warn({ err: e }, 'disconnecting the Kafka admin client failed'));
  }

  private feedContext(): FeedContext {
    return {
      kafka: this.kafka,
      settings: this.settings,
      log: this.log,
      admin: () => {
        this.assertOpen();
        return this.admin();
      },
      retire: (consumer, groupId) => this.retire(consumer, groupId),
    };
  }

  /**
   * One admin connection for offsets, topic checks and group deletion, made on first use. After
   * `close` only the consumers being retired still use it (close disconnects it after them).
   */
  private admin(): Promise<Admin> {
    if (this.adminConnection.current === undefined && this.closed) return Promise.reject(new Error('the Kafka ingestion source is closed'));
    // A failed connection is not kept: the next call tries again.
    return this.adminConnection.get();
  }

  /**
   * Stops a consumer in the background: disconnect waits for its fetch in flight, and the next
   * consumer need not wait for that. Its group is deleted afterwards so groups do not pile up.
   */
  private retire(consumer: Consumer, groupId: string): void {
    const done = (async () => {
      try {
        await consumer.disconnect();
      } catch (e) {
        this.log.warn({ err: e, groupId }, 'stopping a Kafka ingestion consumer failed');
      }
      try {
        await (await this.admin()).deleteGroups([groupId]);
      } catch (e) {
        // Harmless: an empty group without offsets expires on the broker by itself.
        this.log.debug({ err: e, groupId }, 'deleting a retired consumer group failed');
      }
    })();
    this.retiring.add(done);
    void done.finally(() => this.retiring.delete(done));
  }

  private assertOpen(): void {
    if (this.closed) throw new Error('the Kafka ingestion source is closed');
  }
}
