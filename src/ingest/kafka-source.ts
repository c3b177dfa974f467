// Kafka behind the IngestionSource port (docs/ARCHITECTURE.md §7): partition p of a dataset's topic is shard p.
//
// Per dataset this process runs ONE consumer for the partitions of the shards open here, with one
// of two client libraries (`client`): kafkajs has no assign(), so its consumer is in a consumer
// group of its own whose assigner hands it exactly those partitions, and opening or closing a
// shard recreates it, once per burst of changes (./kafka-source/kafkajs-consumer.ts);
// @platformatic/kafka fetches the partitions itself, without a group (./kafka-source/platformatic-
// fetcher.ts). Records go into a bounded buffer per partition that `read` drains; a full buffer
// pauses its partition. The checkpoints in the MetaStore are the source of truth: every consumer
// starts where the buffers end (`seek`), so a recreate loses and repeats nothing. Checkpointed
// offsets are also committed in a consumer group, only so that Kafka's own lag tools see each shard.
import type { Logger } from 'pino';
import type { DatasetConfig } from '../core/dataset-config.js';
import { ShardOutOfRangeError } from '../core/errors.js';
import { isShardInRange, type ShardNum } from '../core/ids.js';
import type { IngestionSource, ShardReader } from './ingestion-source.js';
import type { IngestionKafkaClient } from './kafka-source/feed-client.js';
import { DatasetFeed, type FeedContext, type KafkaFeedStats } from './kafka-source/feed.js';
import { FetchThread } from './kafka-source/fetch-thread.js';
import { ingestionClientOf } from './kafka-source/ingestion-clients.js';
import { KafkaShardReader } from './kafka-source/reader.js';
import { PackingConsumer, type RunConsumer, type RunConsumerEvents, type RunConsumerParams } from './kafka-source/run-consumer.js';
import { kafkaSourceSettings, type KafkaIngestionSourceOptions, type KafkaSourceSettings } from './kafka-source/settings.js';
import { kafkaTopicOf } from './kafka-topic-check.js';

export { decodeKafkaValue, type KafkaValueDecoder } from './kafka-source/decode.js';
export type { KafkaFeedStats } from './kafka-source/feed.js';
export type { FetchThreadChoice, KafkaFetchOptions, KafkaIngestionSourceOptions } from './kafka-source/settings.js';
export type { KafkaClientLibrary } from '../cluster/kafka-options.js';

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
 * - The consumers fetch and unpack on a worker thread of the source's own (`fetchThread: 'worker'`,
 *   the default), so the caller's event loop never waits for the unpacking of a fetch answer; the
 *   buffers, the reads and `decode` are on the caller's thread either way.
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
  private readonly client: IngestionKafkaClient;
  /** Where the dataset consumers run, with `fetchThread: 'worker'`. */
  private readonly fetchThread: FetchThread | undefined;
  private readonly log: Logger;
  private readonly feeds = new Map<string, DatasetFeed>();
  private closed = false;

  constructor(options: KafkaIngestionSourceOptions) {
    this.settings = kafkaSourceSettings(options);
    this.instanceId = this.settings.instanceId;
    this.log = options.log;
    this.client = ingestionClientOf(options, this.settings, this.log);
    if (this.settings.fetchThread === 'worker') {
      const { brokers, clientId, connectionTimeoutMs, requestTimeoutMs } = options;
      const { decode: _decode, ...settings } = this.settings;
      this.fetchThread = new FetchThread(
        { connection: { brokers, clientId, connectionTimeoutMs, requestTimeoutMs }, settings, logLevel: this.log.level },
        this.log.child({ thread: 'kafka-fetch' }),
      );
    }
  }

  /**
   * Resolves once the client library is loaded and, on @platformatic/kafka, the broker serves the
   * protocol versions the library speaks (else an `UNSUPPORTED_BROKER` `ShardherdError` naming
   * `kafka.client`). A node awaits it before it joins the cluster: loading @platformatic/kafka takes
   * about half a second of the event loop, which a member spends not answering its failure detector.
   */
  ready(): Promise<void> {
    return this.client.ready();
  }

  /** Resolves when the dataset's topic exists with exactly `numShards` partitions; see `checkKafkaTopic`. */
  async validate(dataset: DatasetConfig): Promise<void> {
    this.assertOpen();
    kafkaTopicOf(dataset, 'the Kafka ingestion source');
    await this.client.checkTopic(dataset, 'the Kafka ingestion source');
  }

  /** Creates the dataset's topic with `numShards` partitions unless it exists with that count; see `createKafkaTopic`. */
  async createTopic(dataset: DatasetConfig, who = 'the Kafka ingestion source'): Promise<'created' | 'exists'> {
    this.assertOpen();
    return this.client.createTopic(dataset, this.settings.topicReplicationFactor, who);
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
    await Promise.all([this.fetchThread?.close(), this.client.close()]);
  }

  private feedContext(): FeedContext {
    return {
      client: this.client,
      runConsumer: (params, events) => this.runConsumer(params, events),
      settings: this.settings,
      log: this.log,
      assertOpen: () => this.assertOpen(),
    };
  }

  /** A dataset's consumer, on the fetch thread or on this one. */
  private runConsumer(params: RunConsumerParams, events: RunConsumerEvents): RunConsumer {
    if (this.fetchThread !== undefined) return this.fetchThread.consumer(params, events);
    return new PackingConsumer((p) => this.client.feedConsumer(p), params, events);
  }

  private assertOpen(): void {
    if (this.closed) throw new Error('the Kafka ingestion source is closed');
  }
}
