// A node start that failed because Kafka answered too slowly (a request timed out, a new topic's
// leader not known yet) is tried again a few times before the process gives up: on a loaded
// machine those pass within seconds, and each Kafka call retries for only about 3 s (`KAFKA_RETRY`).
// A start that failed for a reason time does not fix (a config error, a refusal), or after a wait
// of its own (brokers out of reach, Cassandra unreachable through `connectTimeoutMs`), fails at
// once, as before: retrying those here would only multiply the wait they already had.
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import { BrokersUnreachableError } from '../cluster/broker-reach.js';
import { isRetriableKafkaError } from '../cluster/kafka-retry.js';
import { MetaStoreUnavailableError } from '../store/meta-store.js';
import { NodeConfigError } from './node-config.js';

/** Starts in all, and the wait before the second (doubling before each next one): about 15 s of waits. */
export const START_ATTEMPTS = { attempts: 4, firstDelayMs: 1_000 } as const;

/**
 * Whether a failed start may work if tried again: an error its client or adapter marks retriable
 * (`retriable`, @platformatic/kafka's `canRetry`, or one it wraps). Never a config error, nor a
 * service that could not be reached within its own retries: brokers (the error names the key to
 * fix) or the MetaStore (its connect already tried for `connectTimeoutMs`).
 */
export function startMayWorkLater(error: unknown): boolean {
  if (error instanceof NodeConfigError || error instanceof BrokersUnreachableError || error instanceof MetaStoreUnavailableError) return false;
  return isRetriableKafkaError(error);
}

/** How long to wait before start number `attempt + 1` after `error`, or undefined to give up. */
export function nextStartDelay(attempt: number, error: unknown): number | undefined {
  if (attempt >= START_ATTEMPTS.attempts || !startMayWorkLater(error)) return undefined;
  return START_ATTEMPTS.firstDelayMs * 2 ** (attempt - 1);
}

export interface StartAttemptsOptions {
  readonly log: Logger;
  /** True once the process was asked to stop: no further attempt. */
  readonly stopping: () => boolean;
  readonly wait?: (ms: number) => Promise<unknown>;
}

/** `start()`, tried again after a failure `nextStartDelay` allows (each logged `node.start-retried`); else its error. */
export async function startWithAttempts<T>(start: () => Promise<T>, { log, stopping, wait = sleep }: StartAttemptsOptions): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await start();
    } catch (e) {
      const delay = nextStartDelay(attempt, e);
      if (delay === undefined || stopping()) throw e;
      log.warn(
        { event: 'node.start-retried', err: e, attempt, of: START_ATTEMPTS.attempts, delayMs: delay },
        'the node could not start for a reason that may pass (Kafka slow to answer): starting again',
      );
      await wait(delay);
      if (stopping()) throw e;
    }
  }
}
