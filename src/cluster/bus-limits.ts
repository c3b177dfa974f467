// The size limits and chunk timeout that every Bus adapter takes as options, with their defaults
// and checks: one place, so the memory and Kafka buses cut and reassemble messages the same way.

/** The options both adapters share (see `Bus` in ./bus.ts for what they mean to a caller). */
export interface BusLimitOptions {
  /**
   * The largest record the bus writes: the UTF-8 bytes of a value's JSON, or of one chunk of it
   * (default 262144, 256 KiB; at least 1024, at most `maxMessageBytes`). A larger value is cut into
   * chunks of this size. On Kafka every topic's `max.message.bytes` must hold such a record and
   * its overhead (`KafkaBus.ensureTopics` checks it).
   */
  readonly maxRecordBytes?: number | undefined;
  /**
   * The largest value `produce` accepts at all, its JSON's UTF-8 bytes (default 67108864, 64 MiB;
   * at most 268435456, 256 MiB). Readers need at least the writers' value: a subscription gives up
   * the messages it is assembling once they hold more than twice this.
   */
  readonly maxMessageBytes?: number | undefined;
  /**
   * How long a subscription waits for the next chunk of a message it is assembling before it
   * gives the message up (default 30000 ms; the bus's clock, not counting time in the handler).
   */
  readonly chunkTimeoutMs?: number | undefined;
}

export interface BusLimits {
  readonly maxRecordBytes: number;
  readonly maxMessageBytes: number;
  readonly chunkTimeoutMs: number;
}

export const DEFAULT_MAX_RECORD_BYTES = 256 * 1024;
export const DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024 * 1024;
export const DEFAULT_CHUNK_TIMEOUT_MS = 30_000;
/** Below this, headers and batch overhead would be a large part of every chunk. */
export const MIN_RECORD_BYTES = 1024;
/**
 * Far below V8's longest string (2^29 - 24 UTF-16 units): a message is encoded to one string and
 * decoded from one, and twice this is held by a subscription at most.
 */
export const MAX_MESSAGE_BYTES = 256 * 1024 * 1024;

/**
 * The limits with their defaults, checked. `invalid(key, reason)` throws the adapter's own error
 * (the reason reads after the key: `maxRecordBytes must be ...`).
 */
export function busLimits(options: BusLimitOptions, invalid: (key: keyof BusLimitOptions, reason: string) => never): BusLimits {
  const whole = (key: keyof BusLimitOptions, fallback: number, min: number, max: number): number => {
    const v = options[key] ?? fallback;
    if (!Number.isSafeInteger(v) || v < min || v > max) invalid(key, `must be a whole number from ${min} to ${max}, got ${String(v)}`);
    return v;
  };
  const maxMessageBytes = whole('maxMessageBytes', DEFAULT_MAX_MESSAGE_BYTES, MIN_RECORD_BYTES, MAX_MESSAGE_BYTES);
  const maxRecordBytes = whole('maxRecordBytes', DEFAULT_MAX_RECORD_BYTES, MIN_RECORD_BYTES, MAX_MESSAGE_BYTES);
  if (maxRecordBytes > maxMessageBytes) invalid('maxRecordBytes', `(${maxRecordBytes}) must be at most maxMessageBytes (${maxMessageBytes})`);
  const chunkTimeoutMs = whole('chunkTimeoutMs', DEFAULT_CHUNK_TIMEOUT_MS, 1, 2 ** 31 - 1);
  return { maxRecordBytes, maxMessageBytes, chunkTimeoutMs };
}

/** How many chunks a value of `bytes` (more than `maxRecordBytes`) is cut into. */
export function chunkCount(bytes: number, maxRecordBytes: number): number {
  return Math.ceil(bytes / maxRecordBytes);
}
