// How the Cassandra MetaStore cuts a map into a header and parts (src/store/map-parts.ts): the
// formats round trip and refuse what is wrong, a change writes only the parts it touches, the
// sizes stay where the store's comments say at the largest map shardherd accepts, and the part
// rows left behind are exactly the ones no header can refer to again.
import { describe, expect, it } from 'vitest';
import { datasetRef, epoch, nodeId } from '../../src/core/ids.js';
import { SHARD_MAP_FORMAT, type ShardMapSnapshot, type ShardRecord } from '../../src/core/shard-map-snapshot.js';
import { Status } from '../../src/core/status.js';
import {
  assemble,
  decodeHeader,
  decodePart,
  encodeHeader,
  encodePart,
  garbageOf,
  knownAfter,
  knownStampOnly,
  knownWhole,
  partCount,
  planWrite,
  SHARDS_PER_PART,
  type MapHeader,
  type PartContent,
} from '../../src/store/map-parts.js';
import { largeMap, mapDifference, withChanges, withProgress } from '../contracts/large-maps.js';

const ds = datasetRef('metrics');
const MAX_STAMP = Number.MAX_SAFE_INTEGER;

/** Every part of `map`, encoded and decoded again. */
function roundTrip(map: ShardMapSnapshot, header: MapHeader): PartContent[] {
  return Array.from({ length: header.parts.length }, (_, p) => {
    const r = decodePart(encodePart(map, header.shardsPerPart, p), header, p);
    if (!r.ok) throw new Error(r.error);
    return r.value;
  });
}

const headerOf = (map: ShardMapSnapshot) => planWrite(map, undefined, new Set()).header;

