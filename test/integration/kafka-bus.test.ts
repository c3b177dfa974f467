// The Kafka bus against a real broker: the Bus contract every adapter passes, then what is
// Kafka's own: topics exist only through ensureTopics, clear failures on missing or partitioned
// topics, the singleton handover between processes, the newest subscription of a group owning the
// log (also against an old one that was stuck and wakes up), and delivery latency.
import { randomBytes } from 'node:crypto';
import { ConfigResourceTypes, Kafka, logLevel, type Admin, type IHeaders } from 'kafkajs';
import { pino } from 'pino';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { IncompleteMessageError, type BusRecord, type BusSubscription } from '../../src/cluster/bus.js';
import { KafkaBus, KafkaBusError, kafkaBusSettings, type KafkaBusOptions } from '../../src/cluster/kafka-bus.js';
import { CHUNK_COUNT_HEADER, CHUNK_ID_HEADER, CHUNK_INDEX_HEADER, chunkHeaders, sliceValue } from '../../src/cluster/kafka-bus/chunks.js';
import { brokerBytesNeeded } from '../../src/cluster/kafka-bus/record-size.js';
import { busContract, shardMapLike, SMALL_LIMITS } from '../contracts/bus-contract.js';
import { services, uniqueName } from './support.js';
import { createTopicsWithLeaders } from '../../src/cluster/kafka-client.js';
import { KAFKA_CLIENT_LIBRARIES } from '../../src/cluster/kafka-options.js';

/** Short group timeouts (the test broker allows sessions down to 1 s). */
const SESSION_MS = 3_000;
const fast = { sessionTimeoutMs: SESSION_MS, heartbeatIntervalMs: 300 };
const silent = pino({ level: 'silent' });

/** A bus as one process would have it; each test closes what it opened. */
const opened: KafkaBus[] = [];
function newBusOf(clientId = 'kafka-bus-test', options: Partial<KafkaBusOptions> = {}): KafkaBus {
  const bus = new KafkaBus({ brokers: services().kafkaBrokers, clientId, log: silent, ...fast, ...options });
  opened.push(bus);
  return bus;
}

/** A plain kafkajs admin, to look at the broker independently of the bus. */
async function withAdmin<T>(use: (admin: Admin) => Promise<T>): Promise<T> {
  const admin = new Kafka({ clientId: 'kafka-bus-test-admin', brokers: services().kafkaBrokers, logLevel: logLevel.NOTHING }).admin();
  await admin.connect();
  try {
    return await use(admin);
  } finally {
    await admin.disconnect();
  }
}

const eventually = (check: () => void, timeout = 15_000): Promise<void> => vi.waitFor(check, { timeout, interval: 5 });
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Subscribes and collects the values delivered. */
async function collect(
  bus: KafkaBus,
  topic: string,
  group: string,
  options: { start?: 'earliest' | 'latest'; handler?: (record: BusRecord) => Promise<void> | void } = {},
): Promise<{ values: unknown[]; records: BusRecord[]; sub: BusSubscription }> {
  const records: BusRecord[] = [];
  const values: unknown[] = [];
  const sub = await bus.subscribe(
    topic,
    group,
    async (record) => {
      records.push(record);
      values.push(record.value);
      await options.handler?.(record);
    },
    options.start === undefined ? {} : { start: options.start },
  );
  return { values, records, sub };
}

afterEach(async () => {
  await Promise.allSettled(opened.splice(0).map((bus) => bus.close()));
});

/** A record as another producer writes it: a value, and the headers of a chunk. */
interface RawRecord {
  readonly value: string | Buffer;
  readonly headers?: IHeaders;
}

/** The records the bus would write for `value` with these limits, as message `id`. */
function busRecords(value: unknown, id: string, maxRecordBytes: number): RawRecord[] {
  const json = JSON.stringify(value);
  if (Buffer.byteLength(json) <= maxRecordBytes) return [{ value: json }];
  const slices = sliceValue(Buffer.from(json), maxRecordBytes);
  return slices.map((slice, i) => ({ value: slice, headers: chunkHeaders(id, i, slices.length) }));
}

/** Writes records with a plain kafkajs producer, in one batch; resolves with the first offset. */
async function writeRaw(topic: string, records: readonly RawRecord[]): Promise<number> {
  const raw = new Kafka({ clientId: 'raw-writer', brokers: services().kafkaBrokers, logLevel: logLevel.NOTHING }).producer();
  await raw.connect();
  try {
    const [sent] = await raw.send({ topic, acks: -1, messages: records.map((r) => ({ ...r, partition: 0 })) });
    return Number(sent!.baseOffset);
  } finally {
    await raw.disconnect();
  }
}

/** Every record of the topic as a plain kafkajs consumer sees it. */
async function readRaw(topic: string, count: number): Promise<{ offset: number; value: Buffer; headers: Record<string, string> }[]> {
  const consumer = new Kafka({ clientId: 'raw-reader', brokers: services().kafkaBrokers, logLevel: logLevel.NOTHING }).consumer({
    groupId: uniqueName('raw-reader'),
    maxWaitTimeInMs: 100,
  });
  const records: { offset: number; value: Buffer; headers: Record<string, string> }[] = [];
  await consumer.connect();
  try {
    await consumer.subscribe({ topics: [topic], fromBeginning: true });
    await consumer.run({
      eachMessage: async ({ message }) => {
        const headers = Object.fromEntries(Object.entries(message.headers ?? {}).map(([k, v]) => [k, String(v)]));
        records.push({ offset: Number(message.offset), value: message.value!, headers });
      },
    });
    await eventually(() => expect(records.length).toBeGreaterThanOrEqual(count), 30_000);
  } finally {
    await consumer.disconnect();
  }
  return records;
}

