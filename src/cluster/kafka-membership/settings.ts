// The Kafka membership's options: what each one does, its default, and the check that refuses a
// value that cannot work, naming the option.
import { z } from 'zod';
import type { KafkaConnection } from '../kafka-client.js';
import { parseOptions, wholeNumber } from '../kafka-options.js';

/** The connection (brokers, client id, log) and the group timings of the membership's consumer. */
export interface KafkaMembershipOptions extends KafkaConnection {
  /** The cluster name: the group and its one-partition topic are both `<topicPrefix>.members`. */
  readonly topicPrefix: string;
  /**
   * A member that has not heartbeated for this long is removed by the broker, and a handle that has
   * not had a heartbeat or join acknowledged for this long fences itself. Default 10000 ms. Must lie
   * within the broker's `group.min.session.timeout.ms` (default 6000) .. `group.max.session.timeout.ms`.
   */
  readonly sessionTimeoutMs?: number | undefined;
  /**
   * How often the handle heartbeats, and so how soon survivors notice a rebalance after a member
   * died. Default `sessionTimeoutMs / 10` (a fifth made failover take 1.2 × the session timeout
   * instead of 1.1 ×); must be below `sessionTimeoutMs`.
   */
  readonly heartbeatIntervalMs?: number | undefined;
  /**
   * How long a rebalance waits for every member to rejoin before it drops the ones that did not (a
   * paused process, say). Default `sessionTimeoutMs`.
   */
  readonly rebalanceTimeoutMs?: number | undefined;
  /** `join` rejects if the handle is not in a view by then (unreachable broker, say). Default 30000 ms. */
  readonly joinTimeoutMs?: number | undefined;
  /** Replication factor of the members topic when `join` creates it. Default 1. */
  readonly replicationFactor?: number | undefined;
  /** This node's rack, unless the join request names one. */
  readonly rack?: string | undefined;
  /** This node's address, unless the join request names one. */
  readonly address?: string | undefined;
  /** This node's weight for the `balanced` strategy, unless the join request names one. */
  readonly weight?: number | undefined;
}

/** The options with their defaults, checked. */
export interface KafkaMembershipSettings {
  readonly brokers: readonly string[];
  readonly clientId: string;
  readonly topicPrefix: string;
  readonly sessionTimeoutMs: number;
  readonly heartbeatIntervalMs: number;
  readonly rebalanceTimeoutMs: number;
  readonly joinTimeoutMs: number;
  readonly replicationFactor: number;
  readonly rack: string | undefined;
  readonly address: string | undefined;
  readonly weight: number | undefined;
}

/** Absent (undefined or null) means the default. */
const ms = wholeNumber(1, 'must be a positive whole number of milliseconds').nullish();

/** The checks of single options, in the order they are reported; the one between options follows. */
const schema = z.object({
  brokers: z.array(z.string()).min(1, 'must name at least one broker'),
  topicPrefix: z
    .string()
    .regex(/^[A-Za-z0-9._-]{1,200}$/, { error: (issue) => `must be 1 to 200 letters, digits, ".", "_" or "-", got ${JSON.stringify(issue.input)}` }),
  sessionTimeoutMs: ms,
  heartbeatIntervalMs: ms,
  replicationFactor: wholeNumber(1, 'must be a whole number >= 1').nullish(),
  rebalanceTimeoutMs: ms,
  joinTimeoutMs: ms,
});

function invalid(key: string, reason: string): never {
  throw new RangeError(`${key} ${reason}`);
}

/** Applies the defaults and fails fast, naming the key, on a value that cannot work. */
export function kafkaMembershipSettings(options: KafkaMembershipOptions): KafkaMembershipSettings {
  const o = parseOptions(schema, options, invalid);
  const sessionTimeoutMs = o.sessionTimeoutMs ?? 10_000;
  const heartbeatIntervalMs = o.heartbeatIntervalMs ?? Math.max(1, Math.floor(sessionTimeoutMs / 10));
  if (heartbeatIntervalMs >= sessionTimeoutMs) invalid('heartbeatIntervalMs', `(${heartbeatIntervalMs}) must be below sessionTimeoutMs (${sessionTimeoutMs})`);
  return {
    brokers: [...o.brokers],
    clientId: options.clientId,
    topicPrefix: o.topicPrefix,
    sessionTimeoutMs,
    heartbeatIntervalMs,
    rebalanceTimeoutMs: o.rebalanceTimeoutMs ?? sessionTimeoutMs,
    joinTimeoutMs: o.joinTimeoutMs ?? 30_000,
    replicationFactor: o.replicationFactor ?? 1,
    rack: options.rack,
    address: options.address,
    weight: options.weight,
  };
}
