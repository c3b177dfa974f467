// The Kafka bus against a real broker: the Bus contract every adapter passes, then what is
// Kafka's own: topics exist only through ensureTopics, clear failures on missing or partitioned
// topics, the singleton handover between processes, the newest subscription of a group owning the
// log (also against an old one that was stuck and wakes up), and delivery latency.
import { Kafka, logLevel, type Admin } from 'kafkajs';
import { pino } from 'pino';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { BusRecord, BusSubscription } from '../../src/cluster/bus.js';
import { KafkaBus, KafkaBusError, kafkaBusSettings, type KafkaBusOptions } from '../../src/cluster/kafka-bus.js';
import { busContract } from '../contracts/bus-contract.js';
import { services, uniqueName } from './support.js';

/** Short group timeouts (the test broker allows sessions down to 1 s). */
const SESSION_MS = 3_000;
const fast = { sessionTimeoutMs: SESSION_MS, heartbeatIntervalMs: 300 };
const silent = pino({ level: 'silent' });

/** A bus as one process would have it; each test closes what it opened. */
const opened: KafkaBus[] = [];
function newBus(clientId = 'kafka-bus-test', options: Partial<KafkaBusOptions> = {}): KafkaBus {
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

busContract(
  'KafkaBus',
  async () => {
    const bus = newBus();
    return { bus, createTopics: async (topics) => void (await bus.ensureTopics(topics)), cleanup: () => bus.close() };
  },
  // A broker round trip is milliseconds, but a group join or a rebalance can take a heartbeat or two.
  { waitMs: 15_000, quietMs: 500 },
);

describe('KafkaBus topics', () => {
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

  it('the replication factor option reaches the broker: 2 on a one-broker cluster is refused', async () => {
    const bus = newBus('rf', { replicationFactor: 2 });
    const topic = uniqueName('bus-rf');
    await expect(bus.ensureTopics([topic])).rejects.toThrow(new RegExp(`${topic}: Replication.factor is invalid`, 'i'));
  });

  it('a topic with more than one partition is refused by ensureTopics, produce and subscribe, saying why', async () => {
    const topic = uniqueName('bus-partitioned');
    await withAdmin((admin) => admin.createTopics({ topics: [{ topic, numPartitions: 3, replicationFactor: 1 }], waitForLeaders: true }));
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
    expect((produced as Error).message).toBe(`topic ${topic} does not exist: the bus never creates topics implicitly; create it with ensureTopics()`);
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

describe('KafkaBus subscriptions', () => {
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
    expect(await withAdmin((admin) => admin.fetchOffsets({ groupId: group, topics: [topic] }))).toMatchObject([{ topic, partitions: [{ partition: 0, offset: '3' }] }]);
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

describe('KafkaBus options', () => {
  const base = { brokers: ['127.0.0.1:9092'], clientId: 'c', log: silent };

  it('has defaults for production and refuses options that cannot work, naming them', () => {
    expect(kafkaBusSettings(base)).toMatchObject({ sessionTimeoutMs: 10_000, heartbeatIntervalMs: 1_000, rebalanceTimeoutMs: 10_000, maxWaitTimeMs: 250, replicationFactor: 1 });
    expect(kafkaBusSettings({ ...base, sessionTimeoutMs: 3_000 })).toMatchObject({ heartbeatIntervalMs: 300, maxWaitTimeMs: 250, rebalanceTimeoutMs: 3_000 });
    expect(() => new KafkaBus({ ...base, sessionTimeoutMs: 3_000, heartbeatIntervalMs: 3_000 })).toThrow(
      'KafkaBus option heartbeatIntervalMs (3000) must be less than sessionTimeoutMs (3000)',
    );
    expect(() => new KafkaBus({ ...base, heartbeatIntervalMs: 200, maxWaitTimeMs: 500 })).toThrow('KafkaBus option maxWaitTimeMs (500) must be at most heartbeatIntervalMs (200)');
    expect(() => new KafkaBus({ ...base, replicationFactor: 0 })).toThrow('KafkaBus option replicationFactor must be a positive whole number, got 0');
    expect(() => new KafkaBus({ ...base, brokers: [] })).toThrow('KafkaBus option brokers needs at least one host:port');
    expect(() => new KafkaBus({ ...base, brokers: ['localhost'] })).toThrow("KafkaBus option brokers must be host:port, got 'localhost'");
  });

  it('refuses values that JSON would change, and bad topic names, before touching the broker', async () => {
    const bus = newBus('json');
    await expect(bus.produce('t', { at: new Date() })).rejects.toThrow('value is not JSON data: a Date object at $.at');
    await expect(bus.produce('t', [1, Number.NaN])).rejects.toThrow('value is not JSON data: NaN at $[1]');
    await expect(bus.produce('t', { n: 1n })).rejects.toThrow('value is not JSON data: a bigint at $.n');
    const cyclic: Record<string, unknown> = {};
    cyclic['self'] = cyclic;
    await expect(bus.produce('t', cyclic)).rejects.toThrow('value is not JSON data: a cycle at $.self');
    await expect(bus.produce('no spaces', 1)).rejects.toMatchObject({ code: 'INVALID_OPTION' });
  });
});
