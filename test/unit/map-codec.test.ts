// The compact encoding of maps and events (src/core/map-codec.ts) carries every map and every
// change on the bus and in the MetaStore: what is encoded must come back equal, through JSON, for
// any map the mapper can make; anything else must be refused with a place, never thrown or trusted.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { datasetRef, epoch, nodeId, shardNum, type NodeId } from '../../src/core/ids.js';
import { COMPACT_MAP_FORMAT, decodeEvents, decodeRecords, decodeSnapshot, encodeEvents, encodeRecords, encodeSnapshot } from '../../src/core/map-codec.js';
import { parseShardMapSnapshot } from '../../src/core/shard-map-snapshot.js';
import { ShardMapper } from '../../src/core/shard-mapper.js';
import { type ShardEvent, ShardEvents } from '../../src/core/status.js';

const ds = datasetRef('metrics');
const viaJson = <T>(v: T): unknown => JSON.parse(JSON.stringify(v));

/** Node ids from short to the longest allowed, some of them alike. */
const nodes: NodeId[] = ['a', 'node-2', 'ingest-17.prod-eu-west-1.example.internal', 'n'.repeat(128), 'x_y.z-9'].map(nodeId);

/** Any event the mapper may be asked to apply (some of which it refuses). */
const eventArb = (numShards: number): fc.Arbitrary<ShardEvent> =>
  fc
    .tuple(fc.integer({ min: 0, max: 10 }), fc.integer({ min: 0, max: numShards - 1 }), fc.constantFrom(...nodes), fc.integer({ min: 0, max: 100 }), fc.string({ maxLength: 20 }))
    .map(([kind, s, node, pct, message]) => {
      const shard = shardNum(s);
      switch (kind) {
        case 0: return ShardEvents.assignmentStarted(ds, shard, node);
        case 1: return ShardEvents.recoveryInProgress(ds, shard, node, pct);
        case 2: return ShardEvents.ingestionStarted(ds, shard, node);
        case 3: return ShardEvents.ingestionError(ds, shard, node, message);
        case 4: return ShardEvents.ingestionStopped(ds, shard, node);
        case 5: return ShardEvents.shardDown(ds, shard, node);
        case 6: return ShardEvents.copyAdded(ds, shard, node);
        case 7: return ShardEvents.leaving(ds, shard, node);
        case 8: return ShardEvents.leavingCancelled(ds, shard, node);
        case 9: return ShardEvents.left(ds, shard, node);
        default: return ShardEvents.copyDown(ds, shard, node);
      }
    });

/** A map the mapper made from random events, and the events it accepted. */
const mapArb = fc.constantFrom(1, 2, 8, 64).chain((numShards) =>
  fc.array(eventArb(numShards), { maxLength: 120 }).map((events) => {
    const m = new ShardMapper(numShards, ds);
    const applied = events.filter((e) => m.updateFromEvent(e).ok);
    return { m, applied };
  }),
);

