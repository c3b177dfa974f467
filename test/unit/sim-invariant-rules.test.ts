// The simulator's invariant rules (src/sim/invariant-rules.ts) alone, on hand-made maps: each rule
// reports the cluster state that breaks its invariant and stays silent on the one that keeps it, so
// a clean simulation run means the cluster kept them, not that a rule could not see.
import { describe, expect, it } from 'vitest';
import { datasetRef, epoch, nodeId, shardNum, type DatasetRef } from '../../src/core/ids.js';
import { ShardMapper } from '../../src/core/shard-mapper.js';
import type { ShardMapSnapshot } from '../../src/core/shard-map-snapshot.js';
import { ShardEvents } from '../../src/core/status.js';
import { validateDatasetConfig } from '../../src/core/dataset-config.js';
import { CountingSink } from '../../src/ingest/counting-sink.js';
import { atRestViolations, failoverLosses, mapsAheadOfLease, rackViolations, uningested, waitingForCooldown } from '../../src/sim/invariant-rules.js';
import { COOLDOWN_MS, DATASETS, RATE, type PreCrash } from '../../src/sim/world.js';

const [a, b, c] = [nodeId('a'), nodeId('b'), nodeId('c')];
const gamma = datasetRef('gamma');
const alpha = datasetRef('alpha');

/** A map of `ref` with each shard's copies on the nodes given (the first its primary), all Active. */
function mapOf(ref: DatasetRef, numShards: number, copies: (shard: number) => readonly string[]): ShardMapper {
  const m = new ShardMapper(numShards, ref);
  for (let s = 0; s < numShards; s++) {
    copies(s).forEach((n, i) => {
      const shard = shardNum(s);
      const event = i === 0 ? ShardEvents.assignmentStarted(ref, shard, nodeId(n)) : ShardEvents.copyAdded(ref, shard, nodeId(n));
      expect(m.updateFromEvent(event).ok).toBe(true);
      expect(m.updateFromEvent(ShardEvents.ingestionStarted(ref, shard, nodeId(n))).ok).toBe(true);
    });
  }
  return m;
}

const snapshot = (m: ShardMapper, e = 1): ShardMapSnapshot => m.toSnapshot(epoch(e));

describe('I8: copies of a shard in distinct racks', () => {
  const rackOf = new Map([
    ['a', 'r1'],
    ['b', 'r1'],
    ['c', 'r2'],
  ]);

  it('reports two copies of a shard in one rack while another rack is live', () => {
    const maps = new Map([[gamma, mapOf(gamma, 8, (s) => (s === 3 ? ['a', 'b'] : ['a', 'c']))]]);
    const found = rackViolations(maps, ['a', 'b', 'c'], rackOf);
    expect(found).toHaveLength(1);
    expect(found[0]).toMatch(/^gamma: .*3/);
  });

  it('is silent when the copies are in distinct racks, or when one rack is all that is live', () => {
    expect(rackViolations(new Map([[gamma, mapOf(gamma, 8, () => ['a', 'c'])]]), ['a', 'b', 'c'], rackOf)).toEqual([]);
    expect(rackViolations(new Map([[gamma, mapOf(gamma, 8, () => ['a', 'b'])]]), ['a', 'b'], rackOf)).toEqual([]);
  });
});

describe('I6: nothing persisted ahead of the lease', () => {
  it('reports a map of a newer epoch than the lease, and only that one', () => {
    const m = mapOf(gamma, 8, () => ['a', 'c']);
    expect(mapsAheadOfLease([snapshot(m, 2), snapshot(m, 3)], 2)).toEqual(["a map of gamma at epoch 3 is newer than the lease's 2"]);
    expect(mapsAheadOfLease([snapshot(m, 2)], 2)).toEqual([]);
  });
});

