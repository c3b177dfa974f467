// The singleton writes a whole map packed (format 4) only for readers that said they read format 4
// (src/actors/map-readers.ts): its addressees, or every member for a map addressed to nobody in
// particular. A process of an older version says nothing, and a map for it goes out in format 3.
import { describe, expect, it } from 'vitest';
import { MapReaders } from '../../src/actors/map-readers.js';
import { COMPACT_MAP_FORMAT, PACKED_MAP_FORMAT } from '../../src/core/map-codec.js';
import { datasetRef, epoch, shardNum, subscriberId, type Incarnation, type NodeId } from '../../src/core/ids.js';
import { ShardEvents } from '../../src/core/status.js';
import { ShardMapper } from '../../src/core/shard-mapper.js';
import { runWhole } from '../../src/core/steps.js';
import type { Member } from '../../src/core/shard-manager/protocol.js';

const member = (node: string, incarnation: string): Member => ({ node: node as NodeId, incarnation: incarnation as Incarnation, joinedAt: 0 });
const guardian = (node: string, incarnation: string) => subscriberId(`${node}@${incarnation}/guardian`);
const members = [member('n1', 'a'), member('n2', 'b')];

describe('the whole-map format the singleton writes', () => {
  it('is packed only when every addressee said it reads format 4, or every member when it is addressed to none', () => {
    const readers = new MapReaders();
    expect(readers.formatFor([], members)).toBe(COMPACT_MAP_FORMAT);
    readers.heard(guardian('n1', 'a'), PACKED_MAP_FORMAT);
    expect(readers.formatFor([], members)).toBe(COMPACT_MAP_FORMAT);
    // Addressed to n1 only: a member that said nothing (a joiner that has not asked yet, or an older
    // version) does not hold it back; if it lacks the map it asked for its own.
    expect(readers.formatFor([guardian('n1', 'a')], members)).toBe(PACKED_MAP_FORMAT);
    readers.heard(guardian('n2', 'b'), undefined); // an older version: no mapFormat
    expect(readers.formatFor([], members)).toBe(COMPACT_MAP_FORMAT);
    expect(readers.formatFor([guardian('n1', 'a'), guardian('n2', 'b')], members)).toBe(COMPACT_MAP_FORMAT);
    readers.heard(subscriberId('n2@b/some-subscriber'), PACKED_MAP_FORMAT); // another subscriber of the same process
    expect(readers.formatFor([guardian('n2', 'b')], members)).toBe(PACKED_MAP_FORMAT);
    expect(readers.formatFor([], members)).toBe(PACKED_MAP_FORMAT);
    // A client addressed that said nothing, or a format it reads that is older, gets format 3.
    expect(readers.formatFor([subscriberId('client:old/maps')], members)).toBe(COMPACT_MAP_FORMAT);
    readers.heard(subscriberId('client:old/maps'), COMPACT_MAP_FORMAT);
    expect(readers.formatFor([subscriberId('client:old/maps')], members)).toBe(COMPACT_MAP_FORMAT);
    readers.heard(subscriberId('client:new/maps'), PACKED_MAP_FORMAT);
    expect(readers.formatFor([subscriberId('client:new/maps')], members)).toBe(PACKED_MAP_FORMAT);
    // A member restarted under a new incarnation is a new process, not known yet.
    expect(readers.formatFor([], [member('n1', 'a'), member('n2', 'c')])).toBe(COMPACT_MAP_FORMAT);
    // A subscriber id without a process part is never assumed to read more than format 3.
    expect(readers.formatFor([subscriberId('loner')], members)).toBe(COMPACT_MAP_FORMAT);
  });

  it('packs changes only when every member and every addressee said it reads format 4: every node applies them', () => {
    const readers = new MapReaders();
    readers.heard(guardian('n1', 'a'), PACKED_MAP_FORMAT);
    readers.heard(subscriberId('client:new/maps'), PACKED_MAP_FORMAT);
    expect(readers.changesFormatFor([subscriberId('client:new/maps')], members)).toBe(COMPACT_MAP_FORMAT); // n2 said nothing
    readers.heardFromNode('n2' as NodeId, 'b' as Incarnation, PACKED_MAP_FORMAT); // in its answer to a recovery question
    expect(readers.changesFormatFor([subscriberId('client:new/maps')], members)).toBe(PACKED_MAP_FORMAT);
    expect(readers.changesFormatFor([subscriberId('client:old/maps')], members)).toBe(COMPACT_MAP_FORMAT);
    expect(readers.changesFormatFor([], members)).toBe(PACKED_MAP_FORMAT);
    const events = [ShardEvents.ingestionStarted(datasetRef('metrics'), shardNum(1), 'n1' as NodeId)];
    expect(readers.encodeChanges(events, [], members)).toMatchObject({ format: PACKED_MAP_FORMAT, events: 'I1:0' });
    expect(readers.encodeChanges(events, [], [...members, member('n3', 'x')])).toEqual({ nodes: ['n1'], events: [['I', 1, 0]] });
  });

  it('encodes in the format it gives, and remembers a bounded number of processes, forgetting the oldest heard', () => {
    const readers = new MapReaders();
    for (let i = 0; i < 10_001; i++) readers.heard(subscriberId(`client:c${i}/maps`), PACKED_MAP_FORMAT);
    expect(readers.formatFor([subscriberId('client:c0/maps')], [])).toBe(COMPACT_MAP_FORMAT);
    expect(readers.formatFor([subscriberId('client:c1/maps'), subscriberId('client:c10000/maps')], [])).toBe(PACKED_MAP_FORMAT);
    const snapshot = new ShardMapper(4, datasetRef('metrics')).toSnapshot(epoch(1));
    expect(runWhole(readers.encoding(snapshot, [subscriberId('client:c1/maps')], [])).format).toBe(PACKED_MAP_FORMAT);
    expect(runWhole(readers.encoding(snapshot, [subscriberId('client:c0/maps')], [])).format).toBe(COMPACT_MAP_FORMAT);
  });
});
