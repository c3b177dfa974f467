// One way to make a kafkajs client: its logs go through pino, topic auto-creation is never relied
// on, and retries are bounded so an unreachable broker surfaces as an error instead of a hang. Also
// creating topics and waiting for their leaders, which works on a cluster of several brokers.
import { Kafka, logLevel, type Admin, type ITopicConfig, type LogEntry } from 'kafkajs';
import type { Logger } from 'pino';
import { isRetriableKafkaError } from './kafka-retry.js';
import { fetchTopicOffsets } from './topic-offsets.js';

export interface KafkaConnection {
  /** `host:port` of one or more brokers. */
  readonly brokers: readonly string[];
  /** Names this process in the broker's logs and quotas. */
  readonly clientId: string;
  readonly log: Logger;
  /** How long a connection attempt may take (default 3000 ms). */
  readonly connectionTimeoutMs?: number | undefined;
  /** How long a request may wait for its answer before it is retried (kafkajs's default, 30 000 ms, unless set). */
  readonly requestTimeoutMs?: number | undefined;
}

/**
 * kafkajs's log levels, one step down on pino's: it logs every normal rebalance ("The group is
 * rebalancing") as an error, and its INFO lines (joins, commits) are debug detail here. Failures
 * that matter reach shardherd's code as exceptions and are logged there with their context.
 */
function pinoLevel(level: logLevel): 'warn' | 'info' | 'debug' | 'trace' {
  switch (level) {
    case logLevel.ERROR:
      return 'warn';
    case logLevel.WARN:
      return 'info';
    case logLevel.INFO:
      return 'debug';
    default:
      return 'trace';
  }
}

/**
 * What kafkajs says while a group rebalances or a heartbeat meets a rebalance: normal on every join,
 * leave and session timeout, so at debug (shardherd logs the membership change itself). With three
 * nodes and short sessions these were most of a node's log.
 */
const ROUTINE_GROUP_CHATTER =
  /rebalanc|heartbeat|re-?join|restarting the consumer|not the correct coordinator|unknown member|illegal generation|member id required/i;

/** The pino level of one kafkajs log entry. */
export function kafkaLogLevel(level: logLevel, message: string, extra: Record<string, unknown> = {}): 'warn' | 'info' | 'debug' | 'trace' {
  const text = `${message} ${typeof extra.error === 'string' ? extra.error : ''} ${typeof extra.type === 'string' ? extra.type : ''}`;
  if (level <= logLevel.WARN && ROUTINE_GROUP_CHATTER.test(text)) return 'debug';
  return pinoLevel(level);
}

export function createKafka(connection: KafkaConnection): Kafka {
  const log = connection.log.child({ component: 'kafkajs' });
  return new Kafka({
    clientId: connection.clientId,
    brokers: [...connection.brokers],
    connectionTimeout: connection.connectionTimeoutMs ?? 3_000,
    ...(connection.requestTimeoutMs === undefined ? {} : { requestTimeout: connection.requestTimeoutMs }),
    retry: { initialRetryTime: 100, maxRetryTime: 2_000, retries: 8 },
    logLevel: logLevel.INFO,
    logCreator:
      () =>
      ({ namespace, level, log: { message, ...extra } }: LogEntry) => {
        log[kafkaLogLevel(level, message, extra)]({ namespace, ...extra }, message);
      },
  });
}

/**
 * What every shardherd producer sets: Kafka's idempotent producer, so a produce retried after its
 * answer was lost (a timeout, a dropped connection) is written once: the broker drops the retry by
 * its producer id and sequence number. kafkajs needs one request in flight for that; every send
 * uses `acks: -1`, as idempotence requires.
 */
export const IDEMPOTENT_PRODUCER = { idempotent: true, maxInFlightRequests: 1 } as const;

/** How long `createTopicsWithLeaders` waits for the new topics' leaders by default. */
const TOPIC_LEADERS_MS = 10_000;

/**
 * `admin.createTopics` that resolves once every partition of the topics has a leader. kafkajs's own
 * `waitForLeaders` asks the broker that took the request, which on a cluster of several brokers may
 * not know the new topic yet: it answers UNKNOWN_TOPIC_OR_PARTITION and kafkajs fails the call,
 * although the topics were created. Here that answer means "not yet". Resolves with what
 * `createTopics` says: false when every topic existed already.
 */
export async function createTopicsWithLeaders(admin: Admin, topics: ITopicConfig[], timeoutMs = TOPIC_LEADERS_MS): Promise<boolean> {
  const created = await admin.createTopics({ topics, waitForLeaders: false });
  await waitForTopicLeaders(
    admin,
    topics.map((t) => t.topic),
    timeoutMs,
  );
  return created;
}

/** Polls the topics' metadata until each has partitions that all have a leader; throws after `timeoutMs`. */
async function waitForTopicLeaders(admin: Admin, topics: readonly string[], timeoutMs = TOPIC_LEADERS_MS): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await topicsHaveLeaders(admin, topics)) return;
    if (Date.now() > deadline) throw new Error(`topics ${topics.join(', ')} have no leader after ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** True when every partition of every topic has a leader that answers; false while a broker does not know them yet. */
async function topicsHaveLeaders(admin: Admin, topics: readonly string[]): Promise<boolean> {
  try {
    const metadata = await admin.fetchTopicMetadata({ topics: [...topics] });
    const led = topics.every((topic) => {
      const partitions = metadata.topics.find((t) => t.name === topic)?.partitions ?? [];
      return partitions.length > 0 && partitions.every((p) => p.leader >= 0);
    });
    return led && (await leadersAnswer(admin, topics));
  } catch (e) {
    if (topicNotKnownYet(e)) return false;
    throw e;
  }
}

/**
 * True when the leaders of the topics answer an offsets request. The metadata can name a leader
 * before that broker serves the new partition (it then answers "not the leader"), and a consumer
 * or a bus subscription reads offsets first thing.
 */
export async function leadersAnswer(admin: Admin, topics: readonly string[]): Promise<boolean> {
  try {
    for (const topic of topics) await fetchTopicOffsets(admin, topic);
    return true;
  } catch (e) {
    if (topicNotKnownYet(e)) return false;
    throw e;
  }
}

/**
 * A retriable failure of a topic's metadata read that does not say the topic is missing (a broker
 * away, a leader being elected): worth another try, where "unknown topic" is the answer.
 */
export function topicMayAnswerLater(e: unknown): boolean {
  return isRetriableKafkaError(e) && (e as { type?: unknown } | undefined)?.type !== 'UNKNOWN_TOPIC_OR_PARTITION';
}

/** What a broker answers about a topic that was just created, before it heard of it or of its leaders. */
export function topicNotKnownYet(e: unknown): boolean {
  const type = (e as { type?: unknown } | undefined)?.type;
  return type === 'UNKNOWN_TOPIC_OR_PARTITION' || type === 'LEADER_NOT_AVAILABLE' || type === 'NOT_LEADER_FOR_PARTITION';
}