describe('map parts', () => {
  it('a map cut in parts and put together again is the same map, its records frozen', () => {
    const map = largeMap(ds, 4_096, 3, 12);
    const header = headerOf(map);
    expect(header.parts).toHaveLength(4_096 / SHARDS_PER_PART);
    const decoded = decodeHeader(encodeHeader(header));
    expect(decoded).toEqual({ ok: true, value: header });
    const back = assemble(ds, header, roundTrip(map, header));
    expect(mapDifference(back, map)).toBeUndefined();
    expect(Object.isFrozen(back.shards[1])).toBe(true);
    expect(Object.isFrozen(back.shards[1]!.assignments[0])).toBe(true);
  });

  it('a map smaller than a part is one part', () => {
    const map = largeMap(ds, 4, 1, 1);
    const header = headerOf(map);
    expect(header.parts).toHaveLength(1);
    expect(mapDifference(assemble(ds, header, roundTrip(map, header)), map)).toBeUndefined();
  });

  it('at 65 536 shards, RF 3 plus a copy in handoff and 128-character node ids, a part stays under 225 KB and a header under 12 KB', () => {
    const id = (i: number) => nodeId(`n${String(i).padStart(127, '0')}`);
    // The worst part: every copy of every shard, and its last node, on a node of its own; long statuses.
    const shards: ShardRecord[] = Array.from({ length: 65_536 }, (_, s) => {
      const status = Status.recovery(99.12345678901234);
      const copy = (c: number) => ({
        node: id((s * 4 + c) % (SHARDS_PER_PART * 4)),
        placement: c === 3 ? ('Initializing' as const) : ('Leaving' as const),
        status,
      });
      return { status, assignments: [copy(0), copy(1), copy(2), copy(3)], lastNode: id(SHARDS_PER_PART * 4 + (s % SHARDS_PER_PART)) };
    });
    const worst: ShardMapSnapshot = {
      format: SHARD_MAP_FORMAT,
      dataset: ds,
      numShards: 65_536,
      epoch: epoch(MAX_STAMP),
      version: MAX_STAMP,
      shards,
      assignmentVersions: new Array<number>(65_536).fill(MAX_STAMP),
    };
    const part = encodePart(worst, SHARDS_PER_PART, 5);
    expect(Buffer.byteLength(part)).toBeGreaterThan(200_000);
    expect(Buffer.byteLength(part)).toBeLessThan(225_000);
    const header: MapHeader = {
      numShards: 65_536,
      epoch: MAX_STAMP,
      version: MAX_STAMP,
      shardsPerPart: SHARDS_PER_PART,
      parts: Array.from({ length: 256 }, (_, p) => ({ epoch: MAX_STAMP - p, version: MAX_STAMP - p })),
    };
    expect(Buffer.byteLength(encodeHeader(header))).toBeLessThan(12_000);

    // A realistic map: 48 nodes with 40-character ids, a handful of distinct part stamps.
    const real = largeMap(ds, 65_536, 3, 1_000);
    expect(Math.max(...Array.from({ length: 256 }, (_, p) => encodePart(real, SHARDS_PER_PART, p).length))).toBeLessThan(20_000);
    const mixed = { ...headerOf(real), parts: headerOf(real).parts.map((_, p) => ({ epoch: 3, version: 990 + (p % 5) })) };
    expect(encodeHeader(mixed).length).toBeLessThan(2_000);
  });

  it('a header that is not right is refused, saying why', () => {
    const good = JSON.parse(encodeHeader(headerOf(largeMap(ds, 1_024, 2, 5)))) as Record<string, unknown>;
    const refused = (change: Record<string, unknown>) => {
      const r = decodeHeader(JSON.stringify({ ...good, ...change }));
      return r.ok ? 'accepted' : r.error;
    };
    expect(decodeHeader('{"numShards":')).toMatchObject({ ok: false, error: expect.stringMatching(/^not JSON/) });
    expect(refused({ numShards: 1_000 })).toMatch(/numShards 1000 is not a power of two/);
    expect(refused({ version: -1 })).toMatch(/epoch and version/);
    expect(refused({ shardsPerPart: 3 })).toMatch(/shardsPerPart 3/);
    expect(refused({ parts: [0, 0, 0] })).toMatch(/parts must list 4 parts/);
    expect(refused({ parts: [0, 0, 0, 1] })).toMatch(/parts\[3\] 1 is not an index into stamps/);
    expect(refused({ stamps: [[2, 6]] })).toMatch(/stamps\[0\] 2\/6 is newer than the map 2\/5/);
    expect(refused({ stamps: [[2]] })).toMatch(/stamps\[0\] is not \[epoch, version\]/);
  });

  it('a part that is not the one asked for, or not right, is refused, saying why', () => {
    const map = largeMap(ds, 1_024, 1, 3);
    const header = headerOf(map);
    const part = JSON.parse(encodePart(map, SHARDS_PER_PART, 2)) as Record<string, unknown>;
    const refused = (p: number, change: Record<string, unknown> = {}) => {
      const r = decodePart(JSON.stringify({ ...part, ...change }), header, p);
      return r.ok ? 'accepted' : r.error;
    };
    expect(refused(2)).toBe('accepted');
    expect(refused(1)).toMatch(/it is part 2 of 1024 shards by 256, not part 1 of 1024 by 256/);
    expect(refused(2, { numShards: 2_048 })).toMatch(/not part 2 of 1024/);
    expect(refused(2, { records: (part.records as unknown[]).slice(1) })).toMatch(/255 records where 256 were expected/);
    expect(refused(2, { nodes: [] })).toMatch(/node index 0 is not in the node table of 0/);
    expect(refused(2, { assignmentVersions: [1] })).toMatch(/assignmentVersions must list 256/);
  });

  describe('planWrite', () => {
    const map = largeMap(ds, 65_536, 1, 100);
    const header = headerOf(map);

    it('writes every part when nothing is known, or only the stamp', () => {
      expect(planWrite(map, undefined, new Set()).write).toHaveLength(256);
      expect(planWrite(map, knownStampOnly({ epoch: 1, version: 99 }), new Set()).write).toHaveLength(256);
    });

    it('after a map it wrote or read, a change of one shard writes one part, and the header reuses the others', () => {
      const known = knownWhole(header, map);
      const plan = planWrite(withChanges(map, [1_000], 101), known, new Set());
      expect(plan.write).toEqual([3]);
      expect(plan.header.parts[3]).toEqual({ epoch: 1, version: 101 });
      expect(plan.header.parts.filter((s) => s.version === 100)).toHaveLength(255);
      expect(planWrite(withChanges(map, [0, 255, 256, 65_535], 101), known, new Set()).write).toEqual([0, 1, 255]);
      // A change of status only (the assignment versions stay): written too.
      expect(planWrite(withProgress(map, [600], 50, 101), known, new Set()).write).toEqual([2]);
    });

    it('compares by value when the records are not the same objects (a map read back), and the assignment versions too', () => {
      const read = assemble(ds, header, roundTrip(map, header));
      const known = knownWhole(header, read);
      expect(planWrite({ ...map, version: 101 }, known, new Set()).write).toEqual([]);
      const versions = map.assignmentVersions.slice();
      versions[4_464] = 77; // shard 4 464 is in part 17
      expect(planWrite({ ...map, version: 101, assignmentVersions: versions }, known, new Set()).write).toEqual([17]);
    });

    it('parts written by an earlier attempt of the same write are referred to, not written again', () => {
      const plan = planWrite(withChanges(map, [10], 101), undefined, new Set([0, 1, 2]));
      expect(plan.write).toHaveLength(253);
      expect(plan.write).not.toContain(1);
    });

    it('after reading another header, only the parts whose rows are still the remembered ones are known', () => {
      const known = knownWhole(header, map);
      const other: MapHeader = { ...header, version: 105, parts: header.parts.map((s, p) => (p === 7 || p === 9 ? { epoch: 1, version: 105 } : s)) };
      const after = knownAfter(other, known);
      expect(after.stamp).toEqual({ epoch: 1, version: 105 });
      expect(planWrite(withChanges(map, [20], 106), after, new Set()).write).toEqual([0, 7, 9]);
      // A header of another shape (a dataset created again with other shards): nothing is known.
      const small = headerOf(largeMap(ds, 1_024, 1, 1));
      expect(knownAfter(small, known).known.every((k) => !k)).toBe(true);
      expect(partCount(1_024, SHARDS_PER_PART)).toBe(4);
    });
  });

  it('garbage: below each part row the header refers to, and between it and the header for the parts it reuses', () => {
    const h: MapHeader = {
      numShards: 1_024,
      epoch: 3,
      version: 9,
      shardsPerPart: 256,
      parts: [
        { epoch: 3, version: 9 },
        { epoch: 2, version: 40 },
        { epoch: 3, version: 9 },
        { epoch: 3, version: 1 },
      ],
    };
    expect(garbageOf(h, [0])).toEqual([{ part: 0, below: { epoch: 3, version: 9 } }]);
    expect(garbageOf(h, [1, 3])).toEqual([
      { part: 1, below: { epoch: 2, version: 40 } },
      { part: 1, after: { epoch: 2, version: 40 }, upTo: { epoch: 3, version: 9 } },
      { part: 3, below: { epoch: 3, version: 1 } },
      { part: 3, after: { epoch: 3, version: 1 }, upTo: { epoch: 3, version: 9 } },
    ]);
  });
});
