// The Bus port on Kafka, on kafkajs or @platformatic/kafka (`client`): one single-partition topic per
// bus topic, one shared producer, one consumer per subscription with its own group membership,
// offsets committed only when the caller says so.
import { randomBytes } from 'node:crypto';
import type { Kafka } from 'kafkajs';
import type { Logger } from 'pino';
import { encodeLabels, MessageTooLargeError, type Bus, type BusSubscription, type ProduceOptions, type RecordHandler, type SubscribeOptions } from './bus.js';
import { RealClock, type Clock } from './clock.js';
import { createKafka, type KafkaConnection } from './kafka-client.js';
import type { BusAdmin } from './kafka-bus/admin.js';
import { chunkHeaders, labelHeaders, sliceValue } from './kafka-bus/chunks.js';
import { KafkaBusError, kafkaCall } from './kafka-bus/errors.js';
import { encodeJson } from './kafka-bus/json.js';
import { KafkajsBusAdmin } from './kafka-bus/kafkajs-admin.js';
import { KafkajsSubscription } from './kafka-bus/kafkajs-subscription.js';
import { KafkajsBusWriter } from './kafka-bus/kafkajs-writer.js';
import { PlatformaticBusAdmin } from './kafka-bus/platformatic-admin.js';
import { PlatformaticSubscription } from './kafka-bus/platformatic-subscription.js';
import { PlatformaticBusWriter } from './kafka-bus/platformatic-writer.js';
import { BusProducer } from './kafka-bus/producer.js';
import { brokerBytesNeeded } from './kafka-bus/record-size.js';
import { kafkaBusSettings, type KafkaBusOptions, type KafkaBusSettings } from './kafka-bus/settings.js';
import type { SubscriptionParams } from './kafka-bus/subscription-params.js';
import { BusTopics, checkTopicName } from './kafka-bus/topics.js';

export { KafkaBusError, type KafkaBusErrorCode } from './kafka-bus/errors.js';
export { kafkaBusSettings, type BusCompression, type KafkaBusOptions, type KafkaBusSettings } from './kafka-bus/settings.js';

/** How long one of the bus's Kafka requests waits for its answer before the client library retries it. */
const BUS_REQUEST_TIMEOUT_MS = 10_000;

/**
 * The bus on Kafka. Each bus topic is a Kafka topic with exactly one partition (one ordered log);
 * values are JSON. It runs on @platformatic/kafka (`client: 'platformatic'`, the default) or
 * kafkajs (`client: 'kafkajs'`); both write and read the same records and speak the same group
 * protocol, so buses on either library share topics and groups (a cluster can switch library node
 * by node).
 *
 * - Records and messages are as `Bus` says. A record is at most `maxRecordBytes` of JSON; a larger
 *   value is cut into chunk records: each holds a slice of the value's UTF-8 bytes, with its
 *   message id (unique per bus and message), index and count in the headers `shardherd.chunk.id`,
 *   `.index` and `.count` (./kafka-bus/chunks.ts). Record batches are gzip-compressed unless
 *   `compression: 'none'`, and never hold more than `maxRecordBytes` of records.
 * - Every topic's `max.message.bytes` and `segment.bytes` must take the largest batch the bus
 *   writes (`maxRecordBytes` plus overhead: ./kafka-bus/record-size.ts): `ensureTopics`, `produce`
 *   and `subscribe` refuse a topic that does not (`BROKER_LIMIT_TOO_SMALL`), and `ensureTopics`
 *   sets `max.message.bytes` on the topics it creates. A batch the broker refuses as too large
 *   anyway (a limit lowered since) fails with `RECORD_TOO_LARGE`; neither is retriable.
 * - Topics are never created implicitly: `ensureTopics` creates them (producer and consumers run
 *   with auto-creation off). `produce` or `subscribe` on a topic that does not exist, or that has
 *   more than one partition, fails at once with a `KafkaBusError` saying so.
 * - `produce` resolves once the record is written with `acks: -1`, idempotently (a retried
 *   request is written once), with its offset. Records
 *   produced by one bus are appended in the order `produce` was called: one request at a time,
 *   consecutive records of the same topic batched into one request.
 * - `subscribe` opens one consumer (its own group member), without auto-commit. It
 *   resolves once the member has joined and its start position is fixed: the group's committed
 *   offset, or else the topic's first or next offset as it was when `subscribe` was called (so
 *   with `start: 'latest'` nothing produced after `subscribe` resolved is missed).
 * - The bus group is the Kafka consumer group (committed offsets are per group and topic, as in
 *   the memory bus). Two open subscriptions of one group to one topic do not split it: partition
 *   0 goes to the subscription opened most recently (its open time travels in the member
 *   metadata; ties go to the smallest member id), the others receive nothing until it closes or
 *   drops out of the group. So the newest subscription owns the log: an old singleton that wakes
 *   up from a pause cannot take the inbox back from its successor. **The memory bus differs**:
 *   there each open subscription of a group receives every record. Subscriptions of one group to
 *   different topics (a node's events and replies) each get their own topic.
 * - Whenever a subscription is given the topic, it starts at the group's committed offset or at
 *   the next record it has not seen yet, whichever is later: it never sees a record twice, and
 *   never goes back behind what its group committed.
 * - `commit(offset)` commits `offset` (exclusive, as in Kafka) for the group and resolves once the
 *   broker has it.
 * - A record that is not JSON is reported to `onError` (a `KafkaBusError` with code
 *   `MALFORMED_RECORD`; the record's value is the raw text) and skipped.
 *
 * Gotchas:
 * - The subscriptions of one group rebalance together: opening a second one (a node's replies
 *   after its events) pauses the first for a rebalance (about heartbeatIntervalMs + maxWaitTimeMs),
 *   and a member stuck in a handler past `sessionTimeoutMs` holds up its group's rebalances until
 *   it is dropped (up to rebalanceTimeoutMs).
 * - A subscription that does not own the topic refuses `commit` (`NOT_OWNER`): a replaced
 *   subscription must not move the group's position.
 * - On kafkajs, heartbeats are sent between records: a handler that takes longer than
 *   `sessionTimeoutMs` gets its subscription dropped from the group; it rejoins after the handler
 *   returns and goes on from where it was. On @platformatic/kafka they are sent on a timer of their
 *   own: a slow handler keeps its membership (a stopped or starved process still loses it).
 * - `close()` of a subscription stops delivery and leaves the group at once; it does not wait
 *   for a handler that is still running (that record's outcome is then ignored).
 * - A broker's `group.initial.rebalance.delay.ms` (3000 ms by default) delays every join of a
 *   group that has no members, so on a stock broker `subscribe` to a new group (every node
 *   incarnation's) or to a group its last member left (the next singleton's inbox) takes that
 *   long: set it to 0 for a shardherd cluster (the test broker does; `subscribe` then takes tens
 *   of milliseconds).
 * - Open times come from each process's clock: two subscriptions of one group opened on
 *   different hosts less than their clock skew apart may be ordered either way.
 * - A consumer that fails for good (the library gives up on an error, or its rejoin failed) is
 *   logged as `bus.consumer.crashed` at error level, and a new consumer joins the group in its
 *   place and goes on from the subscription's position.
 * - Delivery is at least once across subscriptions: records after the last commit are delivered
 *   again to the next owner.
 */
