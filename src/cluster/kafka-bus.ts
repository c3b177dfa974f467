// The Bus port on Kafka (kafkajs): one single-partition topic per bus topic, one shared producer,
// one consumer per subscription with its own group membership, offsets committed only when the
// caller says so.
import { AssignerProtocol, type Admin, type Consumer, type Kafka, type PartitionAssigner, type Producer } from 'kafkajs';
import type { Logger } from 'pino';
import type { Bus, BusRecord, BusSubscription, SubscribeOptions } from './bus.js';
import { RealClock, type Clock } from './clock.js';
import { createKafka, type KafkaConnection } from './kafka-client.js';

/** The connection (brokers, client id, log, connection timeout) and the group timings of the bus's consumers. */
export interface KafkaBusOptions extends KafkaConnection {
  /**
   * How long the broker waits for a subscription's heartbeat before it drops it from its group and
   * gives the topic to another open subscription of that group (default 10000 ms; the broker
   * refuses values outside its `group.min/max.session.timeout.ms`, 6000 ms minimum by default).
   * Keep it at most the cluster's failure-detection timeout, so that a dead singleton's inbox
   * subscription is gone by the time the next singleton subscribes.
   */
  readonly sessionTimeoutMs?: number | undefined;
  /**
   * How often an idle subscription heartbeats, and so how soon it notices that its group is
   * rebalancing (default sessionTimeoutMs / 10, between 100 and 3000 ms). Less than sessionTimeoutMs.
   */
  readonly heartbeatIntervalMs?: number | undefined;
  /**
   * How long the broker waits for the members of a group to rejoin when one joins or leaves; a
   * member that does not rejoin in time is dropped (default sessionTimeoutMs).
   */
  readonly rebalanceTimeoutMs?: number | undefined;
  /**
   * The longest a fetch waits on the broker when there is nothing to read (default 250 ms, or
   * heartbeatIntervalMs if that is less; at most heartbeatIntervalMs, since an idle subscription
   * heartbeats between fetches). A new record ends the wait at once, so this does not delay
   * delivery; it bounds how soon a subscription that was just given the topic starts reading, and
   * how often an idle subscription asks the broker (each one every maxWaitTimeMs).
   */
  readonly maxWaitTimeMs?: number | undefined;
  /** Replication factor of the topics `ensureTopics` creates (default 1). */
  readonly replicationFactor?: number | undefined;
  /** Where subscription open times come from (default: the wall clock). */
  readonly clock?: Clock | undefined;
}

/** The options with their defaults, checked. */
export interface KafkaBusSettings {
  readonly brokers: readonly string[];
  readonly clientId: string;
  readonly sessionTimeoutMs: number;
  readonly heartbeatIntervalMs: number;
  readonly rebalanceTimeoutMs: number;
  readonly maxWaitTimeMs: number;
  readonly replicationFactor: number;
  readonly connectionTimeoutMs: number;
}

export type KafkaBusErrorCode =
  /** An option that cannot be used; the message names it. */
  | 'INVALID_OPTION'
  /** The topic does not exist: the bus never creates topics implicitly (see `ensureTopics`). */
  | 'TOPIC_MISSING'
  /** The topic exists with more than one partition: a bus topic is one ordered log. */
  | 'TOPIC_NOT_ONE_PARTITION'
  /** A value that JSON cannot carry faithfully (a function, a Date, NaN, a cycle...). */
  | 'NOT_JSON'
  /** A record on the topic that is not JSON (reported to `onError`, then skipped). */
  | 'MALFORMED_RECORD'
  /** The bus or the subscription was closed. */
  | 'CLOSED'
  /** A commit from a subscription that does not own the topic in its group (a newer one does). */
  | 'NOT_OWNER'
  /** Kafka failed the operation; it may work if tried again. */
  | 'KAFKA_FAILED';

/** Every error the Kafka bus throws: a stable `code`, whether retrying can help, and the topic and group. */
export class KafkaBusError extends Error {
  readonly code: KafkaBusErrorCode;
  readonly retriable: boolean;
  readonly topic: string | undefined;
  readonly group: string | undefined;

