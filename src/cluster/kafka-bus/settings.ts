// The Kafka bus's options: what each one does, its default, and the check that refuses a value
// that cannot work, naming the option. The schema is the one statement of all three: the options'
// type is its input, the settings' type its output.
import { z } from 'zod';
import { busLimits, type BusLimits } from '../bus-limits.js';
import type { Clock } from '../clock.js';
import { ConfigError, configErrorOf } from '../config-error.js';
import type { KafkaConnection } from '../kafka-client.js';
import { DEFAULT_SESSION_TIMEOUT_MS, kafkaClientSchema, wholeNumber, withDefault } from '../kafka-options.js';

/** How the bus compresses the record batches it produces. */
export const BUS_COMPRESSIONS = ['gzip', 'none'] as const;
export type BusCompression = (typeof BUS_COMPRESSIONS)[number];

/** Absent (undefined or null) means the default, or one derived from another key. */
const positive = wholeNumber(1, 'must be a positive whole number').nullish();
/** Checked with their bounds and between each other by busLimits (../bus-limits.ts documents them). */
const limit = z.number({ error: (issue) => `must be a number, got ${String(issue.input)}` }).nullish();

/**
 * Each option's own check and default, in the order they are reported; the defaults that depend on
 * another key are `timings`' and `limits`'. A node config's `kafka` section is made of these.
 */
export const kafkaBusFields = z.object({
  brokers: z
    .array(z.string().regex(/^[^\s:]+:\d{1,5}$/, { error: (issue) => `must be host:port, got '${String(issue.input)}'` }))
    .min(1, 'needs at least one host:port')
    .readonly(),
  clientId: z.string().min(1, 'must not be empty'),
  /** The client library the bus runs on: `platformatic` (@platformatic/kafka, the default) or `kafkajs`. */
  client: kafkaClientSchema,
  /**
   * How long the broker waits for a subscription's heartbeat before it drops it from its group and
   * gives the topic to another open subscription of that group (default 10000 ms; the broker
   * refuses values outside its `group.min/max.session.timeout.ms`, 6000 ms minimum by default).
   * Keep it at most the cluster's failure-detection timeout, so that a dead singleton's inbox
   * subscription is gone by the time the next singleton subscribes.
   */
  sessionTimeoutMs: withDefault(wholeNumber(1, 'must be a positive whole number'), DEFAULT_SESSION_TIMEOUT_MS),
  /**
   * How often an idle subscription heartbeats, and so how soon it notices that its group is
   * rebalancing (default sessionTimeoutMs / 10, between 100 and 3000 ms). Less than sessionTimeoutMs.
   */
  heartbeatIntervalMs: positive,
  /**
   * The longest a fetch waits on the broker when there is nothing to read (default 250 ms, or
   * heartbeatIntervalMs if that is less; at most heartbeatIntervalMs, since an idle subscription
   * heartbeats between fetches). A new record ends the wait at once, so this does not delay
   * delivery; it bounds how soon a subscription that was just given the topic starts reading, and
   * how often an idle subscription asks the broker (each one every maxWaitTimeMs).
   */
  maxWaitTimeMs: positive,
  /**
   * How long the broker waits for the members of a group to rejoin when one joins or leaves; a
   * member that does not rejoin in time is dropped (default sessionTimeoutMs).
   */
  rebalanceTimeoutMs: positive,
  /** Replication factor of the topics `ensureTopics` creates (default 1). */
  replicationFactor: withDefault(wholeNumber(1, 'must be a positive whole number'), 1),
  /** How long a connection attempt may take (default 3000 ms). */
  connectionTimeoutMs: withDefault(wholeNumber(1, 'must be a positive whole number'), 3_000),
  maxRecordBytes: limit,
  maxMessageBytes: limit,
  chunkTimeoutMs: limit,
  /**
   * How produced record batches are compressed: `gzip` (the default, kafkajs's built-in codec)
   * or `none`. On a 5.6 MB JSON shard map gzip stored 1.8 % of the bytes and halved the time of a
   * produce (./record-size.ts has the measurement).
   */
  compression: withDefault(z.enum(BUS_COMPRESSIONS, { error: (issue) => `must be "gzip" or "none", got ${JSON.stringify(issue.input)}` }), 'gzip'),
});

