// The option checks the Kafka adapters share: whole numbers with a lower bound, and the first
// problem zod finds reported under the name of the option it is about.
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

/**
 * Parses `options` with `schema`. On failure calls `invalid` with the key of the first problem (its
 * path with dots, array positions left out: `brokers`, `fetch.maxBytes`) and the schema's message.
 */
export function parseOptions<S extends z.ZodType>(schema: S, options: unknown, invalid: (key: string, message: string) => never): z.output<S> {
  const r = schema.safeParse(options);
  if (r.success) return r.data;
  const issue = r.error.issues[0];
  return invalid(issue?.path.filter((p) => typeof p === 'string').join('.') ?? '', issue?.message ?? 'is invalid');
}
