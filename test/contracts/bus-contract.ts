// The behaviour every Bus adapter must have (src/cluster/bus.ts), as a reusable suite: the memory
// bus runs it in test/unit, the Kafka adapter runs the same suite against a broker (test/integration).
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { MessageTooLargeError, type Bus, type BusRecord, type BusSubscription, type RecordHandler, type SubscribeOptions } from '../../src/cluster/bus.js';
import type { BusLimitOptions } from '../../src/cluster/bus-limits.js';

export interface BusFixture {
  readonly bus: Bus;
  /** Makes topics usable before a test touches them (a Kafka bus never creates topics implicitly). */
  readonly createTopics?: (topics: string[]) => Promise<void>;
  readonly cleanup?: () => Promise<void>;
  /**
   * Another bus on the same topics with the same limits, as another process has (a second
   * producer); the same bus where an adapter's log belongs to one bus (the memory bus).
   */
  readonly peer: () => Promise<Bus>;
  /**
   * Appends the values as producers writing at once can: their records (the chunks of the
   * chunked ones) taken round robin, value by value, so that chunks of one message have records
   * of the others between them. Resolves with each value's offset (that of its last record).
   */
  readonly writeInterleaved: (topic: string, values: readonly unknown[]) => Promise<number[]>;
}

/** Limits small enough that chunked messages of a few kilobytes keep the tests fast. */
export const SMALL_LIMITS = { maxRecordBytes: 1024, maxMessageBytes: 64 * 1024 } as const satisfies BusLimitOptions;

/** A value whose JSON is exactly `bytes` long (a string of `x`s in its quotes). */
const ofJsonBytes = (bytes: number): string => 'x'.repeat(bytes - 2);

/**
 * JSON shaped like a big shard map: many shards, each with copies on repeated node names (some
 * not ASCII, so that chunks are cut inside characters).
 */
export function shardMapLike(shards: number, copies = 3): unknown {
  const nodes = Array.from({ length: 64 }, (_, i) => `node-${i}.rack-${i % 4}.zone-é€😀`);
  return {
    format: 2,
    dataset: 'metrics',
    numShards: shards,
    shards: Array.from({ length: shards }, (_, s) => ({
      status: s % 7 === 0 ? 'Recovery' : 'Active',
      assignments: Array.from({ length: copies }, (_, c) => ({ node: nodes[(s + c * 17) % nodes.length], placement: 'Available', status: 'Active' })),
    })),
  };
}

/** Topic and group names unique to this run, so a shared broker's old topics never interfere. */
const run = `${process.pid}-${Date.now().toString(36)}`;
let counter = 0;
const fresh = (label: string): string => `contract-${run}-${label}-${counter++}`;

export interface BusContractOptions {
  /** How long to wait for a delivery that must happen (default 1000 ms; a broker needs more). */
  readonly waitMs?: number;
  /** How long to watch for a delivery that must NOT happen (default 50 ms). */
  readonly quietMs?: number;
}