describe('I4: a failover loses nothing of a live owner', () => {
  const pre = (maps: Map<DatasetRef, ShardMapSnapshot>): PreCrash => ({
    maps,
    node: 'c',
    epoch: 1,
    members: new Map([
      ['a', 'a#1'],
      ['b', 'b#1'],
      ['c', 'c#1'],
    ]),
    subscriptions: new Set(),
    draining: new Set(),
  });
  const view = (before: Map<DatasetRef, ShardMapSnapshot>, after: Map<DatasetRef, ShardMapSnapshot>) => ({
    pre: pre(before),
    after,
    state: undefined,
    subscribers: [],
    members: [
      { node: 'a', incarnation: 'a#1' },
      { node: 'b', incarnation: 'b#1' },
    ],
    wasRemoved: () => false,
    exempt: () => false,
  });
  const before = new Map([[alpha, snapshot(mapOf(alpha, 8, (s) => [s < 4 ? 'a' : 'b']))]]);

  it('reports a lost dataset, and a shard moved off its live owner', () => {
    expect(failoverLosses(view(before, new Map()))).toEqual(['dataset alpha lost in the failover']);
    const moved = new Map([
      [
        alpha,
        snapshot(
          mapOf(alpha, 8, (s) => [s < 4 && s !== 2 ? 'a' : 'b']),
          2,
        ),
      ],
    ]);
    expect(failoverLosses(view(before, moved))).toEqual(['alpha/2 was on a, which is still alive, and is now on b']);
  });

  it('is silent when every live owner kept its shards', () => {
    expect(
      failoverLosses(
        view(
          before,
          new Map([
            [
              alpha,
              snapshot(
                mapOf(alpha, 8, (s) => [s < 4 ? 'a' : 'b']),
                2,
              ),
            ],
          ]),
        ),
      ),
    ).toEqual([]);
  });
});

describe('at rest: I2, I4 and I3', () => {
  const rest = (maps: Map<DatasetRef, ShardMapSnapshot>) => ({
    now: 100_000,
    maps,
    members: [a, b, c],
    placeable: [
      { node: 'a', rack: 'r1' },
      { node: 'b', rack: 'r2' },
      { node: 'c', rack: 'r3' },
    ],
    cooldowns: [],
    delayStarts: new Map(),
    subscribers: [],
  });

  it('reports every dataset without a map (I4), and an owner that is not a member (I2)', () => {
    const found = atRestViolations(rest(new Map()));
    expect(found.map((f) => f.invariant)).toEqual(DATASETS.map(() => 'I4'));
    const ghost = new Map([[alpha, snapshot(mapOf(alpha, 8, () => ['ghost']))]]);
    expect(atRestViolations(rest(ghost))).toContainEqual({ invariant: 'I2', message: 'alpha: ghost owns shards but is not a member' });
  });
});

describe('I5: every record produced was ingested', () => {
  const config = (ref: string, numShards: number) => {
    const r = validateDatasetConfig({ ref, numShards, minNumNodes: 1, source: { type: 'synthetic' } });
    if (!r.ok) throw new Error(r.error.message);
    return r.value;
  };

  it('reports a shard whose sink has not covered what was produced by the horizon, up to a poisoned offset', async () => {
    const sink = new CountingSink();
    const produced = (2_000 * RATE) / 1000;
    const records = (n: number) => Array.from({ length: n }, (_, offset) => ({ offset, key: `k${offset}`, value: offset }));
    for (const d of DATASETS) {
      for (let s = 0; s < d.numShards; s++)
        await sink.accept(config(d.ref, d.numShards), shardNum(s), records(d.ref === 'alpha' && s === 1 ? produced - 1 : produced));
    }
    expect(uningested(sink, new Map(), 2_000)).toEqual([`alpha/1: record ${produced - 1} was produced but never ingested (${produced} produced)`]);
    expect(uningested(sink, new Map([['alpha/1', produced - 1]]), 2_000)).toEqual([]);
  });
});

describe('waiting for a cooldown', () => {
  it('holds while a shard short of copies has a cooldown running, and not once it ended', () => {
    const maps = new Map([[gamma, snapshot(mapOf(gamma, 8, (s) => (s === 5 ? ['a'] : ['a', 'c'])))]]);
    const cooldowns = [{ dataset: gamma, shard: shardNum(5), reassignedAt: 10_000 }];
    const sink = new CountingSink();
    expect(waitingForCooldown(maps, cooldowns, 10_000 + COOLDOWN_MS - 1, new Map(), sink)).toBe(true);
    expect(waitingForCooldown(maps, cooldowns, 10_000 + COOLDOWN_MS, new Map(), sink)).toBe(false);
    const full = new Map([[gamma, snapshot(mapOf(gamma, 8, () => ['a', 'c']))]]);
    expect(waitingForCooldown(full, cooldowns, 10_000, new Map(), sink)).toBe(false);
  });
});
