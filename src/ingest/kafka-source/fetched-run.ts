// The records of one fetched batch as they wait for their reader: their bytes copied into one
// buffer, and each record's offset and where its key and value lie in it. Keys and values are
// decoded only when read, into objects that the sink consumes and that die young.
//
// Why not decode as fetched: a buffered record as objects (record, key string, parsed value) lives
// from the fetch to the read, long enough for the garbage collector to promote it, and that cost a
// third of ingestion's throughput against a bare consumer that parses and drops each value. As
// bytes, a run is three allocations whatever its size, and it keeps no slice of the client's fetch
// response alive (the response is many times the size of one partition's records).
import type { SourceRecord } from '../ingestion-source.js';
import type { FetchedRecords } from './feed-client.js';
import { decodeKafkaValue, decodeKafkaValueInText, isAscii, latin1Text, utf8Text, type KafkaValueDecoder } from './decode.js';

/** What a run costs beyond its bytes: its three objects, and per record its offset and four positions. */
const RUN_OVERHEAD_BYTES = 256;
const PER_RECORD_BYTES = 8 + 4 * 4;
/**
 * Keys and values of consecutive records lie this close in a fetch response (the record framing
 * between them: lengths, timestamp and offset deltas, headers); a wider gap starts a new segment,
 * so bytes between unrelated parts of a response are never copied.
 */
const MAX_GAP_BYTES = 512;
const NULL = -1;
/** V8 copies a slice of a string shorter than this; a longer slice keeps the whole string alive. */
const SHORT_TEXT = 13;

/** A record the decoder refused: why, and where. */
export class UndecodableRecord extends Error {
  constructor(
    readonly offset: number,
    reason: string,
  ) {
    super(reason);
  }
}

/** A run as its parts, which a worker thread hands over without copying (each part's buffer is its own). */
export interface FetchedRunParts {
  readonly data: Uint8Array;
  readonly offsets: Float64Array;
  readonly spans: Int32Array;
  readonly count: number;
  readonly bytes: number;
}

export class FetchedRun {
  private constructor(
    /** The keys and values, with the framing between them. */
    private readonly data: Buffer,
    private readonly offsets: Float64Array,
    /** Per record: key start, key end, value start, value end in `data`; a null key or value starts at -1. */
    private readonly spans: Int32Array,
    readonly count: number,
    /** What the run holds in memory. */
    readonly bytes: number,
  ) {}

  /**
   * Packs the first records of a batch, as many as `maxRecords` allows and until the run holds at
   * least `byteBudget` bytes (the message that reaches it included, as a buffer takes one record
   * past its bound). Returns undefined for no records.
   */
  static pack(records: FetchedRecords, maxRecords: number, byteBudget: number): FetchedRun | undefined {
    const wanted = Math.min(records.length, maxRecords);
    if (wanted <= 0) return undefined;
    const spans = new Int32Array(4 * wanted);
    const offsets = new Float64Array(wanted);
    const segments: Uint8Array[] = [];
    // The open segment: where it lies in its source and where it starts in `data`.
    let source: ArrayBufferLike | undefined;
    let start = 0;
    let end = 0;
    let base = 0;
    const close = () => {
      if (source !== undefined) segments.push(new Uint8Array(source, start, end - start));
      base += end - start;
      source = undefined;
      start = end = 0;
    };
    /** Where `part` will lie in `data`, opening a segment when it does not continue the open one. */
    const place = (part: Buffer | null, at: number) => {
      if (part === null) {
        spans[at] = spans[at + 1] = NULL;
        return;
      }
      const from = part.byteOffset;
      if (part.length > 0 && (part.buffer !== source || from < end || from > end + MAX_GAP_BYTES)) {
        close();
        source = part.buffer;
        start = end = from;
      }
      if (part.length > 0) end = Math.max(end, from + part.length);
      const pos = part.length > 0 ? base + (from - start) : 0;
      spans[at] = pos;
      spans[at + 1] = pos + part.length;
    };
    let count = 0;
    let bytes = RUN_OVERHEAD_BYTES;
    while (count < wanted && (count === 0 || bytes < byteBudget)) {
      offsets[count] = records.offset(count);
      place(records.key(count) ?? null, 4 * count);
      place(records.value(count), 4 * count + 2);
      count += 1;
      bytes = RUN_OVERHEAD_BYTES + base + (end - start) + PER_RECORD_BYTES * count;
    }
    close();
    const data = Buffer.allocUnsafeSlow(base);
    let at = 0;
    for (const s of segments) {
      data.set(s, at);
      at += s.length;
    }
    return new FetchedRun(data, offsets, spans, count, RUN_OVERHEAD_BYTES + base + PER_RECORD_BYTES * wanted);
  }

