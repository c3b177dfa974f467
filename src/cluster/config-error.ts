// The one error every config check throws, from an adapter's options to a node's config file: the
// key it is about, with its dotted path, so a user fixes the right line whichever layer refused it.
import type { z } from 'zod';

/**
 * A config value that cannot work. `key` is its dotted path (`failureDetector.leaseMs`,
 * `kafka.brokers.0`); the message is `<label><key> <reason>`.
 * Gotchas: it extends `RangeError`, so callers that caught the adapters' old `RangeError` still do.
 */
export class ConfigError extends RangeError {
  constructor(
    readonly key: string,
    readonly reason: string,
    label = '',
  ) {
    super(`${label}${key === '' ? '' : `${key} `}${reason}`);
    this.name = 'ConfigError';
  }
}

/** `key` under `prefix`: `prefix.key`, or either alone when the other is empty. */
export function dotted(prefix: string, key: string): string {
  return [prefix, key].filter((k) => k !== '').join('.');
}

/** Where a zod failure's key goes: under `prefix`, after `label`, with or without array positions. */
export interface ConfigErrorPlace {
  readonly prefix?: string | undefined;
  readonly label?: string | undefined;
  /** Keep positions in the path (`brokers.0`, the default), or name only the key (`brokers`). */
  readonly positions?: boolean | undefined;
}

/**
 * The first problem zod found, as a `ConfigError` naming its key. An unknown key is reported
 * before the others: a misspelt key usually explains the rest.
 */
export function configErrorOf(error: z.ZodError, { prefix = '', label = '', positions = true }: ConfigErrorPlace = {}): ConfigError {
  const issue = error.issues.find((i) => i.code === 'unrecognized_keys') ?? error.issues[0];
  const steps = (issue?.path ?? []).filter((p) => positions || typeof p === 'string').map(String);
  const path = dotted(prefix, steps.join('.'));
  if (issue?.code === 'unrecognized_keys') return new ConfigError(dotted(path, issue.keys[0] ?? ''), 'is not a known key', label);
  return new ConfigError(path, issue?.message ?? 'is invalid', label);
}
