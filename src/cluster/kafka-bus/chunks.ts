// How the Kafka bus writes a value too large for one record: consecutive records, each holding a
// slice of the value's UTF-8 JSON bytes as its value and the chunk's place in record headers.
// A record without the id header is an ordinary record (one whole JSON value).
import type { ChunkPosition } from '../chunk-assembly.js';

/**
 * The headers of a chunk record. Their names are the format: a different chunk format would take
 * other names, and a reader of this one would see its records as ordinary ones (and report them
 * as malformed: a slice is not JSON), never mistake them for chunks of this format.
 */
export const CHUNK_ID_HEADER = 'shardherd.chunk.id';
export const CHUNK_INDEX_HEADER = 'shardherd.chunk.index';
export const CHUNK_COUNT_HEADER = 'shardherd.chunk.count';

/** The longest message id this bus writes: a 12-character producer id, a dot and a counter. */
export const MAX_MESSAGE_ID_BYTES = 12 + 1 + String(Number.MAX_SAFE_INTEGER).length;
/** The longest index or count it writes (a count is at most MAX_MESSAGE_BYTES / MIN_RECORD_BYTES, 6 digits). */
const MAX_NUMBER_BYTES = 10;

/** Header bytes of a chunk record at most, as Kafka's record format v2 encodes them. */
export const MAX_CHUNK_HEADER_BYTES =
  1 + // the header count (3), a varint
  [CHUNK_ID_HEADER.length + MAX_MESSAGE_ID_BYTES, CHUNK_INDEX_HEADER.length + MAX_NUMBER_BYTES, CHUNK_COUNT_HEADER.length + MAX_NUMBER_BYTES]
    .map((keyAndValue) => keyAndValue + 2) // each header's key length and value length: one-byte varints (< 64)
    .reduce((a, b) => a + b, 0);

/** The headers of chunk `index` of `count` of message `id`. */
export function chunkHeaders(id: string, index: number, count: number): Record<string, string> {
  return { [CHUNK_ID_HEADER]: id, [CHUNK_INDEX_HEADER]: String(index), [CHUNK_COUNT_HEADER]: String(count) };
}

/** The header that carries a record's labels (`RecordLabels`, as JSON), on every record of its value. */
export const LABELS_HEADER = 'shardherd.labels';

/**
 * The labels header, and what it takes of a record's budget: its key and value, their lengths
 * (varints, at most 5 bytes each) and one more for the header count. Counted against the value's
 * room, so that the records' overhead (and every topic's `max.message.bytes`) stays as it was.
 */
export function labelHeaders(json: string): { readonly headers: Record<string, string>; readonly bytes: number } {
  return { headers: { [LABELS_HEADER]: json }, bytes: LABELS_HEADER.length + Buffer.byteLength(json) + 5 + 5 + 1 };
}

/** The labels of a fetched record as JSON text, if it has them. */
export function readLabelsHeader(headers: Readonly<Record<string, unknown>> | undefined): string | undefined {
  const v = headers?.[LABELS_HEADER];
  return Buffer.isBuffer(v) ? v.toString('utf8') : typeof v === 'string' ? v : undefined;
}

/** Cuts the encoded value into slices of at most `maxRecordBytes` (views of it, no copies). */
export function sliceValue(bytes: Buffer, maxRecordBytes: number): Buffer[] {
  const slices: Buffer[] = [];
  for (let start = 0; start < bytes.length; start += maxRecordBytes) slices.push(bytes.subarray(start, start + maxRecordBytes));
  return slices;
}

/** What a fetched record's headers say: an ordinary record, a chunk, or headers that cannot be read. */
export type ReadHeaders =
  { readonly kind: 'record' } | { readonly kind: 'chunk'; readonly position: ChunkPosition } | { readonly kind: 'malformed'; readonly reason: string };

/** Reads the chunk headers of a fetched record (kafkajs gives Buffers; a repeated key gives an array). */
export function readChunkHeaders(headers: Readonly<Record<string, unknown>> | undefined): ReadHeaders {
  const id = headers?.[CHUNK_ID_HEADER];
  if (id === undefined) return { kind: 'record' };
  const text = (v: unknown): string | undefined => (Buffer.isBuffer(v) ? v.toString('utf8') : typeof v === 'string' ? v : undefined);
  const whole = (v: unknown): number | undefined => {
    const t = text(v);
    return t !== undefined && /^\d{1,10}$/.test(t) ? Number(t) : undefined;
  };
  const idText = text(id);
  const index = whole(headers?.[CHUNK_INDEX_HEADER]);
  const count = whole(headers?.[CHUNK_COUNT_HEADER]);
  if (idText === undefined || idText.length === 0 || index === undefined || count === undefined) {
    return {
      kind: 'malformed',
      reason: `its chunk headers are not an id, an index and a count (${CHUNK_ID_HEADER}, ${CHUNK_INDEX_HEADER}, ${CHUNK_COUNT_HEADER})`,
    };
  }
  return { kind: 'chunk', position: { id: idText, index, count } };
}