  constructor(
    code: KafkaBusErrorCode,
    message: string,
    context: { readonly topic?: string; readonly group?: string; readonly cause?: unknown } = {},
    retriable = false,
  ) {
    super(message, context.cause === undefined ? undefined : { cause: context.cause });
    this.name = 'KafkaBusError';
    this.code = code;
    this.retriable = retriable;
    this.topic = context.topic;
    this.group = context.group;
  }
}

/** Applies the defaults and checks every option, naming the one that is wrong. */
export function kafkaBusSettings(options: KafkaBusOptions): KafkaBusSettings {
  const bad = (key: string, reason: string): never => {
    throw new KafkaBusError('INVALID_OPTION', `KafkaBus option ${key} ${reason}`);
  };
  const positive = (key: string, value: number | undefined, fallback: number): number => {
    const v = value ?? fallback;
    if (!Number.isSafeInteger(v) || v <= 0) bad(key, `must be a positive whole number, got ${String(v)}`);
    return v;
  };
  if (options.brokers.length === 0) bad('brokers', 'needs at least one host:port');
  for (const b of options.brokers) if (!/^[^\s:]+:\d{1,5}$/.test(b)) bad('brokers', `must be host:port, got '${b}'`);
  if (options.clientId.length === 0) bad('clientId', 'must not be empty');
  const sessionTimeoutMs = positive('sessionTimeoutMs', options.sessionTimeoutMs, 10_000);
  const heartbeatIntervalMs = positive(
    'heartbeatIntervalMs',
    options.heartbeatIntervalMs,
    Math.min(3_000, Math.max(100, Math.floor(sessionTimeoutMs / 10))),
  );
  // kafkajs refuses this too, but only when the first subscription is made.
  if (heartbeatIntervalMs >= sessionTimeoutMs) bad('heartbeatIntervalMs', `(${heartbeatIntervalMs}) must be less than sessionTimeoutMs (${sessionTimeoutMs})`);
  const maxWaitTimeMs = positive('maxWaitTimeMs', options.maxWaitTimeMs, Math.min(250, heartbeatIntervalMs));
  // An idle subscription heartbeats only between fetches: a longer wait would starve the session.
  if (maxWaitTimeMs > heartbeatIntervalMs) bad('maxWaitTimeMs', `(${maxWaitTimeMs}) must be at most heartbeatIntervalMs (${heartbeatIntervalMs})`);
  return {
    brokers: [...options.brokers],
    clientId: options.clientId,
    sessionTimeoutMs,
    heartbeatIntervalMs,
    rebalanceTimeoutMs: positive('rebalanceTimeoutMs', options.rebalanceTimeoutMs, sessionTimeoutMs),
    maxWaitTimeMs,
    replicationFactor: positive('replicationFactor', options.replicationFactor, 1),
    connectionTimeoutMs: positive('connectionTimeoutMs', options.connectionTimeoutMs, 3_000),
  };
}

/** Name of the group protocol of bus subscriptions; every member of a bus group speaks it. */
export const NEWEST_SUBSCRIPTION_OWNS = 'shardherd-newest-subscription-owns';
const ASSIGNER_VERSION = 1;

/** What a subscription tells its group when it joins (the member metadata's `userData`). */
interface MemberInfo {
  readonly format: 1;
  /** When the subscription was opened (ms, its process's clock). */
  readonly openedAt: number;
}

/**
 * The group assigner of bus subscriptions. For each topic, partition 0 goes to the member, among
 * those subscribed to that topic, whose subscription was opened last (ties to the smallest member
 * id); every other member gets nothing of it. The topics come from every member's metadata, not
 * only the leader's: one group may hold subscriptions to different topics (a node's events and
 * replies), and the leader is any one of them. A member whose metadata cannot be read gets nothing.
 */
