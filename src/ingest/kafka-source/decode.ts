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
  return value === null ? null : decodeKafkaValueAt(value, 0, value.length);
}

/**
 * `decodeKafkaValue` of the bytes `[start, end)` of `bytes`: what the source's buffers call for
 * the default decoder, sparing a Buffer object per record.
 */
export function decodeKafkaValueAt(bytes: Buffer, start: number, end: number): unknown {
  const text = utf8Text(bytes, start, end);
  // Only text that can start a JSON value pays for a parse attempt (and a thrown SyntaxError).
  // The first byte is looked at, not the text: a regular expression per record cost a tenth of ingestion.
  if (!mayStartJson(bytes, start, end)) return text;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}

/**
 * `decodeKafkaValueAt`, given `text`: the Latin-1 decoding of `bytes` from `textStart` on, which
 * covers `[start, end)`. An ASCII value that can start JSON is parsed from a slice of that text (a
 * string cut out of one decoding of many records, instead of a native call to decode each);
 * anything else is decoded on its own. The slice only feeds the parse and dies with it: what the
 * parse returns keeps nothing of `text`.
 */
export function decodeKafkaValueInText(bytes: Buffer, start: number, end: number, text: string, textStart: number): unknown {
  if (mayStartJson(bytes, start, end) && isAscii(bytes, start, end)) {
    try {
      return JSON.parse(text.slice(start - textStart, end - textStart)) as unknown;
    } catch {
      // Not JSON after all: its text, decoded on its own below.
    }
  }
  return decodeKafkaValueAt(bytes, start, end);
}

/** Whether the bytes `[start, end)` are all ASCII, where Latin-1 and UTF-8 read the same text. */
export function isAscii(bytes: Buffer, start: number, end: number): boolean {
  let any = 0;
  for (let i = start; i < end; i++) any |= bytes[i]!;
  return any < 0x80;
}

/** Whether the first byte after JSON's whitespace can start a JSON value: `{ [ " - 0-9 t f n`. */
function mayStartJson(bytes: Buffer, start: number, end: number): boolean {
  let i = start;
  while (i < end && (bytes[i] === 0x20 || bytes[i] === 0x0a || bytes[i] === 0x0d || bytes[i] === 0x09)) i++;
  if (i === end) return false;
  const c = bytes[i]!;
  return c === 0x7b || c === 0x5b || c === 0x22 || c === 0x2d || (c >= 0x30 && c <= 0x39) || c === 0x74 || c === 0x66 || c === 0x6e;
}

/** Buffer's own UTF-8 decoding of a byte range, which `toString()` calls without arguments. */
type Utf8Slicing = { utf8Slice(start: number, end: number): string };

/**
 * The UTF-8 text of the bytes `[start, end)`: `bytes.toString('utf8', start, end)`, without the
 * argument handling around it (the encoding looked up, the bounds checked again), which cost a
 * sixth of a record's decoding. Node has had `utf8Slice` on every Buffer since its first releases;
 * should one lack it, the public call is used.
 */
export const utf8Text: (bytes: Buffer, start: number, end: number) => string =
  typeof (Buffer.prototype as Partial<Utf8Slicing>).utf8Slice === 'function'
    ? (bytes, start, end) => (bytes as unknown as Utf8Slicing).utf8Slice(start, end)
    : (bytes, start, end) => bytes.toString('utf8', start, end);

/** Buffer's own Latin-1 decoding of a byte range (see `utf8Text`). */
type Latin1Slicing = { latin1Slice(start: number, end: number): string };

/** The Latin-1 text of the bytes `[start, end)`: one character per byte. */
export const latin1Text: (bytes: Buffer, start: number, end: number) => string =
  typeof (Buffer.prototype as Partial<Latin1Slicing>).latin1Slice === 'function'
    ? (bytes, start, end) => (bytes as unknown as Latin1Slicing).latin1Slice(start, end)
    : (bytes, start, end) => bytes.toString('latin1', start, end);
