// ShardMapFollower: a subscriber's copy of one dataset's map, fed by snapshots and stamped events.
// It applies what comes next, ignores what is older ('stale'), and asks for a resync ('gap').
import { describe, expect, it } from 'vitest';
import { datasetRef, epoch, nodeId, shardNum } from '../../src/core/ids.js';
import { runInSlices } from '../../src/core/steps.js';
import { ShardMapFollower } from '../../src/core/map-follower.js';
import type { StampedShardEvent } from '../../src/core/shard-manager/protocol.js';
import { ShardMapper } from '../../src/core/shard-mapper.js';
import { ShardEvents, Status, type ShardEvent } from '../../src/core/status.js';

const ds = datasetRef('ds1');
const other = datasetRef('ds2');
const r1 = nodeId('r1');
const r2 = nodeId('r2');

const stamped = (e: number, version: number, event: ShardEvent): StampedShardEvent => ({
  type: 'StampedShardEvent',
  epoch: epoch(e),
  version,
  event,
});

/** The singleton's map at version 2: shard 0 Assigned to r1, shard 1 Active on r2. */
function singletonMap(): ShardMapper {
  const m = new ShardMapper(8, ds);
  expect(m.updateFromEvent(ShardEvents.assignmentStarted(ds, shardNum(0), r1)).ok).toBe(true);
  expect(m.updateFromEvent(ShardEvents.ingestionStarted(ds, shardNum(1), r2)).ok).toBe(true);
  expect(m.version).toBe(2);
  return m;
}

/** A follower that has applied `singletonMap()` at epoch 1, version 2. */
function synced(): { follower: ShardMapFollower; map: ShardMapper } {
  const follower = new ShardMapFollower(ds);
  const map = singletonMap();
  expect(follower.applySnapshot(map.toSnapshot(epoch(1)))).toBe('applied');
  return { follower, map };
}

/** What a caller can see of the follower: its stamp and its map. */
function view(f: ShardMapFollower) {
  return { epoch: f.epoch, version: f.version, snapshot: f.mapper?.toSnapshot(epoch(0)).shards };
}

