// One way to make a kafkajs client: its logs go through pino, topic auto-creation is never relied
// on, and retries are bounded so an unreachable broker surfaces as an error instead of a hang.
import { Kafka, logLevel, type LogEntry } from 'kafkajs';
import type { Logger } from 'pino';

export interface KafkaConnection {
  /** `host:port` of one or more brokers. */
  readonly brokers: readonly string[];
  /** Names this process in the broker's logs and quotas. */
  readonly clientId: string;
  readonly log: Logger;
  /** How long a connection attempt may take (default 3000 ms). */
  readonly connectionTimeoutMs?: number | undefined;
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
const ROUTINE_GROUP_CHATTER = /rebalanc|heartbeat|re-?join|restarting the consumer|not the correct coordinator|unknown member|illegal generation|member id required/i;

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
