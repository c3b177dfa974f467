// Where a copy of a shard starts and how far it catches up before it serves, on hand-built checkpoints
// and, for sinks of one shared store, on random ones.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { compareTokens, type FencingToken } from '../../src/core/fencing-token.js';
import { nodeId, type NodeId } from '../../src/core/ids.js';
import { copyStart, newestFencedCheckpoint, type CopyStartInput } from '../../src/ingest/copy-start.js';
import type { ShardCheckpoints } from '../../src/store/meta-store.js';

const a = nodeId('a');
const b = nodeId('b');

function checkpoints(copies: Record<string, Record<string, number>>, shared: Record<string, number> = {}): ShardCheckpoints {
  return { copies: new Map(Object.entries(copies).map(([n, g]) => [nodeId(n), new Map(Object.entries(g))])), shared: new Map(Object.entries(shared)) };
}

const base: Omit<CopyStartInput, 'checkpoints'> = {
  node: a,
  group: '0',
  copyStartFrom: 'earliest',
  newShardStartFrom: 'earliest',
  earliest: 100,
  endAtStart: 5_000,
};

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
    expect(copyStart({ ...base, newShardStartFrom: 'latest', checkpoints: checkpoints({}) })).toMatchObject({
      from: 5_000,
      reason: 'latest',
      catchUpTo: 5_000,
    });
    // Another group's checkpoint is not this group's.
    expect(copyStart({ ...base, newShardStartFrom: 'latest', checkpoints: checkpoints({ b: { other: 10 } }) })).toMatchObject({
      reason: 'latest',
      peersCheckpoint: undefined,
    });
  });

  it('a checkpoint older than the earliest retained offset starts at the earliest and counts what retention took', () => {
    expect(copyStart({ ...base, checkpoints: checkpoints({ a: { '0': 49 } }) })).toMatchObject({ from: 100, reason: 'own-checkpoint', lostToRetention: 50 });
  });
});

/** Checkpoints with tokens: node → group → [offset, epoch, version] (a token) or offset alone (none). */
function fenced(copies: Record<string, Record<string, number | readonly [number, number, number]>>, shared: Record<string, number> = {}): ShardCheckpoints {
  const offsets = new Map<NodeId, Map<string, number>>();
  const tokens = new Map<NodeId, Map<string, FencingToken>>();
  for (const [n, groups] of Object.entries(copies)) {
    for (const [g, c] of Object.entries(groups)) {
      const [offset, token] = typeof c === 'number' ? [c, undefined] : [c[0], { epoch: c[1], version: c[2] }];
      offsets.set(nodeId(n), (offsets.get(nodeId(n)) ?? new Map<string, number>()).set(g, offset));
      if (token) tokens.set(nodeId(n), (tokens.get(nodeId(n)) ?? new Map<string, FencingToken>()).set(g, token));
    }
  }
  return { copies: offsets, shared: new Map(Object.entries(shared)), tokens };
}