describe('ShardMapFollower', () => {
  it('an event before any snapshot is a gap', () => {
    const f = new ShardMapFollower(ds);
    expect(f.applyEvent(stamped(1, 1, ShardEvents.ingestionStarted(ds, shardNum(0), r1)))).toBe('gap');
    expect(f.mapper).toBeUndefined();
  });

  it('applies a first snapshot', () => {
    const { follower, map } = synced();
    expect(follower.epoch).toBe(1);
    expect(follower.version).toBe(2);
    expect(follower.mapper?.equals(map)).toBe(true);
    expect(follower.mapper?.nodeForShard(1)).toBe(r2);
  });

  it('keeps its own copy: later changes to the mapper the snapshot came from do not reach it', () => {
    const { follower, map } = synced();
    expect(map.updateFromEvent(ShardEvents.shardDown(ds, shardNum(1), r2)).ok).toBe(true);
    expect(follower.mapper?.statusForShard(1)).toEqual(Status.active);
  });

  it('applies the event with the next version and updates the map', () => {
    const { follower, map } = synced();
    const e = ShardEvents.ingestionStarted(ds, shardNum(0), r1);
    expect(follower.applyEvent(stamped(1, 3, e))).toBe('applied');
    expect(follower.version).toBe(3);
    expect(follower.mapper?.statusForShard(0)).toEqual(Status.active);
    expect(follower.mapper?.nodeForShard(0)).toBe(r1);

    // It tracks the singleton's map event by event.
    expect(map.updateFromEvent(e).ok).toBe(true);
    expect(follower.mapper?.equals(map)).toBe(true);
    const e2 = ShardEvents.ingestionError(ds, shardNum(1), r2, 'boom');
    expect(follower.applyEvent(stamped(1, 4, e2))).toBe('applied');
    expect(map.updateFromEvent(e2).ok).toBe(true);
    expect(follower.mapper?.equals(map)).toBe(true);
    expect(follower.version).toBe(4);
  });

  it('a duplicate or older version is stale and changes nothing', () => {
    const { follower } = synced();
    expect(follower.applyEvent(stamped(1, 3, ShardEvents.ingestionStarted(ds, shardNum(0), r1)))).toBe('applied');
    const before = view(follower);
    expect(follower.applyEvent(stamped(1, 3, ShardEvents.ingestionStarted(ds, shardNum(0), r1)))).toBe('stale');
    expect(follower.applyEvent(stamped(1, 3, ShardEvents.shardDown(ds, shardNum(0), r1)))).toBe('stale');
    expect(follower.applyEvent(stamped(1, 2, ShardEvents.shardDown(ds, shardNum(1), r2)))).toBe('stale');
    expect(view(follower)).toEqual(before);
    expect(follower.mapper?.statusForShard(0)).toEqual(Status.active);
    expect(follower.mapper?.statusForShard(1)).toEqual(Status.active);
  });

  it('a version jump is a gap and changes nothing', () => {
    const { follower } = synced();
    const before = view(follower);
    expect(follower.applyEvent(stamped(1, 4, ShardEvents.ingestionStarted(ds, shardNum(0), r1)))).toBe('gap');
    expect(view(follower)).toEqual(before);
    expect(follower.mapper?.statusForShard(0)).toEqual(Status.assigned);
  });

  it('an event from a newer epoch is a gap (a new singleton took over); an older epoch is stale', () => {
    const { follower } = synced();
    const before = view(follower);
    expect(follower.applyEvent(stamped(2, 3, ShardEvents.ingestionStarted(ds, shardNum(0), r1)))).toBe('gap');
    expect(follower.applyEvent(stamped(0, 3, ShardEvents.ingestionStarted(ds, shardNum(0), r1)))).toBe('stale');
    expect(view(follower)).toEqual(before);
  });

  it('an event it cannot apply (shard out of range) is a gap and changes nothing', () => {
    const { follower } = synced();
    const before = view(follower);
    expect(follower.applyEvent(stamped(1, 3, ShardEvents.ingestionStarted(ds, shardNum(8), r1)))).toBe('gap');
    expect(view(follower)).toEqual(before);
  });

  it('an event for another dataset is stale', () => {
    const { follower } = synced();
    const before = view(follower);
    expect(follower.applyEvent(stamped(1, 3, ShardEvents.ingestionStarted(other, shardNum(0), r1)))).toBe('stale');
    expect(view(follower)).toEqual(before);
  });

  it('a snapshot with an older epoch, or the same epoch and an older or equal version, is stale', () => {
    const { follower } = synced();
    const before = view(follower);
    const changed = new ShardMapper(8, ds);
    for (let s = 0; s < 8; s++) expect(changed.updateFromEvent(ShardEvents.ingestionStarted(ds, shardNum(s), r2)).ok).toBe(true);
    expect(changed.version).toBe(8);
    expect(follower.applySnapshot(changed.toSnapshot(epoch(0)))).toBe('stale'); // older epoch, newer version

    const older = new ShardMapper(8, ds);
    expect(older.updateFromEvent(ShardEvents.shardDown(ds, shardNum(0), r1)).ok).toBe(true);
    expect(follower.applySnapshot(older.toSnapshot(epoch(1)))).toBe('stale'); // same epoch, version 1 < 2

    // A different map claiming the same (epoch, version) as the one the follower has.
    const same = new ShardMapper(8, ds);
    expect(same.updateFromEvent(ShardEvents.shardDown(ds, shardNum(0), r1)).ok).toBe(true);
    expect(same.updateFromEvent(ShardEvents.shardDown(ds, shardNum(1), r2)).ok).toBe(true);
    expect(follower.applySnapshot(same.toSnapshot(epoch(1)))).toBe('stale'); // same epoch, same version 2

    expect(view(follower)).toEqual(before);
    expect(follower.mapper?.equals(singletonMap())).toBe(true);
  });

  it('a snapshot with a newer epoch replaces the map, even with a lower version', () => {
    const { follower } = synced();
    const next = new ShardMapper(8, ds);
    expect(next.updateFromEvent(ShardEvents.ingestionStarted(ds, shardNum(5), r1)).ok).toBe(true);
    expect(follower.applySnapshot(next.toSnapshot(epoch(2)))).toBe('applied');
    expect(follower.epoch).toBe(2);
    expect(follower.version).toBe(1);
    expect(follower.mapper?.equals(next)).toBe(true);
    expect(follower.mapper?.statusForShard(1)).toEqual(Status.unassigned);

    // Events now follow the new epoch.
    expect(follower.applyEvent(stamped(1, 3, ShardEvents.ingestionStarted(ds, shardNum(0), r1)))).toBe('stale');
    expect(follower.applyEvent(stamped(2, 2, ShardEvents.ingestionStarted(ds, shardNum(6), r2)))).toBe('applied');
    expect(follower.mapper?.nodeForShard(6)).toBe(r2);
  });

  it('a newer snapshot of the same epoch replaces the map', () => {
    const { follower, map } = synced();
    expect(map.updateFromEvent(ShardEvents.ingestionStarted(ds, shardNum(0), r1)).ok).toBe(true);
    expect(map.updateFromEvent(ShardEvents.ingestionStarted(ds, shardNum(2), r1)).ok).toBe(true);
    expect(follower.applySnapshot(map.toSnapshot(epoch(1)))).toBe('applied');
    expect(follower.version).toBe(4);
    expect(follower.mapper?.equals(map)).toBe(true);
  });

  it('a snapshot for another dataset is stale, before and after the first snapshot', () => {
    const fresh = new ShardMapFollower(ds);
    expect(fresh.applySnapshot(new ShardMapper(8, other).toSnapshot(epoch(5)))).toBe('stale');
    expect(fresh.mapper).toBeUndefined();

    const { follower } = synced();
    const before = view(follower);
    expect(follower.applySnapshot(new ShardMapper(8, other).toSnapshot(epoch(5)))).toBe('stale');
    expect(view(follower)).toEqual(before);
  });
});

