// A node's copy of the maps (src/actors/followed-maps.ts): changes are applied as they come, a whole
// map is taken only when the node is behind, and what the node lacks it asks for, once at a time.
import { describe, expect, it } from 'vitest';
import { FollowedMaps, type FollowedMapsPorts, type MembersRecord } from '../../src/actors/followed-maps.js';
import { parseEventsMessage, type EventsRecord } from '../../src/actors/wire-events.js';
import { WIRE_FORMAT, type EventsMessage } from '../../src/actors/wire.js';
import { validateDatasetConfig, type DatasetConfig } from '../../src/core/dataset-config.js';
import { datasetRef, epoch, incarnation, nodeId, shardNum, subscriberId, type DatasetRef, type Incarnation, type NodeId, type SubscriberId } from '../../src/core/ids.js';
import { encodeEvents, encodeSnapshot } from '../../src/core/map-codec.js';
import type { SubscriberMessage } from '../../src/core/shard-manager/protocol.js';
import { ShardMapper } from '../../src/core/shard-mapper.js';
import { type ShardEvent, ShardEvents } from '../../src/core/status.js';

const ds = datasetRef('metrics');
const other = datasetRef('logs');
const a = nodeId('a');
const b = nodeId('b');

function config(ref: DatasetRef, numShards = 4): DatasetConfig {
  const r = validateDatasetConfig({ ref, numShards, minNumNodes: 1, source: { type: 'synthetic' } });
  if (!r.ok) throw new Error(r.error.message);
  return r.value;
}

/** Parses a record as a node would read it off the bus. */
function read(m: EventsMessage): EventsRecord {
  const r = parseEventsMessage(JSON.parse(JSON.stringify(m)));
  if (!r.ok) throw new Error(r.error.reason);
  return r.value;
}

function snapshotRecord(map: ShardMapper, e: number, to: SubscriberId[] = [], ref = ds, members?: number): Extract<EventsRecord, { kind: 'map-snapshot' }> {
  const snap = map.toSnapshot(epoch(e), ref);
  return read({ format: WIRE_FORMAT, kind: 'map-snapshot', epoch: epoch(e), dataset: ref, numShards: map.numShards, version: snap.version, to, config: config(ref, map.numShards), snapshot: encodeSnapshot(snap), ...(members === undefined ? {} : { members }) }) as Extract<EventsRecord, { kind: 'map-snapshot' }>;
}

function changesRecord(e: number, base: { epoch: number; version: number }, events: ShardEvent[], ref = ds, members?: number): Extract<EventsRecord, { kind: 'map-changes' }> {
  return read({ format: WIRE_FORMAT, kind: 'map-changes', epoch: epoch(e), dataset: ref, numShards: 4, base: { epoch: epoch(base.epoch), version: base.version }, changes: encodeEvents(events), ...(members === undefined ? {} : { members }) }) as Extract<EventsRecord, { kind: 'map-changes' }>;
}

/** Records what the node would do. */
function recorder(self?: { node: NodeId; incarnation: Incarnation }) {
  const seen = {
    maps: [] as { dataset: DatasetRef; version: number; epoch: number }[],
    members: [] as MembersRecord[],
    gone: [] as DatasetRef[],
    delivered: [] as { dataset: DatasetRef; message: SubscriberMessage; only?: readonly SubscriberId[] }[],
    asked: [] as { datasets: readonly DatasetRef[] | 'all'; members: boolean }[],
    /** The shards each map change touched (undefined: the whole map). */
    touched: [] as (readonly number[] | undefined)[],
  };
  const ports: FollowedMapsPorts = {
    mapChanged: (dataset, f, _config, shards) => {
      seen.maps.push({ dataset, version: f.version, epoch: f.epoch });
      seen.touched.push(shards ? [...shards] : undefined);
    },
    membersChanged: (m) => seen.members.push(m),
    datasetGone: (dataset) => seen.gone.push(dataset),
    deliver: (dataset, message, only) => seen.delivered.push({ dataset, message: message(), ...(only ? { only } : {}) }),
    askSync: (wanted) => seen.asked.push(wanted),
  };
  return { seen, maps: new FollowedMaps(ports, self) };
}

