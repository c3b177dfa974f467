// What the feed gets from a client's consumer, on either thread: each batch packed as far as the
// room the feed gave the partition goes, the partition moved past what was taken and paused before
// a batch would not fit; batches of no current start dropped but counted; starts the feed gives
// while the consumer joins become the join's plan, later ones seeks.
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import type { FeedConsumer, FeedConsumerParams, FetchedBatch, FetchedMessage } from '../../src/ingest/kafka-source/feed-client.js';
import { fetchedMessages } from '../../src/ingest/kafka-source/feed-client.js';
import { NO_START, PackingConsumer, type PackedBatch, type RunConsumerEvents } from '../../src/ingest/kafka-source/run-consumer.js';
import type { KafkaSourceSettings } from '../../src/ingest/kafka-source/settings.js';
import { decodeKafkaValue } from '../../src/ingest/kafka-source/decode.js';
import type { SourceRecord } from '../../src/ingest/ingestion-source.js';

const settings = { bufferRecords: 1_000, bufferBytes: 1 << 30 } as KafkaSourceSettings;
const roomFor = (records: number) => ({ records, bytes: 1 << 30 });

/** A client's consumer that records what it is told; the test plays its joins and batches. */
class FakeConsumer implements FeedConsumer {
  readonly calls: string[] = [];
  constructor(readonly params: FeedConsumerParams) {}
  schedule(delayMs: number): void {
    this.calls.push(`schedule ${delayMs} [${this.params.wanted().join(',')}]`);
  }
  seek(partition: number, offset: number): void {
    this.calls.push(`seek ${partition}@${offset}`);
  }
  pause(partition: number): void {
    this.calls.push(`pause ${partition}`);
  }
  resume(partition: number): void {
    this.calls.push(`resume ${partition}`);
  }
  commit = async (): Promise<void> => {};
  stats = () => ({ groupId: 'g', assigned: [], generations: 1, lastRecreateMs: undefined });
  shutdown = async (): Promise<void> => {};
}

/** `count` records of 20-byte values from `offset` on. */
function messages(offset: number, count: number): FetchedMessage[] {
  const bytes = Buffer.alloc(20 * count, 0x31);
  return Array.from({ length: count }, (_, i) => ({ offset: offset + i, value: bytes.subarray(20 * i, 20 * i + 20) }));
}

/** A batch of `count` records at `offset`, recording what the consumer is told about it. */
function batchOf(partition: number, offset: number, count: number, calls: string[], o: { stale?: boolean; nextOffset?: number } = {}): FetchedBatch {
  return {
    partition,
    fetchedOffset: offset,
    records: fetchedMessages(messages(offset, count)),
    nextOffset: o.nextOffset ?? offset + count,
    isStale: () => o.stale ?? false,
    took: (next) => calls.push(`took ${partition}@${next}`),
    pause: () => calls.push(`batch pause ${partition}`),
  };
}

function packing(onJoin: (c: PackingConsumer, assigned: readonly number[]) => void = () => {}) {
  const batches: PackedBatch[] = [];
  let fake: FakeConsumer | undefined;
  const events: RunConsumerEvents = {
    onJoin: (assigned) => onJoin(consumer, assigned),
    onBatch: (b) => batches.push(b),
    onFail: () => {},
  };
  const consumer = new PackingConsumer(
    (params) => (fake = new FakeConsumer(params)),
    { settings, dataset: 'metrics', topic: 'metrics-topic', log: pino({ level: 'silent' }) },
    events,
  );
  return { consumer, fake: fake!, batches };
}

