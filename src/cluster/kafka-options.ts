// The option checks the Kafka adapters share: whole numbers with a lower bound, and a default for
// an absent value.
import { z } from 'zod';

/** The session timeout of the bus's and the membership's consumer groups unless set (ms). */
export const DEFAULT_SESSION_TIMEOUT_MS = 10_000;

/** A whole number (a safe integer) of at least `min`; anything else fails with `<requirement>, got <value>`. */
export function wholeNumber(min: number, requirement: string): z.ZodNumber {
  const error = (issue: { readonly input?: unknown }): string => `${requirement}, got ${String(issue.input)}`;
  return z.number({ error }).int({ error }).min(min, { error });
}

/**
 * `schema`, or `fallback` when the value is absent: undefined or null (a JSON config has no
 * undefined, so null is how it asks for the default).
 */
export function withDefault<T extends z.ZodType, D extends z.output<T>>(schema: T, fallback: D) {
  return schema.nullish().transform((v): z.output<T> | D => v ?? fallback);
}

/** The Kafka client libraries shardherd runs on: kafkajs, and @platformatic/kafka (maintained). */
export const KAFKA_CLIENT_LIBRARIES = ['kafkajs', 'platformatic'] as const;
export type KafkaClientLibrary = (typeof KAFKA_CLIENT_LIBRARIES)[number];

/** A client library option (default `platformatic`), as a node config's `kafka.client` takes it. */
export const kafkaClientSchema = withDefault(
  z.enum(KAFKA_CLIENT_LIBRARIES, {
    error: (issue) => `must be one of ${KAFKA_CLIENT_LIBRARIES.map((c) => `"${c}"`).join(', ')}, got ${JSON.stringify(issue.input)}`,
  }),
  'platformatic',
);
