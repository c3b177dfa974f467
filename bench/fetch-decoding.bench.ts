/**
 * The decoding of one partition's fetched records, in process, no Kafka: kafkajs's own decoder
 * against shardherd's (src/ingest/kafka-source/record-batches.ts) on the records of
 * deploy-throughput (keys `k<n>`, ~35-byte JSON values) as the broker returns them, 200-record
 * batches, 10 000 records a fetch. Each case is what a consumer pays per record: the decoder, then
 * kafkajs's `Batch` (which filters the messages by offset), then a loop over the messages; the
 * last case adds the bare consumer's `JSON.parse` of each value. Rounds alternate the decoders;
 * medians per record.
 */
import { deepStrictEqual } from 'node:assert/strict';
import { createRequire } from 'node:module';
import { kafkajsDecodeMessages, kafkajsDecoding } from '../src/ingest/kafka-source/fetch-decoding.js';
import { recordBatchesDecoder, type KafkaDecoder } from '../src/ingest/kafka-source/record-batches.js';
import { collectGarbage, quantile, register, type Table } from './harness.js';

const require = createRequire(import.meta.url);
const kafkajs = (path: string) => require(`kafkajs/src/${path}`) as unknown;

const BATCHES = 50;
const PER_BATCH = 200;
const RECORDS = BATCHES * PER_BATCH;
const ROUNDS = 9;
/** Fetches decoded per timed round. */
const FETCHES = 40;

type DecodeMessages = (decoder: KafkaDecoder) => Promise<unknown[]>;
type Message = { readonly value: Buffer | null };
type BatchClass = new (topic: string, fetchedOffset: string, partition: object) => { messages: Message[] };

/** One partition's records in a fetch response: their size, then the batches, as kafkajs's encoder writes them. */
async function fetchedRecords(): Promise<Buffer> {
  type Encoded = { buffer: Buffer };
  const Encoder = kafkajs('protocol/encoder.js') as new () => Encoded & { writeBytes(b: Buffer): Encoded };
  const Long = kafkajs('utils/long.js') as { fromValue(v: number): unknown };
  const encodeRecord = kafkajs('protocol/recordBatch/record/v0/index.js') as (r: object) => Encoded;
  const { RecordBatch } = kafkajs('protocol/recordBatch/v0/index.js') as { RecordBatch: (b: object) => Promise<Encoded> };
  const batches: Buffer[] = [];
  for (let b = 0; b < BATCHES; b++) {
    const records = Array.from({ length: PER_BATCH }, (_, i) => {
      const n = b * PER_BATCH + i;
      return encodeRecord({
        offsetDelta: i,
        timestampDelta: i,
        key: Buffer.from(`k${n}`),
        value: Buffer.from(JSON.stringify({ n, at: 1_700_000_000_000 + n })),
      });
    });
    const at = 1_700_000_000_000 + b * PER_BATCH;
    const batch = await RecordBatch({
      firstOffset: Long.fromValue(b * PER_BATCH),
      lastOffsetDelta: PER_BATCH - 1,
      firstTimestamp: at,
      maxTimestamp: at + PER_BATCH - 1,
      records,
    });
    batches.push(Buffer.from(batch.buffer));
  }
  return Buffer.from(new Encoder().writeBytes(Buffer.concat(batches)).buffer);
}

register({
  name: 'fetch-decoding',
  run: async (): Promise<Table> => {
    const { Decoder } = kafkajsDecoding();
    const Batch = kafkajs('consumer/batch.js') as BatchClass;
    const fetched = await fetchedRecords();
    const decoders: Record<string, DecodeMessages> = { kafkajs: kafkajsDecodeMessages(), shardherd: recordBatchesDecoder(kafkajsDecoding()) };
    const consume = async (decode: DecodeMessages, parse: boolean): Promise<number> => {
      const messages = (await decode(new Decoder(fetched))) as Message[];
      const batch = new Batch('metrics', '0', { partition: 0, highWatermark: String(RECORDS), messages, abortedTransactions: [] });
      let seen = 0;
      for (const m of batch.messages) {
        if (parse) JSON.parse(m.value!.toString());
        seen += 1;
      }
      return seen;
    };
    // Like with like: both decoders make the same messages of this fetch.
    deepStrictEqual(await decoders.shardherd!(new Decoder(fetched)), await decoders.kafkajs!(new Decoder(fetched)));

    const nsPerRecord: Record<string, number[]> = {};
    for (let round = 0; round < ROUNDS; round++) {
      for (const parse of [false, true]) {
        for (const [name, decode] of Object.entries(decoders)) {
          collectGarbage();
          const t0 = process.hrtime.bigint();
          let n = 0;
          for (let f = 0; f < FETCHES; f++) n += await consume(decode, parse);
          (nsPerRecord[`${name}${parse ? ' parse' : ''}`] ??= []).push(Number(process.hrtime.bigint() - t0) / n);
        }
      }
    }
    const median = (key: string) => quantile(nsPerRecord[key]!, 0.5);
    const row = (what: string, parse: boolean) => {
      const suffix = parse ? ' parse' : '';
      const theirs = median(`kafkajs${suffix}`);
      const ours = median(`shardherd${suffix}`);
      return [what, `${theirs.toFixed(0)} ns`, `${ours.toFixed(0)} ns`, (theirs / ours).toFixed(2)];
    };
    return {
      title: `Decoding one partition's fetched records (${RECORDS.toLocaleString('en')} records of ~40 bytes in ${BATCHES} batches), per record`,
      columns: ['what a consumer does per record', "kafkajs's decoder", "shardherd's decoder", 'speed-up'],
      rows: [
        row('decode, kafkajs Batch, loop over the messages', false),
        row('the same and JSON.parse of each value (the bare consumer of deploy-throughput)', true),
      ],
      notes: [
        `Medians of ${ROUNDS} alternating rounds of ${FETCHES} fetches each, a full garbage collection before each round; both decoders make the same messages (checked before timing).`,
      ],
    };
  },
});
