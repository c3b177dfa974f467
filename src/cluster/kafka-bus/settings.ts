// The Kafka bus's options: what each one does, its default, and the check that refuses a value
// that cannot work, naming the option.
import { z } from 'zod';
import { busLimits, type BusLimitOptions } from '../bus-limits.js';
import type { Clock } from '../clock.js';
import type { KafkaConnection } from '../kafka-client.js';
import { parseOptions, wholeNumber } from '../kafka-options.js';
import { KafkaBusError } from './errors.js';

/** How the bus compresses the record batches it produces. */
export const BUS_COMPRESSIONS = ['gzip', 'none'] as const;
export type BusCompression = (typeof BUS_COMPRESSIONS)[number];

/**
 * The connection (brokers, client id, log, connection timeout), the group timings of the bus's
 * consumers, and the sizes of what it writes (`maxRecordBytes`, `maxMessageBytes`,
 * `chunkTimeoutMs`: see ../bus-limits.ts).
 */
export interface KafkaBusOptions extends KafkaConnection, BusLimitOptions {
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
  /** Where subscription open times and the chunk timeout's time come from (default: the wall clock). */
  readonly clock?: Clock | undefined;
  /**
   * How produced record batches are compressed: `gzip` (the default, kafkajs's built-in codec)
   * or `none`. On a 5.6 MB JSON shard map gzip stored 1.8 % of the bytes and halved the time of a
   * produce (./record-size.ts has the measurement).
   */
  readonly compression?: BusCompression | undefined;
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
  readonly maxRecordBytes: number;
  readonly maxMessageBytes: number;
  readonly chunkTimeoutMs: number;
  readonly compression: BusCompression;
}

/** Absent (undefined or null) means the default. */
const positive = wholeNumber(1, 'must be a positive whole number').nullish();

/** The checks of single options, in the order they are reported; the ones between options follow. */
const schema = z.object({
  brokers: z
    .array(z.string().regex(/^[^\s:]+:\d{1,5}$/, { error: (issue) => `must be host:port, got '${String(issue.input)}'` }))
    .min(1, 'needs at least one host:port'),
  clientId: z.string().min(1, 'must not be empty'),
  sessionTimeoutMs: positive,
  heartbeatIntervalMs: positive,
  maxWaitTimeMs: positive,
  rebalanceTimeoutMs: positive,
  replicationFactor: positive,
  connectionTimeoutMs: positive,
  // Checked with their bounds and between each other by busLimits below.
  maxRecordBytes: z.number({ error: (issue) => `must be a number, got ${String(issue.input)}` }).nullish(),
  maxMessageBytes: z.number({ error: (issue) => `must be a number, got ${String(issue.input)}` }).nullish(),
  chunkTimeoutMs: z.number({ error: (issue) => `must be a number, got ${String(issue.input)}` }).nullish(),
  compression: z.enum(BUS_COMPRESSIONS, { error: (issue) => `must be "gzip" or "none", got ${JSON.stringify(issue.input)}` }).nullish(),
});

function invalid(key: string, reason: string): never {
  throw new KafkaBusError('INVALID_OPTION', `KafkaBus option ${key} ${reason}`);
}

/** Applies the defaults and checks every option, naming the one that is wrong. */
export function kafkaBusSettings(options: KafkaBusOptions): KafkaBusSettings {
  const o = parseOptions(schema, options, invalid);
  const sessionTimeoutMs = o.sessionTimeoutMs ?? 10_000;
  const heartbeatIntervalMs = o.heartbeatIntervalMs ?? Math.min(3_000, Math.max(100, Math.floor(sessionTimeoutMs / 10)));
  // kafkajs refuses this too, but only when the first subscription is made.
  if (heartbeatIntervalMs >= sessionTimeoutMs)
    invalid('heartbeatIntervalMs', `(${heartbeatIntervalMs}) must be less than sessionTimeoutMs (${sessionTimeoutMs})`);
  const maxWaitTimeMs = o.maxWaitTimeMs ?? Math.min(250, heartbeatIntervalMs);
  // An idle subscription heartbeats only between fetches: a longer wait would starve the session.
  if (maxWaitTimeMs > heartbeatIntervalMs) invalid('maxWaitTimeMs', `(${maxWaitTimeMs}) must be at most heartbeatIntervalMs (${heartbeatIntervalMs})`);
  const limits = busLimits(
    { maxRecordBytes: o.maxRecordBytes ?? undefined, maxMessageBytes: o.maxMessageBytes ?? undefined, chunkTimeoutMs: o.chunkTimeoutMs ?? undefined },
    invalid,
  );
  return {
    brokers: [...o.brokers],
    clientId: o.clientId,
    sessionTimeoutMs,
    heartbeatIntervalMs,
    rebalanceTimeoutMs: o.rebalanceTimeoutMs ?? sessionTimeoutMs,
    maxWaitTimeMs,
    replicationFactor: o.replicationFactor ?? 1,
    connectionTimeoutMs: o.connectionTimeoutMs ?? 3_000,
    ...limits,
    compression: o.compression ?? 'gzip',
  };
}
