// Kafka answers some requests with errors that pass on their own: a topic its broker has not heard
// of yet (just created), a leader that moved, a group coordinator still loading its offsets after a
// broker start, a broker away for a moment. kafkajs marks those errors `retriable`, but its admin
// client retries only some of them (a topic not known yet, in a few calls) and fails the others at
// once. The calls that can race a topic's creation, a leader move or a coordinator's load go
// through `retryRetriable`.
import { setTimeout as sleep } from 'node:timers/promises';

/** How often and how far apart: about 3 s in all, enough for a coordinator's load or a leader election on a small cluster. */
export interface RetryPolicy {
  readonly attempts: number;
  /** Before the second attempt; doubles before each next one. */
  readonly backoffMs: number;
}

export const KAFKA_RETRY: RetryPolicy = { attempts: 6, backoffMs: 100 };

/**
 * True when the client says trying again may work: kafkajs marks such an error (or one it wraps)
 * `retriable`, @platformatic/kafka `canRetry` (an error of several, when each of them is).
 */
export function isRetriableKafkaError(e: unknown): boolean {
  for (let cause = e, depth = 0; cause !== undefined && cause !== null && depth < 5; depth++) {
    const c = cause as { retriable?: unknown; canRetry?: unknown; name?: unknown; cause?: unknown; errors?: unknown };
    if (c.retriable === true || c.canRetry === true || c.name === 'KafkaJSNumberOfRetriesExceeded') return true;
    if (Array.isArray(c.errors) && c.errors.length > 0) return c.errors.every(isRetriableKafkaError);
    cause = c.cause;
  }
  return false;
}

/** True when Kafka's error `type` (kafkajs's name of the error code, e.g. `UNKNOWN_TOPIC_OR_PARTITION`) is the error's or one it wraps. */
export function hasKafkaErrorType(e: unknown, type: string): boolean {
  for (let cause = e, depth = 0; cause !== undefined && cause !== null && depth < 5; depth++) {
    const c = cause as { type?: unknown; cause?: unknown; originalError?: unknown };
    if (c.type === type) return true;
    cause = c.cause ?? c.originalError;
  }
  return false;
}

/**
 * `call()`, tried again while it fails with an error `retriable` accepts (by default one Kafka
 * calls retriable), up to the policy's attempts; then its last error.
 */
export async function retryRetriable<T>(
  call: () => Promise<T>,
  retriable: (e: unknown) => boolean = isRetriableKafkaError,
  policy: RetryPolicy = KAFKA_RETRY,
): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await call();
    } catch (e) {
      if (attempt >= policy.attempts || !retriable(e)) throw e;
      await sleep(policy.backoffMs * 2 ** (attempt - 1));
    }
  }
}
