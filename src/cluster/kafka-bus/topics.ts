// The bus's topics on the broker: created on request with one partition each, and checked once
// per topic to exist with exactly one (the bus never creates a topic implicitly).
import type { Admin } from 'kafkajs';
import type { Logger } from 'pino';
import type { Clock } from '../clock.js';
import { leadersAnswer, topicNotKnownYet } from '../kafka-client.js';
import { KafkaBusError, kafkaCall, kafkaError } from './errors.js';

/** How long `ensure` waits for new topics to have a leader. */
const TOPIC_READY_MS = 10_000;

export interface BusTopicsParams {
  /** The bus's admin client, connected. */
  readonly admin: () => Promise<Admin>;
  readonly clock: Clock;
  readonly log: Logger;
  readonly replicationFactor: number;
}

/** Creates and checks bus topics; remembers the topics it found good. */
export class BusTopics {
  /** Topics checked to exist with one partition. */
  private readonly knownTopics = new Set<string>();

  constructor(private readonly p: BusTopicsParams) {}

  /** Creates the topics that are missing and waits for their leaders: see `KafkaBus.ensureTopics`. */
  async ensure(topics: readonly string[]): Promise<string[]> {
    const wanted = [...new Set(topics)];
    for (const t of wanted) checkTopicName(t);
    if (wanted.length === 0) return [];
    const admin = await this.p.admin();
    const existing = new Set(await kafkaCall('listing topics', {}, () => admin.listTopics()));
    const missing = wanted.filter((t) => !existing.has(t));
    const created: string[] = [];
    if (missing.length > 0) {
      await kafkaCall('creating topics', {}, () =>
        admin.createTopics({
          topics: missing.map((topic) => ({ topic, numPartitions: 1, replicationFactor: this.p.replicationFactor })),
          // Waited for below: kafkajs's own wait fails on a broker that has not heard of them yet.
          waitForLeaders: false,
        }),
      );
      created.push(...missing);
      this.p.log.info({ event: 'bus.topics.created', topics: missing, replicationFactor: this.p.replicationFactor }, 'bus topics created');
    }
    await this.waitForTopics(wanted);
    return created;
  }

  /** Checks once per topic that it exists with exactly one partition. */
  async check(topic: string): Promise<void> {
    if (this.knownTopics.has(topic)) return;
    const admin = await this.p.admin();
    let partitions: number;
    try {
      const metadata = await admin.fetchTopicMetadata({ topics: [topic] });
      partitions = metadata.topics.find((t) => t.name === topic)?.partitions.length ?? 0;
    } catch (e) {
      if ((e as { type?: string }).type === 'UNKNOWN_TOPIC_OR_PARTITION') partitions = 0;
      else throw kafkaError(`reading the metadata of topic ${topic}`, { topic }, e);
    }
    if (partitions === 0) {
      throw new KafkaBusError('TOPIC_MISSING', `topic ${topic} does not exist: the bus never creates topics implicitly; create it with ensureTopics()`, { topic });
    }
    if (partitions !== 1) {
      throw new KafkaBusError('TOPIC_NOT_ONE_PARTITION', `topic ${topic} has ${partitions} partitions: a bus topic must have exactly one (one ordered log)`, { topic });
    }
    this.knownTopics.add(topic);
  }

  /** Waits until each topic has its one partition with a leader that answers; refuses topics with more partitions. */
  private async waitForTopics(topics: readonly string[]): Promise<void> {
    const admin = await this.p.admin();
    const deadline = this.p.clock.now() + TOPIC_READY_MS;
    for (;;) {
      const metadata = await kafkaCall('reading topic metadata', {}, async () => {
        try {
          return await admin.fetchTopicMetadata({ topics: [...topics] });
        } catch (e) {
          // A broker of a cluster may not know a topic the controller has just created.
          if (topicNotKnownYet(e)) return { topics: [] };
          throw e;
        }
      });
      let ready = true;
      for (const topic of topics) {
        const partitions = metadata.topics.find((t) => t.name === topic)?.partitions ?? [];
        if (partitions.length > 1) {
          throw new KafkaBusError('TOPIC_NOT_ONE_PARTITION', `topic ${topic} exists with ${partitions.length} partitions: a bus topic must have exactly one (one ordered log)`, { topic });
        }
        if (partitions.length === 0 || (partitions[0]?.leader ?? -1) < 0) ready = false;
      }
      if (ready && (await kafkaCall('reading topic offsets', {}, () => leadersAnswer(admin, topics)))) break;
      if (this.p.clock.now() > deadline) throw new KafkaBusError('KAFKA_FAILED', `topics ${topics.join(', ')} have no leader after ${TOPIC_READY_MS} ms`, {}, true);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    for (const t of topics) this.knownTopics.add(t);
  }
}

/** Refuses a name Kafka would refuse. */
export function checkTopicName(topic: string): void {
  // Kafka's own rule; checked here so that a bad name fails at once instead of after retries.
  if (!/^[A-Za-z0-9._-]{1,249}$/.test(topic) || topic === '.' || topic === '..') {
    throw new KafkaBusError('INVALID_OPTION', `'${topic}' is not a Kafka topic name: 1 to 249 letters, digits, '.', '_' or '-'`, { topic });
  }
}
