// @platformatic/kafka behind the ingestion source: a consumer client for metadata and offsets and an
// admin client, each made on first use, and per dataset a fetcher with a consumer client of its own
// (./platformatic-fetcher.ts); none joins a group. The library is loaded as soon as the source is
// made (see `loadPlatformaticKafka`): live nodes were evicted when the first shard's fetch loaded it.
import type { Admin, Consumer } from '@platformatic/kafka';
import type { Logger } from 'pino';
import type { KafkaConnection } from '../../cluster/kafka-client.js';
import { isRetriableKafkaError, retryRetriable } from '../../cluster/kafka-retry.js';
import {
  hasPlatformaticKafkaError,
  loadPlatformaticKafka,
  platformaticOptions,
  platformaticPartitionCount,
  platformaticTopicExists,
  requireBrokerApis,
  type PlatformaticKafka,
} from '../../cluster/platformatic-kafka.js';
import { SharedAttempt } from '../../cluster/shared-attempt.js';
import type { DatasetConfig } from '../../core/dataset-config.js';
import { ShardherdError } from '../../core/errors.js';
import { checkTopicPartitions, kafkaTopicOf } from '../kafka-topic-check.js';
import type { FeedConsumer, FeedConsumerParams, IngestionKafkaClient, Watermarks } from './feed-client.js';
import { PlatformaticFeedConsumer } from './platformatic-fetcher.js';
import type { KafkaSourceSettings } from './settings.js';

/** The Kafka APIs the source uses: fetch, offsets, metadata, the offsets group (commit, delete) and topic creation. */
const SOURCE_APIS = ['Fetch', 'ListOffsets', 'Metadata', 'FindCoordinator', 'OffsetCommit', 'DeleteGroups', 'CreateTopics'] as const;

/** How long `ready` waits for the broker to say which protocol versions it serves. */
const BROKER_VERSIONS_MS = 10_000;
/** How long `createTopic` waits for a new topic's partitions to have leaders. */
const TOPIC_LEADERS_MS = 10_000;
const EARLIEST = -2n;
const LATEST = -1n;
/** The high watermark, as kafkajs's admin reads it (read-committed would stop at the last stable offset). */
const READ_UNCOMMITTED = 0;

export class PlatformaticIngestionClient implements IngestionKafkaClient {
  /** For metadata and offsets; each dataset's fetcher has a consumer of its own. */
  private readonly consumer: SharedAttempt<Consumer>;
  private readonly newConsumer: () => Promise<Consumer>;
  private readonly admin: SharedAttempt<Admin>;
  private readonly library: Promise<PlatformaticKafka>;

  private readonly brokers: readonly string[];
  private readonly clientId: string;

  constructor(
    connection: KafkaConnection,
    private readonly settings: KafkaSourceSettings,
    private readonly log: Logger,
  ) {
    const base = platformaticOptions(connection);
    this.brokers = connection.brokers;
    this.clientId = connection.clientId;
    this.library = loadPlatformaticKafka();
    // Awaited by `ready` and by every client made; a failed load is reported there, not as an unhandled rejection.
    this.library.catch(() => undefined);
    // A group id is required by the library's consumer; these never join (the fetchers ask for partitions themselves).
    this.newConsumer = async () => {
      const { Consumer } = await this.library;
      return new Consumer({ ...base, groupId: `${settings.groupPrefix}.${settings.instanceId}.fetch`, autocommit: false });
    };
    this.consumer = new SharedAttempt(this.newConsumer);
    this.admin = new SharedAttempt(async () => {
      const { Admin } = await this.library;
      return new Admin(base);
    });
  }

  async ready(): Promise<void> {
    const library = await this.library;
    let timer: NodeJS.Timeout | undefined;
    const unanswered = new Promise<never>((_, fail) => {
      timer = setTimeout(() => fail(new Error(`no answer within ${BROKER_VERSIONS_MS} ms`)), BROKER_VERSIONS_MS);
    });
    try {
      const asked = (async () => {
        const consumer = await this.consumer.get();
        await requireBrokerApis(consumer, library, { apis: SOURCE_APIS, setting: 'kafka.client', brokers: this.brokers, clientId: this.clientId });
      })();
      // Should the deadline come first, what the question ends with later is of no interest.
      asked.catch(() => undefined);
      await Promise.race([asked, unanswered]);
    } catch (e) {
      // Only the broker's answer stops a start: a question that could not be asked (a broker slow
      // to answer on a loaded machine) says nothing of its versions, and the fetches report their own failures.
      if (e instanceof ShardherdError) throw e;
      this.log.warn(
        { event: 'ingest.broker-versions-unknown', err: e },
        'could not ask the broker which protocol versions it serves: going on (a broker too old for @platformatic/kafka then fails the first fetch)',
      );
    } finally {
      clearTimeout(timer);
    }
  }

