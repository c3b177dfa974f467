// The errors of the Kafka bus: one class with a stable code, and kafkajs's failures wrapped in it
// with what was being done and whether trying again can help.
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

/** A kafkajs failure while doing `what`, as a `KAFKA_FAILED` error that keeps the reasons kafkajs nests inside. */
export function kafkaError(what: string, context: { readonly topic?: string; readonly group?: string }, cause: unknown): KafkaBusError {
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

/** Runs `call`, wrapping what kafkajs throws with `kafkaError`; the bus's own errors pass unchanged. */
export async function kafkaCall<T>(what: string, context: { readonly topic?: string; readonly group?: string }, call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (e) {
    if (e instanceof KafkaBusError) throw e;
    throw kafkaError(what, context, e);
  }
}