/** A map at version 2: shard 0 Active on a, shard 1 assigned to b. */
function startMap(): ShardMapper {
  const m = new ShardMapper(4, ds);
  m.updateFromEvent(ShardEvents.ingestionStarted(ds, shardNum(0), a));
  m.updateFromEvent(ShardEvents.assignmentStarted(ds, shardNum(1), b));
  return m;
}

describe('FollowedMaps', () => {
  it('takes a whole map, then applies changes that continue it, handing each to the runner and the local subscribers', () => {
    const { seen, maps } = recorder();
    const m = startMap();
    maps.snapshot(snapshotRecord(m, 1));
    expect(seen.maps).toEqual([{ dataset: ds, version: 2, epoch: 1 }]);
    expect(seen.delivered.map((d) => d.message.type)).toEqual(['CurrentShardSnapshot']);

    const events = [ShardEvents.ingestionStarted(ds, shardNum(1), b), ShardEvents.assignmentStarted(ds, shardNum(2), a)];
    maps.changes(changesRecord(1, { epoch: 1, version: 2 }, events));
    expect(seen.maps.at(-1)).toEqual({ dataset: ds, version: 4, epoch: 1 });
    expect(seen.delivered.slice(1).map((d) => d.message.type === 'StampedShardEvent' && [d.message.version, d.message.event.type])).toEqual([
      [3, 'IngestionStarted'],
      [4, 'ShardAssignmentStarted'],
    ]);
    for (const e of events) m.updateFromEvent(e);
    expect(maps.followers.get(ds)!.mapper!.equals(m)).toBe(true);
    expect(seen.asked).toEqual([]);
  });

  it('a gap (changes that do not continue its map) asks for the map once, and again only after the request failed', () => {
    const { seen, maps } = recorder();
    maps.snapshot(snapshotRecord(startMap(), 1));
    maps.changes(changesRecord(1, { epoch: 1, version: 5 }, [ShardEvents.ingestionStarted(ds, shardNum(2), a)]));
    maps.changes(changesRecord(1, { epoch: 1, version: 6 }, [ShardEvents.ingestionStarted(ds, shardNum(3), a)]));
    expect(seen.asked).toEqual([{ datasets: [ds], members: false }]);
    expect(seen.maps).toHaveLength(1); // nothing half applied
    maps.syncFailed();
    expect(seen.asked).toHaveLength(2);
    // The map arrives: nothing is lacking any more, and the next lack is asked for at once.
    const newer = startMap();
    newer.updateFromEvent(ShardEvents.ingestionStarted(ds, shardNum(1), b));
    maps.snapshot(snapshotRecord(newer, 2));
    expect(maps.lacking).toBe(false);
    maps.changes(changesRecord(1, { epoch: 1, version: 9 }, [])); // an older singleton's: stale, nothing asked
    expect(seen.asked).toHaveLength(2);
    maps.changes(changesRecord(2, { epoch: 2, version: 7 }, [ShardEvents.ingestionStarted(ds, shardNum(2), a)]));
    expect(seen.asked).toHaveLength(3);
  });

  it('changes it already has are stale: a duplicated record changes nothing', () => {
    const { seen, maps } = recorder();
    maps.snapshot(snapshotRecord(startMap(), 1));
    const c = changesRecord(1, { epoch: 1, version: 2 }, [ShardEvents.ingestionStarted(ds, shardNum(1), b)]);
    maps.changes(c);
    maps.changes(c);
    expect(seen.maps.map((x) => x.version)).toEqual([2, 3]);
    expect(seen.asked).toEqual([]);
  });

  it('after a failover, the new epoch continues the map it holds: no snapshot, and subscribers get the map under the new epoch', () => {
    const { seen, maps } = recorder();
    maps.snapshot(snapshotRecord(startMap(), 1));
    maps.changes(changesRecord(2, { epoch: 1, version: 2 }, [ShardEvents.shardDown(ds, shardNum(1), b)]));
    expect(seen.maps.at(-1)).toEqual({ dataset: ds, version: 3, epoch: 2 });
    const last = seen.delivered.at(-1)!.message;
    expect(last.type === 'CurrentShardSnapshot' && [last.snapshot.epoch, last.snapshot.version]).toEqual([2, 3]);
    expect(seen.asked).toEqual([]);
  });

  it('decodes a whole map only when it is newer, and hands it to the subscribers that asked in any case', () => {
    const { seen, maps } = recorder();
    const m = startMap();
    maps.snapshot(snapshotRecord(m, 1));
    const same = snapshotRecord(m, 1, [subscriberId('node-1@x/sub-1')]);
    // Not newer: its map is never read (a broken one would be refused if it were).
    maps.snapshot({ ...same, snapshot: { ...same.snapshot, records: 'broken' as never } });
    expect(seen.maps).toHaveLength(1);
    expect(seen.delivered.at(-1)).toMatchObject({ dataset: ds, only: ['node-1@x/sub-1'], message: { type: 'CurrentShardSnapshot' } });
  });

  it('the digest: a map it lacks or is behind on is asked for, a dataset no longer listed is gone, the members too, in one request', () => {
    const { seen, maps } = recorder();
    maps.snapshot(snapshotRecord(startMap(), 1));
    maps.snapshot(snapshotRecord(new ShardMapper(4, other), 1, [], other));
    maps.digest(read({ format: WIRE_FORMAT, kind: 'digest', epoch: epoch(1), members: 3, maps: [{ dataset: ds, numShards: 4, version: 7 }] }) as Extract<EventsRecord, { kind: 'digest' }>);
    expect(seen.gone).toEqual([other]);
    expect(seen.asked).toEqual([{ datasets: [ds], members: true }]);
    expect(seen.delivered.filter((d) => d.message.type === 'ShardMapStamp').map((d) => d.message)).toEqual([{ type: 'ShardMapStamp', epoch: 1, dataset: ds, version: 7 }]);
  });

  it('a digest that matches asks for nothing', () => {
    const { seen, maps } = recorder();
    maps.snapshot(snapshotRecord(startMap(), 1));
    maps.membersRecord(read({ format: WIRE_FORMAT, kind: 'members', epoch: epoch(1), version: 3, members: [{ node: a, incarnation: incarnation('a#1') }] }) as Extract<EventsRecord, { kind: 'members' }>);
    maps.digest(read({ format: WIRE_FORMAT, kind: 'digest', epoch: epoch(1), members: 3, maps: [{ dataset: ds, numShards: 4, version: 2 }] }) as Extract<EventsRecord, { kind: 'digest' }>);
    expect(seen.asked).toEqual([]);
    expect(seen.members.map((m) => m.version)).toEqual([3]);
  });

  it('a node starting asks for every map and the members in one request; the first map or a digest answers it', () => {
    const { seen, maps } = recorder();
    maps.want({ all: true, members: true });
    expect(seen.asked).toEqual([{ datasets: 'all', members: true }]);
    maps.snapshot(snapshotRecord(startMap(), 1));
    maps.membersRecord(read({ format: WIRE_FORMAT, kind: 'members', epoch: epoch(1), version: 1, members: [] }) as Extract<EventsRecord, { kind: 'members' }>);
    expect(maps.lacking).toBe(false);
  });

  it('members: a change that continues them is applied; one that does not makes the node ask for them whole', () => {
    const { seen, maps } = recorder();
    const b1 = { node: b, incarnation: incarnation('b#1') };
    const a1 = { node: a, incarnation: incarnation('a#1') };
    maps.membersRecord(read({ format: WIRE_FORMAT, kind: 'members', epoch: epoch(2), version: 4, members: [a1] }) as Extract<EventsRecord, { kind: 'members' }>);
    const change = (version: number, joined: typeof a1[], left: typeof a1[]) => read({ format: WIRE_FORMAT, kind: 'members-change', epoch: epoch(2), version, joined, left }) as Extract<EventsRecord, { kind: 'members-change' }>;
    maps.membersChange(change(5, [b1], []));
    maps.membersChange(change(5, [b1], [])); // a duplicate: nothing
    maps.membersChange(change(6, [], [a1]));
    expect(seen.members.map((m) => [m.version, m.members.map((x) => x.node)])).toEqual([[4, ['a']], [5, ['a', 'b']], [6, ['b']]]);
    maps.membersChange(change(8, [a1], []));
    expect(seen.asked).toEqual([{ datasets: [], members: true }]);
    expect(seen.members).toHaveLength(3);
  });

  it('members: an older record is ignored', () => {
    const { seen, maps } = recorder();
    const members = (e: number, v: number) => read({ format: WIRE_FORMAT, kind: 'members', epoch: epoch(e), version: v, members: [] }) as Extract<EventsRecord, { kind: 'members' }>;
    maps.membersRecord(members(2, 1));
    maps.membersRecord(members(1, 9));
    maps.membersRecord(members(2, 1));
    maps.membersRecord(members(2, 2));
    expect(seen.members.map((m) => [m.epoch, m.version])).toEqual([[2, 1], [2, 2]]);
  });

  it('a node that just joined does not act on a map made for the members before it, and asks for the map again', () => {
    // b's former incarnation held shard 1; b#2 joins at members version 5. A map made for version 4
    // (it left the singleton before the join, and reached the node after it) still gives b shard 1.
    const b2 = { node: b, incarnation: incarnation('b#2') };
    const { seen, maps } = recorder(b2);
    const members = (v: number) => read({ format: WIRE_FORMAT, kind: 'members', epoch: epoch(1), version: v, members: [{ node: a, incarnation: incarnation('a#1') }, b2] }) as Extract<EventsRecord, { kind: 'members' }>;
    maps.membersRecord(members(5));
    expect(maps.admission).toEqual({ epoch: 1, version: 5 });
    maps.snapshot(snapshotRecord(startMap(), 1, [], ds, 4));
    expect(maps.madeForThisNode(ds)).toBe(false);
    expect(seen.asked.at(-1)).toEqual({ datasets: [ds], members: false });
    // The answer: the same map, now said to be made for version 5 (nothing changed since): taken
    // as one the node may act on, and handed to the runner again.
    const before = seen.maps.length;
    maps.snapshot(snapshotRecord(startMap(), 1, [], ds, 5));
    expect(maps.madeForThisNode(ds)).toBe(true);
    expect(seen.maps.length).toBe(before + 1);
    // Later members do not move the admission; a change made for them keeps the map current.
    maps.membersRecord(members(6));
    expect(maps.admission).toEqual({ epoch: 1, version: 5 });
    maps.changes(changesRecord(1, { epoch: 1, version: 2 }, [ShardEvents.ingestionStarted(ds, shardNum(1), b)], ds, 6));
    expect(maps.madeForThisNode(ds)).toBe(true);
    expect(maps.madeForMembers(ds)).toBe(6);
  });

  it('a change that makes a waiting map current is handed over whole; a map that does not say what it was made for is taken as before', () => {
    const b2 = { node: b, incarnation: incarnation('b#2') };
    const { seen, maps } = recorder(b2);
    maps.membersRecord(read({ format: WIRE_FORMAT, kind: 'members', epoch: epoch(1), version: 5, members: [b2] }) as Extract<EventsRecord, { kind: 'members' }>);
    maps.snapshot(snapshotRecord(startMap(), 1, [], ds, 3));
    expect(maps.madeForThisNode(ds)).toBe(false);
    maps.changes(changesRecord(1, { epoch: 1, version: 2 }, [ShardEvents.ingestionStarted(ds, shardNum(1), b)], ds, 5));
    expect(maps.madeForThisNode(ds)).toBe(true);
    expect(seen.maps.at(-1)).toEqual({ dataset: ds, version: 3, epoch: 1 });
    expect(seen.touched.at(-1)).toBeUndefined(); // the node reconciles every shard, not shard 1 alone
    maps.changes(changesRecord(1, { epoch: 1, version: 3 }, [ShardEvents.assignmentStarted(ds, shardNum(2), b)], ds, 5));
    expect(seen.touched.at(-1)).toEqual([2]);
    maps.snapshot(snapshotRecord(startMap(), 1, [], other));
    expect(maps.madeForThisNode(other)).toBe(true);
  });
});
