// Kafka's record batches (message format v2, every broker since 0.11) decoded into the very
// message objects kafkajs's own decoder makes: the same fields, values and types, so everything
// above the decoder (kafkajs's batches, offsets, control records, transactions, our source) runs
// unchanged. Why a decoder of our own: kafkajs's computes each record's offset and timestamp
// through BigInt-backed longs and their decimal strings, reads each record through a decoder
// object of its own and builds each header object by spreading the previous one; on 16 partitions
// of small JSON records that and the collection of its garbage were two thirds of a bare
// consumer's time (docs/BENCHMARKS.md). This one reads the bytes in place and does the arithmetic
// in doubles wherever they are exact (offsets and timestamps below 2^53, all of them in practice),
// taking kafkajs's own long arithmetic for the rest. Compressed batches, and the message sets of
// the formats before v2, go to kafkajs's decoder whole: their decompression is kafkajs's, and this
// module does not repeat it.

/** kafkajs's decoder of the fetch response (`src/protocol/decoder.js`): what this module uses of it. */
export interface KafkaDecoder {
  buffer: Buffer;
  offset: number;
  readInt32(): number;
  readBytes(length: number): Buffer;
  canReadBytes(length: number): boolean;
  forward(length: number): void;
  readVarLong(): KafkaLong;
}

/** kafkajs's 64-bit integer (`src/utils/long.js`). */
export interface KafkaLong {
  add(other: KafkaLong | number): KafkaLong;
  toString(): string;
}

/** The parts of kafkajs this decoder delegates to, so that its results stay kafkajs's own. */
export interface KafkajsDecoding {
  readonly Decoder: new (buffer: Buffer) => KafkaDecoder;
  readonly Long: { fromValue(value: string | number): KafkaLong };
  /** kafkajs's decoder of one record batch (compressed ones come here). */
  readonly decodeRecordBatch: (decoder: KafkaDecoder) => Promise<{ records: unknown[] }>;
  /** kafkajs's decoder of the message sets of the formats before v2. */
  readonly decodeMessageSet: (decoder: KafkaDecoder, size: number) => Promise<unknown[]>;
  readonly isPartialMessageError: (e: unknown) => boolean;
  /** kafkajs's names of the two timestamp types. */
  readonly timestampTypes: { readonly CREATE_TIME: number; readonly LOG_APPEND_TIME: number };
}

/** What kafkajs puts in `batchContext`: the batch's header, one object shared by its records. */
interface BatchContext {
  readonly firstOffset: string;
  readonly firstTimestamp: string;
  readonly partitionLeaderEpoch: number;
  readonly inTransaction: boolean;
  readonly isControlBatch: boolean;
  readonly lastOffsetDelta: number;
  readonly producerId: string;
  readonly producerEpoch: number;
  readonly firstSequence: number;
  readonly maxTimestamp: string;
  readonly timestampType: number;
  readonly magicByte: number;
}

/** kafkajs's message: the fields and their order as its record decoder makes them. */
interface DecodedMessage {
  readonly magicByte: number;
  readonly attributes: number;
  readonly timestamp: string;
  readonly offset: string;
  readonly key: Buffer | null;
  readonly value: Buffer | null;
  readonly headers: Record<string, Buffer | null | (Buffer | null)[]>;
  readonly isControlRecord: boolean;
  readonly batchContext: BatchContext;
}

const MAGIC_V2 = 2;
/** Where the magic byte lies, in every message format: kafkajs tells the formats apart by the first batch's. */
const MAGIC_OFFSET = 16;
/** The smallest batch kafkajs tries to decode; fewer bytes at the end of a fetch are a partial batch. */
const RECORD_BATCH_OVERHEAD = 49;
/** firstOffset (8) and length (4): the bytes before the part `length` counts. */
const LOG_OVERHEAD = 12;
const COMPRESSION_MASK = 0x07;
const TIMESTAMP_TYPE_MASK = 0x08;
const TRANSACTIONAL_MASK = 0x10;
const CONTROL_MASK = 0x20;
const TWO_TO_32 = 4_294_967_296;

/** Record batches decoded so far, by this module's decoder and by kafkajs's (compressed ones, old formats). */
export interface DecodedBatchCounts {
  own: number;
  kafkajs: number;
}

/** A record batch or record whose lengths contradict its bytes. */
export class CorruptRecordBatch extends Error {
  override readonly name = 'CorruptRecordBatch';
}

