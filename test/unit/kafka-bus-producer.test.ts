// The Kafka bus's producer queue against a stand-in for kafkajs's producer: what goes into one
// request (never more than maxRecordBytes of records, so a batch fits where one record fits), a
// message whose record failed sends nothing more, and a batch the broker refuses as too large
// becomes a RECORD_TOO_LARGE error that is not retried.
import type { Kafka, ProducerRecord, RecordMetadata } from 'kafkajs';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { KafkajsBusWriter } from '../../src/cluster/kafka-bus/kafkajs-writer.js';
import { BusProducer, type OutgoingRecord } from '../../src/cluster/kafka-bus/producer.js';
import { KafkaBusError } from '../../src/cluster/kafka-bus/errors.js';
import { MAX_RECORD_OVERHEAD_BYTES } from '../../src/cluster/kafka-bus/record-size.js';

const MAX = 1024;

/** A kafkajs stand-in whose producer records each request and answers as `answer` says. */
function fakeKafka(answer: (request: ProducerRecord, n: number) => Error | undefined = () => undefined) {
  const requests: ProducerRecord[] = [];
  let offset = 0;
  const producer = {
    connect: async () => {},
    disconnect: async () => {},
    send: async (request: ProducerRecord): Promise<RecordMetadata[]> => {
      requests.push(request);
      const error = answer(request, requests.length);
      if (error) throw error;
      const baseOffset = String(offset);
      offset += request.messages.length;
      return [{ topicName: request.topic, partition: 0, errorCode: 0, baseOffset }];
    },
  };
  return { kafka: { producer: () => producer } as unknown as Kafka, requests };
}

function busProducer(kafka: Kafka, compression: 'gzip' | 'none' = 'gzip'): BusProducer {
  return new BusProducer(new KafkajsBusWriter(kafka), {
    checkTopic: async () => {},
    failure: (e) => e,
    log: pino({ level: 'silent' }),
    maxRecordBytes: MAX,
    compression,
  });
}

const record = (bytes: number): OutgoingRecord => ({ value: 'x'.repeat(bytes), bytes });

describe('BusProducer', () => {
  it('fills a request with records while their bytes and overheads fit maxRecordBytes; a record of maxRecordBytes goes alone', async () => {
    const { kafka, requests } = fakeKafka();
    const producer = busProducer(kafka);
    const sizes = [100, 200, 300, 400, MAX, 10, 10];
    const offsets = await Promise.all(sizes.map((b) => producer.produce('t', [record(b)])));
    expect(offsets).toEqual([0, 1, 2, 3, 4, 5, 6]);
    const batches = requests.map((r) => r.messages.map((m) => (m.value as string).length));
    expect(batches.flat()).toEqual(sizes);
    for (const batch of batches) {
      if (batch.length > 1) expect(batch.reduce((sum, b) => sum + b + MAX_RECORD_OVERHEAD_BYTES, 0)).toBeLessThanOrEqual(MAX);
    }
    // The first is sent as soon as it is queued; the rest queue behind it. 200 + 300 + 400 and
    // their overheads would be 1329 bytes.
    expect(batches).toEqual([[100], [200, 300], [400], [MAX], [10, 10]]);
  });

  it('compresses with gzip unless told none', async () => {
    const gzip = fakeKafka();
    await busProducer(gzip.kafka).produce('t', [record(1)]);
    const none = fakeKafka();
    await busProducer(none.kafka, 'none').produce('t', [record(1)]);
    expect([gzip.requests[0]!.compression, none.requests[0]!.compression]).toEqual([1, 0]); // kafkajs's CompressionTypes.GZIP, None
  });

  it("sends a message's records in order with their headers, and resolves with the last one's offset", async () => {
    const { kafka, requests } = fakeKafka();
    const chunks = [0, 1, 2].map((i) => ({ ...record(MAX), headers: { i: String(i) } }));
    expect(await busProducer(kafka).produce('t', chunks)).toBe(2);
    expect(requests.map((r) => r.messages.map((m) => m.headers))).toEqual([[{ i: '0' }], [{ i: '1' }], [{ i: '2' }]]);
  });

  it('once a record of a message fails, its later records are not sent; the next message is', async () => {
    const { kafka, requests } = fakeKafka((_r, n) => (n === 2 ? Object.assign(new Error('broker gone'), { retriable: true }) : undefined));
    const producer = busProducer(kafka);
    const failed = producer.produce('t', [record(MAX), record(MAX), record(MAX), record(MAX)]).catch((e: unknown) => e);
    const next = producer.produce('t', [record(5)]);
    expect(await failed).toMatchObject({ code: 'KAFKA_FAILED', retriable: true });
    expect(await next).toBe(1);
    expect(requests.map((r) => r.messages.length)).toEqual([1, 1, 1]); // chunk 0, chunk 1 (failed), the next message
  });

  it.each([
    ['MESSAGE_TOO_LARGE', 'max.message.bytes'],
    ['RECORD_LIST_TOO_LARGE', 'segment.bytes'],
  ])('a batch refused with %s becomes RECORD_TOO_LARGE, not retriable, naming %s', async (type, config) => {
    // As kafkajs gives it up: its protocol error inside the retrier's.
    const refusal = Object.assign(new Error('refused'), {
      name: 'KafkaJSNonRetriableError',
      originalError: Object.assign(new Error('too large'), { type, retriable: false }),
    });
    const { kafka } = fakeKafka(() => refusal);
    const error = await busProducer(kafka)
      .produce('t', [record(500)])
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(KafkaBusError);
    expect(error).toMatchObject({ code: 'RECORD_TOO_LARGE', retriable: false, topic: 't' });
    expect((error as Error).message).toContain(`(${type}): its ${config} is below what the bus writes (maxRecordBytes ${MAX} and overhead)`);
  });
});
