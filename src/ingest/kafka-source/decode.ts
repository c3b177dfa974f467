// What readers see of a Kafka record's value: the decoder type, and the default decoding (JSON
// when the value is JSON, else its text).

/** Turns a record's value into what readers see; throwing makes the record a poison record. */
export type KafkaValueDecoder = (value: Buffer | null, key: string, offset: number) => unknown;

/**
 * The default decoding of a record value: the parsed JSON when the value is JSON, otherwise its
 * UTF-8 text; `null` for a null value (a tombstone).
 *
 * Gotchas: a value that happens to be JSON text becomes the parsed value, so the text `42` is read
 * as the number 42 and `"a"` (with the quotes) as the string `a`. The `ShardedProducer` writes every
 * value as JSON, so what it sends is read back unchanged.
 */
export function decodeKafkaValue(value: Buffer | null): unknown {
  if (value === null) return null;
  const text = value.toString('utf8');
  // Only text that can start a JSON value pays for a parse attempt (and a thrown SyntaxError).
  if (!/^\s*[{["\-0-9tfn]/.test(text)) return text;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}
