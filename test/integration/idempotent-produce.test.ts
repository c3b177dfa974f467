// A produce whose answer is lost is retried by kafkajs; with the producer settings shardherd uses
// (`IDEMPOTENT_PRODUCER`) the real broker keeps the record once. Without them it keeps it twice,
// which shows the test can tell the difference. The answer is lost by a socket that swallows the
// first Produce response it reads (Kafka frames: 4-byte size, then the correlation id).
import net from 'node:net';
import { Kafka, logLevel, Partitioners, type ISocketFactory } from 'kafkajs';
import { afterAll, describe, expect, it } from 'vitest';
import { IDEMPOTENT_PRODUCER } from '../../src/cluster/kafka-client.js';
import { services, uniqueName } from './support.js';
import { createTopicsWithLeaders } from '../../src/cluster/kafka-client.js';

const PRODUCE_API_KEY = 0;

/** Sockets that drop the answer to the first Produce request written on any of them. */
function losingFirstProduceAnswer(): { factory: ISocketFactory; dropped: () => number } {
  let armed = true;
  let dropped = 0;
  const factory: ISocketFactory = ({ host, port, onConnect }) => {
    const socket = net.connect({ host, port }, onConnect);
    const swallow = new Set<number>();
    const write = socket.write.bind(socket) as (chunk: Buffer, ...rest: unknown[]) => boolean;
    socket.write = ((chunk: Buffer, ...rest: unknown[]) => {
      // A request: size, api key (int16), api version (int16), correlation id (int32), ...
      if (armed && Buffer.isBuffer(chunk) && chunk.length >= 12 && chunk.readInt16BE(4) === PRODUCE_API_KEY) {
        armed = false;
        swallow.add(chunk.readInt32BE(8));
      }
      return write(chunk, ...rest);
    }) as typeof socket.write;
    const emit = socket.emit.bind(socket) as (event: string | symbol, ...args: unknown[]) => boolean;
    let pending = Buffer.alloc(0);
    socket.emit = ((event: string | symbol, ...args: unknown[]) => {
      if (event !== 'data' || swallow.size === 0) return emit(event, ...args);
      pending = Buffer.concat([pending, args[0] as Buffer]);
      const pass: Buffer[] = [];
      while (pending.length >= 8 && pending.length >= 4 + pending.readInt32BE(0)) {
        const frame = pending.subarray(0, 4 + pending.readInt32BE(0));
        pending = pending.subarray(frame.length);
        if (swallow.delete(frame.readInt32BE(4))) dropped += 1;
        else pass.push(frame);
      }
      if (swallow.size === 0 && pending.length > 0) {
        pass.push(pending);
        pending = Buffer.alloc(0);
      }
      return pass.length === 0 ? true : emit('data', Buffer.concat(pass));
    }) as typeof socket.emit;
    return socket;
  };
  return { factory, dropped: () => dropped };
}

describe('a produce whose answer is lost', () => {
  const closers: (() => Promise<void>)[] = [];
  afterAll(async () => {
    for (const close of closers) await close().catch(() => undefined);
  });

  async function produceOnceLosingTheAnswer(options: object): Promise<{ records: number; dropped: number }> {
    const brokers = services().kafkaBrokers;
    const topic = uniqueName('idempotence');
    const admin = new Kafka({ clientId: 'idempotence-admin', brokers, logLevel: logLevel.NOTHING }).admin();
    await admin.connect();
    closers.push(() => admin.disconnect());
    await createTopicsWithLeaders(admin, [{ topic, numPartitions: 1 }]);
    const losing = losingFirstProduceAnswer();
    // A short request timeout: the lost answer is noticed and the request retried within a second.
    const kafka = new Kafka({
      clientId: 'idempotence-producer',
      brokers,
      logLevel: logLevel.NOTHING,
      socketFactory: losing.factory,
      requestTimeout: 1_000,
      retry: { retries: 5, initialRetryTime: 100 },
    });
    const producer = kafka.producer({ allowAutoTopicCreation: false, createPartitioner: Partitioners.DefaultPartitioner, ...options });
    await producer.connect();
    closers.push(() => producer.disconnect());
    await producer.send({ topic, acks: -1, messages: [{ partition: 0, value: 'the one record' }] });
    const [end] = await admin.fetchTopicOffsets(topic);
    return { records: Number(end!.high), dropped: losing.dropped() };
  }

  it('is written once with the idempotent producer shardherd uses', async () => {
    expect(await produceOnceLosingTheAnswer(IDEMPOTENT_PRODUCER)).toEqual({ records: 1, dropped: 1 });
  });

  it('is written twice without idempotence (the fault is real)', async () => {
    expect(await produceOnceLosingTheAnswer({ idempotent: false, maxInFlightRequests: 1 })).toEqual({ records: 2, dropped: 1 });
  });
});
