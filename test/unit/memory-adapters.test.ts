// The in-memory Bus and MetaStore of embedded mode and the simulator: the shared contracts, plus
// the fault injection the simulator relies on (dropped, duplicated and delayed records, pending
// work, failing MetaStore writes).
import { describe, expect, it } from 'vitest';
import type { BusRecord } from '../../src/cluster/bus.js';
import { SimulatedClock } from '../../src/cluster/clock.js';
import { MemoryBus, type BusFault, type MemoryBusOptions } from '../../src/cluster/memory-bus.js';
import { datasetRef, epoch, incarnation, nodeId } from '../../src/core/ids.js';
import { MemoryMetaStore } from '../../src/store/memory-meta-store.js';
import { FencedError, MetaStoreUnavailableError } from '../../src/store/meta-store.js';
import { busContract } from '../contracts/bus-contract.js';
import type { ShardMapSnapshot } from '../../src/core/shard-map-snapshot.js';
import { ShardMapper } from '../../src/core/shard-mapper.js';
import { datasetConfig, ds1, formatOneMap, metaStoreContract, nodeA, shardMap } from '../contracts/meta-store-contract.js';

/** The fencing token the checkpoints of these tests are written with (one assignment throughout). */
const TOKEN = { epoch: 1, version: 1 };

busContract('MemoryBus', async (limits) => {
  const clock = new SimulatedClock();
  // Records overtake each other in a memory log only by the delay fault: writeInterleaved delays
  // each record by its place in the round robin.
  let plan: MemoryBusOptions['faults'];
  const bus = new MemoryBus(clock, { ...limits, faults: (topic, value, chunk) => plan?.(topic, value, chunk) ?? { kind: 'deliver' } });
  return {
    bus,
    peer: async () => bus,
    writeInterleaved: async (topic, values) => {
      const written = values.map((value, i) => {
        plan = (_t, _v, chunk) => ({ kind: 'delay', ms: 1 + (chunk?.index ?? 0) * values.length + i });
        return bus.produce(topic, value);
      });
      plan = undefined;
      clock.advance(1_000_000);
      return Promise.all(written);
    },
  };
});
metaStoreContract('MemoryMetaStore', async () => ({ store: new MemoryMetaStore() }));

/** Lets every queued microtask and promise continuation run (the memory bus delivers from microtasks). */
async function settle(): Promise<void> {
  for (let i = 0; i < 20; i += 1) await Promise.resolve();
}

/** Faults chosen by the record's value: `{ fault: ... }` values get that fault, the others are delivered. */
function byValue(topic: string, value: unknown): BusFault {
  void topic;
  return (value as { fault?: BusFault }).fault ?? { kind: 'deliver' };
}

describe('MemoryMetaStore and maps written before replicas', () => {
  it('hands a format 1 map back so that a recovering singleton rebuilds the same map', async () => {
    // An embedded cluster upgraded in place: its store still holds the map an older version wrote.
    const store = new MemoryMetaStore();
    await store.takeLease(nodeA, incarnation('a#1'), 0);
    await store.putShardMap(formatOneMap(ds1, 1, 3) as unknown as ShardMapSnapshot);
    const [map] = await store.shardMaps();
    expect(ShardMapper.fromSnapshot(map!).equals(ShardMapper.fromSnapshot(shardMap(ds1, 1, 3)))).toBe(true);
    expect(ShardMapper.fromSnapshot(map!).assignmentVersion(0)).toBe(0);
  });
});

describe('MemoryBus retention', () => {
  it('keeps the newest records of a topic, offsets unchanged; a subscription behind goes on from the oldest kept', async () => {
    // Small records and messages: the log must hold the chunks of the largest message.
    const bus = new MemoryBus(new SimulatedClock(), { retainRecords: 3, maxRecordBytes: 1024, maxMessageBytes: 3 * 1024 });
    for (let n = 0; n < 10; n += 1) await bus.produce('t', n);
    // Trimmed in chunks: at most twice the bound is ever held.
    expect(bus.topic('t').length).toBeLessThanOrEqual(6);
    expect(bus.topic('t').at(-1)).toEqual({ topic: 't', offset: 9, value: 9 });
    const seen: number[] = [];
    const sub = await bus.subscribe('t', 'late', (r) => void seen.push(r.offset), { start: 'earliest' });
    await new Promise((r) => setImmediate(r));
    expect(seen).toEqual(bus.topic('t').map((r) => r.offset));
    expect(seen.at(-1)).toBe(9);
    expect(bus.pending()).toBe(0);
    await sub.close();
    expect(() => new MemoryBus(new SimulatedClock(), { retainRecords: 0 })).toThrow(RangeError);
  });
});

