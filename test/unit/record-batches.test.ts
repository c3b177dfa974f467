// shardherd's decoder of fetched record batches against kafkajs's own, on batches that kafkajs's
// own encoder writes: every message object must be the same, down to the quirks (header keys,
// offsets past 2^53, control and transactional batches, log-append time, a batch cut short at the
// end of a fetch). Compressed batches and the old message sets must come out as kafkajs's, which
// decodes them.
import { deepStrictEqual } from 'node:assert/strict';
import { createRequire } from 'node:module';
import fc from 'fast-check';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { fetchDecoding, installFetchDecoder, kafkajsDecodeMessages, kafkajsDecoding } from '../../src/ingest/kafka-source/fetch-decoding.js';
import { kafkaSourceSettings } from '../../src/ingest/kafka-source/settings.js';
import { CorruptRecordBatch, recordBatchesDecoder, type KafkaDecoder } from '../../src/ingest/kafka-source/record-batches.js';

const require = createRequire(import.meta.url);
const kafkajs = (path: string) => require(`kafkajs/src/${path}`) as unknown;

interface Encoded {
  readonly buffer: Buffer;
}
type EncoderClass = new () => Encoded & { writeBytes(b: Buffer): Encoded; writeEncoder(e: Encoded): unknown };
const Encoder = kafkajs('protocol/encoder.js') as EncoderClass;
const Long = kafkajs('utils/long.js') as { fromValue(v: string | number | bigint): unknown };
const encodeRecord = kafkajs('protocol/recordBatch/record/v0/index.js') as (r: object) => Encoded;
const { RecordBatch: encodeBatch } = kafkajs('protocol/recordBatch/v0/index.js') as { RecordBatch: (b: object) => Promise<Encoded> };
const encodeMessageSet = kafkajs('protocol/messageSet/index.js') as (m: object) => Encoded;
const { Types: Compression } = kafkajs('protocol/message/compression/index.js') as { Types: { None: number; GZIP: number } };

const ours = recordBatchesDecoder(kafkajsDecoding());
const theirs = kafkajsDecodeMessages();
const newDecoder = (b: Buffer) => new (kafkajsDecoding().Decoder)(b);

/** Attribute bits kafkajs's encoder cannot set; the decoders read them, the CRC is not checked. */
const LOG_APPEND_TIME = 0x08;
const CONTROL = 0x20;
const ATTRIBUTES_AT = 21;

const bytes = fc.oneof(
  fc.constant(null),
  fc.uint8Array({ maxLength: 40 }).map((a) => Buffer.from(a)),
);
const headerKey = fc.constantFrom('trace', 'a', 'b', 'constructor', 'toString', '__proto__', 'ü', '');
const headers = fc
  .array(
    fc.tuple(
      headerKey,
      fc.array(
        fc.uint8Array({ maxLength: 8 }).map((a) => Buffer.from(a)),
        { minLength: 1, maxLength: 3 },
      ),
    ),
    { maxLength: 3 },
  )
  // An own property even for `__proto__`; an array value is encoded as that many headers with the key.
  .map((entries) => Object.fromEntries(entries.map(([k, vs]) => [k, vs.length === 1 ? vs[0] : vs])));
const record = fc.record({
  // Small deltas mostly; large ones take the long arithmetic.
  timestampDelta: fc.oneof(fc.integer({ min: -1000, max: 1000 }), fc.bigInt({ min: -(2n ** 62n), max: 2n ** 62n })),
  key: bytes,
  value: bytes,
  headers: fc.oneof(fc.constant({}), headers),
});
const int64 = fc.oneof(
  fc.integer({ min: 0, max: 1_000_000 }).map(BigInt),
  fc.bigInt({ min: 2n ** 53n - 100n, max: 2n ** 53n + 100n }),
  fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 2n ** 32n }),
);
const batch = fc.record({
  firstOffset: int64,
  firstTimestamp: fc.oneof(fc.constant(1_700_000_000_000n), fc.constant(-1n), int64),
  maxTimestamp: fc.oneof(fc.constant(1_700_000_000_999n), int64),
  producerId: fc.oneof(fc.constant(-1n), int64),
  transactional: fc.boolean(),
  extraAttributes: fc.constantFrom(0, LOG_APPEND_TIME, CONTROL, LOG_APPEND_TIME | CONTROL),
  gzip: fc.boolean(),
  records: fc.array(record, { maxLength: 12 }),
  // Offsets a compacted log leaves: gaps between records.
  gaps: fc.array(fc.integer({ min: 1, max: 5 }), { minLength: 12, maxLength: 12 }),
});