export class KafkaBus implements Bus {
  readonly settings: KafkaBusSettings;
  private readonly connection: KafkaConnection;
  /** The kafkajs client, when the bus runs on kafkajs. */
  private readonly kafka: Kafka | undefined;
  private readonly log: Logger;
  private readonly clock: Clock;
  private readonly admin: BusAdmin;
  private readonly topics: BusTopics;
  private readonly producer: BusProducer;
  private readonly subscriptions = new Set<KafkajsSubscription | PlatformaticSubscription>();
  private lastOpenedAt = -Infinity;
  private closed = false;
  /** Makes chunked messages' ids unique per bus: another bus's chunks may interleave with ours. */
  private readonly producerId = randomBytes(9).toString('base64url');
  private nextMessage = 0;

  constructor(options: KafkaBusOptions) {
    this.settings = kafkaBusSettings(options);
    this.log = options.log;
    this.clock = options.clock ?? new RealClock();
    this.connection = {
      brokers: this.settings.brokers,
      clientId: this.settings.clientId,
      log: options.log,
      connectionTimeoutMs: this.settings.connectionTimeoutMs,
      // The bus's requests are small. A produce sent to a broker that was frozen (SIGSTOP) and came
      // back could wait the default 30 s for an answer that never came, then again on each of its
      // retries: the node's every produce queued behind it for over two minutes (the broker-faults
      // test: a node's copies never reported). 10 s, then the retry.
      requestTimeoutMs: BUS_REQUEST_TIMEOUT_MS,
    };
    this.kafka = this.settings.client === 'kafkajs' ? createKafka(this.connection) : undefined;
    this.admin = this.kafka === undefined ? new PlatformaticBusAdmin(this.connection) : new KafkajsBusAdmin(this.kafka);
    this.topics = new BusTopics({
      admin: this.admin,
      clock: this.clock,
      log: this.log,
      replicationFactor: this.settings.replicationFactor,
      batchBytes: brokerBytesNeeded(this.settings.maxRecordBytes, this.settings.compression),
      maxRecordBytes: this.settings.maxRecordBytes,
    });
    this.producer = new BusProducer(this.kafka === undefined ? new PlatformaticBusWriter(this.connection) : new KafkajsBusWriter(this.kafka), {
      checkTopic: (topic) => this.topics.check(topic),
      failure: (error, topic) => this.closedInstead(error, topic),
      log: this.log,
      maxRecordBytes: this.settings.maxRecordBytes,
      compression: this.settings.compression,
    });
  }

