// The bus's admin requests on @platformatic/kafka: one admin client, made at the first request
// (which first asks the broker whether it serves what the bus needs).
import type { Admin } from '@platformatic/kafka';
import type { KafkaConnection } from '../kafka-client.js';
import { isRetriableKafkaError, retryRetriable } from '../kafka-retry.js';
import {
  hasPlatformaticKafkaError,
  loadPlatformaticKafka,
  platformaticOptions,
  platformaticPartitionCount,
  onlyExistingTopics,
  platformaticTopicExists,
  requireBrokerApis,
} from '../platformatic-kafka.js';
import { SharedAttempt } from '../shared-attempt.js';
import type { BusAdmin, PartitionLeaders } from './admin.js';

/** Every Kafka API the bus uses, asked of the broker at its first request. */
const BUS_APIS = [
  'Metadata',
  'CreateTopics',
  'DescribeConfigs',
  'ListOffsets',
  'Produce',
  'InitProducerId',
  'FindCoordinator',
  'JoinGroup',
  'SyncGroup',
  'Heartbeat',
  'LeaveGroup',
  'OffsetFetch',
  'OffsetCommit',
  'Fetch',
] as const;
/** The option a user changes for a broker too old for the library. */
const CLIENT_SETTING = 'the bus option client (kafka.client in a node config)';

/** Kafka's config resource type of a topic. */
const TOPIC_RESOURCE = 2;
/** ListOffsets' timestamps for a partition's first and next offsets. */
const EARLIEST = -2n;
const LATEST = -1n;

/** What a broker answers about a topic that was just created, before it heard of it or of its leaders. */
function topicNotKnownYet(e: unknown): boolean {
  return ['UNKNOWN_TOPIC_OR_PARTITION', 'LEADER_NOT_AVAILABLE', 'NOT_LEADER_OR_FOLLOWER'].some((id) => hasPlatformaticKafkaError(e, id));
}

export class PlatformaticBusAdmin implements BusAdmin {
  private readonly admin: SharedAttempt<Admin>;
  /** Every admin client made, checked or not: `close` closes them at once, which ends their retries. */
  private readonly made = new Set<Admin>();
  private closed = false;

  constructor(connection: KafkaConnection) {
    this.admin = new SharedAttempt(async () => {
      const library = await loadPlatformaticKafka();
      if (this.closed) throw new Error('the bus admin client was closed');
      const admin = new library.Admin(platformaticOptions(connection));
      this.made.add(admin);
      try {
        // At the bus's first request (a node's first Kafka call): a broker too old for the library
        // is named as such, with the option that avoids it, not as a request the broker cannot read.
        await requireBrokerApis(admin, library, { apis: BUS_APIS, setting: CLIENT_SETTING, brokers: connection.brokers, clientId: connection.clientId });
      } catch (e) {
        this.made.delete(admin);
        await admin.close().catch(() => undefined);
        throw e;
      }
      return admin;
    });
  }

  async listTopics(): Promise<string[]> {
    return (await this.admin.get()).listTopics({ includeInternals: false });
  }

  async createTopics(topics: readonly string[], replicationFactor: number, configs: Readonly<Record<string, string>>): Promise<void> {
    const admin = await this.admin.get();
    try {
      await admin.createTopics({
        topics: [...topics],
        partitions: 1,
        replicas: replicationFactor,
        configs: Object.entries(configs).map(([name, value]) => ({ name, value })),
      });
    } catch (e) {
      // Nodes starting together race to create a cluster's topics: one created by another process
      // since the topic list was read is there, as asked (kafkajs passes over it the same way).
      if (!onlyExistingTopics(e)) throw e;
    }
  }

  async partitionCount(topic: string): Promise<number> {
    const admin = await this.admin.get();
    // The topic list first: the library's metadata request retries an unknown topic for seconds.
    if (!(await platformaticTopicExists(admin, topic))) return 0;
    return (await retryRetriable(() => platformaticPartitionCount(admin, admin, topic))) ?? 0;
  }

  async leaders(topics: readonly string[]): Promise<ReadonlyMap<string, PartitionLeaders>> {
    const admin = await this.admin.get();
    try {
      const metadata = await admin.metadata({ topics: [...topics], forceUpdate: true });
      return new Map([...metadata.topics].map(([name, t]) => [name, t.partitions.map((p) => p.leader)]));
    } catch (e) {
      if (topicNotKnownYet(e) || isRetriableKafkaError(e)) return new Map();
      // The library reports an unknown topic as a plain user error: the topic list says whether it is one.
      const known = new Set(await admin.listTopics({ includeInternals: false }));
      if (topics.some((t) => !known.has(t))) return new Map();
      throw e;
    }
  }

  async leadersAnswer(topics: readonly string[]): Promise<boolean> {
    try {
      for (const topic of topics) await this.listOffset(topic, LATEST);
      return true;
    } catch (e) {
      if (topicNotKnownYet(e)) return false;
      throw e;
    }
  }

  async topicConfigs(topics: readonly string[], names: readonly string[]): Promise<ReadonlyMap<string, ReadonlyMap<string, string>>> {
    const described = await (
      await this.admin.get()
    ).describeConfigs({
      resources: topics.map((resourceName) => ({ resourceType: TOPIC_RESOURCE, resourceName, configurationKeys: [...names] })),
      includeSynonyms: false,
    });
    return new Map(
      described.map((r) => [
        r.resourceName,
        new Map(r.configs.flatMap((c) => (c.value === null || c.value === undefined ? [] : [[c.name, c.value] as const]))),
      ]),
    );
  }

  async watermarks(topic: string): Promise<{ low: number; high: number }> {
    const [low, high] = await Promise.all([retryRetriable(() => this.listOffset(topic, EARLIEST)), retryRetriable(() => this.listOffset(topic, LATEST))]);
    return { low, high };
  }

  async committedOffset(group: string, topic: string): Promise<number | undefined> {
    const admin = await this.admin.get();
    const groups = await retryRetriable(() =>
      admin.listConsumerGroupOffsets({ groups: [{ groupId: group, topics: [{ name: topic, partitionIndexes: [0] }] }] }),
    );
    const committed = groups
      .find((g) => g.groupId === group)
      ?.topics.find((t) => t.name === topic)
      ?.partitions.find((p) => p.partitionIndex === 0)?.committedOffset;
    return committed === undefined || committed < 0n ? undefined : Number(committed);
  }

  /**
   * Closes the admin client at once, also while its first request is still being tried (brokers
   * away): waiting for that attempt's retries would hold up the bus's close by seconds.
   */
  async close(): Promise<void> {
    this.closed = true;
    this.admin.take()?.catch(() => undefined);
    const made = [...this.made];
    this.made.clear();
    await Promise.all(made.map((admin) => admin.close()));
  }

  private async listOffset(topic: string, timestamp: bigint): Promise<number> {
    const listed = await (await this.admin.get()).listOffsets({ topics: [{ name: topic, partitions: [{ partitionIndex: 0, timestamp }] }] });
    const offset = listed.find((t) => t.name === topic)?.partitions.find((p) => p.partitionIndex === 0)?.offset;
    if (offset === undefined) throw new Error(`the broker returned no offset for partition 0 of ${topic}`);
    return Number(offset);
  }
}