export function newestSubscriptionOwns(openedAt: number): PartitionAssigner {
  return () => ({
    name: NEWEST_SUBSCRIPTION_OWNS,
    version: ASSIGNER_VERSION,
    async assign({ members }) {
      const infos = members.map((m) => ({ memberId: m.memberId, ...readMember(m.memberMetadata) }));
      const assignment = new Map<string, Record<string, number[]>>(members.map((m) => [m.memberId, {}]));
      for (const topic of new Set(infos.flatMap((i) => i.topics))) {
        const owner = infos
          .filter((i) => i.topics.includes(topic))
          .sort((a, b) => b.openedAt - a.openedAt || (a.memberId < b.memberId ? -1 : a.memberId > b.memberId ? 1 : 0))[0];
        if (owner) assignment.get(owner.memberId)![topic] = [0];
      }
      return members.map((m) => ({
        memberId: m.memberId,
        memberAssignment: AssignerProtocol.MemberAssignment.encode({
          version: ASSIGNER_VERSION,
          assignment: assignment.get(m.memberId) ?? {},
          userData: Buffer.alloc(0),
        }),
      }));
    },
    protocol({ topics }) {
      const info: MemberInfo = { format: 1, openedAt };
      return {
        name: NEWEST_SUBSCRIPTION_OWNS,
        metadata: AssignerProtocol.MemberMetadata.encode({ version: ASSIGNER_VERSION, topics, userData: Buffer.from(JSON.stringify(info)) }),
      };
    },
  });
}

function readMember(metadata: Buffer): { readonly openedAt: number; readonly topics: readonly string[] } {
  try {
    const decoded = AssignerProtocol.MemberMetadata.decode(metadata);
    const info = JSON.parse(decoded?.userData.toString('utf8') ?? '') as Partial<MemberInfo>;
    if (decoded && info.format === 1 && typeof info.openedAt === 'number' && Number.isFinite(info.openedAt)) {
      return { openedAt: info.openedAt, topics: decoded.topics };
    }
  } catch {
    // Not ours: below.
  }
  return { openedAt: -Infinity, topics: [] };
}

/** Encodes a value as JSON, refusing what JSON would silently change or drop. */
export function encodeJson(value: unknown): string {
  checkJson(value, '$', new Set());
  return JSON.stringify(value);
}

function checkJson(value: unknown, path: string, parents: Set<object>): void {
  const refuse = (what: string): never => {
    throw new KafkaBusError('NOT_JSON', `value is not JSON data: ${what} at ${path}`);
  };
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return;
    case 'number':
      if (!Number.isFinite(value)) refuse(String(value));
      return;
    case 'object': {
      if (value === null) return;
      if (parents.has(value)) refuse('a cycle');
      const proto: unknown = Object.getPrototypeOf(value);
      parents.add(value);
      if (Array.isArray(value)) {
        value.forEach((item, i) => checkJson(item, `${path}[${i}]`, parents));
      } else if (proto === Object.prototype || proto === null) {
        for (const [k, v] of Object.entries(value)) {
          // An undefined field is absent once encoded, which is what reading it gives anyway.
          if (v !== undefined) checkJson(v, `${path}.${k}`, parents);
        }
      } else {
        refuse(`a ${(value as { constructor?: { name?: string } }).constructor?.name ?? 'non-plain'} object`);
      }
      parents.delete(value);
      return;
    }
    default:
      refuse(typeof value === 'undefined' ? 'undefined' : `a ${typeof value}`);
  }
}

interface PendingProduce {
  readonly topic: string;
  readonly value: string;
  readonly resolve: (offset: number) => void;
  readonly reject: (error: unknown) => void;
}

/** How many queued records of one topic go in one produce request, at most, and how many bytes. */
const MAX_BATCH_RECORDS = 500;
const MAX_BATCH_BYTES = 512 * 1024;

/** How long `ensureTopics` waits for new topics to have a leader. */
const TOPIC_READY_MS = 10_000;

