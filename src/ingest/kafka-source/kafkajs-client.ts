// kafkajs behind the ingestion source: one client per source, an admin connection made on first use,
// and per dataset a consumer in a group of its own (./kafkajs-consumer.ts).
import type { Admin, Consumer, Kafka } from 'kafkajs';
import type { Logger } from 'pino';
import { createKafka, type KafkaConnection } from '../../cluster/kafka-client.js';
import { hasKafkaErrorType } from '../../cluster/kafka-retry.js';
import { SharedAttempt } from '../../cluster/shared-attempt.js';
import { fetchTopicOffsets } from '../../cluster/topic-offsets.js';
import type { DatasetConfig } from '../../core/dataset-config.js';
import { checkKafkaTopic, createKafkaTopic } from '../kafka-topic-check.js';
import type { FeedConsumer, FeedConsumerParams, IngestionKafkaClient, Watermarks } from './feed-client.js';
import { KafkajsFeedConsumer } from './kafkajs-consumer.js';

export class KafkajsIngestionClient implements IngestionKafkaClient {
  private readonly kafka: Kafka;
  private readonly adminConnection: SharedAttempt<Admin>;
  private readonly retiring = new Set<Promise<void>>();
  private closed = false;

  constructor(
    connection: KafkaConnection,
    private readonly log: Logger,
  ) {
    this.kafka = createKafka(connection);
    this.adminConnection = new SharedAttempt(() => {
      const admin = this.kafka.admin();
      return admin.connect().then(() => admin);
    });
  }

  /** kafkajs is loaded with this module. */
  async ready(): Promise<void> {}

  feedConsumer(params: FeedConsumerParams): FeedConsumer {
    return new KafkajsFeedConsumer({
      ...params,
      kafka: this.kafka,
      retire: (consumer, groupId) => this.retire(consumer, groupId),
      topicExists: () => this.withAdmin(async (admin) => (await admin.listTopics()).includes(params.topic)),
    });
  }

  checkTopic(dataset: DatasetConfig, who: string): Promise<void> {
    return this.withAdmin((admin) => checkKafkaTopic(admin, dataset, who));
  }

  createTopic(dataset: DatasetConfig, replicationFactor: number, who: string): Promise<'created' | 'exists'> {
    return this.withAdmin((admin) => createKafkaTopic(admin, dataset, replicationFactor, who));
  }

  async topicOffsets(topic: string): Promise<ReadonlyMap<number, Watermarks>> {
    const offsets = await this.withAdmin((admin) => fetchTopicOffsets(admin, topic));
    return new Map(offsets.map((o) => [o.partition, { low: Number(o.low), high: Number(o.high) }]));
  }

  async close(): Promise<void> {
    this.closed = true;
    await Promise.all([...this.retiring]);
    const admin = this.adminConnection.take();
    if (admin !== undefined)
      await admin.then((a) => a.disconnect()).catch((e: unknown) => this.log.warn({ err: e }, 'disconnecting the Kafka admin client failed'));
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
   * `call` with the admin client. kafkajs's admin keeps every topic it was asked about and refreshes
   * their metadata together, so once one of them is deleted every later call fails with "unknown
   * topic", whatever topic it is about: such a failure drops the client, and the next call makes a
   * new one, which knows only what it is asked.
   */
  private async withAdmin<T>(call: (admin: Admin) => Promise<T>): Promise<T> {
    const connection = this.admin();
    try {
      return await call(await connection);
    } catch (e) {
      if (hasKafkaErrorType(e, 'UNKNOWN_TOPIC_OR_PARTITION') && this.adminConnection.current === connection && !this.closed) {
        this.adminConnection.take();
        void connection.then((a) => a.disconnect()).catch(() => undefined);
        this.log.debug({ err: e }, 'Kafka admin client replaced after an unknown topic');
      }
      throw e;
    }
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
        await this.withAdmin((admin) => admin.deleteGroups([groupId]));
      } catch (e) {
        // Harmless: an empty group without offsets expires on the broker by itself.
        this.log.debug({ err: e, groupId }, 'deleting a retired consumer group failed');
      }
    })();
    this.retiring.add(done);
    void done.finally(() => this.retiring.delete(done));
  }
}