const oneRecordBatch = {
  firstOffset: 0n,
  firstTimestamp: 0n,
  maxTimestamp: 0n,
  producerId: -1n,
  transactional: false,
  extraAttributes: 0,
  gzip: false,
  records: [{ timestampDelta: 0, key: null, value: Buffer.from('v'), headers: {} }],
  gaps: Array<number>(12).fill(1),
};

type Batch = typeof batch extends fc.Arbitrary<infer T> ? T : never;

async function encode(b: Batch): Promise<Buffer> {
  let delta = 0;
  const records = b.records.map((r, i) => {
    const encoded = encodeRecord({ ...r, timestampDelta: Long.fromValue(r.timestampDelta), offsetDelta: delta });
    delta += b.gaps[i]!;
    return encoded;
  });
  const encoded = await encodeBatch({
    compression: b.gzip ? Compression.GZIP : Compression.None,
    firstOffset: Long.fromValue(b.firstOffset),
    firstTimestamp: Long.fromValue(b.firstTimestamp),
    maxTimestamp: Long.fromValue(b.maxTimestamp),
    producerId: Long.fromValue(b.producerId),
    lastOffsetDelta: Math.max(0, delta - 1),
    transactional: b.transactional,
    records,
  });
  const out = Buffer.from(encoded.buffer);
  out.writeInt16BE(out.readInt16BE(ATTRIBUTES_AT) | b.extraAttributes, ATTRIBUTES_AT);
  return out;
}

/** The records of a partition in a fetch response: their size, then the batches, the last maybe cut short. */
function fetchedRecords(batches: readonly Buffer[], cut = 0): Buffer {
  const all = Buffer.concat(batches);
  return Buffer.from(new Encoder().writeBytes(all.subarray(0, all.length - Math.min(cut, all.length))).buffer);
}

/** The messages, or the error's name when decoding throws. */
async function outcome(decode: (d: KafkaDecoder) => Promise<unknown[]>, d: KafkaDecoder): Promise<unknown> {
  try {
    return await decode(d);
  } catch (e) {
    return { threw: e instanceof Error ? e.name : String(e) };
  }
}

async function bothDecoders(fetched: Buffer): Promise<{ ours: unknown; theirs: unknown; oursAt: number; theirsAt: number }> {
  // Framing before and after, as in a real response: the decoders must start and stop at the right bytes.
  const response = Buffer.concat([Buffer.from([9, 9, 9]), fetched, Buffer.from([7, 7])]);
  const a = newDecoder(response);
  const b = newDecoder(response);
  a.offset = b.offset = 3;
  return { ours: await outcome(ours, a), theirs: await outcome(theirs, b), oursAt: a.offset, theirsAt: b.offset };
}