/** The topic's max.message.bytes as the broker has it. */
async function maxMessageBytesOf(topic: string): Promise<number> {
  const described = await withAdmin((admin) =>
    admin.describeConfigs({ includeSynonyms: false, resources: [{ type: ConfigResourceTypes.TOPIC, name: topic, configNames: ['max.message.bytes'] }] }),
  );
  return Number(described.resources[0]?.configEntries[0]?.configValue);
}

// Every suite runs on each client library the bus runs on.
for (const client of KAFKA_CLIENT_LIBRARIES) {
  /** A bus on this library, as one process would have it. */
  const newBus = (clientId?: string, options: Partial<KafkaBusOptions> = {}): KafkaBus => newBusOf(clientId, { client, ...options });

  busContract(
    `KafkaBus on ${client}`,
    async (limits = {}) => {
      const bus = newBus('kafka-bus-test', limits);
      return {
        bus,
        createTopics: async (topics) => void (await bus.ensureTopics(topics)),
        cleanup: () => bus.close(),
        peer: async () => newBus('kafka-bus-peer', limits),
        writeInterleaved: async (topic, values) => {
          // Another process's records in the bus's own format, taken round robin.
          const perValue = values.map((v, i) => busRecords(v, `${uniqueName('other')}.${i}`, bus.settings.maxRecordBytes));
          const order: [number, RawRecord][] = [];
          for (let k = 0; k < Math.max(...perValue.map((r) => r.length)); k += 1) {
            perValue.forEach((records, i) => {
              const record = records[k];
              if (record !== undefined) order.push([i, record]);
            });
          }
          const base = await writeRaw(
            topic,
            order.map(([, r]) => r),
          );
          return values.map((_, i) => base + order.map(([v]) => v).lastIndexOf(i));
        },
      };
    },
    // A broker round trip is milliseconds, but a group join or a rebalance can take a heartbeat or two.
    { waitMs: 15_000, quietMs: 500 },
  );

  describe(`KafkaBus topics on ${client}`, () => {
    it('ensureTopics creates each missing topic with one partition; a second call creates nothing', async () => {
      const bus = newBus();
      const [a, b] = [uniqueName('bus-topic-a'), uniqueName('bus-topic-b')];
      expect((await bus.ensureTopics([a, b, a])).sort()).toEqual([a, b].sort());
      const metadata = await withAdmin((admin) => admin.fetchTopicMetadata({ topics: [a, b] }));
      for (const topic of metadata.topics) {
        expect(topic.partitions.map((p) => p.partitionId)).toEqual([0]);
        expect(topic.partitions[0]?.replicas).toHaveLength(1);
      }
      await bus.produce(a, 'kept');

      expect(await newBus('another-process').ensureTopics([a, b])).toEqual([]);
      const offsets = await withAdmin((admin) => admin.fetchTopicOffsets(a));
      expect(offsets.map((o) => [o.partition, o.high])).toEqual([[0, '1']]); // not recreated: the record is still there
    });

    it('processes starting together create the same new topics at once: each resolves, and the topics are there once', async () => {
      const topics = [uniqueName('bus-race-a'), uniqueName('bus-race-b')];
      const created = await Promise.all(['starter-1', 'starter-2', 'starter-3'].map((id) => newBus(id).ensureTopics(topics)));
      // Each reports the topics missing when it looked: at least one of them reports each topic.
      expect(new Set(created.flat())).toEqual(new Set(topics));
      expect((await withAdmin((admin) => admin.listTopics())).filter((t) => topics.includes(t)).sort()).toEqual([...topics].sort());
    });

    it('the replication factor option reaches the broker: 2 on a one-broker cluster is refused', async () => {
      const bus = newBus('rf', { replicationFactor: 2 });
      const topic = uniqueName('bus-rf');
      // Each library's words for it (kafkajs: "Replication-factor is invalid"; the broker's: "The target replication factor of 2 cannot be reached").
      await expect(bus.ensureTopics([topic])).rejects.toThrow(new RegExp(`${topic}: .*replication.factor`, 'i'));
    });

    it('a topic with more than one partition is refused by ensureTopics, produce and subscribe, saying why', async () => {
      const topic = uniqueName('bus-partitioned');
      await withAdmin((admin) => createTopicsWithLeaders(admin, [{ topic, numPartitions: 3, replicationFactor: 1 }]));
      const bus = newBus();
      const why = /has 3 partitions: a bus topic must have exactly one/;
      await expect(bus.ensureTopics([topic])).rejects.toThrow(/exists with 3 partitions: a bus topic must have exactly one/);
      await expect(bus.produce(topic, 'x')).rejects.toThrow(why);
      await expect(bus.subscribe(topic, uniqueName('g'), () => {})).rejects.toMatchObject({ code: 'TOPIC_NOT_ONE_PARTITION', topic });
    });

    it('produce and subscribe on a topic that does not exist fail within a few seconds, naming it, and create nothing', async () => {
      const bus = newBus();
      const topic = uniqueName('bus-missing');
      const started = Date.now();
      const produced = await bus.produce(topic, 'lost').catch((e: unknown) => e);
      expect(produced).toBeInstanceOf(KafkaBusError);
      expect((produced as KafkaBusError).code).toBe('TOPIC_MISSING');
      expect((produced as Error).message).toBe(
        `topic ${topic} does not exist: the bus never creates topics implicitly; create a cluster's topics with \`shardherd topics create --config <node config>\` or createClusterTopics() (shardherd/node), any other with KafkaBus.ensureTopics()`,
      );
      await expect(bus.subscribe(topic, uniqueName('g'), () => {})).rejects.toMatchObject({ code: 'TOPIC_MISSING', topic });
      expect(Date.now() - started).toBeLessThan(3_000);
      expect(await withAdmin((admin) => admin.listTopics())).not.toContain(topic);

      // Once created, the same bus uses it.
      await bus.ensureTopics([topic]);
      expect(await bus.produce(topic, 'now')).toBe(0);
    });

    it('produce keeps the order of calls, also when they are not awaited one by one, and across topics', async () => {
      const bus = newBus();
      const [t1, t2] = [uniqueName('bus-order-1'), uniqueName('bus-order-2')];
      await bus.ensureTopics([t1, t2]);
      const calls = Array.from({ length: 300 }, (_, i) => bus.produce(i % 7 === 0 ? t2 : t1, i));
      const offsets = await Promise.all(calls);
      const one = await collect(bus, t1, uniqueName('g'), { start: 'earliest' });
      const two = await collect(bus, t2, uniqueName('g'), { start: 'earliest' });
      const expected1 = [...Array(300).keys()].filter((i) => i % 7 !== 0);
      const expected2 = [...Array(300).keys()].filter((i) => i % 7 === 0);
      await eventually(() => expect(one.values).toEqual(expected1));
      await eventually(() => expect(two.values).toEqual(expected2));
      expect(one.records.map((r) => r.offset)).toEqual(expected1.map((i) => offsets[i]));
      expect(two.records.map((r) => r.offset)).toEqual(expected2.map((i) => offsets[i]));
    });
  });

  describe(`KafkaBus subscriptions on ${client}`, () => {
    it("start 'latest' misses nothing produced right after subscribe resolves", async () => {
      const bus = newBus();
      const topic = uniqueName('bus-latest');
      await bus.ensureTopics([topic]);
      for (let round = 0; round < 5; round += 1) {
        await bus.produce(topic, `old-${round}`);
        const { values } = await collect(bus, topic, uniqueName('g'), { start: 'latest' });
        // Not awaited one by one: the first is on its way before the subscription has fetched anything.
        await Promise.all([bus.produce(topic, `new-${round}-a`), bus.produce(topic, `new-${round}-b`)]);
        await eventually(() => expect(values).toEqual([`new-${round}-a`, `new-${round}-b`]));
      }
    });

    it('the singleton handover: another process subscribing with the group resumes at the committed offset', async () => {
      const first = newBus('process-1');
      const second = newBus('process-2');
      const topic = uniqueName('bus-inbox');
      const group = `${topic}.singleton`;
      await first.ensureTopics([topic]);
      for (const n of [0, 1, 2, 3, 4]) await first.produce(topic, n);

      const old = await collect(first, topic, group, { start: 'earliest' });
      await eventually(() => expect(old.values).toEqual([0, 1, 2, 3, 4]));
      await old.sub.commit(old.records[2]!.offset + 1); // applied 0, 1 and 2
      expect(await first.committedOffset(topic, group)).toBe(3);
      expect(await withAdmin((admin) => admin.fetchOffsets({ groupId: group, topics: [topic] }))).toMatchObject([
        { topic, partitions: [{ partition: 0, offset: '3' }] },
      ]);
      await first.close(); // the old singleton's process stops

      await second.produce(topic, 5);
      const next = await collect(second, topic, group, { start: 'latest' }); // a committed position wins over start
      await eventually(() => expect(next.values).toEqual([3, 4, 5]));
    });

    it('of two open subscriptions of one group the newer receives the records; the older cannot commit, and gets the topic back when the newer closes', async () => {
      const a = newBus('process-a');
      const b = newBus('process-b');
      const topic = uniqueName('bus-two');
      const group = uniqueName('g');
      await a.ensureTopics([topic]);

      const older = await collect(a, topic, group, { start: 'earliest' });
      await a.produce(topic, 'r1');
      await eventually(() => expect(older.values).toEqual(['r1']));
      await older.sub.commit(older.records[0]!.offset + 1);

      const newer = await collect(b, topic, group, { start: 'earliest' });
      for (const v of ['r2', 'r3']) await a.produce(topic, v);
      await eventually(() => expect(newer.values).toEqual(['r2', 'r3']));
      await sleep(500);
      expect(older.values).toEqual(['r1']);
      await expect(older.sub.commit(3)).rejects.toMatchObject({ code: 'NOT_OWNER' });
      await newer.sub.commit(newer.records[0]!.offset + 1); // applied r2, not r3

      await newer.sub.close();
      await a.produce(topic, 'r4');
      // Back at the group's committed offset: r3 again (not applied by anyone), never r1 or r2.
      await eventually(() => expect(older.values).toEqual(['r1', 'r3', 'r4']));
    });

    it("one group's subscriptions to different topics each get their own topic (a node's events and replies)", async () => {
      const bus = newBus('node-1');
      const [events, replies] = [uniqueName('bus-events'), uniqueName('bus-replies')];
      const group = uniqueName('node-1@incarnation');
      await bus.ensureTopics([events, replies]);
      const e = await collect(bus, events, group);
      const r = await collect(bus, replies, group);
      await bus.produce(events, 'event-1');
      await bus.produce(replies, 'reply-1');
      await eventually(() => expect(e.values).toEqual(['event-1']));
      await eventually(() => expect(r.values).toEqual(['reply-1']));
      // A newer subscription to one of the topics takes that topic only.
      const r2 = await collect(newBus('node-1-again'), replies, group);
      await bus.produce(events, 'event-2');
      await bus.produce(replies, 'reply-2');
      await eventually(() => expect(e.values).toEqual(['event-1', 'event-2']));
      await eventually(() => expect(r2.values).toEqual(['reply-2']));
      await sleep(500);
      expect(r.values).toEqual(['reply-1']);
    });

    it('a stuck old subscription that wakes up does not take the log back from its successor', async () => {
      const a = newBus('stuck-process');
      const b = newBus('successor');
      const topic = uniqueName('bus-stuck');
      const group = uniqueName('g');
      await a.ensureTopics([topic]);
      let release!: () => void;
      const stuck = new Promise<void>((resolve) => (release = resolve));
      const older = await collect(a, topic, group, { start: 'earliest', handler: (r) => (r.value === 'stuck' ? stuck : undefined) });
      await a.produce(topic, 'first');
      await eventually(() => expect(older.values).toEqual(['first']));
      await older.sub.commit(older.records[0]!.offset + 1);
      await a.produce(topic, 'stuck'); // the old process stops heartbeating in this handler

      const started = Date.now();
      const newer = await collect(b, topic, group, { start: 'latest' });
      // The join waits for the stuck member to drop out: about one session timeout.
      expect(Date.now() - started).toBeLessThan(SESSION_MS + 5_000);
      await eventually(() => expect(newer.values).toEqual(['stuck']));

      release(); // the old process wakes up and rejoins its group
      await sleep(1_500);
      for (const v of ['after-1', 'after-2']) await b.produce(topic, v);
      await eventually(() => expect(newer.values).toEqual(['stuck', 'after-1', 'after-2']));
      await sleep(500);
      expect(older.values).toEqual(['first', 'stuck']);
      await expect(older.sub.commit(10)).rejects.toMatchObject({ code: 'NOT_OWNER' });
    });

    it('close() does not wait for a handler that never returns, and the group moves on at once', async () => {
      const bus = newBus();
      const topic = uniqueName('bus-close');
      const group = uniqueName('g');
      await bus.ensureTopics([topic]);
      const dead = await collect(bus, topic, group, { start: 'earliest', handler: () => new Promise<void>(() => {}) });
      await bus.produce(topic, 'never-done');
      await eventually(() => expect(dead.values).toEqual(['never-done']));
      const started = Date.now();
      await dead.sub.close();
      expect(Date.now() - started).toBeLessThan(2_000);

      const next = await collect(bus, topic, group, { start: 'earliest' });
      expect(Date.now() - started).toBeLessThan(SESSION_MS); // the closed member left the group: no session wait
      await eventually(() => expect(next.values).toEqual(['never-done']));
    });

    it('a handler may close its own subscription', async () => {
      const bus = newBus();
      const topic = uniqueName('bus-self-close');
      await bus.ensureTopics([topic]);
      const closed: unknown[] = [];
      const own: { sub?: BusSubscription } = {};
      own.sub = await bus.subscribe(topic, uniqueName('g'), async (record) => {
        await own.sub?.close();
        closed.push(record.value);
      });
      await bus.produce(topic, 'last');
      await bus.produce(topic, 'not delivered');
      await eventually(() => expect(closed).toEqual(['last']));
      await sleep(500);
      expect(closed).toEqual(['last']);
    });

    it('a record that is not JSON is reported to onError and skipped; a bus.malformed warning is logged', async () => {
      const lines: string[] = [];
      const log = pino({ level: 'warn' }, { write: (line: string) => void lines.push(line) });
      const bus = newBus('malformed', { log });
      const topic = uniqueName('bus-malformed');
      await bus.ensureTopics([topic]);
      const raw = new Kafka({ clientId: 'raw-writer', brokers: services().kafkaBrokers, logLevel: logLevel.NOTHING }).producer();
      await raw.connect();
      try {
        await raw.send({ topic, messages: [{ value: '{"not": json', partition: 0 }] });
      } finally {
        await raw.disconnect();
      }
      await bus.produce(topic, { fine: true });

      const errors: [unknown, BusRecord][] = [];
      const values: unknown[] = [];
      await bus.subscribe(topic, uniqueName('g'), (r) => void values.push(r.value), { start: 'earliest', onError: (e, r) => errors.push([e, r]) });
      await eventually(() => expect(values).toEqual([{ fine: true }]));
      expect(errors).toHaveLength(1);
      expect(errors[0]![0]).toMatchObject({ code: 'MALFORMED_RECORD', topic });
      expect(errors[0]![1]).toEqual({ topic, offset: 0, value: '{"not": json' });
      expect(lines.some((l) => l.includes('"event":"bus.malformed"'))).toBe(true);
    });

    it('an idle subscription sees a new record within tens of milliseconds', async () => {
      const bus = newBus();
      const topic = uniqueName('bus-latency');
      await bus.ensureTopics([topic]);
      let arrived: ((at: number) => void) | undefined;
      await bus.subscribe(topic, uniqueName('g'), () => arrived?.(performance.now()));
      const latencies: number[] = [];
      for (let i = 0; i < 30; i += 1) {
        await sleep(20 + (i % 5) * 20); // idle: the consumer is waiting in a fetch
        const got = new Promise<number>((resolve) => (arrived = resolve));
        const sent = performance.now();
        await bus.produce(topic, i);
        latencies.push((await got) - sent);
      }
      latencies.sort((x, y) => x - y);
      expect(latencies[Math.floor(latencies.length / 2)]).toBeLessThan(50);
    });

    it('a fetched batch is handed on in slices: the event loop gets turns while its records are handled', async () => {
      const bus = newBus();
      const topic = uniqueName('bus-slices');
      await bus.ensureTopics([topic]);
      const records = 300;
      await Promise.all(Array.from({ length: records }, (_, i) => bus.produce(topic, i)));
      // Each record costs its handler 5 ms of synchronous work: kafkajs hands over a fetched batch
      // (about a hundred of these records) with awaits that never leave the microtask queue.
      let handled = 0;
      let last = performance.now();
      let longestGap = 0;
      const ticker = setInterval(() => {
        const now = performance.now();
        longestGap = Math.max(longestGap, now - last);
        last = now;
      }, 5);
      try {
        await bus.subscribe(
          topic,
          uniqueName('g'),
          () => {
            if (handled === 0) last = performance.now();
            const until = performance.now() + 5;
            while (performance.now() < until) {
              // the handler's work
            }
            handled++;
          },
          { start: 'earliest' },
        );
        await eventually(() => expect(handled).toBe(records), 30_000);
      } finally {
        clearInterval(ticker);
      }
      // A timer waits for a slice (20 ms) and the record in hand (about 50 ms in all here), not for
      // the batch (about 300 ms when the records were handed on in one task).
      expect(longestGap).toBeLessThan(250);
    });

    it('closing the bus closes its subscriptions and refuses further use', async () => {
      const bus = newBus();
      const topic = uniqueName('bus-closed');
      await bus.ensureTopics([topic]);
      const { values } = await collect(bus, topic, uniqueName('g'));
      await bus.close();
      const other = newBus('other');
      await other.produce(topic, 'after');
      await sleep(500);
      expect(values).toEqual([]);
      await expect(bus.produce(topic, 'x')).rejects.toMatchObject({ code: 'CLOSED' });
      await expect(bus.subscribe(topic, 'g', () => {})).rejects.toMatchObject({ code: 'CLOSED' });
    });
  });

  describe(`KafkaBus records, chunks and limits on ${client}`, () => {
    it('a topic whose max.message.bytes is below what the bus writes is refused by ensureTopics, produce and subscribe, saying what to change', async () => {
      const topic = uniqueName('bus-small-limit');
      await withAdmin((admin) =>
        createTopicsWithLeaders(admin, [{ topic, numPartitions: 1, replicationFactor: 1, configEntries: [{ name: 'max.message.bytes', value: '100000' }] }]),
      );
      // 256 KiB of records, 143 bytes of headers and lengths per record, a 61-byte batch header, and what gzip may add.
      expect(brokerBytesNeeded(262_144, 'gzip')).toBe(262_453);
      expect(brokerBytesNeeded(262_144, 'none')).toBe(262_348);
      const bus = newBus();
      const error = await bus.ensureTopics([topic]).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(KafkaBusError);
      expect(error).toMatchObject({ code: 'BROKER_LIMIT_TOO_SMALL', retriable: false, topic });
      expect((error as Error).message).toContain(
        `topic ${topic} takes record batches of at most 100000 bytes (its max.message.bytes), but this bus writes up to 262453 (maxRecordBytes 262144 and 309 bytes of record and batch overhead)`,
      );
      expect((error as Error).message).toMatch(
        /raise the topic's max\.message\.bytes to at least 262453 .*or lower the bus option maxRecordBytes \(kafka\.maxRecordBytes in a node config\)$/,
      );
      await expect(bus.produce(topic, 'x')).rejects.toMatchObject({ code: 'BROKER_LIMIT_TOO_SMALL', topic });
      await expect(bus.subscribe(topic, uniqueName('g'), () => {})).rejects.toMatchObject({ code: 'BROKER_LIMIT_TOO_SMALL', topic });

      // Smaller records fit that topic: 64 KiB ones need 65 737 bytes.
      const small = newBus('small-records', { maxRecordBytes: 65_536 });
      expect(await small.ensureTopics([topic])).toEqual([]);
      const value = 'é'.repeat(100_000);
      expect(await small.produce(topic, value)).toBe(3); // 200 002 bytes: four chunks
      const { values } = await collect(small, topic, uniqueName('g'), { start: 'earliest' });
      await eventually(() => expect(values).toEqual([value]));
    });

    it("ensureTopics sets max.message.bytes on the topics it creates: never below Kafka's default, more for larger records; a segment.bytes below the batches is refused too", async () => {
      const [usual, large] = [uniqueName('bus-usual'), uniqueName('bus-large')];
      await newBus().ensureTopics([usual]);
      expect(await maxMessageBytesOf(usual)).toBe(1_048_588);
      const options = { maxRecordBytes: 2 * 1024 * 1024 };
      const need = brokerBytesNeeded(options.maxRecordBytes, 'gzip');
      // The test broker's segments are 1 MiB (log.segment.bytes): a 2 MiB batch would be refused.
      const refused = await newBus('large-records', options)
        .ensureTopics([large])
        .catch((e: unknown) => e);
      expect(refused).toMatchObject({ code: 'BROKER_LIMIT_TOO_SMALL', topic: large });
      expect((refused as Error).message).toContain(`takes record batches of at most 1048576 bytes (its segment.bytes), but this bus writes up to ${need}`);
      expect(await maxMessageBytesOf(large)).toBe(need);
      // alterConfigs replaces every override of the topic: both are given.
      const configEntries = [
        { name: 'segment.bytes', value: String(4 * 1024 * 1024) },
        { name: 'max.message.bytes', value: String(need) },
      ];
      await withAdmin((admin) => admin.alterConfigs({ validateOnly: false, resources: [{ type: ConfigResourceTypes.TOPIC, name: large, configEntries }] }));
      const big = newBus('large-records-again', options);
      await eventually(async () => expect(await big.ensureTopics([large])).toEqual([]));
      // Random text barely compresses: records and batches of nearly 2 MiB reach the broker and come back.
      const value = randomBytes(3 * 1024 * 1024).toString('base64');
      const offset = await big.produce(large, value);
      expect(offset).toBe(2); // 4 MiB of base64 and its quotes: three chunks
      const { records } = await collect(big, large, uniqueName('g'), { start: 'earliest' });
      await eventually(() => expect(records).toHaveLength(1), 30_000);
      expect(records[0]).toEqual({ topic: large, offset, value });
    });

    it('a chunked message read by a plain kafkajs consumer: consecutive records of at most maxRecordBytes, with id, index and count headers', async () => {
      const bus = newBus('chunks', SMALL_LIMITS);
      const topic = uniqueName('bus-chunks');
      await bus.ensureTopics([topic]);
      // Exactly maxRecordBytes of JSON: an ordinary record, without chunk headers.
      const plain = 'p'.repeat(SMALL_LIMITS.maxRecordBytes - 2);
      await bus.produce(topic, plain);
      const value = shardMapLike(40);
      const json = JSON.stringify(value);
      const count = Math.ceil(Buffer.byteLength(json) / SMALL_LIMITS.maxRecordBytes);
      expect(count).toBeGreaterThan(5);
      const last = await bus.produce(topic, value);
      const raw = await readRaw(topic, count + 1);
      expect(raw.map((r) => r.offset)).toEqual(Array.from({ length: count + 1 }, (_, i) => last - count + i));
      expect(raw[0]!.headers).toEqual({});
      expect(raw[0]!.value).toEqual(Buffer.from(JSON.stringify(plain)));
      const chunks = raw.slice(1);
      for (const r of chunks) expect(r.value.length).toBeLessThanOrEqual(SMALL_LIMITS.maxRecordBytes);
      expect(chunks.map((r) => [r.headers[CHUNK_INDEX_HEADER], r.headers[CHUNK_COUNT_HEADER]])).toEqual(chunks.map((_, i) => [String(i), String(count)]));
      expect(new Set(chunks.map((r) => r.headers[CHUNK_ID_HEADER])).size).toBe(1);
      expect(chunks[0]!.headers[CHUNK_ID_HEADER]).toMatch(/^[A-Za-z0-9_-]{12}\.\d+$/);
      expect(Buffer.concat(chunks.map((r) => r.value)).toString('utf8')).toBe(json);
    });

    it('labels travel with every record of a value, within maxRecordBytes; a subscription passes over what its skip names, chunked messages whole', async () => {
      const bus = newBus('labels', SMALL_LIMITS);
      const topic = uniqueName('bus-labels');
      await bus.ensureTopics([topic]);
      const big = shardMapLike(40); // several chunks
      await bus.produce(topic, 'first', { labels: { kind: 'keep' } });
      await bus.produce(topic, big, { labels: { kind: 'pass', n: '1' } });
      await bus.produce(topic, 'between');
      await bus.produce(topic, 'small passed', { labels: { kind: 'pass', n: '2' } });
      const lastBig = await bus.produce(topic, big, { labels: { kind: 'keep', n: '3' } });
      await bus.produce(topic, 'last', { labels: { kind: 'keep' } });
      // On the broker: each record at most maxRecordBytes with its labels header, which a plain consumer can read.
      const raw = await readRaw(topic, lastBig + 2);
      for (const r of raw) expect(r.value.length + (r.headers['shardherd.labels']?.length ?? 0)).toBeLessThanOrEqual(SMALL_LIMITS.maxRecordBytes);
      const chunks = (raw.length - 4) / 2;
      expect(chunks).toBeGreaterThan(1);
      const labelled = raw.map((r) => r.headers['shardherd.labels']).map((h) => (h === undefined ? '-' : ((JSON.parse(h) as { n?: string }).n ?? 'k')));
      expect(labelled).toEqual(['k', ...Array<string>(chunks).fill('1'), '-', '2', ...Array<string>(chunks).fill('3'), 'k']);
      const judged: string[] = [];
      const records: BusRecord[] = [];
      await bus.subscribe(topic, uniqueName('g'), (r) => void records.push(r), {
        start: 'earliest',
        skip: (labels) => {
          judged.push(labels.n ?? labels.kind ?? '');
          return labels.kind === 'pass';
        },
      });
      await eventually(() => expect(records.map((r) => r.value)).toEqual(['first', 'between', big, 'last']), 30_000);
      // A chunked message is judged once, at its first chunk; a record without labels is not judged.
      expect(judged).toEqual(['keep', '1', '2', '3', 'keep']);
      // Without a skip, labelled records are delivered as any.
      const all = await collect(bus, topic, uniqueName('g'), { start: 'earliest' });
      await eventually(() => expect(all.values).toEqual(['first', big, 'between', 'small passed', big, 'last']), 30_000);
    });

    it('chunks of two buses producing at once interleave on the topic, and each message is delivered whole', async () => {
      const [a, b] = [newBus('producer-a', SMALL_LIMITS), newBus('producer-b', SMALL_LIMITS)];
      const topic = uniqueName('bus-two-producers');
      await a.ensureTopics([topic]);
      const { records } = await collect(a, topic, uniqueName('g'), { start: 'earliest' });
      const sent: { offset: number; value: unknown }[] = [];
      let interleaved = false;
      let from = 0;
      for (let round = 0; round < 5 && !interleaved; round += 1) {
        const values = [
          { from: 'a', round, pad: 'x'.repeat(20_000) },
          { from: 'b', round, pad: 'y'.repeat(20_000) },
        ];
        const offsets = await Promise.all([a.produce(topic, values[0]), b.produce(topic, values[1])]);
        offsets.forEach((offset, i) => sent.push({ offset, value: values[i] }));
        const end = Math.max(...offsets) + 1;
        const ids = (await readRaw(topic, end)).filter((r) => r.offset >= from && r.offset < end).map((r) => r.headers[CHUNK_ID_HEADER]);
        interleaved = ids.filter((id, i) => i > 0 && id !== ids[i - 1]).length >= 2;
        from = end;
      }
      expect(interleaved).toBe(true); // two producers' chunks alternated at least twice
      sent.sort((x, y) => x.offset - y.offset);
      await eventually(() => expect(records.map((r) => [r.offset, r.value])).toEqual(sent.map((x) => [x.offset, x.value])), 30_000);
    });

    it("gzip by default: a batch the broker's lowered limit refuses uncompressed gets in compressed; the refused one fails at once with RECORD_TOO_LARGE, not retriable", async () => {
      const topic = uniqueName('bus-compression');
      const gzip = newBus('gzip');
      const none = newBus('none', { compression: 'none' });
      expect([gzip.settings.compression, none.settings.compression]).toEqual(['gzip', 'none']);
      await gzip.ensureTopics([topic]);
      // Both check the topic now, while its limit takes their records.
      await gzip.produce(topic, 'a');
      await none.produce(topic, 'b');
      await withAdmin((admin) =>
        admin.alterConfigs({
          validateOnly: false,
          resources: [{ type: ConfigResourceTypes.TOPIC, name: topic, configEntries: [{ name: 'max.message.bytes', value: '20000' }] }],
        }),
      );
      await eventually(async () => expect(await maxMessageBytesOf(topic)).toBe(20_000));
      const value = shardMapLike(600); // ~170 KB of JSON, one record; a few KB gzipped
      expect(Buffer.byteLength(JSON.stringify(value))).toBeGreaterThan(150_000);

      const started = Date.now();
      const refused = await none.produce(topic, value).catch((e: unknown) => e);
      expect(Date.now() - started).toBeLessThan(2_000); // not retried
      expect(refused).toBeInstanceOf(KafkaBusError);
      expect(refused).toMatchObject({ code: 'RECORD_TOO_LARGE', retriable: false, topic });
      expect((refused as Error).message).toMatch(/as too large \(MESSAGE_TOO_LARGE\): its max\.message\.bytes is below .*lower the bus option maxRecordBytes/);
      const offset = await gzip.produce(topic, value);
      const { values } = await collect(gzip, topic, uniqueName('g'), { start: 'earliest' });
      await eventually(() => expect(values).toEqual(['a', 'b', value]));
      expect(offset).toBe(2);
    });

    it('a message whose producer died mid-way is given up after chunkTimeoutMs and reported; the records after it are delivered and commits go on', async () => {
      const bus = newBus('timeout', { ...SMALL_LIMITS, chunkTimeoutMs: 500 });
      const topic = uniqueName('bus-dead-producer');
      const group = uniqueName('g');
      await bus.ensureTopics([topic]);
      const records = busRecords({ pad: 'z'.repeat(3_000) }, 'dead-producer.7', SMALL_LIMITS.maxRecordBytes);
      expect(records).toHaveLength(3);
      await writeRaw(topic, records.slice(0, 2)); // offsets 0 and 1; the third never comes
      const errors: [unknown, BusRecord][] = [];
      const values: unknown[] = [];
      const sub = await bus.subscribe(topic, group, (r) => void values.push(r.value), { start: 'earliest', onError: (e, r) => errors.push([e, r]) });
      const after = await bus.produce(topic, 'after');
      await eventually(() => expect(values).toEqual(['after']));
      await sub.commit(after + 1);
      expect(await bus.committedOffset(topic, group)).toBe(0); // held at the incomplete message
      await eventually(() => expect(errors).toHaveLength(1), 5_000);
      expect(errors[0]![0]).toBeInstanceOf(IncompleteMessageError);
      expect(errors[0]![0]).toMatchObject({ code: 'INCOMPLETE_MESSAGE', topic, messageId: 'dead-producer.7', chunksSeen: 2, chunkCount: 3, reason: 'timeout' });
      expect(errors[0]![1]).toEqual({ topic, offset: 0, value: null });
      await sub.commit(after + 1);
      expect(await bus.committedOffset(topic, group)).toBe(after + 1);
      expect(values).toEqual(['after']);
    });
  });
}