describe('MemoryBus fault injection', () => {
  it('drop: produce resolves with -1 and no subscriber ever sees the record', async () => {
    const bus = new MemoryBus(new SimulatedClock(), { faults: byValue });
    const seen: unknown[] = [];
    await bus.subscribe('t', 'g', (r) => void seen.push(r.value));
    expect(await bus.produce('t', { n: 1, fault: { kind: 'drop' } })).toBe(-1);
    expect(await bus.produce('t', { n: 2 })).toBe(0);
    await settle();
    expect(seen).toEqual([{ n: 2 }]);
    expect(bus.topic('t').map((r) => r.value)).toEqual([{ n: 2 }]);
    expect(bus.pending()).toBe(0);
  });

  it('duplicate: the record is appended twice in a row and delivered twice; produce gives the first offset', async () => {
    const bus = new MemoryBus(new SimulatedClock(), { faults: byValue });
    const seen: [number, unknown][] = [];
    await bus.subscribe('t', 'g', (r) => void seen.push([r.offset, (r.value as { n: number }).n]));
    expect(await bus.produce('t', { n: 1, fault: { kind: 'duplicate' } })).toBe(0);
    expect(await bus.produce('t', { n: 2 })).toBe(2);
    await settle();
    expect(seen).toEqual([
      [0, 1],
      [1, 1],
      [2, 2],
    ]);
  });

  it('delay: the record is appended when the clock reaches the delay, after records produced meanwhile', async () => {
    const clock = new SimulatedClock();
    const bus = new MemoryBus(clock, { faults: byValue });
    const seen: unknown[] = [];
    await bus.subscribe('t', 'g', (r) => void seen.push((r.value as { n: number }).n));

    let delayedOffset: number | undefined;
    void bus.produce('t', { n: 1, fault: { kind: 'delay', ms: 100 } }).then((o) => (delayedOffset = o));
    expect(await bus.produce('t', { n: 2 })).toBe(0);
    await settle();
    expect(seen).toEqual([2]);
    expect(delayedOffset).toBeUndefined(); // not durable yet
    expect(bus.pending()).toBe(1); // the delayed record

    clock.advance(99);
    await settle();
    expect(seen).toEqual([2]);

    clock.advance(1);
    await settle();
    expect(delayedOffset).toBe(1);
    expect(seen).toEqual([2, 1]);
    expect(bus.pending()).toBe(0);
  });

  it('the fault function sees each produced record once, and the same fault sequence gives the same log', async () => {
    async function runWith(seed: number): Promise<readonly BusRecord[]> {
      const clock = new SimulatedClock();
      let state = seed;
      const calls: string[] = [];
      const faults = (topic: string, value: unknown): BusFault => {
        calls.push(`${topic}:${String(value)}`);
        state = (Math.imul(state, 1103515245) + 12345) >>> 0; // a seeded LCG
        const kinds: BusFault[] = [{ kind: 'deliver' }, { kind: 'drop' }, { kind: 'duplicate' }, { kind: 'delay', ms: 10 }];
        return kinds[(state >>> 16) % 4]!;
      };
      const bus = new MemoryBus(clock, { faults });
      const produced: Promise<number>[] = [];
      for (let n = 0; n < 20; n += 1) {
        produced.push(bus.produce('t', n));
        clock.advance(3);
      }
      clock.advance(100);
      await Promise.all(produced);
      expect(calls).toEqual(Array.from({ length: 20 }, (_, n) => `t:${n}`));
      return bus.topic('t');
    }
    const a = await runWith(7);
    expect(await runWith(7)).toEqual(a);
    expect(a.map((r) => r.value)).not.toEqual(Array.from({ length: 20 }, (_, n) => n)); // faults did change the log
  });

  it('pending counts records not yet handled by open subscriptions, including the one in its handler', async () => {
    const bus = new MemoryBus(new SimulatedClock());
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const handled: number[] = [];
    const sub = await bus.subscribe('t', 'slow', async (r) => {
      if (r.offset === 0) await gate;
      handled.push(r.offset);
    });
    expect(bus.pending()).toBe(0);
    for (let n = 0; n < 3; n += 1) await bus.produce('t', n);
    await settle();
    expect(handled).toEqual([]);
    expect(bus.pending()).toBe(3); // one in the handler, two waiting

    const other = await bus.subscribe('t', 'fast', () => {}, { start: 'earliest' });
    expect(bus.pending()).toBe(6);
    await settle();
    expect(bus.pending()).toBe(3); // the fast group is done

    release();
    await settle();
    expect(handled).toEqual([0, 1, 2]);
    expect(bus.pending()).toBe(0);

    await bus.produce('t', 3);
    await sub.close();
    await other.close();
    expect(bus.pending()).toBe(0); // closed subscriptions have nothing pending
  });

  it('never delivers inside produce or subscribe: delivery waits for a microtask', async () => {
    const bus = new MemoryBus(new SimulatedClock());
    const seen: unknown[] = [];
    await bus.produce('t', 'a');
    const subscribing = bus.subscribe('t', 'g', (r) => void seen.push(r.value), { start: 'earliest' });
    const producing = bus.produce('t', 'b');
    expect(seen).toEqual([]);
    await subscribing;
    await producing;
    await settle();
    expect(seen).toEqual(['a', 'b']);
  });

  it('keeps committed positions per topic and group', async () => {
    const bus = new MemoryBus(new SimulatedClock());
    const sub = await bus.subscribe('t', 'g', () => {});
    await sub.commit(7);
    expect(bus.committedPosition('t', 'g')).toBe(7);
    expect(bus.committedPosition('t', 'other')).toBeUndefined();
    expect(bus.committedPosition('u', 'g')).toBeUndefined();
    await expect(sub.commit(-1)).rejects.toThrow(RangeError);
    expect(bus.committedPosition('t', 'g')).toBe(7);
  });
});