describe('copyStart with a sink of one shared store', () => {
  // A left the shard at 1 999 under token 1/3; B held it under 1/5 up to 4 800; now it is A's again.
  const returned = fenced({ a: { '0': [1_999, 1, 3] }, b: { '0': [4_800, 1, 5] } });

  it("a copy back on its node resumes after the shard's newest fenced checkpoint, not its own older one, and still recovers to the end seen at start", () => {
    expect(copyStart({ ...base, storage: 'shared', checkpoints: returned })).toEqual({
      from: 4_801,
      reason: 'newest-fenced-checkpoint',
      catchUpTo: 5_000,
      peersCheckpoint: 4_800,
      lostToRetention: 0,
    });
  });

  it('a per-copy sink, or one that declares nothing, resumes from its own checkpoint as before', () => {
    expect(copyStart({ ...base, storage: 'per-copy', checkpoints: returned })).toMatchObject({ from: 2_000, reason: 'own-checkpoint' });
    expect(copyStart({ ...base, checkpoints: returned })).toMatchObject({ from: 2_000, reason: 'own-checkpoint' });
  });

  it('its own checkpoint wins when it is further than the newest fenced one (a newer token that replayed from lower)', () => {
    const stored = fenced({ a: { '0': [3_000, 1, 3] }, b: { '0': [2_500, 1, 5] } });
    expect(copyStart({ ...base, storage: 'shared', checkpoints: stored })).toMatchObject({ from: 3_001, reason: 'own-checkpoint' });
  });

  it('the newest is by token first: a further checkpoint of an older token is not it', () => {
    const stored = fenced({ a: { '0': [1_000, 1, 3] }, b: { '0': [2_000, 1, 5] }, c: { '0': [4_000, 1, 4] } });
    expect(newestFencedCheckpoint(stored, '0')).toEqual({ node: b, offset: 2_000, token: { epoch: 1, version: 5 } });
    expect(copyStart({ ...base, storage: 'shared', checkpoints: stored })).toMatchObject({ from: 2_001, reason: 'newest-fenced-checkpoint' });
  });

  it('a copy without a checkpoint of its own starts after the newest fenced one too, whatever copyStartFrom says', () => {
    const stored = fenced({ b: { '0': [4_800, 2, 1] } });
    expect(copyStart({ ...base, storage: 'shared', checkpoints: stored })).toMatchObject({ from: 4_801, reason: 'newest-fenced-checkpoint', catchUpTo: 5_000 });
    expect(copyStart({ ...base, storage: 'shared', copyStartFrom: 'serving-copies', checkpoints: stored })).toMatchObject({ from: 4_801 });
  });

  it('checkpoints without a token vouch for nothing here: the per-copy rules apply', () => {
    const stored = fenced({ a: { '0': 1_999 }, b: { '0': 4_800 } });
    expect(copyStart({ ...base, storage: 'shared', checkpoints: stored })).toMatchObject({ from: 2_000, reason: 'own-checkpoint' });
    // Another group's newest is not this group's.
    expect(copyStart({ ...base, storage: 'shared', checkpoints: fenced({ a: { '0': [10, 1, 1] }, b: { other: [4_800, 9, 9] } }) })).toMatchObject({
      from: 100,
      reason: 'own-checkpoint',
      lostToRetention: 89,
    });
  });

  // Random shards: up to four nodes' checkpoints in two groups, some with tokens, maybe a legacy one.
  const token = fc.record({ epoch: fc.nat(3), version: fc.nat(6) });
  const checkpoint = fc.tuple(fc.nat(6_000), fc.option(token, { nil: undefined }));
  const arbitraryInput = fc
    .record({
      copies: fc.dictionary(fc.constantFrom('a', 'b', 'c', 'd'), fc.dictionary(fc.constantFrom('0', '1'), checkpoint, { maxKeys: 2 }), { maxKeys: 4 }),
      legacy: fc.option(fc.nat(6_000), { nil: undefined }),
      node: fc.constantFrom('a', 'b', 'c', 'd'),
      copyStartFrom: fc.constantFrom('earliest' as const, 'serving-copies' as const),
      newShardStartFrom: fc.constantFrom('earliest' as const, 'latest' as const),
      earliest: fc.nat(3_000),
      span: fc.nat(4_000),
    })
    .map((r): Omit<CopyStartInput, 'storage'> => {
      const copies = Object.fromEntries(
        Object.entries(r.copies).map(([n, groups]) => [
          n,
          Object.fromEntries(Object.entries(groups).map(([g, [offset, t]]) => [g, t ? ([offset, t.epoch, t.version] as const) : offset])),
        ]),
      );
      return {
        checkpoints: fenced(copies, r.legacy === undefined ? {} : { '0': r.legacy }),
        node: nodeId(r.node),
        group: '0',
        copyStartFrom: r.copyStartFrom,
        newShardStartFrom: r.newShardStartFrom,
        earliest: r.earliest,
        endAtStart: r.earliest + r.span,
      };
    });

  /** The newest fenced checkpoint of group 0, found the slow way: every fenced one sorted by (token, offset). */
  function newestBySorting(input: Omit<CopyStartInput, 'storage'>): number | undefined {
    const all: { offset: number; token: FencingToken }[] = [];
    for (const [n, groups] of input.checkpoints.copies) {
      const t = input.checkpoints.tokens?.get(n)?.get('0');
      const offset = groups.get('0');
      if (t && offset !== undefined) all.push({ offset, token: t });
    }
    all.sort((x, y) => compareTokens(x.token, y.token) || x.offset - y.offset);
    return all.at(-1)?.offset;
  }

  it('on random checkpoints: a shared-store copy starts at exactly the later of the per-copy start and the newest fenced checkpoint + 1; per-copy is unchanged', () => {
    fc.assert(
      fc.property(arbitraryInput, (input) => {
        const perCopy = copyStart(input);
        expect(copyStart({ ...input, storage: 'per-copy' })).toEqual(perCopy);
        const plan = copyStart({ ...input, storage: 'shared' });
        const newest = newestBySorting(input);
        // Never below the newest fenced checkpoint + 1 when there is one (nothing vouched for is replayed),
        // never below the per-copy start, and never above the later of the two (nothing unvouched is skipped).
        if (newest !== undefined) expect(plan.from).toBeGreaterThanOrEqual(newest + 1);
        expect(plan.from).toBeGreaterThanOrEqual(perCopy.from);
        expect(plan.from).toBe(Math.max(perCopy.from, newest === undefined ? -Infinity : newest + 1));
        // Said as the reason exactly when the newest fenced checkpoint moved the start (before retention's floor).
        expect(plan.reason === 'newest-fenced-checkpoint').toBe(newest !== undefined && newest + 1 > perCopy.from - perCopy.lostToRetention);
        // It serves only once it reached the end seen at start, like every copy.
        expect(plan.catchUpTo).toBe(input.endAtStart);
        expect(plan.from).toBeGreaterThanOrEqual(input.earliest);
        expect(plan.lostToRetention).toBeGreaterThanOrEqual(0);
        expect(plan.lostToRetention).toBeLessThanOrEqual(perCopy.lostToRetention);
      }),
      { numRuns: 2_000 },
    );
  });
});
