// parseShardMapSnapshot reads shard maps from untrusted places (the bus, a file, Cassandra):
// it must accept what toSnapshot writes and refuse, with InvalidSnapshotError, anything else.
import { describe, expect, it } from 'vitest';
import { InvalidSnapshotError } from '../../src/core/errors.js';
import { datasetRef, epoch, nodeId, shardNum } from '../../src/core/ids.js';
import { compareStamps, parseShardMapSnapshot, SHARD_MAP_FORMAT } from '../../src/core/shard-map-snapshot.js';
import { ShardMapper } from '../../src/core/shard-mapper.js';
import { ShardEvents } from '../../src/core/status.js';

const ds = datasetRef('ds1');
const r1 = nodeId('r1');
const r2 = nodeId('r2');

/** The JSON shape of a snapshot, loose enough to corrupt in tests. */
interface Json {
  format: number;
  numShards: number;
  shards: { status: { type: string }; assignments: { node: string; placement: string; status: { type: string } }[]; lastNode?: string }[];
}

/** A 16-shard map with every status, as it would arrive over the wire (version 8). */
function wire(): Json {
  const m = new ShardMapper(16, ds);
  const events = [
    ShardEvents.assignmentStarted(ds, shardNum(1), r1),
    ShardEvents.ingestionStarted(ds, shardNum(2), r1),
    ShardEvents.recoveryInProgress(ds, shardNum(3), r2, 60),
    ShardEvents.ingestionError(ds, shardNum(4), r2, 'bad data'),
    ShardEvents.ingestionStarted(ds, shardNum(5), r1),
    ShardEvents.ingestionStopped(ds, shardNum(5), r1),
    ShardEvents.ingestionStarted(ds, shardNum(6), r2),
    ShardEvents.shardDown(ds, shardNum(6), r2),
  ];
  for (const e of events) expect(m.updateFromEvent(e).ok).toBe(true);
  return JSON.parse(JSON.stringify(m.toSnapshot(epoch(4)))) as Json;
}

/** The snapshot of an accepted parse; fails the test if it was refused. */
function parsed(input: unknown) {
  const r = parseShardMapSnapshot(input);
  if (!r.ok) throw r.error;
  return r.value;
}

/** The error of a refused parse; fails the test if it was accepted. */
function refused(input: unknown): InvalidSnapshotError {
  const r = parseShardMapSnapshot(input);
  if (r.ok) throw new Error('expected the snapshot to be refused');
  expect(r.error).toBeInstanceOf(InvalidSnapshotError);
  expect(r.error.code).toBe('INVALID_SNAPSHOT');
  return r.error;
}