/**
 * The bus on Kafka. Each bus topic is a Kafka topic with exactly one partition (one ordered log);
 * values are JSON.
 *
 * - Topics are never created implicitly: `ensureTopics` creates them (producer and consumers run
 *   with auto-creation off). `produce` or `subscribe` on a topic that does not exist, or that has
 *   more than one partition, fails at once with a `KafkaBusError` saying so.
 * - `produce` resolves once the record is written with `acks: -1`, with its offset. Records
 *   produced by one bus are appended in the order `produce` was called: one request at a time,
 *   consecutive records of the same topic batched into one request.
 * - `subscribe` opens one kafkajs consumer (its own group member), without auto-commit. It
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
 * - Heartbeats are sent between records: a handler that takes longer than `sessionTimeoutMs`
 *   gets its subscription dropped from the group; it rejoins after the handler returns and goes on
 *   from where it was.
 * - `close()` of a subscription stops delivery and leaves the group at once; it does not wait
 *   for a handler that is still running (that record's outcome is then ignored).
 * - A broker's `group.initial.rebalance.delay.ms` (3000 ms by default) delays every join of a
 *   group that has no members, so on a stock broker `subscribe` to a new group (every node
 *   incarnation's) or to a group its last member left (the next singleton's inbox) takes that
 *   long: set it to 0 for a shardherd cluster (the test broker does; `subscribe` then takes tens
 *   of milliseconds).
 * - Open times come from each process's clock: two subscriptions of one group opened on
 *   different hosts less than their clock skew apart may be ordered either way.
 * - A consumer that fails for good (kafkajs gives up on a non-retriable error) is logged as
 *   `bus.consumer.crashed` at error level; its subscription then delivers nothing more.
 * - Delivery is at least once across subscriptions: records after the last commit are delivered
 *   again to the next owner. `produce` may append a record twice if a request times out after the
 *   broker wrote it (kafkajs retries it; idempotence is off).
 */
export class KafkaBus implements Bus {
  readonly settings: KafkaBusSettings;
  private readonly kafka: Kafka;
  private readonly log: Logger;
  private readonly clock: Clock;
  private readonly admin: Admin;
  private readonly producer: Producer;
  private adminConnected: Promise<void> | undefined;
  private producerConnected: Promise<void> | undefined;
  /** Topics checked to exist with one partition. */
  private readonly knownTopics = new Set<string>();
  private readonly pending: PendingProduce[] = [];
  /** The pump sending `pending`, while it runs. */
  private pumping: Promise<void> | undefined;
  private readonly subscriptions = new Set<KafkaSubscription>();
  private lastOpenedAt = -Infinity;
  private closed = false;

  constructor(options: KafkaBusOptions) {
    this.settings = kafkaBusSettings(options);
    this.log = options.log;
    this.clock = options.clock ?? new RealClock();
    this.kafka = createKafka({
      brokers: this.settings.brokers,
      clientId: this.settings.clientId,
      log: options.log,
      connectionTimeoutMs: this.settings.connectionTimeoutMs,
    });
    this.admin = this.kafka.admin();
    this.producer = this.kafka.producer({
      allowAutoTopicCreation: false,
      // The pump sends one request at a time anyway; this keeps kafkajs from reordering retries.
      maxInFlightRequests: 1,
      idempotent: false,
      // A topic deleted under a running bus, or a broker gone: fail within a few seconds, not 10+.
      retry: { retries: 4, initialRetryTime: 100, maxRetryTime: 1_000 },
    });
  }

  /**
   * Creates the topics that do not exist yet, with one partition each and the configured
   * replication factor, and waits until each has a leader. Topics that exist are checked to have
   * exactly one partition. Resolves with the topics it created (none on a second call).
   */
  async ensureTopics(topics: readonly string[]): Promise<string[]> {
    this.assertOpen();
    const wanted = [...new Set(topics)];
    for (const t of wanted) checkTopicName(t);
    if (wanted.length === 0) return [];
    const admin = await this.connectedAdmin();
    const existing = new Set(await kafkaCall('listing topics', {}, () => admin.listTopics()));
    const missing = wanted.filter((t) => !existing.has(t));
    const created: string[] = [];
    if (missing.length > 0) {
      await kafkaCall('creating topics', {}, () =>
        admin.createTopics({
          topics: missing.map((topic) => ({ topic, numPartitions: 1, replicationFactor: this.settings.replicationFactor })),
          waitForLeaders: true,
        }),
      );
      created.push(...missing);
      this.log.info({ event: 'bus.topics.created', topics: missing, replicationFactor: this.settings.replicationFactor }, 'bus topics created');
    }
    await this.waitForTopics(wanted);
    return created;
  }

  async produce(topic: string, value: unknown): Promise<number> {
    this.assertOpen();
    checkTopicName(topic);
    const encoded = encodeJson(value);
    return new Promise<number>((resolve, reject) => {
      this.pending.push({ topic, value: encoded, resolve, reject });
      this.pump();
    });
  }