interface Deferred {
  readonly promise: Promise<void>;
  readonly resolve: () => void;
}
function deferred(): Deferred {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

/** `makeBus(limits)` makes a fresh bus with those limits (the defaults without). */
export function busContract(name: string, makeBus: (limits?: BusLimitOptions) => Promise<BusFixture>, options: BusContractOptions = {}): void {
  const waitMs = options.waitMs ?? 1000;
  const quietMs = options.quietMs ?? 50;
  const quiet = (): Promise<void> => new Promise((resolve) => setTimeout(resolve, quietMs));
  const eventually = (check: () => void): Promise<void> => vi.waitFor(check, { timeout: waitMs, interval: 5 });

  describe(`Bus contract: ${name}`, () => {
    let fixture: BusFixture;
    let bus: Bus;
    let open: BusSubscription[] = [];
    let fixtures: BusFixture[] = [];

    beforeEach(async () => {
      fixture = await makeBus();
      fixtures = [fixture];
      bus = fixture.bus;
      open = [];
    });

    afterEach(async () => {
      for (const sub of open) await sub.close();
      for (const f of fixtures) await f.cleanup?.();
    });

    /** A fresh bus with these limits, used instead of the test's default one. */
    async function withLimits(limits: BusLimitOptions): Promise<BusFixture> {
      const f = await makeBus(limits);
      fixtures.push(f);
      fixture = f;
      bus = f.bus;
      return f;
    }

    /** A topic no other test uses, created if the adapter needs that. */
    async function newTopic(label: string): Promise<string> {
      const topic = fresh(label);
      await fixture.createTopics?.([topic]);
      return topic;
    }

    /** Subscribes and records what is delivered. */
    async function collect(
      topic: string,
      group: string,
      options: SubscribeOptions = {},
      handler: RecordHandler = () => {},
      on: Bus = bus,
    ): Promise<{ records: BusRecord[]; values: () => unknown[]; sub: BusSubscription }> {
      const records: BusRecord[] = [];
      const sub = await on.subscribe(
        topic,
        group,
        (record) => {
          records.push(record);
          return handler(record);
        },
        options,
      );
      open.push(sub);
      return { records, values: () => records.map((r) => r.value), sub };
    }

    it('produce resolves with consecutive offsets, and records are delivered with those offsets in order', async () => {
      const topic = await newTopic('offsets');
      const offsets = [];
      for (const v of ['a', 'b', 'c']) offsets.push(await bus.produce(topic, { v }));
      expect(offsets[1]).toBe(offsets[0]! + 1);
      expect(offsets[2]).toBe(offsets[0]! + 2);

      const { records } = await collect(topic, fresh('g'), { start: 'earliest' });
      await eventually(() => expect(records).toHaveLength(3));
      expect(records.map((r) => [r.topic, r.offset, r.value])).toEqual([
        [topic, offsets[0], { v: 'a' }],
        [topic, offsets[1], { v: 'b' }],
        [topic, offsets[2], { v: 'c' }],
      ]);
    });

    it('delivers one record at a time: the next only after the handler settles', async () => {
      const topic = await newTopic('one-at-a-time');
      const gate = deferred();
      let running = 0;
      let maxRunning = 0;
      const { values } = await collect(topic, fresh('g'), { start: 'earliest' }, async (record) => {
        running += 1;
        maxRunning = Math.max(maxRunning, running);
        if (record.value === 0) await gate.promise;
        running -= 1;
      });
      for (const n of [0, 1, 2]) await bus.produce(topic, n);

      await eventually(() => expect(values()).toEqual([0]));
      await quiet();
      expect(values()).toEqual([0]); // record 1 waits for record 0's handler
      gate.resolve();
      await eventually(() => expect(values()).toEqual([0, 1, 2]));
      expect(maxRunning).toBe(1);
    });

    it('delivers records produced after subscribing, in order', async () => {
      const topic = await newTopic('later');
      const { values } = await collect(topic, fresh('g'));
      for (let n = 0; n < 5; n += 1) await bus.produce(topic, n);
      await eventually(() => expect(values()).toEqual([0, 1, 2, 3, 4]));
    });

    it('a new group starts at the end by default (latest), or at the beginning with start: earliest', async () => {
      const topic = await newTopic('start');
      await bus.produce(topic, 'old-1');
      await bus.produce(topic, 'old-2');
      const latest = await collect(topic, fresh('latest'));
      const explicitLatest = await collect(topic, fresh('latest2'), { start: 'latest' });
      const earliest = await collect(topic, fresh('earliest'), { start: 'earliest' });
      await bus.produce(topic, 'new');

      await eventually(() => expect(earliest.values()).toEqual(['old-1', 'old-2', 'new']));
      await eventually(() => expect(latest.values()).toEqual(['new']));
      await eventually(() => expect(explicitLatest.values()).toEqual(['new']));
      await quiet();
      expect(latest.values()).toEqual(['new']);
    });

    it('a group resumes at its committed position after close, whatever its start option', async () => {
      const topic = await newTopic('commit');
      const group = fresh('g');
      for (const n of [0, 1, 2]) await bus.produce(topic, n);

      const first = await collect(topic, group, { start: 'earliest' });
      await eventually(() => expect(first.values()).toEqual([0, 1, 2]));
      await first.sub.commit(first.records[1]!.offset + 1); // processed 0 and 1, not 2
      await first.sub.close();
      await bus.produce(topic, 3);

      const second = await collect(topic, group, { start: 'latest' });
      await eventually(() => expect(second.values()).toEqual([2, 3]));

      // Another group is not affected by this group's commit.
      const other = await collect(topic, fresh('other'), { start: 'earliest' });
      await eventually(() => expect(other.values()).toEqual([0, 1, 2, 3]));
    });

    it('a group that never committed starts over from its start option after close', async () => {
      const topic = await newTopic('no-commit');
      const group = fresh('g');
      for (const n of [0, 1]) await bus.produce(topic, n);
      const first = await collect(topic, group, { start: 'earliest' });
      await eventually(() => expect(first.values()).toEqual([0, 1]));
      await first.sub.close();
      const again = await collect(topic, group, { start: 'earliest' });
      await eventually(() => expect(again.values()).toEqual([0, 1]));
    });

    it('a handler that throws or rejects is reported to onError, and delivery continues with the next record', async () => {
      const topic = await newTopic('errors');
      const reported: [string, unknown][] = [];
      const { values } = await collect(
        topic,
        fresh('g'),
        { start: 'earliest', onError: (error, record) => reported.push([(error as Error).message, record.value]) },
        async (record) => {
          if (record.value === 'throw') throw new Error('boom');
          if (record.value === 'reject') await Promise.reject(new Error('rejected'));
        },
      );
      for (const v of ['throw', 'reject', 'fine']) await bus.produce(topic, v);
      await eventually(() => expect(values()).toEqual(['throw', 'reject', 'fine']));
      await eventually(() =>
        expect(reported).toEqual([
          ['boom', 'throw'],
          ['rejected', 'reject'],
        ]),
      );
    });

    it('a synchronous handler that throws does not stop delivery either', async () => {
      const topic = await newTopic('sync-throw');
      const reported: unknown[] = [];
      const { values } = await collect(topic, fresh('g'), { start: 'earliest', onError: (_e, r) => reported.push(r.value) }, (record) => {
        if (record.value === 1) throw new Error('sync boom');
      });
      for (const n of [1, 2]) await bus.produce(topic, n);
      await eventually(() => expect(values()).toEqual([1, 2]));
      expect(reported).toEqual([1]);
    });

    it('close stops delivery', async () => {
      const topic = await newTopic('close');
      const { values, sub } = await collect(topic, fresh('g'));
      await bus.produce(topic, 'before');
      await eventually(() => expect(values()).toEqual(['before']));
      await sub.close();
      await bus.produce(topic, 'after');
      await quiet();
      expect(values()).toEqual(['before']);
    });

    it('topics are independent', async () => {
      const t1 = await newTopic('t1');
      const t2 = await newTopic('t2');
      const one = await collect(t1, fresh('g'));
      await bus.produce(t2, 'two');
      await bus.produce(t1, 'one');
      await eventually(() => expect(one.values()).toEqual(['one']));
      await quiet();
      expect(one.values()).toEqual(['one']);
    });

    it('values are copies: changing the produced object or a delivered value changes no other delivery', async () => {
      const topic = await newTopic('copies');
      const a = await collect(topic, fresh('a'), {}, (record) => {
        // A bus may deliver frozen values (the memory bus shares one frozen copy): then the change throws.
        try {
          (record.value as { items: string[] }).items.push('changed by a');
        } catch (e) {
          if (!(e instanceof TypeError)) throw e;
        }
      });
      const b = await collect(topic, fresh('b'));
      const value = { items: ['original'] };
      await bus.produce(topic, value);
      value.items.push('changed by producer');

      await eventually(() => expect(a.records).toHaveLength(1));
      await eventually(() => expect(b.values()).toEqual([{ items: ['original'] }]));
      const late = await collect(topic, fresh('late'), { start: 'earliest' });
      await eventually(() => expect(late.values()).toEqual([{ items: ['original'] }]));
    });

    it('a value that is not JSON data is refused by produce, saying what and where', async () => {
      const topic = await newTopic('not-data');
      await expect(bus.produce(topic, { f: () => 1 })).rejects.toThrow('value is not JSON data: a function at $.f');
      await expect(bus.produce(topic, [1, Number.NaN])).rejects.toThrow('value is not JSON data: NaN at $[1]');
      await expect(bus.produce(topic, { at: new Date(0) })).rejects.toThrow('value is not JSON data: a Date object at $.at');
      const { values } = await collect(topic, fresh('g'), { start: 'earliest' });
      await bus.produce(topic, 'data');
      await eventually(() => expect(values()).toEqual(['data']));
    });
    it('a 3 MB value round-trips whole, once, at the offset produce resolved with', async () => {
      const topic = await newTopic('big');
      const value = shardMapLike(11_000);
      expect(Buffer.byteLength(JSON.stringify(value))).toBeGreaterThan(3_000_000);
      const errors: unknown[] = [];
      const { records } = await collect(topic, fresh('g'), { start: 'earliest', onError: (e) => errors.push(e) });
      const offset = await bus.produce(topic, value);
      const after = await bus.produce(topic, 'after');
      await eventually(() => expect(records.map((r) => r.value)).toHaveLength(2));
      expect(records[0]!.value).toEqual(value);
      expect(records.map((r) => [r.offset, r.topic])).toEqual([
        [offset, topic],
        [after, topic],
      ]);
      // 256 KiB records by default: the value took 12 or more of them.
      expect(after - offset).toBe(1);
      expect(offset).toBeGreaterThanOrEqual(11);
      expect(errors).toEqual([]);
    });

    it('a value just under or at maxRecordBytes is one record; one byte more is two; a cut inside a character is joined', async () => {
      await withLimits(SMALL_LIMITS);
      const topic = await newTopic('edges');
      const max = SMALL_LIMITS.maxRecordBytes;
      // 'a' and 341 three-byte characters in quotes: 1026 bytes, cut inside the last character.
      const euros = `a${'€'.repeat(341)}`;
      const encoded = Buffer.from(JSON.stringify(euros));
      expect(encoded.length).toBe(max + 2);
      expect(encoded.subarray(0, max).toString('utf8').endsWith('\ufffd')).toBe(true);
      const values = [ofJsonBytes(max - 1), ofJsonBytes(max), ofJsonBytes(max + 1), euros];
      const offsets = [await bus.produce(topic, 'start')];
      for (const v of values) offsets.push(await bus.produce(topic, v));
      expect(offsets.slice(1).map((o, i) => o - offsets[i]!)).toEqual([1, 1, 2, 2]);

      const { records } = await collect(topic, fresh('g'), { start: 'earliest' });
      await eventually(() => expect(records).toHaveLength(5));
      expect(records.map((r) => r.value)).toEqual(['start', ...values]);
      expect(records.map((r) => r.offset)).toEqual(offsets);
    });

    it('chunked messages of two buses producing at once are each delivered whole, in the order they completed', async () => {
      await withLimits(SMALL_LIMITS);
      const topic = await newTopic('two-producers');
      const other = await fixture.peer();
      const { records } = await collect(topic, fresh('g'), { start: 'earliest' });
      const values = Array.from({ length: 6 }, (_, i) => ({ from: i % 2 === 0 ? 'one' : 'two', n: i, payload: ofJsonBytes(3_000 + i * 700) }));
      const offsets = await Promise.all(values.map((v, i) => (i % 2 === 0 ? bus : other).produce(topic, v)));
      await eventually(() => expect(records).toHaveLength(6));
      expect(records.map((r) => r.offset)).toEqual([...offsets].sort((a, b) => a - b));
      for (const r of records) expect(r.value).toEqual(values[offsets.indexOf(r.offset)]);
    });

    it('interleaved chunks of several messages: each delivered whole, in the order they completed, the records between them too', async () => {
      await withLimits(SMALL_LIMITS);
      const topic = await newTopic('interleaved');
      const a = { name: 'a', payload: ofJsonBytes(5_000) };
      const b = { name: 'b', payload: '€'.repeat(900) };
      const offsets = await fixture.writeInterleaved(topic, [a, b, 'between']);
      const { records } = await collect(topic, fresh('g'), { start: 'earliest' });
      await eventually(() => expect(records).toHaveLength(3));
      // 'between' is the third record; b (3 chunks) completes before a (5 chunks).
      expect(records.map((r) => r.value)).toEqual(['between', b, a]);
      expect(records.map((r) => r.offset)).toEqual([offsets[2], offsets[1], offsets[0]]);
      expect(offsets[2]).toBeLessThan(offsets[1]!);
    });

    it('a commit while a message is incomplete stops at its first chunk: the next subscription of the group receives it whole', async () => {
      await withLimits(SMALL_LIMITS);
      const topic = await newTopic('commit-incomplete');
      const group = fresh('g');
      const message = { big: ofJsonBytes(4_000) };
      const holder: { sub?: BusSubscription } = {};
      // 'between' lands after the message's first chunk: its handler commits past it.
      const first = await collect(topic, group, { start: 'earliest' }, async (record) => {
        if (record.value === 'between') await holder.sub!.commit(record.offset + 1);
      });
      holder.sub = first.sub;
      const [messageOffset, betweenOffset] = await fixture.writeInterleaved(topic, [message, 'between']);
      await eventually(() => expect(first.values()).toEqual(['between', message]));
      await first.sub.close();

      const second = await collect(topic, group, { start: 'latest' });
      await eventually(() => expect(second.values()).toEqual(['between', message]));
      expect(second.records.map((r) => r.offset)).toEqual([betweenOffset, messageOffset]);
    });

    it('a value above maxMessageBytes is refused with MessageTooLargeError, not retriable, and nothing is written', async () => {
      await withLimits(SMALL_LIMITS);
      const topic = await newTopic('too-large');
      const bytes = SMALL_LIMITS.maxMessageBytes + 1;
      const error = await bus.produce(topic, ofJsonBytes(bytes)).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(MessageTooLargeError);
      expect(error).toMatchObject({ code: 'MESSAGE_TOO_LARGE', retriable: false, topic, bytes, limit: SMALL_LIMITS.maxMessageBytes });
      expect((error as Error).message).toMatch(/maxMessageBytes \(65536\): raise the bus option maxMessageBytes/);
      // At the limit it goes through: the first offset of the topic was not taken by the refused one.
      const { records } = await collect(topic, fresh('g'), { start: 'earliest' });
      const atLimit = ofJsonBytes(SMALL_LIMITS.maxMessageBytes);
      const offset = await bus.produce(topic, atLimit);
      expect(offset).toBe(SMALL_LIMITS.maxMessageBytes / SMALL_LIMITS.maxRecordBytes - 1);
      await eventually(() => expect(records.map((r) => r.value)).toEqual([atLimit]));
      await quiet();
      expect(records).toHaveLength(1);
    });
  });
}
