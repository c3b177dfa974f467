// The bus's admin requests on kafkajs.
import type { Admin, ConfigResourceTypes, Kafka } from 'kafkajs';
import { leadersAnswer, topicMayAnswerLater, topicNotKnownYet } from '../kafka-client.js';
import { retryRetriable } from '../kafka-retry.js';
import { SharedAttempt } from '../shared-attempt.js';
import { fetchTopicOffsets } from '../topic-offsets.js';
import type { BusAdmin, PartitionLeaders } from './admin.js';
import { kafkaCall } from './errors.js';

/**
 * Kafka's config resource type of a topic (kafkajs's `ConfigResourceTypes.TOPIC`). Not imported as
 * a value: Node's ESM loader cannot see that export of kafkajs's CommonJS module (only the names
 * before the spread in its `module.exports`), so the import would fail outside the tests.
 */
const TOPIC_RESOURCE: ConfigResourceTypes = 2;

export class KafkajsBusAdmin implements BusAdmin {
  private readonly admin: Admin;
  private readonly connection: SharedAttempt<void>;

  constructor(kafka: Kafka) {
    this.admin = kafka.admin();
    this.connection = new SharedAttempt(() => kafkaCall('connecting the admin client', {}, () => this.admin.connect()));
  }

  async listTopics(): Promise<string[]> {
    return (await this.connected()).listTopics();
  }

  async createTopics(topics: readonly string[], replicationFactor: number, configs: Readonly<Record<string, string>>): Promise<void> {
    await (
      await this.connected()
    ).createTopics({
      topics: topics.map((topic) => ({
        topic,
        numPartitions: 1,
        replicationFactor,
        configEntries: Object.entries(configs).map(([name, value]) => ({ name, value })),
      })),
      waitForLeaders: false,
    });
  }

  async partitionCount(topic: string): Promise<number> {
    const admin = await this.connected();
    try {
      const metadata = await retryRetriable(() => admin.fetchTopicMetadata({ topics: [topic] }), topicMayAnswerLater);
      return metadata.topics.find((t) => t.name === topic)?.partitions.length ?? 0;
    } catch (e) {
      if ((e as { type?: string }).type === 'UNKNOWN_TOPIC_OR_PARTITION') return 0;
      throw e;
    }
  }

  async leaders(topics: readonly string[]): Promise<ReadonlyMap<string, PartitionLeaders>> {
    const admin = await this.connected();
    try {
      const metadata = await admin.fetchTopicMetadata({ topics: [...topics] });
      return new Map(metadata.topics.map((t) => [t.name, [...t.partitions].sort((a, b) => a.partitionId - b.partitionId).map((p) => p.leader)]));
    } catch (e) {
      if (topicNotKnownYet(e)) return new Map();
      throw e;
    }
  }

  async leadersAnswer(topics: readonly string[]): Promise<boolean> {
    return leadersAnswer(await this.connected(), topics);
  }

  async topicConfigs(topics: readonly string[], names: readonly string[]): Promise<ReadonlyMap<string, ReadonlyMap<string, string>>> {
    const described = await (
      await this.connected()
    ).describeConfigs({ includeSynonyms: false, resources: topics.map((name) => ({ type: TOPIC_RESOURCE, name, configNames: [...names] })) });
    return new Map(described.resources.map((r) => [r.resourceName, new Map(r.configEntries.map((e) => [e.configName, e.configValue]))]));
  }

  async watermarks(topic: string): Promise<{ low: number; high: number }> {
    const p0 = (await fetchTopicOffsets(await this.connected(), topic)).find((p) => p.partition === 0);
    return { low: Number(p0?.low ?? '0'), high: Number(p0?.high ?? '0') };
  }

  async committedOffset(group: string, topic: string): Promise<number | undefined> {
    const admin = await this.connected();
    const offsets = await retryRetriable(() => admin.fetchOffsets({ groupId: group, topics: [topic] }));
    const raw = offsets.find((o) => o.topic === topic)?.partitions.find((p) => p.partition === 0)?.offset;
    const n = raw === undefined ? -1 : Number(raw);
    return n >= 0 ? n : undefined;
  }

  async close(): Promise<void> {
    if (this.connection.current) await this.admin.disconnect();
  }

  private async connected(): Promise<Admin> {
    await this.connection.get();
    return this.admin;
  }
}