  feedConsumer(params: FeedConsumerParams): FeedConsumer {
    return new PlatformaticFeedConsumer({
      ...params,
      connect: this.newConsumer,
      commitOffsets: async (groupId, offsets) => {
        const admin = await this.admin.get();
        await admin.alterConsumerGroupOffsets({
          groupId,
          topics: [{ name: params.topic, partitionOffsets: offsets.map((o) => ({ partition: o.partition, offset: BigInt(o.offset) })) }],
        });
      },
      deleteGroup: async (groupId) => (await this.admin.get()).deleteGroups({ groups: [groupId] }),
      earliestOffset: async (partition) => Number((await this.offsets(params.topic, EARLIEST))[partition] ?? 0n),
      topicExists: () => this.topicExists(params.topic),
    });
  }

  async checkTopic(dataset: DatasetConfig, who: string): Promise<void> {
    const topic = kafkaTopicOf(dataset, who);
    checkTopicPartitions(dataset, topic, await this.partitionCount(topic));
  }

  async createTopic(dataset: DatasetConfig, replicationFactor: number, who: string): Promise<'created' | 'exists'> {
    const topic = kafkaTopicOf(dataset, who);
    let created = false;
    if ((await this.partitionCount(topic)) === undefined) {
      const admin = await this.admin.get();
      try {
        await admin.createTopics({ topics: [topic], partitions: dataset.numShards, replicas: replicationFactor });
        created = true;
      } catch (e) {
        // Another node created it meanwhile: the check below has the last word.
        if (!hasPlatformaticKafkaError(e, 'TOPIC_ALREADY_EXISTS')) throw e;
      }
      await this.waitForLeaders(topic);
    }
    await this.checkTopic(dataset, who);
    return created ? 'created' : 'exists';
  }

  async topicOffsets(topic: string): Promise<ReadonlyMap<number, Watermarks>> {
    const [low, high] = await Promise.all([this.offsets(topic, EARLIEST), this.offsets(topic, LATEST)]);
    return new Map(high.map((h, partition) => [partition, { low: Number(low[partition] ?? 0n), high: Number(h) }]));
  }

  async close(): Promise<void> {
    const clients = [this.consumer.take(), this.admin.take()].filter((c) => c !== undefined);
    await Promise.all(
      clients.map((c) =>
        c.then((client) => client.close()).catch((e: unknown) => this.log.warn({ err: e }, 'closing a Kafka client of the ingestion source failed')),
      ),
    );
  }

  /** Each partition's offset at `timestamp` (earliest or latest), by partition. */
  private async offsets(topic: string, timestamp: bigint): Promise<readonly bigint[]> {
    const consumer = await this.consumer.get();
    const listed = await retryRetriable(() => consumer.listOffsets({ topics: [topic], timestamp, isolationLevel: READ_UNCOMMITTED }), isRetriableKafkaError);
    return listed.get(topic) ?? [];
  }

  /** The topic's partition count, or undefined when it does not exist. */
  private async partitionCount(topic: string): Promise<number | undefined> {
    return platformaticPartitionCount(await this.consumer.get(), await this.admin.get(), topic);
  }

  private async topicExists(topic: string): Promise<boolean> {
    return platformaticTopicExists(await this.admin.get(), topic);
  }

  /** Polls the topic's metadata until every partition has a leader; throws after `TOPIC_LEADERS_MS`. */
  private async waitForLeaders(topic: string): Promise<void> {
    const consumer = await this.consumer.get();
    const deadline = Date.now() + TOPIC_LEADERS_MS;
    for (;;) {
      const led = await consumer.metadata({ topics: [topic], forceUpdate: true }).then(
        (m) => {
          const partitions = m.topics.get(topic)?.partitions ?? [];
          return partitions.length > 0 && partitions.every((p) => p.leader >= 0);
        },
        (e: unknown) => {
          if (hasPlatformaticKafkaError(e, 'UNKNOWN_TOPIC_OR_PARTITION') || hasPlatformaticKafkaError(e, 'LEADER_NOT_AVAILABLE')) return false;
          throw e;
        },
      );
      if (led) return;
      if (Date.now() > deadline) throw new Error(`topic ${topic} has no leader for every partition after ${TOPIC_LEADERS_MS} ms`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}