/**
 * kafkajs's `decodeMessages` (the records of one partition in a fetch response), made with the
 * decoding of this module: reads the size-prefixed records at `decoder`'s position and moves it past them.
 */
export function recordBatchesDecoder(
  kafkajs: KafkajsDecoding,
  counts: DecodedBatchCounts = { own: 0, kafkajs: 0 },
): (decoder: KafkaDecoder) => Promise<unknown[]> {
  return async (decoder) => {
    const size = decoder.readInt32();
    if (size <= 0 || !decoder.canReadBytes(size)) return [];
    const bytes = decoder.readBytes(size);
    const batches = new kafkajs.Decoder(bytes);
    // Fewer bytes than that throw, as they do in kafkajs.
    if (bytes.readInt8(MAGIC_OFFSET) !== MAGIC_V2) {
      counts.kafkajs += 1;
      return kafkajs.decodeMessageSet(batches, size);
    }
    const records: unknown[] = [];
    while (batches.canReadBytes(RECORD_BATCH_OVERHEAD)) {
      const start = batches.offset;
      const length = bytes.readInt32BE(start + 8);
      // A fetch ends wherever its byte limit falls: the last batch may be cut short.
      if (bytes.length - start - LOG_OVERHEAD < length) break;
      if ((bytes.readInt16BE(start + 21) & COMPRESSION_MASK) !== 0) {
        counts.kafkajs += 1;
        try {
          for (const r of (await kafkajs.decodeRecordBatch(batches)).records) records.push(r);
        } catch (e) {
          if (kafkajs.isPartialMessageError(e)) break;
          throw e;
        }
        continue;
      }
      decodeRecordBatch(bytes, start, kafkajs, records);
      counts.own += 1;
      batches.forward(LOG_OVERHEAD + length);
    }
    return records;
  };
}

/**
 * Appends the records of the uncompressed batch at `start` of `bytes` to `out`.
 *
 * The batch: FirstOffset int64, Length int32, PartitionLeaderEpoch int32, Magic int8, CRC int32,
 * Attributes int16, LastOffsetDelta int32, FirstTimestamp int64, MaxTimestamp int64, ProducerId
 * int64, ProducerEpoch int16, FirstSequence int32, then the records: their count as int32, each
 * Length varint, Attributes int8, TimestampDelta varlong, OffsetDelta varint, Key and Value
 * (varint length, -1 for null, then the bytes), Headers (varint count, each a key string and a value).
 * Like kafkajs, the CRC is not checked (the broker checked it when the batch was produced).
 */
function decodeRecordBatch(bytes: Buffer, start: number, kafkajs: KafkajsDecoding, out: unknown[]): void {
  const end = start + LOG_OVERHEAD + bytes.readInt32BE(start + 8);
  const at = start + LOG_OVERHEAD;
  const attributes = bytes.readInt16BE(at + 9);
  const timestampType = (attributes & TIMESTAMP_TYPE_MASK) > 0 ? kafkajs.timestampTypes.LOG_APPEND_TIME : kafkajs.timestampTypes.CREATE_TIME;
  const firstOffset = int64Number(bytes, start);
  const firstTimestamp = int64Number(bytes, at + 15);
  const context: BatchContext = {
    firstOffset: int64String(bytes, start),
    firstTimestamp: int64String(bytes, at + 15),
    partitionLeaderEpoch: bytes.readInt32BE(at),
    inTransaction: (attributes & TRANSACTIONAL_MASK) > 0,
    isControlBatch: (attributes & CONTROL_MASK) > 0,
    lastOffsetDelta: bytes.readInt32BE(at + 11),
    producerId: int64String(bytes, at + 31),
    producerEpoch: bytes.readInt16BE(at + 39),
    firstSequence: bytes.readInt32BE(at + 41),
    maxTimestamp: int64String(bytes, at + 23),
    timestampType,
    magicByte: bytes.readInt8(at + 4),
  };
  const logAppendTime = timestampType === kafkajs.timestampTypes.LOG_APPEND_TIME;
  const count = bytes.readInt32BE(at + 45);
  const r = new RecordReader(bytes, at + 49);
  for (let i = 0; i < count; i++) {
    const length = r.varInt();
    const recordEnd = r.at + length;
    if (length < 0 || recordEnd > end)
      throw new CorruptRecordBatch(`record ${i} of the batch at offset ${context.firstOffset} is ${length} bytes long, past the batch's end`);
    const recordAttributes = r.int8();
    const timestampDelta = r.varLong(kafkajs);
    const offsetDelta = r.varInt();
    const key = r.bytes();
    const value = r.bytes();
    const headerCount = r.varInt();
    const headers = headerCount > 0 ? r.headers(headerCount) : {};
    if (r.at > recordEnd) throw new CorruptRecordBatch(`record ${i} of the batch at offset ${context.firstOffset} runs past its length of ${length} bytes`);
    r.at = recordEnd;
    const offsetSum = firstOffset + offsetDelta;
    const message: DecodedMessage = {
      magicByte: context.magicByte,
      attributes: recordAttributes,
      timestamp: logAppendTime
        ? context.maxTimestamp
        : typeof timestampDelta === 'number' && Number.isSafeInteger(firstTimestamp + timestampDelta)
          ? String(firstTimestamp + timestampDelta)
          : kafkajs.Long.fromValue(context.firstTimestamp).add(timestampDelta).toString(),
      offset: Number.isSafeInteger(offsetSum) ? String(offsetSum) : kafkajs.Long.fromValue(context.firstOffset).add(offsetDelta).toString(),
      key,
      value,
      headers,
      isControlRecord: context.isControlBatch,
      batchContext: context,
    };
    out.push(message);
  }
}