  async subscribe(
    topic: string,
    group: string,
    handler: (record: BusRecord) => Promise<void> | void,
    options: SubscribeOptions & { onError?: (error: unknown, record: BusRecord) => void } = {},
  ): Promise<BusSubscription> {
    this.assertOpen();
    checkTopicName(topic);
    if (group.length === 0) throw new KafkaBusError('INVALID_OPTION', 'group must not be empty', { topic });
    let watermarks: { low: string; high: string } | undefined;
    try {
      await this.checkTopic(topic);
      // Fixed before joining: with `latest`, a record produced after subscribe() resolves has an
      // offset at or after this one, whenever the member actually starts reading.
      [watermarks] = await kafkaCall('reading the topic offsets', { topic }, async () => (await this.connectedAdmin()).fetchTopicOffsets(topic));
    } catch (e) {
      throw this.closedInstead(e, topic);
    }
    this.assertOpen();
    const startIfUncommitted = Number(options.start === 'earliest' ? watermarks?.low ?? '0' : watermarks?.high ?? '0');
    const openedAt = this.nextOpenTime();
    const sub: KafkaSubscription = new KafkaSubscription({
      committedOffset: () => this.committedOffset(topic, group),
      onClosed: () => this.subscriptions.delete(sub),
      kafka: this.kafka,
      settings: this.settings,
      log: this.log.child({ topic, group }),
      topic,
      group,
      handler,
      onError: options.onError,
      startIfUncommitted,
      openedAt,
      fromBeginning: options.start === 'earliest',
    });
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
    while (this.pumping) await this.pumping;
    if (this.producerConnected) await this.producer.disconnect().catch((e: unknown) => this.log.warn({ err: e }, 'producer disconnect failed'));
    if (this.adminConnected) await this.admin.disconnect().catch((e: unknown) => this.log.warn({ err: e }, 'admin disconnect failed'));
  }