  /**
   * Creates the topics that do not exist yet, with one partition each, the configured
   * replication factor and a `max.message.bytes` that takes the bus's records, and waits until
   * each has a leader. Every topic is checked to have exactly one partition, and a
   * `max.message.bytes` and `segment.bytes` that take the bus's largest batch
   * (`BROKER_LIMIT_TOO_SMALL` otherwise). Resolves with the topics it created (none on a second
   * call): those missing when it looked, so of processes creating the same topics at once, more
   * than one may report a topic (each resolves; the topic exists once).
   */
  async ensureTopics(topics: readonly string[]): Promise<string[]> {
    this.assertOpen();
    return this.topics.ensure(topics);
  }

  async produce(topic: string, value: unknown, options: ProduceOptions = {}): Promise<number> {
    this.assertOpen();
    checkTopicName(topic);
    const json = encodeJson(value);
    const bytes = Buffer.byteLength(json);
    const { maxRecordBytes, maxMessageBytes } = this.settings;
    // Labels travel in a header of every record of the value, within the record's budget: a
    // topic's limits stay what they were for records without them.
    const labels = options.labels === undefined ? undefined : labelHeaders(encodeLabels(options.labels));
    const room = maxRecordBytes - (labels?.bytes ?? 0);
    if (bytes <= room)
      return this.producer.produce(topic, [{ value: json, bytes: bytes + (labels?.bytes ?? 0), ...(labels ? { headers: labels.headers } : {}) }]);
    if (bytes > maxMessageBytes) throw new MessageTooLargeError(topic, bytes, maxMessageBytes);
    // Cut as bytes, not characters: a slice may end inside a character; the reader joins the
    // bytes before it decodes them, once.
    const slices = sliceValue(Buffer.from(json, 'utf8'), room);
    const id = `${this.producerId}.${this.nextMessage++}`;
    return this.producer.produce(
      topic,
      slices.map((slice, index) => ({
        value: slice,
        bytes: slice.length + (labels?.bytes ?? 0),
        headers: { ...chunkHeaders(id, index, slices.length), ...labels?.headers },
      })),
    );
  }

  async subscribe(topic: string, group: string, handler: RecordHandler, options: SubscribeOptions = {}): Promise<BusSubscription> {
    this.assertOpen();
    checkTopicName(topic);
    if (group.length === 0) throw new KafkaBusError('INVALID_OPTION', 'group must not be empty', { topic });
    let watermarks: { low: number; high: number } | undefined;
    try {
      await this.topics.check(topic);
      // Fixed before joining: with `latest`, a record produced after subscribe() resolves has an
      // offset at or after this one, whenever the member actually starts reading.
      watermarks = await kafkaCall('reading the topic offsets', { topic }, () => this.admin.watermarks(topic));
    } catch (e) {
      throw this.closedInstead(e, topic);
    }
    this.assertOpen();
    const params: SubscriptionParams = {
      committedOffset: () => this.committedOffset(topic, group),
      onClosed: () => this.subscriptions.delete(sub),
      settings: this.settings,
      log: this.log.child({ topic, group }),
      topic,
      group,
      handler,
      onError: options.onError,
      skip: options.skip,
      startIfUncommitted: options.startAt ?? (options.start === 'earliest' ? watermarks.low : watermarks.high),
      openedAt: this.nextOpenTime(),
      fromBeginning: options.start === 'earliest',
      clock: this.clock,
    };
    const sub =
      this.kafka === undefined
        ? new PlatformaticSubscription(this.connection, params, async () => (await this.admin.watermarks(topic)).low)
        : new KafkajsSubscription(this.kafka, params);
    this.subscriptions.add(sub);
    try {
      await sub.open();
    } catch (e) {
      this.subscriptions.delete(sub);
      throw this.closedInstead(e, topic);
    }
    return sub;
  }

  /**
   * Closes every subscription, lets the records already passed to `produce` be sent (or fail),
   * then closes the producer and the admin connection. Further calls are refused (`CLOSED`).
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await Promise.allSettled([...this.subscriptions].map((s) => s.close()));
    await this.producer.close();
    await this.admin.close().catch((e: unknown) => this.log.warn({ err: e }, 'admin disconnect failed'));
  }

  /** The group's committed offset on the topic, if it committed one (as the broker has it now). */
  async committedOffset(topic: string, group: string): Promise<number | undefined> {
    // Retried: right after a broker start the group's coordinator answers "loading" for a while,
    // and a subscription that could not read its committed offset would start from elsewhere.
    return kafkaCall('reading the committed offset', { topic, group }, () => this.admin.committedOffset(group, topic));
  }

  private nextOpenTime(): number {
    // Strictly increasing within the bus, so that of two subscriptions opened in the same
    // millisecond the second is still the newer one.
    this.lastOpenedAt = Math.max(this.clock.now(), this.lastOpenedAt + 1);
    return this.lastOpenedAt;
  }

  private assertOpen(): void {
    if (this.closed) throw new KafkaBusError('CLOSED', 'the bus is closed');
  }

  /** What failed because the bus was closed under it says so, not what the client library made of it. */
  private closedInstead(error: unknown, topic: string): unknown {
    return this.closed && !(error instanceof KafkaBusError && error.code !== 'KAFKA_FAILED')
      ? new KafkaBusError('CLOSED', `the bus was closed during an operation on ${topic}`, { topic, cause: error })
      : error;
  }
}