describe("shardherd's decoder of fetched record batches", () => {
  it("makes kafkajs's message objects from any batches kafkajs encodes, and stops where kafkajs stops", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(batch, { minLength: 1, maxLength: 4 }), fc.nat({ max: 120 }), async (batches, cut) => {
        const result = await bothDecoders(fetchedRecords(await Promise.all(batches.map(encode)), cut));
        // Node's own deep equality: prototypes, own properties, Buffers by content, functions by identity.
        deepStrictEqual(result.ours, result.theirs);
        if (Array.isArray(result.theirs)) expect(result.oursAt).toBe(result.theirsAt);
      }),
      { numRuns: 400 },
    );
  });

  it('decodes a plain batch as a consumer sees it: offsets, timestamps, keys, values, headers', async () => {
    const batchBytes = await encode({
      firstOffset: 41n,
      firstTimestamp: 1_700_000_000_000n,
      maxTimestamp: 1_700_000_000_005n,
      producerId: -1n,
      transactional: false,
      extraAttributes: 0,
      gzip: false,
      records: [
        { timestampDelta: 0, key: Buffer.from('k1'), value: Buffer.from('{"n":1}'), headers: { trace: Buffer.from('t') } },
        { timestampDelta: 5, key: null, value: null, headers: {} },
      ],
      gaps: Array<number>(12).fill(2),
    });
    const { ours: messages } = await bothDecoders(fetchedRecords([batchBytes]));
    expect(messages).toMatchObject([
      {
        offset: '41',
        timestamp: '1700000000000',
        key: Buffer.from('k1'),
        value: Buffer.from('{"n":1}'),
        headers: { trace: Buffer.from('t') },
        isControlRecord: false,
      },
      { offset: '43', timestamp: '1700000000005', key: null, value: null, headers: {} },
    ]);
  });

  it("hands the message sets of the formats before v2 to kafkajs's decoder", async () => {
    const set = encodeMessageSet({
      messageVersion: 1,
      compression: Compression.None,
      entries: [
        { key: 'a', value: 'x', timestamp: 5 },
        { key: null, value: 'y', timestamp: 6 },
      ],
    });
    const result = await bothDecoders(Buffer.from(new Encoder().writeBytes(Buffer.from(set.buffer)).buffer));
    expect(result.ours).toHaveLength(2);
    deepStrictEqual(result.ours, result.theirs);
  });

  it('refuses a record that claims more bytes than its batch holds, instead of reading the next batch as its own', async () => {
    const batchBytes = await encode(oneRecordBatch);
    // The first record's length varint follows the 61-byte header: claim 60 bytes (zigzag 120).
    batchBytes[61] = 120;
    await expect(ours(newDecoder(fetchedRecords([batchBytes, batchBytes])))).rejects.toThrow(CorruptRecordBatch);
  });

  it("takes the place of kafkajs's decoder for the whole process, once, and counts what it decodes", async () => {
    const decodeMessagesPath = require.resolve('kafkajs/src/protocol/requests/fetch/v4/decodeMessages.js');
    const v11Path = require.resolve('kafkajs/src/protocol/requests/fetch/v11/response.js');
    require(v11Path);
    expect(require(decodeMessagesPath)).toBe(theirs);
    expect(fetchDecoding().decoder).toBe('kafkajs');

    expect(installFetchDecoder(pino({ enabled: false }))).toBe('shardherd');
    expect(fetchDecoding().decoder).toBe('shardherd');
    const installed = require(decodeMessagesPath) as (d: KafkaDecoder) => Promise<unknown[]>;
    expect(installed).not.toBe(theirs);
    // A fetch response loaded before is loaded again, with the new decoder.
    expect(require.cache[v11Path]).toBeUndefined();
    expect(kafkajsDecodeMessages()).toBe(theirs);
    const before = fetchDecoding().batches;
    const plain = await encode({ ...oneRecordBatch, gzip: false });
    const gzipped = await encode({ ...oneRecordBatch, gzip: true });
    expect(await installed(newDecoder(fetchedRecords([plain, gzipped, plain])))).toHaveLength(3);
    expect(fetchDecoding().batches).toEqual({ own: before.own + 2, kafkajs: before.kafkajs + 1 });

    expect(installFetchDecoder(pino({ enabled: false }))).toBe('shardherd');
    expect(require(decodeMessagesPath)).toBe(installed);
  });

  it("is the default of a Kafka source; kafkajs's own is an option, and anything else is refused, naming the option", () => {
    const options = { brokers: ['127.0.0.1:9092'], clientId: 't', log: pino({ enabled: false }), groupPrefix: 'g' };
    expect(kafkaSourceSettings(options).fetchDecoder).toBe('shardherd');
    expect(kafkaSourceSettings({ ...options, fetch: { decoder: 'kafkajs' } }).fetchDecoder).toBe('kafkajs');
    expect(() => kafkaSourceSettings({ ...options, fetch: { decoder: 'fast' as 'kafkajs' } })).toThrow(
      'KafkaIngestionSource option fetch.decoder must be "shardherd" or "kafkajs", got "fast"',
    );
  });
});