  /** The group's committed offset on the topic, if it committed one (as the broker has it now). */
  async committedOffset(topic: string, group: string): Promise<number | undefined> {
    const admin = await this.connectedAdmin();
    const offsets = await kafkaCall('reading the committed offset', { topic, group }, () => admin.fetchOffsets({ groupId: group, topics: [topic] }));
    const raw = offsets.find((o) => o.topic === topic)?.partitions.find((p) => p.partition === 0)?.offset;
    const n = raw === undefined ? -1 : Number(raw);
    return n >= 0 ? n : undefined;
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

  /** What failed because the bus was closed under it says so, not what kafkajs made of it. */
  private closedInstead(error: unknown, topic: string): unknown {
    return this.closed && !(error instanceof KafkaBusError && error.code !== 'KAFKA_FAILED')
      ? new KafkaBusError('CLOSED', `the bus was closed during an operation on ${topic}`, { topic, cause: error })
      : error;
  }

  private connectedAdmin(): Promise<Admin> {
    this.adminConnected ??= kafkaCall('connecting the admin client', {}, () => this.admin.connect()).catch((e: unknown) => {
      this.adminConnected = undefined;
      throw e;
    });
    return this.adminConnected.then(() => this.admin);
  }

  private connectedProducer(): Promise<Producer> {
    this.producerConnected ??= kafkaCall('connecting the producer', {}, () => this.producer.connect()).catch((e: unknown) => {
      this.producerConnected = undefined;
      throw e;
    });
    return this.producerConnected.then(() => this.producer);
  }

  /** Checks once per topic that it exists with exactly one partition. */
  private async checkTopic(topic: string): Promise<void> {
    if (this.knownTopics.has(topic)) return;
    const admin = await this.connectedAdmin();
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

  /** Waits until each topic has its one partition with a leader; refuses topics with more partitions. */
  private async waitForTopics(topics: readonly string[]): Promise<void> {
    const admin = await this.connectedAdmin();
    const deadline = this.clock.now() + TOPIC_READY_MS;
    for (;;) {
      const metadata = await kafkaCall('reading topic metadata', {}, () => admin.fetchTopicMetadata({ topics: [...topics] }));
      let ready = true;
      for (const topic of topics) {
        const partitions = metadata.topics.find((t) => t.name === topic)?.partitions ?? [];
        if (partitions.length > 1) {
          throw new KafkaBusError('TOPIC_NOT_ONE_PARTITION', `topic ${topic} exists with ${partitions.length} partitions: a bus topic must have exactly one (one ordered log)`, { topic });
        }
        if (partitions.length === 0 || (partitions[0]?.leader ?? -1) < 0) ready = false;
      }
      if (ready) break;
      if (this.clock.now() > deadline) throw new KafkaBusError('KAFKA_FAILED', `topics ${topics.join(', ')} have no leader after ${TOPIC_READY_MS} ms`, {}, true);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    for (const t of topics) this.knownTopics.add(t);
  }

  /** Sends queued records one request at a time, in order. */
  private pump(): void {
    if (this.pumping) return;
    this.pumping = this.drain().finally(() => {
      this.pumping = undefined;
      // Records queued after drain() saw the queue empty, before this ran.
      if (this.pending.length > 0) this.pump();
    });
  }

  private async drain(): Promise<void> {
    while (this.pending.length > 0) {
      const topic = this.pending[0]!.topic;
      let n = 0;
      let bytes = 0;
      while (n < this.pending.length && n < MAX_BATCH_RECORDS && this.pending[n]!.topic === topic) {
        bytes += this.pending[n]!.value.length;
        if (n > 0 && bytes > MAX_BATCH_BYTES) break;
        n += 1;
      }
      const batch = this.pending.splice(0, n);
      try {
        await this.checkTopic(topic);
        const producer = await this.connectedProducer();
        const sent = await producer.send({ topic, acks: -1, messages: batch.map((p) => ({ value: p.value, partition: 0 })) });
        const meta = sent.find((m) => m.topicName === topic && m.partition === 0);
        if (meta?.baseOffset === undefined) throw new Error('the broker returned no offset for partition 0');
        const base = Number(meta.baseOffset);
        batch.forEach((p, i) => p.resolve(base + i));
      } catch (e) {
        const error = this.closedInstead(e instanceof KafkaBusError ? e : kafkaError(`producing to ${topic}`, { topic }, e), topic);
        for (const p of batch) p.reject(error);
      }
    }
  }
}

interface SubscriptionParams {
  readonly committedOffset: () => Promise<number | undefined>;
  readonly onClosed: () => void;
  readonly kafka: Kafka;
  readonly settings: KafkaBusSettings;
  readonly log: Logger;
  readonly topic: string;
  readonly group: string;
  readonly handler: (record: BusRecord) => Promise<void> | void;
  readonly onError: ((error: unknown, record: BusRecord) => void) | undefined;
  readonly startIfUncommitted: number;
  readonly openedAt: number;
  readonly fromBeginning: boolean;
}

/** One subscription: one kafkajs consumer, one group member. */
class KafkaSubscription implements BusSubscription {
  private readonly consumer: Consumer;
  /** Whether this member was given partition 0 at its last join. */
  private owns = false;
  /** The next offset to deliver; unknown until the member first owns the topic. */
  private position: number | undefined;
  /** Counts joins, so that a positioning overtaken by a newer join does nothing. */
  private joins = 0;
  private ready = false;
  private readonly opened: Deferred<void>;
  /** Stops waiting for the handler in flight, if any. */
  private abandonInFlight: (() => void) | undefined;
  private closing: Promise<void> | undefined;

  constructor(private readonly p: SubscriptionParams) {
    this.opened = deferred();
    this.consumer = p.kafka.consumer({
      groupId: p.group,
      partitionAssigners: [newestSubscriptionOwns(p.openedAt)],
      sessionTimeout: p.settings.sessionTimeoutMs,
      heartbeatInterval: p.settings.heartbeatIntervalMs,
      rebalanceTimeout: p.settings.rebalanceTimeoutMs,
      maxWaitTimeInMs: p.settings.maxWaitTimeMs,
      allowAutoTopicCreation: false,
      retry: {
        // A failure before the first join fails subscribe(); after it, kafkajs rejoins on its own.
        restartOnFailure: async () => this.ready && this.closing === undefined,
      },
    });
    this.consumer.on(this.consumer.events.GROUP_JOIN, (event) => this.onJoin(event.payload.memberAssignment));
    this.consumer.on(this.consumer.events.CRASH, (event) => {
      const { error, restart } = event.payload;
      if (!this.ready) {
        this.opened.reject(kafkaError(`subscribing to ${p.topic} as group ${p.group}`, { topic: p.topic, group: p.group }, error));
      } else if (this.closing === undefined) {
        p.log.error({ event: 'bus.consumer.crashed', err: error, restart }, restart ? 'bus consumer failed: it restarts' : 'bus consumer failed for good: no more records on this subscription');
      }
    });
  }

  async open(): Promise<void> {
    const { topic, group } = this.p;
    try {
      await kafkaCall('connecting a consumer', { topic, group }, () => this.consumer.connect());
      await kafkaCall('subscribing a consumer', { topic, group }, () => this.consumer.subscribe({ topics: [topic], fromBeginning: this.p.fromBeginning }));
      await kafkaCall('starting a consumer', { topic, group }, () => this.consumer.run({ autoCommit: false, eachMessage: async ({ message }) => this.onMessage(message.offset, message.value) }));
      await this.opened.promise;
    } catch (e) {
      await this.close();
      throw e;
    }
  }

  async commit(offset: number): Promise<void> {
    const { topic, group } = this.p;
    if (!Number.isSafeInteger(offset) || offset < 0) throw new RangeError(`commit offset must be a non-negative integer, got ${offset}`);
    if (this.closing !== undefined) throw new KafkaBusError('CLOSED', `cannot commit on ${topic} for group ${group}: the subscription is closed`, { topic, group });
    if (!this.owns) {
      throw new KafkaBusError('NOT_OWNER', `cannot commit on ${topic} for group ${group}: a newer subscription of the group owns the topic`, { topic, group });
    }
    await kafkaCall(`committing offset ${offset}`, { topic, group }, () => this.consumer.commitOffsets([{ topic, partition: 0, offset: String(offset) }]));
  }

  close(): Promise<void> {
    this.closing ??= (async () => {
      this.abandonInFlight?.();
      if (!this.ready) this.opened.reject(new KafkaBusError('CLOSED', `subscription to ${this.p.topic} closed before it was open`, { topic: this.p.topic, group: this.p.group }));
      try {
        await this.consumer.disconnect();
      } catch (e) {
        this.p.log.warn({ err: e }, 'bus consumer disconnect failed');
      } finally {
        this.p.onClosed();
      }
    })();
    return this.closing;
  }

  /**
   * Called synchronously by kafkajs after each join, before it fetches anything: pause the
   * partition until its position is fixed, then seek there and resume.
   */
  private onJoin(assignment: Record<string, number[] | undefined>): void {
    const join = ++this.joins;
    this.owns = (assignment[this.p.topic] ?? []).includes(0);
    this.p.log.debug({ event: 'bus.subscription.joined', owns: this.owns }, this.owns ? 'bus subscription owns its topic' : 'bus subscription joined without the topic');
    if (!this.owns) {
      this.markReady();
      return;
    }
    const partitions = [{ topic: this.p.topic, partitions: [0] }];
    this.consumer.pause(partitions);
    void this.fixPosition(join).then((offset) => {
      if (join !== this.joins || this.closing !== undefined) return;
      try {
        this.consumer.seek({ topic: this.p.topic, partition: 0, offset: String(offset) });
        this.consumer.resume(partitions);
      } catch (e) {
        // The consumer stopped in between (a crash); its restart joins again and repositions.
        this.p.log.debug({ err: e }, 'bus subscription could not seek');
      }
      this.markReady();
    });
  }

  /** The group's committed offset or the next unseen record, whichever is later. */
  private async fixPosition(join: number): Promise<number> {
    let committed: number | undefined;
    try {
      committed = await this.p.committedOffset();
    } catch (e) {
      this.p.log.error({ err: e, event: 'bus.position.unknown' }, 'cannot read the committed offset: going on from the position this subscription knows');
    }
    const next = this.position === undefined ? committed ?? this.p.startIfUncommitted : Math.max(this.position, committed ?? 0);
    if (join === this.joins) {
      this.position = next;
      this.p.log.debug({ event: 'bus.subscription.positioned', offset: next, committed }, 'bus subscription positioned');
    }
    return next;
  }

  private markReady(): void {
    if (this.ready) return;
    this.ready = true;
    this.opened.resolve();
  }

  private async onMessage(rawOffset: string, raw: Buffer | null): Promise<void> {
    if (this.closing !== undefined) return;
    const offset = Number(rawOffset);
    // Already delivered to this subscription (kafkajs may fetch from before the seek once).
    if (this.position !== undefined && offset < this.position) return;
    this.position = offset + 1;
    const { topic } = this.p;
    const text = raw === null ? null : raw.toString('utf8');
    let value: unknown;
    try {
      if (text === null) throw new Error('the record has no value');
      value = JSON.parse(text);
    } catch (e) {
      const error = new KafkaBusError('MALFORMED_RECORD', `record ${offset} of ${topic} is not JSON: ${e instanceof Error ? e.message : String(e)}`, { topic, group: this.p.group, cause: e });
      this.p.log.warn({ event: 'bus.malformed', offset, reason: error.message }, 'malformed bus record skipped');
      this.report(error, { topic, offset, value: text });
      return;
    }
    const record: BusRecord = { topic, offset, value };
    // close() ends this wait: it must not wait for a handler that never returns (a paused or dead
    // node's handler waits on its gate), and kafkajs leaves the group only after this returns.
    await new Promise<void>((resolve) => {
      this.abandonInFlight = resolve; // before the handler runs: it may call close() itself
      void this.deliver(record).then(resolve);
    });
    this.abandonInFlight = undefined;
  }

  private async deliver(record: BusRecord): Promise<void> {
    try {
      await this.p.handler(record);
    } catch (error) {
      this.report(error, record);
    }
  }

  private report(error: unknown, record: BusRecord): void {
    if (!this.p.onError) {
      this.p.log.warn({ event: 'bus.handler.failed', offset: record.offset, err: error }, 'bus record not handled (no onError)');
      return;
    }
    try {
      this.p.onError(error, record);
    } catch (e) {
      this.p.log.warn({ err: e, offset: record.offset }, 'onError threw');
    }
  }
}

interface Deferred<T> {
  readonly promise: Promise<T>;
  readonly resolve: (value: T) => void;
  readonly reject: (error: unknown) => void;
}

function deferred<T>(): Deferred<T> {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  // The subscription may fail before anyone awaits it; its awaiting caller still sees the error.
  promise.catch(() => undefined);
  return { promise, resolve, reject };
}

function checkTopicName(topic: string): void {
  // Kafka's own rule; checked here so that a bad name fails at once instead of after retries.
  if (!/^[A-Za-z0-9._-]{1,249}$/.test(topic) || topic === '.' || topic === '..') {
    throw new KafkaBusError('INVALID_OPTION', `'${topic}' is not a Kafka topic name: 1 to 249 letters, digits, '.', '_' or '-'`, { topic });
  }
}

function kafkaError(what: string, context: { readonly topic?: string; readonly group?: string }, cause: unknown): KafkaBusError {
  let message = cause instanceof Error ? cause.message : String(cause);
  // kafkajs aggregates per-topic failures ("Topic creation errors"): the reasons are inside.
  const inner = (cause as { errors?: unknown } | undefined)?.errors;
  if (Array.isArray(inner) && inner.length > 0) {
    message += `: ${inner.map((e: { topic?: string; message?: string }) => `${e.topic ?? '?'}: ${e.message ?? String(e)}`).join('; ')}`;
  }
  // Retries exhausted on a retriable error (a broker away, a rebalance) may work later; a refusal will not.
  const c = cause as { retriable?: boolean; name?: string } | undefined;
  const retriable = c?.retriable === true || c?.name === 'KafkaJSNumberOfRetriesExceeded';
  return new KafkaBusError('KAFKA_FAILED', `Kafka failed ${what}: ${message}`, { ...context, cause }, retriable);
}

async function kafkaCall<T>(what: string, context: { readonly topic?: string; readonly group?: string }, call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (e) {
    if (e instanceof KafkaBusError) throw e;
    throw kafkaError(what, context, e);
  }
}