describe('KafkaBus across client libraries', () => {
  it('subscriptions on kafkajs and @platformatic/kafka share a group: the newest owns the topic whichever its library, and each reads what the other wrote', async () => {
    const onKafkajs = newBusOf('library-switch-old', { ...SMALL_LIMITS, client: 'kafkajs' });
    const onPlatformatic = newBusOf('library-switch-new', { ...SMALL_LIMITS, client: 'platformatic' });
    const topic = uniqueName('bus-libraries');
    const group = uniqueName('g');
    await onKafkajs.ensureTopics([topic]);
    // A value large enough to be chunked, written by one library and read by the other.
    const large = shardMapLike(64);
    expect(JSON.stringify(large).length).toBeGreaterThan(3 * SMALL_LIMITS.maxRecordBytes);

    const older = await collect(onKafkajs, topic, group, { start: 'earliest' });
    await onPlatformatic.produce(topic, 'r1');
    await eventually(() => expect(older.values).toEqual(['r1']));
    await older.sub.commit(older.records[0]!.offset + 1);

    // A rolling switch: the node restarted on the other library subscribes with the same group.
    const newer = await collect(onPlatformatic, topic, group, { start: 'earliest' });
    await onKafkajs.produce(topic, large);
    await onKafkajs.produce(topic, 'r3');
    await eventually(() => expect(newer.values).toEqual([large, 'r3']));
    expect(older.values).toEqual(['r1']);
    await expect(older.sub.commit(5)).rejects.toMatchObject({ code: 'NOT_OWNER' });
    await newer.sub.commit(newer.records[0]!.offset + 1);

    // And back: the kafkajs subscription takes the topic over from the group's committed offset.
    await newer.sub.close();
    await eventually(() => expect(older.values).toEqual(['r1', 'r3']));
  });
});

