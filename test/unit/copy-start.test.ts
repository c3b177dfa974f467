// Where a copy of a shard starts and how far it catches up before it serves, on hand-built checkpoints.
import { describe, expect, it } from 'vitest';
import { nodeId } from '../../src/core/ids.js';
import { copyStart, type CopyStartInput } from '../../src/ingest/copy-start.js';
import type { ShardCheckpoints } from '../../src/store/meta-store.js';

const a = nodeId('a');
const b = nodeId('b');

function checkpoints(copies: Record<string, Record<string, number>>, shared: Record<string, number> = {}): ShardCheckpoints {
  return { copies: new Map(Object.entries(copies).map(([n, g]) => [nodeId(n), new Map(Object.entries(g))])), shared: new Map(Object.entries(shared)) };
}

const base: Omit<CopyStartInput, 'checkpoints'> = { node: a, group: '0', copyStartFrom: 'earliest', newShardStartFrom: 'earliest', earliest: 100, endAtStart: 5_000 };

describe('copyStart', () => {
  it('a restarted copy resumes from its own checkpoint, not from the furthest copy', () => {
    const plan = copyStart({ ...base, checkpoints: checkpoints({ a: { '0': 1_999 }, b: { '0': 4_800 } }) });
    expect(plan).toEqual({ from: 2_000, reason: 'own-checkpoint', catchUpTo: 5_000, peersCheckpoint: 4_800, lostToRetention: 0 });
  });

  it('a new copy starts from the earliest retained offset by default, and catches up past the serving copies before it serves', () => {
    const plan = copyStart({ ...base, checkpoints: checkpoints({ b: { '0': 4_800 }, c: { '0': 4_900 } }) });
    expect(plan).toMatchObject({ from: 100, reason: 'earliest', peersCheckpoint: 4_900 });
    // Reported Available only at the end seen at start, beyond every serving copy's checkpoint.
    expect(plan.catchUpTo).toBeGreaterThan(plan.peersCheckpoint!);
  });

  it("with copyStartFrom serving-copies a new copy starts after the furthest other copy's checkpoint", () => {
    const plan = copyStart({ ...base, copyStartFrom: 'serving-copies', checkpoints: checkpoints({ b: { '0': 4_800 }, c: { '0': 4_900, other: 4_990 } }) });
    expect(plan).toMatchObject({ from: 4_901, reason: 'serving-copies', catchUpTo: 5_000 });
  });

  it('a shard checkpoint of an older store starts every copy without its own (migration), whatever copyStartFrom says', () => {
    const stored = checkpoints({ b: { '0': 4_800 } }, { '0': 3_000 });
    expect(copyStart({ ...base, checkpoints: stored })).toMatchObject({ from: 3_001, reason: 'shared-checkpoint' });
    expect(copyStart({ ...base, copyStartFrom: 'serving-copies', checkpoints: stored })).toMatchObject({ from: 3_001, reason: 'shared-checkpoint' });
    // A copy's own checkpoint wins over the shared one.
    expect(copyStart({ ...base, node: b, checkpoints: stored })).toMatchObject({ from: 4_801, reason: 'own-checkpoint' });
  });

  it('a shard nobody ever checkpointed starts as the source says (latest: at the end, nothing to catch up)', () => {
    expect(copyStart({ ...base, checkpoints: checkpoints({}) })).toMatchObject({ from: 100, reason: 'earliest' });
    expect(copyStart({ ...base, newShardStartFrom: 'latest', checkpoints: checkpoints({}) })).toMatchObject({ from: 5_000, reason: 'latest', catchUpTo: 5_000 });
    // Another group's checkpoint is not this group's.
    expect(copyStart({ ...base, newShardStartFrom: 'latest', checkpoints: checkpoints({ b: { other: 10 } }) })).toMatchObject({ reason: 'latest', peersCheckpoint: undefined });
  });

  it('a checkpoint older than the earliest retained offset starts at the earliest and counts what retention took', () => {
    expect(copyStart({ ...base, checkpoints: checkpoints({ a: { '0': 49 } }) })).toMatchObject({ from: 100, reason: 'own-checkpoint', lostToRetention: 50 });
  });
});
