// The compact encoding of maps and events (src/core/map-codec.ts) carries every map and every
// change on the bus and in the MetaStore: what is encoded must come back equal, through JSON, for
// any map the mapper can make; anything else must be refused with a place, never thrown or trusted.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { datasetRef, epoch, nodeId, shardNum, type NodeId } from '../../src/core/ids.js';
import {
  COMPACT_MAP_FORMAT,
  decodeEvents,
  decodeRecords,
  decodeSnapshot,
  encodeEvents,
  encodeRecords,
  encodeSnapshot,
  eventsDecoding,
  PACKED_MAP_FORMAT,
  packSnapshot,
  snapshotPacking,
} from '../../src/core/map-codec.js';
import { packEvents } from '../../src/core/packed-events.js';
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
    .tuple(
      fc.integer({ min: 0, max: 10 }),
      fc.integer({ min: 0, max: numShards - 1 }),
      fc.constantFrom(...nodes),
      fc.integer({ min: 0, max: 100 }),
      fc.string({ maxLength: 20 }),
    )
    .map(([kind, s, node, pct, message]) => {
      const shard = shardNum(s);
      switch (kind) {
        case 0:
          return ShardEvents.assignmentStarted(ds, shard, node);
        case 1:
          return ShardEvents.recoveryInProgress(ds, shard, node, pct);
        case 2:
          return ShardEvents.ingestionStarted(ds, shard, node);
        case 3:
          return ShardEvents.ingestionError(ds, shard, node, message);
        case 4:
          return ShardEvents.ingestionStopped(ds, shard, node);
        case 5:
          return ShardEvents.shardDown(ds, shard, node);
        case 6:
          return ShardEvents.copyAdded(ds, shard, node);
        case 7:
          return ShardEvents.leaving(ds, shard, node);
        case 8:
          return ShardEvents.leavingCancelled(ds, shard, node);
        case 9:
          return ShardEvents.left(ds, shard, node);
        default:
          return ShardEvents.copyDown(ds, shard, node);
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

  it('a packed snapshot (format 4) comes back equal through JSON: error messages of any text, fractional progress, last nodes', () => {
    const messageArb = fc.oneof(fc.string({ maxLength: 30 }), fc.constantFrom('a;b,c', 'E0', ';', ',', '"quoted"\n', ''));
    fc.assert(
      fc.property(
        mapArb,
        fc.nat(1000),
        fc.array(fc.tuple(fc.nat(), fc.constantFrom(...nodes), messageArb, fc.double({ min: 0, max: 100, noNaN: true })), { maxLength: 6 }),
        ({ m }, e, extra) => {
          // Statuses the random events rarely reach: errors with awkward messages, fractional progress.
          for (const [s, node, message, pct] of extra) {
            const shard = shardNum(s % m.numShards);
            m.updateFromEvent(s % 2 === 0 ? ShardEvents.ingestionError(ds, shard, node, message) : ShardEvents.recoveryInProgress(ds, shard, node, pct));
          }
          const snapshot = m.toSnapshot(epoch(e));
          const packed = viaJson(packSnapshot(snapshot)) as { format: number };
          expect(packed.format).toBe(PACKED_MAP_FORMAT);
          const back = decodeSnapshot(packed);
          if (!back.ok) throw back.error;
          expect(back.value).toEqual(snapshot);
          expect(ShardMapper.fromSnapshot(back.value).equals(m)).toBe(true);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('packs a map and decodes events in steps of a thousand, each ending as the whole call does', () => {
    const m = new ShardMapper(4096, ds);
    const events: ShardEvent[] = [];
    for (let s = 0; s < 4096; s++)
      events.push(
        ShardEvents.ingestionStarted(ds, shardNum(s), nodes[s % nodes.length]!),
        ShardEvents.copyAdded(ds, shardNum(s), nodes[(s + 1) % nodes.length]!),
      );
    for (const e of events) expect(m.updateFromEvent(e).ok).toBe(true);
    const stepsOf = <T>(g: Generator<void, T, void>): { steps: number; value: T } => {
      let steps = 0;
      for (;;) {
        const next = g.next();
        if (next.done) return { steps, value: next.value };
        steps++;
      }
    };
    const snapshot = m.toSnapshot(epoch(2));
    const packing = stepsOf(snapshotPacking(snapshot));
    expect(packing.steps).toBeGreaterThanOrEqual(3);
    expect(packing.value).toEqual(packSnapshot(snapshot));
    const encoded = viaJson(encodeEvents(events));
    const decoding = stepsOf(eventsDecoding(encoded, ds, 4096));
    expect(decoding.steps).toBeGreaterThanOrEqual(7);
    expect(decoding.value).toEqual(decodeEvents(encoded, ds, 4096));
    expect(decoding.value.ok && decoding.value.value).toEqual(events);
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

  it('events come back equal, compact or packed, and replaying them rebuilds the map', () => {
    fc.assert(
      fc.property(mapArb, ({ m, applied }) => {
        const back = decodeEvents(viaJson(encodeEvents(applied)), ds, m.numShards);
        if (!back.ok) throw back.error;
        expect(back.value).toEqual(applied);
        // Packed (format 4) too, error messages of any text included.
        const unpacked = decodeEvents(viaJson(packEvents(applied)), ds, m.numShards);
        if (!unpacked.ok) throw unpacked.error;
        expect(unpacked.value).toEqual(applied);
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
    // Packed: one string per shard, under half the compact bytes.
    const packed = JSON.stringify(packSnapshot(snapshot));
    expect(packed.length * 2).toBeLessThan(compact);
    const unpacked = decodeSnapshot(JSON.parse(packed));
    expect(unpacked.ok && ShardMapper.fromSnapshot(unpacked.value).equals(m)).toBe(true);
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
    expect(
      refusal({
        ...good,
        records: good.records.map((r, i) =>
          i === 1
            ? [
                'A',
                [
                  [0, 'A', 'A'],
                  [0, 'I', 'N'],
                ],
              ]
            : r,
        ),
      }),
    ).toMatch(/two copies/);
    expect(refusal({ ...good, records: good.records.map((r, i) => (i === 1 ? ['A', [[0, 'Q', 'A']]] : r)) })).toMatch(/placement/);
    expect(refusal({ ...good, records: good.records.map((r, i) => (i === 2 ? [['R', 40], [[1, 'I', ['R', 140]]]] : r)) })).toMatch(/0\.\.100/);
    expect(refusal({ ...good, records: good.records.map((r, i) => (i === 1 ? ['D', [[0, 'A', 'A']]] : r)) })).toMatch(/differs from its owner/);
    expect(refusal({ ...good, records: good.records.map((r, i) => (i === 0 ? ['constructor', []] : r)) })).toMatch(/unknown status/);
    expect(refusal({ ...good, assignmentVersions: [0, 1] })).toMatch(/assignmentVersions/);
    expect(refusal({ ...good, dataset: 'no spaces' })).toMatch(/dataset/);
    expect(decodeSnapshot({ ...good, format: 9 }).ok).toBe(false);
    // Any JSON at all: a result, never an exception.
    fc.assert(
      fc.property(fc.jsonValue(), (v) => {
        expect(decodeSnapshot(v).ok).toBe(false);
        expect(decodeSnapshot({ ...good, records: v }).ok).toBe(false);
        expect(decodeEvents(v, ds, 4).ok).toBe(
          typeof v === 'object' &&
            v !== null &&
            Array.isArray((v as { events?: unknown }).events) &&
            (v as { events: unknown[] }).events.length === 0 &&
            Array.isArray((v as { nodes?: unknown }).nodes) &&
            (v as { nodes: unknown[] }).nodes.length === 0,
        );
      }),
      { numRuns: 500 },
    );
    expect(good.format).toBe(COMPACT_MAP_FORMAT);
  });

  it('refuses a malformed packed map with the place it is wrong, never throws', () => {
    const m = new ShardMapper(4, ds);
    m.updateFromEvent(ShardEvents.ingestionStarted(ds, shardNum(1), nodes[0]!));
    m.updateFromEvent(ShardEvents.recoveryInProgress(ds, shardNum(2), nodes[1]!, 40));
    m.updateFromEvent(ShardEvents.ingestionError(ds, shardNum(3), nodes[2]!, 'disk full; retry, later'));
    const good = viaJson(packSnapshot(m.toSnapshot(epoch(3)))) as Record<string, unknown> & { records: string[]; messages: string[] };
    expect(decodeSnapshot(good).ok).toBe(true);
    const refusal = (raw: unknown): string => {
      const r = decodeSnapshot(raw);
      if (r.ok) throw new Error(`accepted ${JSON.stringify(raw)}`);
      expect(r.error.code).toBe('INVALID_SNAPSHOT');
      return r.error.message;
    };
    const withRecord = (i: number, record: unknown) => ({ ...good, records: good.records.map((r, j) => (j === i ? record : r)) });
    expect(refusal({ ...good, numShards: 8 })).toMatch(/4 records where 8 were expected/);
    expect(refusal({ ...good, messages: undefined })).toMatch(/messages/);
    expect(refusal({ ...good, messages: [7] })).toMatch(/messages\[0\]/);
    expect(refusal(withRecord(1, ['A', []]))).toMatch(/records\[1\]: not a packed shard record/);
    expect(refusal(withRecord(1, 'A'))).toMatch(/records\[1\]/);
    expect(refusal(withRecord(1, 'A;0AA;1;2'))).toMatch(/records\[1\]/);
    expect(refusal(withRecord(1, 'A;9AA'))).toMatch(/records\[1\]\.copies\[0\]\.node/);
    expect(refusal(withRecord(1, 'A;0AA,0IN'))).toMatch(/records\[1\]\.copies\[1\]: two copies/);
    expect(refusal(withRecord(1, 'A;0QA'))).toMatch(/records\[1\]\.copies\[0\]: not a copy/);
    expect(refusal(withRecord(1, 'A;0AX'))).toMatch(/records\[1\]\.copies\[0\]\.status: unknown status/);
    expect(refusal(withRecord(2, 'R140;1IR140'))).toMatch(/0\.\.100/);
    expect(refusal(withRecord(2, 'R;1IR'))).toMatch(/0\.\.100/);
    expect(refusal(withRecord(3, 'E5;2AE5'))).toMatch(/message table of 1/);
    expect(refusal(withRecord(1, 'D;0AA'))).toMatch(/differs from its owner/);
    expect(refusal(withRecord(0, 'constructor;'))).toMatch(/unknown status/);
    expect(refusal(withRecord(0, 'U;;x'))).toMatch(/records\[0\]\.lastNode/);
    expect(refusal(withRecord(1, `A;${Array.from({ length: 17 }, () => '0AA').join(',')}`))).toMatch(/records\[1\]\.copies: at most 16 copies/);
    // Any JSON or string at all: a result, never an exception.
    fc.assert(
      fc.property(fc.jsonValue(), fc.string({ maxLength: 40 }), (v, text) => {
        expect(decodeSnapshot({ ...good, records: v }).ok).toBe(false);
        expect(decodeSnapshot({ ...good, messages: v }).ok).toBe(Array.isArray(v) && v.every((x) => typeof x === 'string') && v.length >= 1);
        decodeSnapshot(withRecord(1, text));
      }),
      { numRuns: 500 },
    );
  });

  it('refuses events out of range or of an unknown type', () => {
    const enc = viaJson(
      encodeEvents([ShardEvents.ingestionStarted(ds, shardNum(3), nodes[0]!), ShardEvents.recoveryInProgress(ds, shardNum(1), nodes[1]!, 50)]),
    ) as { nodes: string[]; events: unknown[][] };
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
    expect(msg({ ...enc, format: 9 })).toMatch(/unknown events format 9/);
  });

  it('refuses malformed packed events with the place they are wrong, never throws', () => {
    const packed = viaJson(
      packEvents([ShardEvents.ingestionStarted(ds, shardNum(3), nodes[0]!), ShardEvents.ingestionError(ds, shardNum(1), nodes[1]!, 'a:b,c')]),
    ) as { format: number; nodes: string[]; messages: string[]; events: string };
    expect(packed.events).toBe('I3:0,E1:1:0');
    const msg = (raw: unknown, numShards = 4) => {
      const r = decodeEvents(raw, ds, numShards);
      return r.ok ? 'accepted' : r.error.message;
    };
    expect(msg(packed)).toBe('accepted');
    expect(msg({ ...packed, events: '' })).toBe('accepted');
    expect(msg(packed, 2)).toMatch(/events\[0\]\.shard/);
    expect(msg({ ...packed, events: 'Z0:0' })).toMatch(/events\[0\]\.type: unknown event/);
    expect(msg({ ...packed, events: 'I0:0,R0:0:101' })).toMatch(/events\[1\]\.progress.*0\.\.100/);
    expect(msg({ ...packed, events: 'R0:0' })).toMatch(/0\.\.100/);
    expect(msg({ ...packed, events: 'E0:0' })).toMatch(/needs its message/);
    expect(msg({ ...packed, events: 'E0:0:4' })).toMatch(/events\[0\]\.error.*message table of 1/);
    expect(msg({ ...packed, events: 'I0:0:x' })).toMatch(/no detail/);
    expect(msg({ ...packed, events: 'I0:2' })).toMatch(/events\[0\]\.node.*node index 2/);
    expect(msg({ ...packed, events: 'I0:0,,I1:0' })).toMatch(/events\[1\]: not a packed event/);
    expect(msg({ ...packed, events: ['I0:0'] })).toMatch(/not a string/);
    expect(msg({ ...packed, messages: 'x' })).toMatch(/messages/);
    // Any text or JSON at all: a result, never an exception; anything but a string is refused.
    fc.assert(
      fc.property(fc.string({ maxLength: 40 }), fc.jsonValue(), (text, v) => {
        expect(typeof decodeEvents({ ...packed, events: text }, ds, 4).ok).toBe('boolean');
        if (typeof v !== 'string') expect(decodeEvents({ ...packed, events: v }, ds, 4).ok).toBe(false);
      }),
      { numRuns: 500 },
    );
  });
});
