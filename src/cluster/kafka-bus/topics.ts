// The bus's topics on the broker: created on request with one partition each, and checked once
// per topic to exist with exactly one (the bus never creates a topic implicitly) and to take the
// largest record batch the bus writes.
import type { Logger } from 'pino';
import type { Clock } from '../clock.js';
import type { BusAdmin } from './admin.js';
import { KafkaBusError, kafkaCall, kafkaError } from './errors.js';
import { KAFKA_DEFAULT_MAX_MESSAGE_BYTES } from './record-size.js';

/** How long `ensure` waits for new topics to have a leader. */
const TOPIC_READY_MS = 10_000;

export interface BusTopicsParams {
  /** The bus's admin requests. */
  readonly admin: BusAdmin;
  readonly clock: Clock;
  readonly log: Logger;
  readonly replicationFactor: number;
  /** The largest record batch the bus writes (./record-size.ts): each topic's max.message.bytes and segment.bytes must allow it. */
  readonly batchBytes: number;
  /** The option behind it, named in the error when a topic is too small. */
  readonly maxRecordBytes: number;
}

const MAX_MESSAGE_BYTES_CONFIG = 'max.message.bytes';
/** The topic configs that bound a record batch: its largest size, and the size of a log segment. */
const LIMIT_CONFIGS = [MAX_MESSAGE_BYTES_CONFIG, 'segment.bytes'] as const;

/** Creates and checks bus topics; remembers the topics it found good. */
export class BusTopics {
  /** Topics checked to exist with one partition and limits that take the bus's batches. */
  private readonly knownTopics = new Set<string>();

  constructor(private readonly p: BusTopicsParams) {}

  /** Creates the topics that are missing and waits for their leaders: see `KafkaBus.ensureTopics`. */
  async ensure(topics: readonly string[]): Promise<string[]> {
    const wanted = [...new Set(topics)];
    for (const t of wanted) checkTopicName(t);
    if (wanted.length === 0) return [];
    const admin = this.p.admin;
    const existing = new Set(await kafkaCall('listing topics', {}, () => admin.listTopics()));
    const missing = wanted.filter((t) => !existing.has(t));
    const created: string[] = [];
    const maxMessageBytes = String(Math.max(this.p.batchBytes, KAFKA_DEFAULT_MAX_MESSAGE_BYTES));
    if (missing.length > 0) {
      await kafkaCall('creating topics', {}, () => admin.createTopics(missing, this.p.replicationFactor, { [MAX_MESSAGE_BYTES_CONFIG]: maxMessageBytes }));
      created.push(...missing);
      this.p.log.info({ event: 'bus.topics.created', topics: missing, replicationFactor: this.p.replicationFactor }, 'bus topics created');
    }
    await this.waitForTopics(wanted);
    await this.checkLimits(wanted);
    for (const t of wanted) this.knownTopics.add(t);
    return created;
  }

  /** Checks once per topic that it exists with exactly one partition. */
  async check(topic: string): Promise<void> {
    if (this.knownTopics.has(topic)) return;
    let partitions: number;
    try {
      partitions = await this.p.admin.partitionCount(topic);
    } catch (e) {
      throw kafkaError(`reading the metadata of topic ${topic}`, { topic }, e);
    }
    if (partitions === 0) {
      throw new KafkaBusError(
        'TOPIC_MISSING',
        `topic ${topic} does not exist: the bus never creates topics implicitly; create a cluster's topics with \`shardherd topics create --config <node config>\` or createClusterTopics() (shardherd/node), any other with KafkaBus.ensureTopics()`,
        { topic },
      );
    }
    if (partitions !== 1) {
      throw new KafkaBusError('TOPIC_NOT_ONE_PARTITION', `topic ${topic} has ${partitions} partitions: a bus topic must have exactly one (one ordered log)`, {
        topic,
      });
    }
    await this.checkLimits([topic]);
    this.knownTopics.add(topic);
  }

  /**
   * Refuses topics that cannot take the largest record batch the bus writes: the broker refuses a
   * batch larger than the topic's max.message.bytes (MESSAGE_TOO_LARGE) or than its segment.bytes
   * (RECORD_LIST_TOO_LARGE), for good; say so now, with what to change.
   */
  private async checkLimits(topics: readonly string[]): Promise<void> {
    if (topics.length === 0) return;
    const described = await kafkaCall('reading the topic configs', {}, () => this.p.admin.topicConfigs(topics, LIMIT_CONFIGS));
    const need = this.p.batchBytes;
    for (const topic of topics) {
      const configs = described.get(topic);
      for (const config of LIMIT_CONFIGS) {
        const value = configs?.get(config);
        const limit = Number(value);
        if (value === undefined || !Number.isSafeInteger(limit)) {
          throw new KafkaBusError('KAFKA_FAILED', `the broker did not say the ${config} of topic ${topic} (got ${String(value)})`, { topic }, true);
        }
        if (limit >= need) continue;
        throw new KafkaBusError(
          'BROKER_LIMIT_TOO_SMALL',
          `topic ${topic} takes record batches of at most ${limit} bytes (its ${config}), but this bus writes up to ${need} ` +
            `(maxRecordBytes ${this.p.maxRecordBytes} and ${need - this.p.maxRecordBytes} bytes of record and batch overhead): raise the topic's ` +
            `${config} to at least ${need} (kafka-configs.sh --alter --entity-type topics --entity-name ${topic} --add-config ${config}=${need}), ` +
            'or lower the bus option maxRecordBytes (kafka.maxRecordBytes in a node config)',
          { topic },
          false,
        );
      }
    }
  }

  /** Waits until each topic has its one partition with a leader that answers; refuses topics with more partitions. */
  private async waitForTopics(topics: readonly string[]): Promise<void> {
    const admin = this.p.admin;
    const deadline = this.p.clock.now() + TOPIC_READY_MS;
    for (;;) {
      const leaders = await kafkaCall('reading topic metadata', {}, () => admin.leaders(topics));
      let ready = true;
      for (const topic of topics) {
        const partitions = leaders.get(topic) ?? [];
        if (partitions.length > 1) {
          throw new KafkaBusError(
            'TOPIC_NOT_ONE_PARTITION',
            `topic ${topic} exists with ${partitions.length} partitions: a bus topic must have exactly one (one ordered log)`,
            { topic },
          );
        }
        if (partitions.length === 0 || (partitions[0] ?? -1) < 0) ready = false;
      }
      if (ready && (await kafkaCall('reading topic offsets', {}, () => admin.leadersAnswer(topics)))) break;
      if (this.p.clock.now() > deadline)
        throw new KafkaBusError('KAFKA_FAILED', `topics ${topics.join(', ')} have no leader after ${TOPIC_READY_MS} ms`, {}, true);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}

/** Refuses a name Kafka would refuse. */
export function checkTopicName(topic: string): void {
  // Kafka's own rule; checked here so that a bad name fails at once instead of after retries.
  if (!/^[A-Za-z0-9._-]{1,249}$/.test(topic) || topic === '.' || topic === '..') {
    throw new KafkaBusError('INVALID_OPTION', `'${topic}' is not a Kafka topic name: 1 to 249 letters, digits, '.', '_' or '-'`, { topic });
  }
}