type Fields = z.output<typeof kafkaBusFields>;

/** The timings' defaults, which follow the session timeout and heartbeat actually set. */
function timings(o: Fields) {
  const heartbeatIntervalMs = o.heartbeatIntervalMs ?? Math.min(3_000, Math.max(100, Math.floor(o.sessionTimeoutMs / 10)));
  return {
    heartbeatIntervalMs,
    rebalanceTimeoutMs: o.rebalanceTimeoutMs ?? o.sessionTimeoutMs,
    maxWaitTimeMs: o.maxWaitTimeMs ?? Math.min(250, heartbeatIntervalMs),
  };
}

/** The first timing that cannot work with the others, as [key, reason]. */
function timingConflict(sessionTimeoutMs: number, t: ReturnType<typeof timings>): [string, string] | undefined {
  // kafkajs refuses this too, but only when the first subscription is made.
  if (t.heartbeatIntervalMs >= sessionTimeoutMs)
    return ['heartbeatIntervalMs', `(${t.heartbeatIntervalMs}) must be less than sessionTimeoutMs (${sessionTimeoutMs})`];
  // An idle subscription heartbeats only between fetches: a longer wait would starve the session.
  if (t.maxWaitTimeMs > t.heartbeatIntervalMs) return ['maxWaitTimeMs', `(${t.maxWaitTimeMs}) must be at most heartbeatIntervalMs (${t.heartbeatIntervalMs})`];
  return undefined;
}

/** The size limits with their defaults, or the key and reason busLimits refused them with. */
function limits(o: Fields): BusLimits | ConfigError {
  try {
    return busLimits(
      { maxRecordBytes: o.maxRecordBytes ?? undefined, maxMessageBytes: o.maxMessageBytes ?? undefined, chunkTimeoutMs: o.chunkTimeoutMs ?? undefined },
      (key, reason) => {
        throw new ConfigError(key, reason);
      },
    );
  } catch (e) {
    if (e instanceof ConfigError) return e;
    throw e;
  }
}

/** The options, their derived defaults and the checks between them. */
export const kafkaBusSchema = kafkaBusFields.transform((o, ctx) => {
  const t = timings(o);
  const conflict = timingConflict(o.sessionTimeoutMs, t);
  if (conflict !== undefined) {
    ctx.addIssue({ code: 'custom', path: [conflict[0]], message: conflict[1] });
    return z.NEVER;
  }
  const l = limits(o);
  if (l instanceof ConfigError) {
    ctx.addIssue({ code: 'custom', path: [l.key], message: l.reason });
    return z.NEVER;
  }
  return { ...o, ...t, ...l };
});

/**
 * The connection (brokers, client id, log, connection timeout), the group timings of the bus's
 * consumers, and the sizes of what it writes (`maxRecordBytes`, `maxMessageBytes`,
 * `chunkTimeoutMs`: see ../bus-limits.ts).
 */
export type KafkaBusOptions = Omit<KafkaConnection, 'brokers' | 'clientId' | 'connectionTimeoutMs'> &
  z.input<typeof kafkaBusSchema> & {
    /** Where subscription open times and the chunk timeout's time come from (default: the wall clock). */
    readonly clock?: Clock | undefined;
  };

/** The options with their defaults, checked. */
export type KafkaBusSettings = Readonly<z.output<typeof kafkaBusSchema>>;

/** Applies the defaults and checks every option, failing with a `ConfigError` that names the one that is wrong. */
export function kafkaBusSettings(options: KafkaBusOptions): KafkaBusSettings {
  const r = kafkaBusSchema.safeParse(options);
  // The bus's messages name the option without array positions ("brokers"), as they always have.
  if (!r.success) throw configErrorOf(r.error, { label: 'KafkaBus option ', positions: false });
  return r.data;
}