describe('KafkaBus options', () => {
  const base = { brokers: ['127.0.0.1:9092'], clientId: 'c', log: silent };

  it('has defaults for production and refuses options that cannot work, naming them', () => {
    expect(kafkaBusSettings(base)).toMatchObject({
      sessionTimeoutMs: 10_000,
      heartbeatIntervalMs: 1_000,
      rebalanceTimeoutMs: 10_000,
      maxWaitTimeMs: 250,
      replicationFactor: 1,
    });
    expect(kafkaBusSettings({ ...base, sessionTimeoutMs: 3_000 })).toMatchObject({ heartbeatIntervalMs: 300, maxWaitTimeMs: 250, rebalanceTimeoutMs: 3_000 });
    expect(() => new KafkaBus({ ...base, sessionTimeoutMs: 3_000, heartbeatIntervalMs: 3_000 })).toThrow(
      'KafkaBus option heartbeatIntervalMs (3000) must be less than sessionTimeoutMs (3000)',
    );
    expect(() => new KafkaBus({ ...base, heartbeatIntervalMs: 200, maxWaitTimeMs: 500 })).toThrow(
      'KafkaBus option maxWaitTimeMs (500) must be at most heartbeatIntervalMs (200)',
    );
    expect(() => new KafkaBus({ ...base, replicationFactor: 0 })).toThrow('KafkaBus option replicationFactor must be a positive whole number, got 0');
    expect(() => new KafkaBus({ ...base, brokers: [] })).toThrow('KafkaBus option brokers needs at least one host:port');
    expect(() => new KafkaBus({ ...base, brokers: ['localhost'] })).toThrow("KafkaBus option brokers must be host:port, got 'localhost'");
  });

  it('has limits, a chunk timeout and compression with defaults, and refuses values that cannot work, naming them', () => {
    expect(kafkaBusSettings(base)).toMatchObject({ maxRecordBytes: 262_144, maxMessageBytes: 67_108_864, chunkTimeoutMs: 30_000, compression: 'gzip' });
    expect(kafkaBusSettings({ ...base, maxRecordBytes: 4096, maxMessageBytes: 8192, chunkTimeoutMs: 10, compression: 'none' })).toMatchObject({
      maxRecordBytes: 4096,
      maxMessageBytes: 8192,
      chunkTimeoutMs: 10,
      compression: 'none',
    });
    expect(() => new KafkaBus({ ...base, maxRecordBytes: 100 })).toThrow(
      'KafkaBus option maxRecordBytes must be a whole number from 1024 to 268435456, got 100',
    );
    expect(() => new KafkaBus({ ...base, maxRecordBytes: 2048, maxMessageBytes: 1024 })).toThrow(
      'KafkaBus option maxRecordBytes (2048) must be at most maxMessageBytes (1024)',
    );
    expect(() => new KafkaBus({ ...base, maxMessageBytes: 1.5 })).toThrow(
      'KafkaBus option maxMessageBytes must be a whole number from 1024 to 268435456, got 1.5',
    );
    expect(() => new KafkaBus({ ...base, chunkTimeoutMs: -1 })).toThrow('KafkaBus option chunkTimeoutMs must be a whole number from 1 to 2147483647, got -1');
    expect(() => new KafkaBus({ ...base, compression: 'zstd' as never })).toThrow('KafkaBus option compression must be "gzip" or "none", got "zstd"');
    expect(() => new KafkaBus({ ...base, maxRecordBytes: 'big' as never })).toThrow('KafkaBus option maxRecordBytes must be a number, got big');
  });

  it('refuses values that JSON would change, and bad topic names, before touching the broker', async () => {
    const bus = newBusOf('json');
    await expect(bus.produce('t', { at: new Date() })).rejects.toThrow('value is not JSON data: a Date object at $.at');
    await expect(bus.produce('t', [1, Number.NaN])).rejects.toThrow('value is not JSON data: NaN at $[1]');
    await expect(bus.produce('t', { n: 1n })).rejects.toThrow('value is not JSON data: a bigint at $.n');
    const cyclic: Record<string, unknown> = {};
    cyclic['self'] = cyclic;
    await expect(bus.produce('t', cyclic)).rejects.toThrow('value is not JSON data: a cycle at $.self');
    await expect(bus.produce('no spaces', 1)).rejects.toMatchObject({ code: 'INVALID_OPTION' });
  });
});