describe('MemoryMetaStore fault injection', () => {
  const ds1 = datasetRef('ds1');
  const a = nodeId('a');
  const incA = incarnation('a#1');

  it('failWrites(n): the next n writes reject with a retriable MetaStoreUnavailableError and change nothing; reads still work', async () => {
    const store = new MemoryMetaStore();
    store.failWrites(2);
    const first = await store.takeLease(a, incA, 0).catch((e: unknown) => e);
    expect(first).toBeInstanceOf(MetaStoreUnavailableError);
    expect(first).toMatchObject({ code: 'METASTORE_UNAVAILABLE', retriable: true });
    expect(await store.readLease()).toBeUndefined();
    await expect(store.writeCheckpoint(ds1, 0, nodeA, 'sink', 5, TOKEN)).rejects.toBeInstanceOf(MetaStoreUnavailableError);
    expect((await store.readCheckpoints(ds1, 0)).copies.size).toBe(0);

    // The third write goes through.
    expect(await store.takeLease(a, incA, 0)).toEqual({ epoch: 1, node: a, incarnation: incA, renewal: 0 });
    await store.putDataset(datasetConfig(ds1), epoch(1));
    expect(await store.datasets()).toEqual([datasetConfig(ds1)]);
  });

  it('an injected failure comes before fencing: a fenced write that fails is unavailable, then fenced', async () => {
    const store = new MemoryMetaStore();
    await store.takeLease(a, incA, 0);
    await store.takeLease(a, incA, 1);
    store.failWrites(1);
    await expect(store.putShardMap(shardMap(ds1, 1, 1))).rejects.toBeInstanceOf(MetaStoreUnavailableError);
    await expect(store.putShardMap(shardMap(ds1, 1, 1))).rejects.toBeInstanceOf(FencedError);
  });

  it('the faults option fails exactly the operations it picks, reads included', async () => {
    const asked: string[] = [];
    const store = new MemoryMetaStore({
      faults: (operation) => {
        asked.push(operation);
        return operation === 'readLease' || operation === 'putCooldown';
      },
    });
    await expect(store.readLease()).rejects.toBeInstanceOf(MetaStoreUnavailableError);
    expect(await store.takeLease(a, incA, 0)).toBeDefined();
    await expect(store.putCooldown({ dataset: ds1, shard: 0, reassignedAt: 1 }, epoch(1))).rejects.toBeInstanceOf(MetaStoreUnavailableError);
    expect(await store.cooldowns()).toEqual([]);
    expect(asked).toEqual(['readLease', 'takeLease', 'putCooldown', 'cooldowns']);
  });
});