  /** The run's parts, and the buffers to transfer with them (`postMessage`'s transfer list). */
  parts(): { readonly parts: FetchedRunParts; readonly transfer: ArrayBuffer[] } {
    const { data, offsets, spans, count, bytes } = this;
    // Each is made by `pack` with a buffer of its own (`allocUnsafeSlow` is never pooled).
    return { parts: { data, offsets, spans, count, bytes }, transfer: [data.buffer, offsets.buffer, spans.buffer] as ArrayBuffer[] };
  }

  static fromParts(p: FetchedRunParts): FetchedRun {
    return new FetchedRun(Buffer.from(p.data.buffer, p.data.byteOffset, p.data.byteLength), p.offsets, p.spans, p.count, p.bytes);
  }

  offset(i: number): number {
    return this.offsets[i]!;
  }

  lastOffset(): number {
    return this.offsets[this.count - 1]!;
  }

  /**
   * Decodes the records from index `from` on into `out`, until `out` holds `max` or the run ends;
   * returns how many it added. At a record the decoder refuses it stops, and throws
   * `UndecodableRecord` if that record would have been the first in `out`.
   */
  readInto(out: SourceRecord[], from: number, max: number, decode: KafkaValueDecoder): number {
    const until = Math.min(this.count, from + max - out.length);
    if (until <= from) return 0;
    // A decoder of its own gets each value's bytes: the text would then serve the keys only.
    const text = decode === decodeKafkaValue ? this.textOf(from, until) : undefined;
    let i = from;
    for (; i < until; i++) {
      try {
        out.push(this.decodeRecord(i, decode, text));
      } catch (e) {
        if (!(e instanceof UndecodableRecord) || out.length === 0) throw e;
        break;
      }
    }
    return i - from;
  }

  /**
   * The Latin-1 text of the bytes the records `from .. until - 1` span, and where it starts: one
   * native call for a read, from which short ASCII keys and ASCII JSON values are cut (two calls a
   * record before: 276 → 198 ns a record for a key and a small JSON value, decoding included).
   */
  private textOf(from: number, until: number): ReadText {
    const s = this.spans;
    // `pack` lays keys and values out in record order, so the first part that lies somewhere
    // starts the text and the last one ends it. Null (-1) and empty (0..0) parts lie nowhere.
    let first = 4 * from;
    let last = 4 * until - 2;
    while (first <= last && s[first + 1]! <= s[first]!) first += 2;
    while (last > first && s[last + 1]! <= s[last]!) last -= 2;
    return first <= last ? { text: latin1Text(this.data, s[first]!, s[last + 1]!), start: s[first]! } : { text: '', start: 0 };
  }

  /** The bytes of the keys and values of the records `from .. from + n - 1` (for the load figures). */
  bytesOf(from: number, n: number): number {
    const s = this.spans;
    let bytes = 0;
    // A null key or value spans -1..-1: 0 bytes.
    for (let at = 4 * from, end = 4 * (from + n); at < end; at += 4) bytes += s[at + 1]! - s[at]! + s[at + 3]! - s[at + 2]!;
    return bytes;
  }

  /** The record at `i`, decoded; throws `UndecodableRecord` when the decoder refuses its value. */
  record(i: number, decode: KafkaValueDecoder): SourceRecord {
    return this.decodeRecord(i, decode, decode === decodeKafkaValue ? this.textOf(i, i + 1) : undefined);
  }

  /** The record at `i`, decoded, with the read's text when the default decoder reads it. */
  private decodeRecord(i: number, decode: KafkaValueDecoder, read: ReadText | undefined): SourceRecord {
    const { data, spans: s } = this;
    const at = 4 * i;
    const offset = this.offsets[i]!;
    const key = this.keyAt(at, read);
    const start = s[at + 2]!;
    try {
      if (start === NULL) return { offset, key, value: decode(null, key, offset) };
      // The default decoder reads the bytes in place; any other gets a Buffer of its own.
      if (read !== undefined) return { offset, key, value: decodeKafkaValueInText(data, start, s[at + 3]!, read.text, read.start) };
      return { offset, key, value: decode(data.subarray(start, s[at + 3]), key, offset) };
    } catch (e) {
      throw new UndecodableRecord(offset, e instanceof Error ? e.message : String(e));
    }
  }

  /**
   * The key of the record whose spans start at `at`, as text. A short ASCII key is cut out of the
   * read's text, when there is one: V8 copies a slice shorter than 13 characters, while a longer
   * one would keep the whole text alive for as long as a sink holds the key, so those are decoded
   * on their own.
   */
  private keyAt(at: number, read: ReadText | undefined): string {
    const start = this.spans[at]!;
    const end = this.spans[at + 1]!;
    if (end <= start) return '';
    if (read !== undefined && end - start < SHORT_TEXT && isAscii(this.data, start, end)) return read.text.slice(start - read.start, end - read.start);
    return utf8Text(this.data, start, end);
  }
}

/** The Latin-1 text of the bytes a read spans, and where in the run's bytes it starts. */
interface ReadText {
  readonly text: string;
  readonly start: number;
}