describe('parseShardMapSnapshot', () => {
  it('accepts a snapshot that went through JSON, and it rebuilds an equal mapper', () => {
    const input = wire();
    const r = parseShardMapSnapshot(input);
    if (!r.ok) throw r.error;
    expect(r.value).toMatchObject({ format: SHARD_MAP_FORMAT, dataset: ds, numShards: 16, epoch: 4, version: 8 });
    expect(r.value).toEqual(input);

    const back = ShardMapper.fromSnapshot(r.value);
    expect(back.version).toBe(8);
    expect(back.shardsForNode(r1)).toEqual([1, 2, 5]);
    expect(back.shardsForNode(r2)).toEqual([3]);
    expect(back.statusForShard(4)).toEqual({ type: 'Error', message: 'bad data' });
    expect(back.recordForShard(6).lastNode).toBe(r2);
  });

  it('refuses an unknown format', () => {
    expect(refused({ ...wire(), format: 3 }).message).toMatch(/format/i);
    expect(refused({ ...wire(), format: '2' }).message).toMatch(/format/i);
  });

  it('reads a format 1 map (written before replicas) as the same map in format 2', () => {
    // Exactly what a cluster upgraded in place finds in its MetaStore: no assignmentVersions.
    const { assignmentVersions: _, ...rest } = wire() as Json & { assignmentVersions: number[] };
    const old = { ...rest, format: 1 };
    const r = parseShardMapSnapshot(old);
    if (!r.ok) throw r.error;
    expect(r.value.format).toBe(SHARD_MAP_FORMAT);
    expect(r.value.assignmentVersions).toEqual(new Array(16).fill(0));
    expect(ShardMapper.fromSnapshot(r.value).equals(ShardMapper.fromSnapshot(parsed(wire())))).toBe(true);
  });

  it('a format 1 map still has at most one assignment per shard', () => {
    const input = { ...wire(), format: 1 } as Json & { assignmentVersions?: number[] };
    delete input.assignmentVersions;
    const shard = input.shards[2]!;
    shard.assignments.push({ ...shard.assignments[0]!, node: 'r2' });
    expect(refused(input).message).toMatch(/at most one assignment/);
  });

  it('keeps replicas: several copies of one shard on distinct nodes', () => {
    const input = wire();
    const shard = input.shards[2]!;
    shard.assignments.push({ ...shard.assignments[0]!, node: 'r2', placement: 'Initializing', status: { type: 'Assigned' } });
    const snap = parsed(input);
    expect(snap.shards[2]!.assignments.map((a) => a.node)).toEqual(['r1', 'r2']);
  });

  it('refuses assignmentVersions of the wrong length or with a negative version', () => {
    const short = wire() as Json & { assignmentVersions: number[] };
    short.assignmentVersions.pop();
    expect(refused(short).message).toMatch(/assignmentVersions/);
    const negative = wire() as Json & { assignmentVersions: number[] };
    negative.assignmentVersions[0] = -1;
    expect(refused(negative).message).toMatch(/assignmentVersions/);
  });

  it('refuses a shard list whose length is not numShards', () => {
    const input = wire();
    input.shards.pop();
    expect(refused(input).message).toMatch(/15 shards|numShards/);
  });

  it('refuses numShards 34 (not a power of two), even with 34 shards listed', () => {
    const input = wire();
    input.numShards = 34;
    while (input.shards.length < 34) input.shards.push({ status: { type: 'Unassigned' }, assignments: [] });
    expect(refused(input).message).toMatch(/numShards|power of two/);
  });

  it('refuses a malformed node id, as an owner or as a last owner', () => {
    const owner = wire();
    owner.shards[2]!.assignments[0]!.node = 'bad node!';
    expect(refused(owner).message).toMatch(/node/i);

    const last = wire();
    last.shards[6]!.lastNode = '';
    expect(refused(last).message).toMatch(/node/i);
  });

  it('refuses two copies of one shard on one node', () => {
    const input = wire();
    const shard = input.shards[2]!;
    shard.assignments.push({ ...shard.assignments[0]! });
    expect(refused(input).message).toMatch(/two copies on one node/i);
  });

  it("refuses a shard status that differs from its owner's", () => {
    const input = wire();
    input.shards[1]!.status = { type: 'Active' }; // owner r1 is Assigned
    expect(refused(input).message).toMatch(/differs|owner/i);
  });

  it('refuses things that are not snapshots', () => {
    refused(null);
    refused('{}');
    refused({ format: 1 });
    refused({ ...wire(), dataset: '1-not-a-name' });
    refused({ ...wire(), epoch: -1 });
    refused({ ...wire(), extra: true });
  });
});

describe('compareStamps', () => {
  it('orders by epoch first, then by version', () => {
    expect(compareStamps({ epoch: 1, version: 99 }, { epoch: 2, version: 0 })).toBeLessThan(0);
    expect(compareStamps({ epoch: 2, version: 0 }, { epoch: 1, version: 99 })).toBeGreaterThan(0);
    expect(compareStamps({ epoch: 2, version: 3 }, { epoch: 2, version: 4 })).toBeLessThan(0);
    expect(compareStamps({ epoch: 2, version: 4 }, { epoch: 2, version: 3 })).toBeGreaterThan(0);
    expect(compareStamps({ epoch: 2, version: 4 }, { epoch: 2, version: 4 })).toBe(0);
  });

  it('sorts stamps oldest first', () => {
    const stamps = [
      { epoch: 2, version: 1 },
      { epoch: 1, version: 7 },
      { epoch: 3, version: 0 },
      { epoch: 1, version: 2 },
      { epoch: 2, version: 0 },
    ];
    expect([...stamps].sort(compareStamps)).toEqual([
      { epoch: 1, version: 2 },
      { epoch: 1, version: 7 },
      { epoch: 2, version: 0 },
      { epoch: 2, version: 1 },
      { epoch: 3, version: 0 },
    ]);
  });
});
