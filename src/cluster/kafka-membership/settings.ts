// The Kafka membership's options: what each one does, its default, and the check that refuses a
// value that cannot work, naming the option. The schema is the one statement of all three: the
// options' type is its input, the settings' type its output.
import { z } from 'zod';
import { configErrorOf } from '../config-error.js';
import type { KafkaConnection } from '../kafka-client.js';
import { DEFAULT_SESSION_TIMEOUT_MS, kafkaClientSchema, wholeNumber, withDefault } from '../kafka-options.js';

/** Absent (undefined or null) means the default, or one derived from another key. */
const ms = wholeNumber(1, 'must be a positive whole number of milliseconds').nullish();

/** Each option's own check and default; the defaults that depend on another key are `derive`'s. */
const fields = z.object({
  brokers: z.array(z.string()).min(1, 'must name at least one broker').readonly(),
  clientId: z.string(),
  /** The client library of the group's consumer: `platformatic` (@platformatic/kafka, the default) or `kafkajs`. */
  client: kafkaClientSchema,
  /** The cluster name: the group and its one-partition topic are both `<topicPrefix>.members`. */
  topicPrefix: z
    .string()
    .regex(/^[A-Za-z0-9._-]{1,200}$/, { error: (issue) => `must be 1 to 200 letters, digits, ".", "_" or "-", got ${JSON.stringify(issue.input)}` }),
  /**
   * A member that has not heartbeated for this long is removed by the broker, and a handle that has
   * not had a heartbeat or join acknowledged for this long fences itself. Default 10000 ms. Must lie
   * within the broker's `group.min.session.timeout.ms` (default 6000) .. `group.max.session.timeout.ms`.
   */
  sessionTimeoutMs: withDefault(wholeNumber(1, 'must be a positive whole number of milliseconds'), DEFAULT_SESSION_TIMEOUT_MS),
  /**
   * How often the handle heartbeats, and so how soon survivors notice a rebalance after a member
   * died. Default `sessionTimeoutMs / 10` (a fifth made failover take 1.2 × the session timeout
   * instead of 1.1 ×); must be below `sessionTimeoutMs`.
   */
  heartbeatIntervalMs: ms,
  /** Replication factor of the members topic when `join` creates it. Default 1. */
  replicationFactor: withDefault(wholeNumber(1, 'must be a whole number >= 1'), 1),
  /**
   * How long a rebalance waits for every member to rejoin before it drops the ones that did not (a
   * paused process, say). Default `sessionTimeoutMs`.
   */
  rebalanceTimeoutMs: ms,
  /** `join` rejects if the handle is not in a view by then (unreachable broker, say). Default 30000 ms. */
  joinTimeoutMs: withDefault(wholeNumber(1, 'must be a positive whole number of milliseconds'), 30_000),
  /** This node's rack, unless the join request names one. */
  rack: z.string().optional(),
  /** This node's address, unless the join request names one. */
  address: z.string().optional(),
  /** This node's weight for the `balanced` strategy, unless the join request names one: above 0, at most 1 000 000. */
  weight: z.number().positive('must be above 0').max(1_000_000, 'must be at most 1000000').optional(),
});

/** The defaults that follow the session timeout actually set. */
function derive({ heartbeatIntervalMs, rebalanceTimeoutMs, ...o }: z.output<typeof fields>) {
  return {
    ...o,
    heartbeatIntervalMs: heartbeatIntervalMs ?? Math.max(1, Math.floor(o.sessionTimeoutMs / 10)),
    rebalanceTimeoutMs: rebalanceTimeoutMs ?? o.sessionTimeoutMs,
  };
}

/** The options, their defaults and the check between them. */
export const kafkaMembershipSchema = fields.transform(derive).superRefine((s, ctx) => {
  if (s.heartbeatIntervalMs >= s.sessionTimeoutMs)
    ctx.addIssue({
      code: 'custom',
      path: ['heartbeatIntervalMs'],
      message: `(${s.heartbeatIntervalMs}) must be below sessionTimeoutMs (${s.sessionTimeoutMs})`,
    });
});

/** The connection (brokers, client id, log) and the group timings of the membership's consumer. */
export type KafkaMembershipOptions = Omit<KafkaConnection, 'brokers' | 'clientId'> & z.input<typeof kafkaMembershipSchema>;

/** The options with their defaults, checked. */
export type KafkaMembershipSettings = Readonly<z.output<typeof kafkaMembershipSchema>>;

/** Applies the defaults and fails fast with a `ConfigError` naming the key of a value that cannot work. */
export function kafkaMembershipSettings(options: KafkaMembershipOptions): KafkaMembershipSettings {
  const r = kafkaMembershipSchema.safeParse(options);
  if (!r.success) throw configErrorOf(r.error);
  return r.data;
}