describe('ShardMapFollower.applyingChanges in slices', () => {
  /** A map of 4096 shards at version 0, and a decision of 3000 events on it: starts, then catch-ups. */
  function largeDecision(): { follower: ShardMapFollower; events: ShardEvent[] } {
    const follower = new ShardMapFollower(ds);
    follower.applySnapshot(new ShardMapper(4096, ds).toSnapshot(epoch(1)));
    const events: ShardEvent[] = [];
    for (let s = 0; s < 1500; s++) events.push(ShardEvents.assignmentStarted(ds, shardNum(s), s % 2 === 0 ? r1 : r2));
    for (let s = 0; s < 1500; s++) events.push(ShardEvents.ingestionStarted(ds, shardNum(s), s % 2 === 0 ? r1 : r2));
    return { follower, events };
  }

  it('ends with the map applyChanges makes, pausing between slices, the map unchanged until the last event', async () => {
    const whole = largeDecision();
    expect(whole.follower.applyChanges({ epoch: epoch(1), base: { epoch: 1, version: 0 }, events: whole.events })).toBe('applied');
    const sliced = largeDecision();
    const before = view(sliced.follower);
    let pauses = 0;
    const outcome = await runInSlices(sliced.follower.applyingChanges({ epoch: epoch(1), base: { epoch: 1, version: 0 }, events: sliced.events }), async () => {
      pauses++;
      expect(view(sliced.follower)).toEqual(before); // others see the map as it was, never half a decision
    });
    expect(outcome).toBe('applied');
    expect(pauses).toBe(Math.floor(3000 / 1024));
    expect(view(sliced.follower)).toEqual(view(whole.follower));
    expect(sliced.follower.version).toBe(3000);
  });

  it('is a gap, changing nothing, when an event does not apply or the map changed meanwhile; stale and gap stamps as applyChanges', async () => {
    const { follower, events } = largeDecision();
    const before = view(follower);
    const wrong = [...events.slice(0, 1000), ShardEvents.ingestionStarted(other, shardNum(0), r1)];
    const none = async () => {};
    expect(await runInSlices(follower.applyingChanges({ epoch: epoch(1), base: { epoch: 1, version: 0 }, events: wrong }), none)).toBe('gap');
    expect(view(follower)).toEqual(before);
    expect(await runInSlices(follower.applyingChanges({ epoch: epoch(1), base: { epoch: 1, version: 5 }, events }), none)).toBe('gap');
    expect(await runInSlices(follower.applyingChanges({ epoch: epoch(0), base: { epoch: 0, version: 0 }, events: [] }), none)).toBe('stale');
    // A whole map taken between two slices: the changes were made on the map before it.
    const newer = new ShardMapper(4096, ds).toSnapshot(epoch(2));
    const outcome = await runInSlices(
      follower.applyingChanges({ epoch: epoch(1), base: { epoch: 1, version: 0 }, events }),
      async () => void follower.applySnapshot(newer),
    );
    expect(outcome).toBe('gap');
    expect(follower.epoch).toBe(2);
  });
});