describe('PackingConsumer', () => {
  it('packs what the room takes, moves the partition past it, and pauses it when the rest of the batch did not fit', () => {
    const { consumer, fake, batches } = packing();
    consumer.start(3, 100, 1, roomFor(600));
    expect(fake.calls).toEqual(['seek 3@100', 'resume 3']);
    fake.params.onBatch(batchOf(3, 100, 1_000, fake.calls));
    const [b] = batches;
    expect(b).toMatchObject({ partition: 3, epoch: 1, fetchedOffset: 100, fetched: 1_000, nextOffset: 700, paused: true });
    expect(b!.run!.count).toBe(600);
    // The records after 699 are fetched again once the feed grants room.
    expect(fake.calls.slice(2)).toEqual(['took 3@700', 'batch pause 3']);
  });

  it('keeps fetching while a batch like the last still fits, and pauses before one would not', () => {
    const { consumer, fake, batches } = packing();
    consumer.start(0, 0, 1, roomFor(1_000));
    fake.params.onBatch(batchOf(0, 0, 400, fake.calls));
    expect(batches[0]).toMatchObject({ nextOffset: 400, paused: false });
    // 600 left: takes 400 more, and 200 left would not take a third.
    fake.params.onBatch(batchOf(0, 400, 400, fake.calls));
    expect(batches[1]).toMatchObject({ nextOffset: 800, paused: true });
    expect(batches[1]!.run!.count).toBe(400);
    expect(fake.calls.filter((c) => c.includes('pause'))).toEqual(['batch pause 0']);
  });

  it('a grant of the current start resumes the partition; a grant of an earlier start is ignored', () => {
    const { consumer, fake, batches } = packing();
    consumer.start(1, 0, 1, roomFor(100));
    fake.params.onBatch(batchOf(1, 0, 100, fake.calls));
    expect(batches[0]!.paused).toBe(true);
    consumer.start(1, 50, 2, roomFor(1_000));
    consumer.grant(1, 1, roomFor(1_000));
    expect(fake.calls.filter((c) => c.startsWith('resume'))).toEqual(['resume 1', 'resume 1']);
    consumer.grant(1, 2, roomFor(1_000));
    expect(fake.calls.filter((c) => c.startsWith('resume'))).toEqual(['resume 1', 'resume 1', 'resume 1']);
  });

  it('drops a stale batch or one of a partition that waits, counting it; a waiting partition is paused again', () => {
    const { consumer, fake, batches } = packing();
    fake.params.onBatch(batchOf(2, 0, 10, fake.calls));
    consumer.start(4, 0, 1, roomFor(1_000));
    fake.params.onBatch(batchOf(4, 0, 10, fake.calls, { stale: true }));
    expect(batches).toEqual([
      { partition: 2, epoch: NO_START, fetchedOffset: 0, fetched: 10, run: undefined, nextOffset: 0, paused: false },
      { partition: 4, epoch: NO_START, fetchedOffset: 0, fetched: 10, run: undefined, nextOffset: 0, paused: false },
    ]);
    // Only the partition that waits is paused; neither moved on.
    expect(fake.calls).toEqual(['batch pause 2', 'seek 4@0', 'resume 4']);
  });

  it('a batch of only control records moves the partition past them without a run', () => {
    const { consumer, fake, batches } = packing();
    consumer.start(0, 10, 1, roomFor(1_000));
    fake.params.onBatch(batchOf(0, 10, 0, fake.calls, { nextOffset: 12 }));
    expect(batches[0]).toMatchObject({ run: undefined, nextOffset: 12, paused: false, epoch: 1 });
    expect(fake.calls).toContain('took 0@12');
  });

  it("starts given while the consumer joins are the join's plan; the partitions not started stay paused; later starts are seeks", () => {
    const { consumer, fake } = packing((c, assigned) => {
      if (assigned.includes(0)) c.start(0, 42, 1, roomFor(1_000));
    });
    consumer.schedule(50, [0, 1]);
    expect(fake.calls).toEqual(['schedule 50 [0,1]']);
    expect(fake.params.onJoin([0, 1])).toEqual({ start: [{ partition: 0, offset: 42 }], pause: [1] });
    expect(fake.calls).toEqual(['schedule 50 [0,1]']);
    consumer.start(1, 7, 1, roomFor(1_000));
    expect(fake.calls.slice(1)).toEqual(['seek 1@7', 'resume 1']);
  });

  it('a join makes every assigned partition wait for a new start: a batch before it is not taken', () => {
    const { consumer, fake, batches } = packing();
    consumer.start(0, 0, 1, roomFor(1_000));
    fake.params.onJoin([0]);
    fake.params.onBatch(batchOf(0, 0, 5, fake.calls));
    expect(batches[0]).toMatchObject({ epoch: NO_START, run: undefined });
  });
});