/**
 * Reads a record's fields in place. Bytes past the buffer read as undefined, which ends a varint
 * (as in kafkajs's decoder), so the fields are read unchecked and the record's end is checked once
 * they are all read: a record that ran past it is corrupt.
 */
class RecordReader {
  constructor(
    private readonly buf: Buffer,
    public at: number,
  ) {}

  int8(): number {
    return this.buf.readInt8(this.at++);
  }

  /** kafkajs's varint, bit for bit (`Decoder.readVarInt`): zigzag over the 7-bit groups. */
  varInt(): number {
    let byte: number;
    let result = 0;
    let shift = 0;
    do {
      byte = this.buf[this.at++]!;
      result += (byte & 0x7f) << shift;
      shift += 7;
    } while (byte >= 0x80);
    return (result >>> 1) ^ -(result & 1);
  }

  /**
   * A varlong as a number when it has at most 7 groups (below 2^49, exact in a double); a longer
   * one is read by kafkajs's own decoder, as kafkajs's long.
   */
  varLong(kafkajs: KafkajsDecoding): number | KafkaLong {
    const from = this.at;
    let result = 0;
    let scale = 1;
    for (let groups = 0; groups < 7; groups++) {
      const byte = this.buf[this.at++]!;
      result += (byte & 0x7f) * scale;
      if (!(byte >= 0x80)) return result % 2 === 0 ? result / 2 : -(result + 1) / 2;
      scale *= 128;
    }
    const decoder = new kafkajs.Decoder(this.buf);
    decoder.offset = from;
    const value = decoder.readVarLong();
    this.at = decoder.offset;
    return value;
  }

  /** Bytes with a varint length, -1 for null: a view of the fetched bytes, as kafkajs's. */
  bytes(): Buffer | null {
    const length = this.varInt();
    if (length === -1) return null;
    return this.buf.subarray(this.at, (this.at += length));
  }

  /**
   * The headers as kafkajs makes them, quirks included: a repeated key collects its values in an
   * array, a null key is the key "null", and the previous value is looked up with inheritance (a
   * key such as `constructor` finds Object's). Each step builds a new object with a computed key,
   * as kafkajs does, so that a key such as `__proto__` is an own property, not the prototype.
   */
  headers(count: number): Record<string, Buffer | null | (Buffer | null)[]> {
    let headers: Record<string, Buffer | null | (Buffer | null)[]> = {};
    for (let h = 0; h < count; h++) {
      const keyBytes = this.bytes();
      const key = keyBytes === null ? 'null' : keyBytes.toString('utf8');
      const value = this.bytes();
      const previous = headers[key];
      headers = { ...headers, [key]: previous === undefined ? value : Array.isArray(previous) ? [...previous, value] : [previous, value] };
    }
    return headers;
  }
}

/** The int64 at `at` as a number when a double holds it exactly, else NaN (so that no sum with it is safe). */
function int64Number(bytes: Buffer, at: number): number {
  const n = bytes.readInt32BE(at) * TWO_TO_32 + bytes.readUInt32BE(at + 4);
  return Number.isSafeInteger(n) ? n : NaN;
}

/** The int64 at `at` in decimal, as kafkajs's long prints it. */
function int64String(bytes: Buffer, at: number): string {
  const n = int64Number(bytes, at);
  return Number.isNaN(n) ? bytes.readBigInt64BE(at).toString() : String(n);
}
