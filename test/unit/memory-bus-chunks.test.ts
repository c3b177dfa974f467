// Chunked messages on the memory bus, with the simulator's faults applied to single chunks: a
// dropped, duplicated or delayed chunk, retention that drops the first chunks of a message, the
// give-up timeout on a simulated clock, and the limits as options (also through EmbeddedCluster).
import { describe, expect, it } from 'vitest';
import { IncompleteMessageError, MessageTooLargeError, type BusRecord } from '../../src/cluster/bus.js';
import { SimulatedClock } from '../../src/cluster/clock.js';
import { MemoryBus, type BusFault, type MemoryBusOptions, type MemoryChunk } from '../../src/cluster/memory-bus.js';
import { EmbeddedCluster } from '../../src/embedded/embedded-cluster.js';

const RECORD = 1024;
const TIMEOUT = 5_000;
const limits = { maxRecordBytes: RECORD, maxMessageBytes: 16 * RECORD, chunkTimeoutMs: TIMEOUT } as const;

/** Lets every queued microtask and promise continuation run (the memory bus delivers from microtasks). */
async function settle(): Promise<void> {
  for (let i = 0; i < 20; i += 1) await Promise.resolve();
}

/** A value of `chunks` chunks at `limits` (its JSON a little over `chunks - 1` records). */
function message(name: string, chunks: number): { name: string; pad: string } {
  return { name, pad: 'x'.repeat((chunks - 1) * RECORD) };
}

/** A bus whose faults hit the chunks `pick` chooses; every other record is delivered. */
function faulty(pick: (value: unknown, chunk: MemoryChunk | undefined) => BusFault | undefined, options: MemoryBusOptions = {}) {
  const clock = new SimulatedClock();
  const bus = new MemoryBus(clock, { ...limits, ...options, faults: (_topic, value, chunk) => pick(value, chunk) ?? { kind: 'deliver' } });
  const delivered: BusRecord[] = [];
  const errors: [unknown, BusRecord][] = [];
  const subscribe = (start: 'earliest' | 'latest' = 'earliest', handler?: (r: BusRecord) => Promise<void> | void) =>
    bus.subscribe(
      't',
      'g',
      async (r) => {
        delivered.push(r);
        await handler?.(r);
      },
      { start, onError: (e, r) => errors.push([e, r]) },
    );
  return { clock, bus, delivered, errors, subscribe };
}