describe('map codec', () => {
  it('a snapshot comes back equal through JSON, and equal to what parseShardMapSnapshot reads of the old format', () => {
    fc.assert(
      fc.property(mapArb, fc.nat(1000), ({ m }, e) => {
        const snapshot = m.toSnapshot(epoch(e));
        const back = decodeSnapshot(viaJson(encodeSnapshot(snapshot)));
        if (!back.ok) throw back.error;
        expect(back.value).toEqual(snapshot);
        const old = parseShardMapSnapshot(viaJson(snapshot));
        if (!old.ok) throw old.error;
        expect(back.value).toEqual(old.value);
        expect(ShardMapper.fromSnapshot(back.value).equals(m)).toBe(true);
      }),
      { numRuns: 300 },
    );
  });

  it('records of any slice come back equal', () => {
    fc.assert(
      fc.property(mapArb, fc.nat(), fc.nat(), ({ m }, a, b) => {
        const shards = m.toSnapshot(epoch(1)).shards;
        const from = a % shards.length;
        const slice = shards.slice(from, from + (b % (shards.length - from + 1)));
        const back = decodeRecords(viaJson(encodeRecords(slice)), slice.length);
        if (!back.ok) throw back.error;
        expect(back.value).toEqual(slice);
      }),
      { numRuns: 200 },
    );
  });

  it('events come back equal, and replaying them rebuilds the map', () => {
    fc.assert(
      fc.property(mapArb, ({ m, applied }) => {
        const back = decodeEvents(viaJson(encodeEvents(applied)), ds, m.numShards);
        if (!back.ok) throw back.error;
        expect(back.value).toEqual(applied);
        const replayed = new ShardMapper(m.numShards, ds);
        for (const e of back.value) expect(replayed.updateFromEvent(e).ok).toBe(true);
        expect(replayed.equals(m)).toBe(true);
      }),
      { numRuns: 200 },
    );
  });

  it('writes each node id once: 16 384 shards × 3 copies with long node ids are a fraction of the plain JSON', () => {
    const m = new ShardMapper(16_384, ds);
    const long = [0, 1, 2].map((i) => nodeId(`ingest-${i}.prod-eu-west-1.example.internal`));
    for (let s = 0; s < 16_384; s++) {
      m.updateFromEvent(ShardEvents.ingestionStarted(ds, shardNum(s), long[0]!));
      for (const n of long.slice(1)) {
        m.updateFromEvent(ShardEvents.copyAdded(ds, shardNum(s), n));
        m.updateFromEvent(ShardEvents.ingestionStarted(ds, shardNum(s), n));
      }
    }
    const snapshot = m.toSnapshot(epoch(1));
    const plain = JSON.stringify(snapshot).length;
    const compact = JSON.stringify(encodeSnapshot(snapshot)).length;
    expect(compact * 5).toBeLessThan(plain);
    const back = decodeSnapshot(JSON.parse(JSON.stringify(encodeSnapshot(snapshot))));
    expect(back.ok && ShardMapper.fromSnapshot(back.value).equals(m)).toBe(true);
  });

  it('refuses malformed input with the place it is wrong, never throws', () => {
    const m = new ShardMapper(4, ds);
    m.updateFromEvent(ShardEvents.ingestionStarted(ds, shardNum(1), nodes[0]!));
    m.updateFromEvent(ShardEvents.recoveryInProgress(ds, shardNum(2), nodes[1]!, 40));
    const good = viaJson(encodeSnapshot(m.toSnapshot(epoch(3)))) as Record<string, unknown> & { records: unknown[][]; nodes: string[] };
    const refusal = (raw: unknown): string => {
      const r = decodeSnapshot(raw);
      if (r.ok) throw new Error(`accepted ${JSON.stringify(raw)}`);
      expect(r.error.code).toBe('INVALID_SNAPSHOT');
      return r.error.message;
    };
    expect(refusal({ ...good, numShards: 8 })).toMatch(/4 records where 8 were expected/);
    expect(refusal({ ...good, numShards: 3 })).toMatch(/numShards/);
    expect(refusal({ ...good, epoch: -1 })).toMatch(/epoch/);
    expect(refusal({ ...good, nodes: ['ok', 'not ok'] })).toMatch(/nodes\[1\]/);
    expect(refusal({ ...good, records: good.records.map((r, i) => (i === 1 ? ['A', [[5, 'A', 'A']]] : r)) })).toMatch(/records\[1\]\.copies\[0\]\.node/);
    expect(refusal({ ...good, records: good.records.map((r, i) => (i === 1 ? ['A', [[0, 'A', 'A'], [0, 'I', 'N']]] : r)) })).toMatch(/two copies/);
    expect(refusal({ ...good, records: good.records.map((r, i) => (i === 1 ? ['A', [[0, 'Q', 'A']]] : r)) })).toMatch(/placement/);
    expect(refusal({ ...good, records: good.records.map((r, i) => (i === 2 ? [['R', 40], [[1, 'I', ['R', 140]]]] : r)) })).toMatch(/0\.\.100/);
    expect(refusal({ ...good, records: good.records.map((r, i) => (i === 1 ? ['D', [[0, 'A', 'A']]] : r)) })).toMatch(/differs from its owner/);
    expect(refusal({ ...good, records: good.records.map((r, i) => (i === 0 ? ['constructor', []] : r)) })).toMatch(/unknown status/);
    expect(refusal({ ...good, assignmentVersions: [0, 1] })).toMatch(/assignmentVersions/);
    expect(refusal({ ...good, dataset: 'no spaces' })).toMatch(/dataset/);
    expect(decodeSnapshot({ ...good, format: 9 }).ok).toBe(false);
    // Any JSON at all: a result, never an exception.
    fc.assert(fc.property(fc.jsonValue(), (v) => {
      expect(decodeSnapshot(v).ok).toBe(false);
      expect(decodeSnapshot({ ...good, records: v }).ok).toBe(false);
      expect(decodeEvents(v, ds, 4).ok).toBe(typeof v === 'object' && v !== null && Array.isArray((v as { events?: unknown }).events) && (v as { events: unknown[] }).events.length === 0 && Array.isArray((v as { nodes?: unknown }).nodes) && (v as { nodes: unknown[] }).nodes.length === 0);
    }), { numRuns: 500 });
    expect(good.format).toBe(COMPACT_MAP_FORMAT);
  });

  it('refuses events out of range or of an unknown type', () => {
    const enc = viaJson(encodeEvents([ShardEvents.ingestionStarted(ds, shardNum(3), nodes[0]!), ShardEvents.recoveryInProgress(ds, shardNum(1), nodes[1]!, 50)])) as { nodes: string[]; events: unknown[][] };
    const msg = (raw: unknown, numShards = 4) => {
      const r = decodeEvents(raw, ds, numShards);
      return r.ok ? 'accepted' : r.error.message;
    };
    expect(msg(enc)).toBe('accepted');
    expect(msg(enc, 2)).toMatch(/events\[0\]\.shard/);
    expect(msg({ ...enc, events: [['Z', 0, 0]] })).toMatch(/unknown event/);
    expect(msg({ ...enc, events: [['R', 0, 0, 101]] })).toMatch(/0\.\.100/);
    expect(msg({ ...enc, events: [['E', 0, 0]] })).toMatch(/needs its message/);
    expect(msg({ ...enc, events: [['I', 0, 0, 'extra']] })).toMatch(/no detail/);
    expect(msg({ ...enc, events: [['I', 0, 2]] })).toMatch(/node index 2/);
  });
});