/** A small deterministic generator (mulberry32), so a failing case names its seed. */
function random(seed: number): (n: number) => number {
  let a = seed >>> 0;
  return (n) => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return Math.floor((((t ^ (t >>> 14)) >>> 0) / 4294967296) * n);
  };
}

describe('PackingConsumer on random fetches, grants, reads and seeks', () => {
  it('hands every record to the buffer once and in order, and the buffer never holds more than its bound (3 000 random runs)', () => {
    for (let seed = 1; seed <= 3_000; seed++) {
      const rnd = random(seed);
      const total = 200 + rnd(800);
      const bound = 20 + rnd(300);
      const bounds = { bufferRecords: bound, bufferBytes: 1 << 30 } as KafkaSourceSettings;
      // The client's consumer: fetches from where it was told to go on, while not paused.
      let fetchAt = 0;
      let paused = true;
      let epoch = 0;
      const buffered: number[] = [];
      let next = 0; // the next offset the reader expects
      let bufferEnd = 0; // where the buffer ends (the feed's position)
      let waiting = false; // paused by the packing consumer, waiting for a grant
      const events: RunConsumerEvents = {
        onJoin: () => {},
        onBatch: (b) => {
          if (b.epoch !== epoch) return;
          const out: SourceRecord[] = [];
          if (b.run !== undefined) b.run.readInto(out, 0, b.run.count, decodeKafkaValue);
          for (const r of out) buffered.push(r.offset);
          bufferEnd = b.nextOffset;
          if (b.paused) waiting = true;
        },
        onFail: () => {},
      };
      let fake: FakeConsumer | undefined;
      const consumer = new PackingConsumer(
        (params) => {
          fake = new FakeConsumer(params);
          fake.seek = (_p, offset) => void (fetchAt = offset);
          fake.pause = () => void (paused = true);
          fake.resume = () => void (paused = false);
          return fake;
        },
        { settings: bounds, dataset: 'd', topic: 't', log: pino({ level: 'silent' }) },
        events,
      );
      const start = (at: number) => {
        epoch += 1;
        buffered.length = 0;
        bufferEnd = next = at;
        waiting = false;
        consumer.start(0, at, epoch, roomFor(bound));
      };
      start(0);
      for (let step = 0; step < 5_000 && next < total; step++) {
        const action = rnd(10);
        if (action < 5 && !paused && fetchAt < total) {
          const count = Math.min(1 + rnd(2 * bound), total - fetchAt);
          const calls: string[] = [];
          const batch = batchOf(0, fetchAt, count, calls);
          fake!.params.onBatch({ ...batch, took: (o) => void (fetchAt = o), pause: () => void (paused = true) });
        } else if (action < 9) {
          // A read of up to a random number of records, then a grant once half the bound is free.
          const n = Math.min(buffered.length, 1 + rnd(bound));
          const read = buffered.splice(0, n);
          for (const offset of read) if (offset !== next++) throw new Error(`seed ${seed}: read offset ${offset}, expected ${next - 1}`);
          if (waiting && bound - buffered.length >= Math.ceil(bound / 2)) {
            waiting = false;
            consumer.grant(0, epoch, roomFor(bound - buffered.length));
          }
        } else if (rnd(20) === 0) {
          // A read elsewhere: back to an earlier offset, the buffer dropped.
          start(Math.max(0, next - rnd(50)));
        }
        if (buffered.length > bound) throw new Error(`seed ${seed}: ${buffered.length} records buffered, bound ${bound}`);
        if (bufferEnd !== next + buffered.length) throw new Error(`seed ${seed}: the buffer ends at ${bufferEnd}, its records at ${next + buffered.length}`);
      }
      expect(next, `seed ${seed}: stalled at ${next} of ${total}`).toBe(total);
    }
  });
});