describe('MemoryBus chunked messages under faults', () => {
  it('a dropped chunk: nothing is delivered, produce resolves -1, and onError hears INCOMPLETE_MESSAGE once chunkTimeoutMs passed', async () => {
    const { clock, bus, delivered, errors, subscribe } = faulty((_v, chunk) => (chunk?.index === 1 ? { kind: 'drop' } : undefined));
    const sub = await subscribe();
    const value = message('m', 3);
    expect(await bus.produce('t', value)).toBe(-1);
    expect(bus.topic('t').map((r) => r.chunk && [r.chunk.index, r.chunk.count])).toEqual([
      [0, 3],
      [2, 3],
    ]);
    await bus.produce('t', 'after');
    await settle();
    expect(delivered.map((r) => r.value)).toEqual(['after']);
    await sub.commit(10);
    expect(bus.committedPosition('t', 'g')).toBe(0); // held at the incomplete message's first chunk

    clock.advance(TIMEOUT - 1);
    await settle();
    expect(errors).toEqual([]);
    clock.advance(1);
    await settle();
    expect(errors).toHaveLength(1);
    const [error, record] = errors[0]!;
    expect(error).toBeInstanceOf(IncompleteMessageError);
    expect(error).toMatchObject({ code: 'INCOMPLETE_MESSAGE', retriable: false, topic: 't', messageId: '0', chunksSeen: 2, chunkCount: 3, reason: 'timeout' });
    expect((error as Error).message).toMatch(/^message 0 on t given up with 2 of 3 chunks: the others did not arrive within chunkTimeoutMs/);
    expect(record).toEqual({ topic: 't', offset: 0, value: null });
    expect(delivered.map((r) => r.value)).toEqual(['after']);
    await sub.commit(10);
    expect(bus.committedPosition('t', 'g')).toBe(10); // given up: no longer holds commits back
    expect(clock.pendingTimers).toBe(0);
  });

  it('a duplicated chunk: the message is delivered once, at the offset of the chunk that completed it', async () => {
    const { clock, bus, delivered, errors, subscribe } = faulty((_v, chunk) => (chunk?.index === 0 || chunk?.index === 2 ? { kind: 'duplicate' } : undefined));
    await subscribe();
    const value = message('m', 3);
    expect(await bus.produce('t', value)).toBe(3); // 0 0' 1 2 2': the last chunk's first copy
    await bus.produce('t', 'after');
    await settle();
    expect(delivered).toEqual([
      { topic: 't', offset: 3, value },
      { topic: 't', offset: 5, value: 'after' },
    ]);
    // The copy of the last chunk, read after the message was delivered, starts nothing that could time out.
    clock.advance(2 * TIMEOUT);
    await settle();
    expect(errors).toEqual([]);
    expect(clock.pendingTimers).toBe(0);
  });

  it('a delayed chunk overtaken by the others: delivered once, whole, when it arrives; records produced meanwhile come first', async () => {
    const { clock, bus, delivered, errors, subscribe } = faulty((_v, chunk) => (chunk?.index === 0 ? { kind: 'delay', ms: 100 } : undefined));
    await subscribe();
    const value = message('m', 3);
    let offset: number | undefined;
    void bus.produce('t', value).then((o) => (offset = o));
    await bus.produce('t', 'meanwhile');
    await settle();
    expect(delivered.map((r) => r.value)).toEqual(['meanwhile']);
    expect(bus.pending()).toBe(1); // the delayed chunk
    clock.advance(100);
    await settle();
    expect(offset).toBe(1); // the last chunk's offset, though chunk 0 completed the message
    expect(delivered).toEqual([
      { topic: 't', offset: 2, value: 'meanwhile' },
      { topic: 't', offset: 3, value },
    ]);
    expect(delivered[1]!.value).toBe(bus.topic('t')[0]!.value); // the one frozen copy, not a re-parse
    expect(Object.isFrozen(delivered[1]!.value)).toBe(true);
    expect(errors).toEqual([]);
  });

  it('retention that drops the first chunks of a message: given up after the timeout, never delivered', async () => {
    const { clock, bus, delivered, errors, subscribe } = faulty(() => undefined, { retainRecords: 4, maxMessageBytes: 4 * RECORD });
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    await subscribe('earliest', (r) => (r.value === 'first' ? gate : undefined));
    await bus.produce('t', 'first');
    await settle(); // the subscription is in the handler of 'first'
    const value = message('m', 4);
    for (const v of [value, 'a', 'b', 'c']) await bus.produce('t', v);
    expect(bus.topic('t').map((r) => r.offset)).toEqual([4, 5, 6, 7]); // the message's last chunk and a, b, c
    release();
    await settle();
    expect(delivered.map((r) => r.value)).toEqual(['first', 'a', 'b', 'c']);
    clock.advance(TIMEOUT);
    await settle();
    expect(errors.map(([e, r]) => [(e as IncompleteMessageError).chunksSeen, (e as IncompleteMessageError).chunkCount, r.offset])).toEqual([[1, 4, 4]]);
    expect(delivered.map((r) => r.value)).toEqual(['first', 'a', 'b', 'c']);
  });

  it('a chunk that arrives after its message was given up is ignored: no delivery, no second report', async () => {
    const { clock, bus, delivered, errors, subscribe } = faulty((_v, chunk) => (chunk?.index === 2 ? { kind: 'delay', ms: TIMEOUT + 100 } : undefined));
    await subscribe();
    void bus.produce('t', message('m', 3));
    await settle(); // chunks 0 and 1 read
    clock.advance(TIMEOUT);
    await settle();
    expect(errors).toHaveLength(1);
    clock.advance(100); // the late chunk
    await settle();
    clock.advance(10 * TIMEOUT);
    await settle();
    expect(delivered).toEqual([]);
    expect(errors).toHaveLength(1);
  });

  it('time in the handler does not count: a message whose next chunk waits behind a slow handler is delivered', async () => {
    const { clock, bus, delivered, errors, subscribe } = faulty((_v, chunk) => (chunk?.index === 1 ? { kind: 'delay', ms: 1 } : undefined));
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    await subscribe('earliest', (r) => (r.value === 'slow' ? gate : undefined));
    const value = message('m', 2);
    void bus.produce('t', value); // chunk 0 now, chunk 1 after 'slow'
    await bus.produce('t', 'slow');
    clock.advance(1);
    await settle(); // read chunk 0, now in the handler of 'slow'
    clock.advance(3 * TIMEOUT);
    await settle();
    release();
    await settle();
    expect(errors).toEqual([]);
    expect(delivered.map((r) => r.value)).toEqual(['slow', value]);
  });

  it('gives up the oldest incomplete messages once they hold more than twice maxMessageBytes', async () => {
    const last = (chunk: MemoryChunk | undefined) => chunk !== undefined && chunk.index === chunk.count - 1;
    const { bus, delivered, errors, subscribe } = faulty((_v, chunk) => (last(chunk) ? { kind: 'drop' } : undefined), { maxMessageBytes: 4 * RECORD });
    await subscribe();
    for (const name of ['a', 'b', 'c']) await bus.produce('t', message(name, 4)); // 3 KiB held each; 8 KiB allowed
    await settle();
    expect(errors.map(([e]) => [(e as IncompleteMessageError).messageId, (e as IncompleteMessageError).reason])).toEqual([['0', 'memory']]);
    expect(delivered).toEqual([]);
  });

  it('the fault function is called once per chunk, with its place in the message', async () => {
    const seen: (MemoryChunk | undefined)[] = [];
    const bus = new MemoryBus(new SimulatedClock(), {
      ...limits,
      faults: (_t, _v, chunk) => {
        seen.push(chunk);
        return { kind: 'deliver' };
      },
    });
    await bus.produce('t', 'small');
    const value = { pad: 'é'.repeat(RECORD) }; // 2 bytes each: 2 KiB and the JSON around it
    await bus.produce('t', value);
    const bytes = Buffer.byteLength(JSON.stringify(value));
    expect(seen).toEqual([
      undefined,
      { id: '0', index: 0, count: 3, bytes: RECORD },
      { id: '0', index: 1, count: 3, bytes: RECORD },
      { id: '0', index: 2, count: 3, bytes: bytes - 2 * RECORD },
    ]);
  });
});

