// The errors of the Kafka bus: one class with a stable code, and the client library's failures wrapped in it
// with what was being done and whether trying again can help.
import { ShardherdError } from '../../core/errors.js';
import { isRetriableKafkaError } from '../kafka-retry.js';
import { topicAnswersOf } from '../platformatic-kafka.js';

export type KafkaBusErrorCode =
  /** An option that cannot be used; the message names it. */
  | 'INVALID_OPTION'
  /**
   * The topic does not exist: the bus never creates topics implicitly (`shardherd topics create`
   * or `createClusterTopics` make a cluster's; `KafkaBus.ensureTopics` any).
   */
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
  /**
   * A topic's `max.message.bytes` or `segment.bytes` is below what the bus writes (`maxRecordBytes`
   * and a record batch's overhead): the message names the topic, both values and the option to change.
   */
  | 'BROKER_LIMIT_TOO_SMALL'
  /** The broker refused a record batch as too large (its limit changed under the bus): not retried. */
  | 'RECORD_TOO_LARGE'
  /** Kafka failed the operation; it may work if tried again. */
  | 'KAFKA_FAILED';

/**
 * Every error the Kafka bus throws but `MessageTooLargeError` (./bus.ts, which every bus throws): a
 * stable `code`, whether retrying can help, and the topic and group.
 */
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

/** A client library's failure while doing `what`, as a `KAFKA_FAILED` error that keeps the reasons it nests inside. */
export function kafkaError(what: string, context: { readonly topic?: string; readonly group?: string }, cause: unknown): KafkaBusError {
  let message = cause instanceof Error ? cause.message : String(cause);
  const inner = innerReasons(cause);
  if (inner.length > 0) message += `: ${inner.join('; ')}`;
  // Retries exhausted on a retriable error (a broker away, a rebalance) may work later; a refusal will not.
  const retriable = isRetriableKafkaError(cause);
  return new KafkaBusError('KAFKA_FAILED', `Kafka failed ${what}: ${message}`, { ...context, cause }, retriable);
}

/**
 * The reasons a library's aggregate error holds: kafkajs's per-topic "Topic creation errors", and
 * @platformatic/kafka's MultipleErrors of answers that name each failed topic with the broker's message.
 */
function innerReasons(cause: unknown): string[] {
  const inner = (cause as { errors?: unknown } | undefined)?.errors;
  if (!Array.isArray(inner)) return [];
  return inner.flatMap((e: { topic?: string; message?: string }) => {
    const failed = topicAnswersOf(e)?.filter((t) => t.errorCode !== 0) ?? [];
    if (failed.length > 0) return failed.map((t) => `${t.name ?? '?'}: ${t.errorMessage ?? e.message ?? ''}`);
    return [`${e.topic === undefined ? '' : `${e.topic}: `}${e.message ?? String(e)}`];
  });
}

/**
 * Runs `call`, wrapping what the client library throws with `kafkaError`; the bus's own errors, and
 * shardherd's (a broker too old for the library), pass unchanged.
 */
export async function kafkaCall<T>(what: string, context: { readonly topic?: string; readonly group?: string }, call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (e) {
    if (e instanceof KafkaBusError || e instanceof ShardherdError) throw e;
    throw kafkaError(what, context, e);
  }
}
