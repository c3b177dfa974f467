// A produce whose answer is lost is retried by the client library; with the producer settings
// shardherd uses the real broker keeps the record once. Without idempotence it keeps it twice,
// which shows the test can tell the difference. The answer is lost by a socket that swallows the
// first Produce response it reads (Kafka frames: 4-byte size, then the correlation id): kafkajs
// takes the socket from a factory; @platformatic/kafka's sockets are reached through its public
// diagnostics channel for connections.
import { tracingChannel } from 'node:diagnostics_channel';
import net from 'node:net';
import { Kafka, logLevel, Partitioners, type Admin } from 'kafkajs';
import { pino } from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { ShardedProducer } from '../../src/client/sharded-producer.js';
import { createTopicsWithLeaders, IDEMPOTENT_PRODUCER } from '../../src/cluster/kafka-client.js';
import { validateDatasetConfig } from '../../src/core/dataset-config.js';
import { services, uniqueName } from './support.js';

const PRODUCE_API_KEY = 0;

/** Makes sockets drop the answer to the first Produce request written on any of them. */
function firstProduceAnswerLost(): { lose: (socket: net.Socket) => void; dropped: () => number } {
  let armed = true;
  let dropped = 0;
  const lose = (socket: net.Socket): void => {
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
  };
  return { lose, dropped: () => dropped };
}

/** Loses the first Produce answer on every @platformatic/kafka connection made until the returned function is called. */
function losingOnPlatformaticConnections(): { dropped: () => number; stop: () => void } {
  const losing = firstProduceAnswerLost();
  const connects = tracingChannel<string, { connection?: { socket?: net.Socket } }>('plt:kafka:connections:connects');
  // `end` comes right after the socket is made, before it connects and before any request is written.
  const ignore = (): void => {};
  const handlers = {
    start: ignore,
    asyncStart: ignore,
    asyncEnd: ignore,
    error: ignore,
    end: (context: { connection?: { socket?: net.Socket } }) => {
      const socket = context.connection?.socket;
      if (socket !== undefined && !wrapped.has(socket)) {
        wrapped.add(socket);
        losing.lose(socket);
      }
    },
  };
  const wrapped = new WeakSet<net.Socket>();
  connects.subscribe(handlers);
  return { dropped: losing.dropped, stop: () => connects.unsubscribe(handlers) };
}

describe('a produce whose answer is lost', () => {
  const closers: (() => Promise<void>)[] = [];
  afterAll(async () => {
    for (const close of closers.reverse()) await close().catch(() => undefined);
  });

  async function topicOfOnePartition(): Promise<{ topic: string; admin: Admin; records: () => Promise<number> }> {
    const topic = uniqueName('idempotence');
    const admin = new Kafka({ clientId: 'idempotence-admin', brokers: services().kafkaBrokers, logLevel: logLevel.NOTHING }).admin();
    await admin.connect();
    closers.push(() => admin.disconnect());
    await createTopicsWithLeaders(admin, [{ topic, numPartitions: 1 }]);
    return { topic, admin, records: async () => Number((await admin.fetchTopicOffsets(topic))[0]!.high) };
  }

  async function kafkajsProduceLosingTheAnswer(options: object): Promise<{ records: number; dropped: number }> {
    const { topic, records } = await topicOfOnePartition();
    const losing = firstProduceAnswerLost();
    // A short request timeout: the lost answer is noticed and the request retried within a second.
    const kafka = new Kafka({
      clientId: 'idempotence-producer',
      brokers: services().kafkaBrokers,
      logLevel: logLevel.NOTHING,
      socketFactory: ({ host, port, onConnect }) => {
        const socket = net.connect({ host, port }, onConnect);
        losing.lose(socket);
        return socket;
      },
      requestTimeout: 1_000,
      retry: { retries: 5, initialRetryTime: 100 },
    });
    const producer = kafka.producer({ allowAutoTopicCreation: false, createPartitioner: Partitioners.DefaultPartitioner, ...options });
    await producer.connect();
    closers.push(() => producer.disconnect());
    await producer.send({ topic, acks: -1, messages: [{ partition: 0, value: 'the one record' }] });
    return { records: await records(), dropped: losing.dropped() };
  }

  it('is written once by kafkajs with the idempotent producer shardherd uses', async () => {
    expect(await kafkajsProduceLosingTheAnswer(IDEMPOTENT_PRODUCER)).toEqual({ records: 1, dropped: 1 });
  });

  it('is written twice by kafkajs without idempotence (the fault is real)', async () => {
    expect(await kafkajsProduceLosingTheAnswer({ idempotent: false, maxInFlightRequests: 1 })).toEqual({ records: 2, dropped: 1 });
  });

  it('is written once by the ShardedProducer on @platformatic/kafka', async () => {
    const { topic, records } = await topicOfOnePartition();
    const validated = validateDatasetConfig({ ref: 'idempotence', numShards: 1, minNumNodes: 1, source: { type: 'kafka', topic } });
    if (!validated.ok) throw new Error(validated.error.message);
    // A short request timeout: the lost answer is noticed and the request retried within a second.
    const producer = new ShardedProducer({
      kafkaClient: 'platformatic',
      brokers: services().kafkaBrokers,
      clientId: 'idempotence-sharded-producer',
      log: pino({ level: 'silent' }),
      requestTimeoutMs: 1_000,
    });
    closers.push(() => producer.close());
    const losing = losingOnPlatformaticConnections();
    try {
      const [sent] = await producer.send(validated.value, [{ shardKey: { _metric_: 'm' }, partitionKey: { host: 'a' }, value: 'the one record' }]);
      expect(sent).toMatchObject({ partition: 0, offset: 0 });
    } finally {
      losing.stop();
    }
    expect({ records: await records(), dropped: losing.dropped() }).toEqual({ records: 1, dropped: 1 });
  });

  it('is written twice by @platformatic/kafka without idempotence (the fault is real)', async () => {
    const { topic, records } = await topicOfOnePartition();
    const { Producer } = await import('@platformatic/kafka');
    const producer = new Producer({
      clientId: 'idempotence-plain',
      bootstrapBrokers: services().kafkaBrokers,
      requestTimeout: 1_000,
      idempotent: false,
      acks: -1,
    });
    closers.push(() => producer.close());
    const losing = losingOnPlatformaticConnections();
    try {
      await producer.send({ messages: [{ topic, partition: 0, value: Buffer.from('the one record') }] });
    } finally {
      losing.stop();
    }
    expect({ records: await records(), dropped: losing.dropped() }).toEqual({ records: 2, dropped: 1 });
  });
});