describe('MemoryBus limits', () => {
  it('are validated, naming the option', () => {
    const clock = new SimulatedClock();
    expect(new MemoryBus(clock).limits).toEqual({ maxRecordBytes: 262_144, maxMessageBytes: 67_108_864, chunkTimeoutMs: 30_000 });
    expect(() => new MemoryBus(clock, { maxRecordBytes: 1023 })).toThrow(
      'MemoryBus option maxRecordBytes must be a whole number from 1024 to 268435456, got 1023',
    );
    expect(() => new MemoryBus(clock, { maxRecordBytes: 4096, maxMessageBytes: 2048 })).toThrow(
      'MemoryBus option maxRecordBytes (4096) must be at most maxMessageBytes (2048)',
    );
    expect(() => new MemoryBus(clock, { maxMessageBytes: 2 ** 30 })).toThrow(
      'MemoryBus option maxMessageBytes must be a whole number from 1024 to 268435456, got 1073741824',
    );
    expect(() => new MemoryBus(clock, { chunkTimeoutMs: 0 })).toThrow('MemoryBus option chunkTimeoutMs must be a whole number from 1 to 2147483647, got 0');
    expect(() => new MemoryBus(clock, { maxRecordBytes: 1024, maxMessageBytes: 1024 * 3_000 })).toThrow(
      'MemoryBus option retainRecords (2000) must hold the chunks of the largest message: maxMessageBytes / maxRecordBytes = 3000',
    );
  });

  it('measures a value by its UTF-8 JSON bytes, and a value whose loose bound passes the limit but whose JSON fits is one record', async () => {
    const bus = new MemoryBus(new SimulatedClock(), limits);
    // 200 control characters: JSON writes each as \u00XX, six bytes: 1202 bytes, two records.
    await bus.produce('t', '\u0001'.repeat(200));
    // 500 one-byte characters: bounded at 3002 bytes, 502 in fact: one record.
    await bus.produce('t', 'x'.repeat(500));
    // Exactly maxRecordBytes is an ordinary record; one byte more is two chunks.
    await bus.produce('t', 'x'.repeat(RECORD - 2));
    await bus.produce('t', 'x'.repeat(RECORD - 1));
    expect(bus.topic('t').map((r) => r.chunk?.count ?? 'record')).toEqual([2, 2, 'record', 'record', 2, 2]);
  });

  it('EmbeddedCluster passes its bus limits to its MemoryBus', async () => {
    const cluster = new EmbeddedCluster({ clock: new SimulatedClock(), nodes: ['n1'], metrics: false, bus: { maxRecordBytes: 2048, maxMessageBytes: 8192 } });
    expect(cluster.bus.limits).toMatchObject({ maxRecordBytes: 2048, maxMessageBytes: 8192 });
    await cluster.bus.produce('t', 'x'.repeat(3_000));
    expect(bus(cluster).map((r) => r.chunk?.index)).toEqual([0, 1]);
    await expect(cluster.bus.produce('t', 'x'.repeat(9_000))).rejects.toBeInstanceOf(MessageTooLargeError);
    expect(new EmbeddedCluster({ clock: new SimulatedClock(), nodes: ['n1'], metrics: false }).bus.limits.maxRecordBytes).toBe(262_144);
  });
});

function bus(cluster: EmbeddedCluster): readonly { readonly chunk?: MemoryChunk }[] {
  return cluster.bus.topic('t');
}
