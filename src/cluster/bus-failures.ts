// Which bus failures no retry can fix: the callers say those once and count them, where a
// failure that may pass (a broker away, a timeout) is retried or repaired later.

/** Codes of failures that will fail again however often they are retried: the record is never carried. */
const PERMANENT_CODES: ReadonlySet<string> = new Set([
  /** A value larger than the bus's `maxMessageBytes`. */
  'MESSAGE_TOO_LARGE',
  /** The broker refused a record as too large for it. */
  'RECORD_TOO_LARGE',
  /** The topic's `max.message.bytes` is below what the bus writes. */
  'BROKER_LIMIT_TOO_SMALL',
  /** A value that JSON cannot carry. */
  'NOT_JSON',
]);

/** True for a produce failure that will fail again whatever is retried (a value the bus can never carry). */
export function isPermanentBusFailure(e: unknown): boolean {
  const x = e as { code?: unknown; retriable?: unknown } | null;
  return typeof x === 'object' && x !== null && x.retriable !== true && typeof x.code === 'string' && PERMANENT_CODES.has(x.code);
}
