// The behaviour every MetaStore adapter must have (src/store/meta-store.ts), as a reusable suite:
// the memory and file stores run it in test/unit, the Cassandra adapter in test/integration.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { validateDatasetConfig, type DatasetConfig } from '../../src/core/dataset-config.js';
import { datasetRef, epoch, incarnation, nodeId, replyTo, shardNum, type DatasetRef, type SubscriberId } from '../../src/core/ids.js';
import type { AppliedRequest } from '../../src/core/shard-manager/protocol.js';
import type { ShardMapSnapshot } from '../../src/core/shard-map-snapshot.js';
import { ShardMapper } from '../../src/core/shard-mapper.js';
import { ShardEvents } from '../../src/core/status.js';
import { CheckpointRefusedError, FencedError, RELEASED_RENEWAL, type MetaStore, type ShardCheckpoints } from '../../src/store/meta-store.js';
import { largeMap, mapDifference, withChanges, withProgress } from './large-maps.js';

/** The fencing token the checkpoints of these tests are written with (one assignment throughout). */
const TOKEN = { epoch: 1, version: 1 };

export interface MetaStoreFixture {
  readonly store: MetaStore;
  readonly cleanup?: () => Promise<void>;
  /**
   * Stores a shard's checkpoint as a version before per-copy checkpoints wrote it, the way that
   * store kept it (a format 2 file, a row of Cassandra's old table), and returns the store that
   * reads it (for a file, one opened on it). Absent for a store with no older layout (memory).
   */
  readonly withSharedCheckpoints?: (rows: readonly SharedCheckpointRow[]) => Promise<MetaStore>;
  /**
   * Stores copies' checkpoints as a version before fencing tokens wrote them (no token), and returns
   * the store that reads them. Absent for a store with no older layout (memory).
   */
  readonly withUntokenedCheckpoints?: (rows: readonly (SharedCheckpointRow & { readonly node: string })[]) => Promise<MetaStore>;
}

export interface SharedCheckpointRow {
  readonly dataset: DatasetRef;
  readonly shard: number;
  readonly group: string;
  readonly offset: number;
}

/** A shard's checkpoints as plain data, for `toEqual`: `{ copies: { node: { group: offset } }, shared: { group: offset } }`. */
export function plainCheckpoints(c: ShardCheckpoints | undefined): { copies: Record<string, Record<string, number>>; shared: Record<string, number> } {
  if (!c) throw new Error('no checkpoints read for the shard');
  return { copies: Object.fromEntries([...c.copies].map(([node, groups]) => [node, Object.fromEntries(groups)])), shared: Object.fromEntries(c.shared) };
}

/** The checkpoints of a shard only `node` wrote. */
export function onlyCopy(node: string, groups: Record<string, number>) {
  return { copies: { [node]: groups }, shared: {} };
}

export const NONE = { copies: {}, shared: {} };

/**
 * Tries to change a value a store handed out. A store may hand out frozen values (the memory
 * store shares its stored, frozen values) or copies (Cassandra decodes fresh ones): either way the
 * change must not reach the store, which the caller then checks by reading again.
 */
function tryToChange(change: () => void): void {
  try {
    change();
  } catch (e) {
    if (!(e instanceof TypeError)) throw e;
  }
}

/** The datasets, nodes and incarnations of the contract, for adapter-specific tests too. */
export const ds1 = datasetRef('ds1');
export const ds2 = datasetRef('ds2');
export const nodeA = nodeId('node-a');
export const nodeB = nodeId('node-b');
export const incA = incarnation('a#1');
export const incB = incarnation('b#1');

export function datasetConfig(ref: DatasetRef, numShards = 4, recordsPerSecond = 100): DatasetConfig {
  const r = validateDatasetConfig({ ref, numShards, minNumNodes: 1, source: { type: 'synthetic', recordsPerSecond } });
  if (!r.ok) throw new Error(r.error.message);
  return r.value;
}

/** A 4-shard map of `dataset` with shard 0 on node-a, stamped `(e, version)`. */
export function shardMap(dataset: DatasetRef, e: number, version: number): ShardMapSnapshot {
  const m = new ShardMapper(4, dataset);
  m.updateFromEvent(ShardEvents.ingestionStarted(dataset, shardNum(0), nodeA));
  return { ...m.toSnapshot(epoch(e)), version };
}

/**
 * The same map as `shardMap` in the format written before replicas (format 1: no
 * assignmentVersions): what a cluster upgraded in place finds in its MetaStore.
 */
export function formatOneMap(dataset: DatasetRef, e: number, version: number): Record<string, unknown> {
  const { assignmentVersions: _, ...rest } = shardMap(dataset, e, version);
  return JSON.parse(JSON.stringify({ ...rest, format: 1 })) as Record<string, unknown>;
}

const byRef = (a: { ref: string }, b: { ref: string }): number => (a.ref < b.ref ? -1 : a.ref > b.ref ? 1 : 0);
const byDataset = (a: { dataset: string; shard?: number }, b: { dataset: string; shard?: number }): number =>
  a.dataset !== b.dataset ? (a.dataset < b.dataset ? -1 : 1) : (a.shard ?? 0) - (b.shard ?? 0);

export function metaStoreContract(name: string, makeStore: () => Promise<MetaStoreFixture>): void {
  describe(`MetaStore contract: ${name}`, () => {
    let fixture: MetaStoreFixture;
    let store: MetaStore;

    beforeEach(async () => {
      fixture = await makeStore();
      store = fixture.store;
    });

    afterEach(async () => {
      await fixture.cleanup?.();
    });

    /** Takes the lease for node-a at epoch 1. */
    async function leaseForA(): Promise<void> {
      expect(await store.takeLease(nodeA, incA, 0)).toEqual({ epoch: 1, node: nodeA, incarnation: incA, renewal: 0 });
    }

    describe('lease', () => {
      it('there is no lease at first; the first candidate takes epoch 1 from expected epoch 0', async () => {
        expect(await store.readLease()).toBeUndefined();
        const lease = await store.takeLease(nodeA, incA, 0);
        expect(lease).toEqual({ epoch: 1, node: nodeA, incarnation: incA, renewal: 0 });
        expect(await store.readLease()).toEqual(lease);
      });

      it('takeLease is a compare-and-set: a stale expected epoch gets nothing and changes nothing', async () => {
        await leaseForA();
        expect(await store.takeLease(nodeB, incB, 0)).toBeUndefined();
        expect(await store.takeLease(nodeB, incB, 5)).toBeUndefined();
        expect(await store.readLease()).toEqual({ epoch: 1, node: nodeA, incarnation: incA, renewal: 0 });

        expect(await store.takeLease(nodeB, incB, 1)).toEqual({ epoch: 2, node: nodeB, incarnation: incB, renewal: 0 });
        expect(await store.readLease()).toEqual({ epoch: 2, node: nodeB, incarnation: incB, renewal: 0 });
      });

      it('the holder renews it; a successor takes it only on the renewal it saw, and the former holder can renew no more', async () => {
        await leaseForA();
        expect(await store.renewLease(epoch(1), 1)).toBe(true);
        expect(await store.renewLease(epoch(1), 2)).toBe(true);
        expect(await store.readLease()).toEqual({ epoch: 1, node: nodeA, incarnation: incA, renewal: 2 });
        // A renewal seen before the last one is stale: the holder still renews, nothing is taken.
        expect(await store.takeLease(nodeB, incB, 1, 1)).toBeUndefined();
        expect(await store.readLease()).toEqual({ epoch: 1, node: nodeA, incarnation: incA, renewal: 2 });
        expect(await store.takeLease(nodeB, incB, 1, 2)).toEqual({ epoch: 2, node: nodeB, incarnation: incB, renewal: 0 });
        expect(await store.renewLease(epoch(1), 3)).toBe(false);
        expect(await store.readLease()).toEqual({ epoch: 2, node: nodeB, incarnation: incB, renewal: 0 });
        expect(await store.renewLease(epoch(2), 1)).toBe(true);
      });

      it('a holder that hands over marks its lease released; the successor takes it on that mark', async () => {
        await leaseForA();
        expect(await store.renewLease(epoch(1), 4)).toBe(true);
        expect(await store.renewLease(epoch(1), RELEASED_RENEWAL)).toBe(true);
        expect(await store.readLease()).toEqual({ epoch: 1, node: nodeA, incarnation: incA, renewal: RELEASED_RENEWAL });
        expect(await store.takeLease(nodeB, incB, 1, RELEASED_RENEWAL)).toEqual({ epoch: 2, node: nodeB, incarnation: incB, renewal: 0 });
      });

      it('nobody renews a lease that was never taken', async () => {
        expect(await store.renewLease(epoch(1), 1)).toBe(false);
        expect(await store.readLease()).toBeUndefined();
      });

      it('of two candidates racing from the same epoch exactly one wins, round after round', async () => {
        for (let round = 0; round < 5; round += 1) {
          const [a, b] = await Promise.all([store.takeLease(nodeA, incA, round), store.takeLease(nodeB, incB, round)]);
          const winners = [a, b].filter((l) => l !== undefined);
          expect(winners).toHaveLength(1);
          expect(winners[0]!.epoch).toBe(round + 1);
          expect(await store.readLease()).toEqual(winners[0]);
        }
      });
    });

    describe('subscriptions', () => {
      it('start empty, round trip whole, and come back as copies', async () => {
        expect(await store.subscriptions()).toEqual({ subscriptions: [], watchers: [] });
        await leaseForA();
        const subs = { subscriptions: [{ dataset: ds1, subscribers: ['n1@i/router' as SubscriberId] }], watchers: ['n1@i/guardian' as SubscriberId] };
        await store.putSubscriptions(subs, epoch(1));
        const read = await store.subscriptions();
        expect(read).toEqual(subs);
        tryToChange(() => (read.watchers as SubscriberId[]).push('x@y/z' as SubscriberId));
        expect(await store.subscriptions()).toEqual(subs);
        await store.putSubscriptions({ subscriptions: [], watchers: ['n2@i/guardian' as SubscriberId] }, epoch(1));
        expect(await store.subscriptions()).toEqual({ subscriptions: [], watchers: ['n2@i/guardian'] });
      });
    });

    describe('node operations', () => {
      it('start as none, round trip whole, and a stale epoch cannot change them', async () => {
        expect(await store.nodeOperations()).toEqual({ draining: [], replacements: [] });
        await leaseForA();
        const ops = { draining: [nodeA], replacements: [{ old: nodeA, new: nodeB }] };
        await store.putNodeOperations(ops, epoch(1));
        expect(await store.nodeOperations()).toEqual(ops);
        await store.putNodeOperations({ draining: [], replacements: [] }, epoch(1));
        expect(await store.nodeOperations()).toEqual({ draining: [], replacements: [] });
        await store.putNodeOperations(ops, epoch(1));
        expect(await store.takeLease(nodeB, incB, 1)).toBeDefined();
        await expect(store.putNodeOperations({ draining: [], replacements: [] }, epoch(1))).rejects.toBeInstanceOf(FencedError);
        expect(await store.nodeOperations()).toEqual(ops);
      });

      it('keep the absences and the members a successor needs, racks and weights included', async () => {
        await leaseForA();
        const member = { node: nodeB, incarnation: incB, joinedAt: 1_700_000_000_000, rack: 'r1', weight: 2, detector: '127.0.0.1:7400' };
        const ops = { draining: [], replacements: [], absent: [{ member, since: 1_700_000_100_000 }], members: [member] };
        await store.putNodeOperations(ops, epoch(1));
        expect(await store.nodeOperations()).toEqual(ops);
      });

      it('keep the datasets whose moves for load are paused and the copies moved for load, as a successor needs them', async () => {
        await leaseForA();
        const ops = {
          draining: [],
          replacements: [],
          loadBalancePaused: [datasetRef('metrics')],
          loadMoves: [
            { dataset: datasetRef('metrics'), shard: 3, at: 1_700_000_200_000 },
            { dataset: datasetRef('logs'), shard: 0, at: 1_700_000_300_000 },
          ],
        };
        await store.putNodeOperations(ops, epoch(1));
        expect(await store.nodeOperations()).toEqual(ops);
      });
    });

    describe('applied requests', () => {
      it('start as none, round trip whole with their answers, and a stale epoch cannot change them', async () => {
        expect(await store.appliedRequests()).toEqual([]);
        await leaseForA();
        const applied = [
          { request: replyTo('n1@i/req-1'), reply: { type: 'DatasetVerified', dataset: 'metrics' } },
          { request: replyTo('n1@i/req-2'), reply: { type: 'NodeOperationRefused', operation: 'remove', reason: 'capacity', message: 'no room' } },
        ] as AppliedRequest[];
        await store.putAppliedRequests(applied, epoch(1));
        expect(await store.appliedRequests()).toEqual(applied);
        expect(await store.takeLease(nodeB, incB, 1)).toBeDefined();
        await expect(store.putAppliedRequests([], epoch(1))).rejects.toBeInstanceOf(FencedError);
        expect(await store.appliedRequests()).toEqual(applied);
      });
    });

    describe('fencing', () => {
      it('after another candidate takes the lease, every singleton write of the old epoch is refused and changes nothing', async () => {
        await leaseForA();
        await store.putDataset(datasetConfig(ds1), epoch(1));
        await store.putShardMap(shardMap(ds1, 1, 3));
        await store.putCooldown({ dataset: ds1, shard: 2, reassignedAt: 1000 }, epoch(1));
        expect(await store.takeLease(nodeB, incB, 1)).toBeDefined();

        const stale: [string, () => Promise<void>][] = [
          ['putDataset', () => store.putDataset(datasetConfig(ds2), epoch(1))],
          ['putDataset (replace)', () => store.putDataset(datasetConfig(ds1, 8), epoch(1))],
          ['deleteDataset', () => store.deleteDataset(ds1, epoch(1))],
          ['putShardMap', () => store.putShardMap(shardMap(ds1, 1, 99))],
          ['putCooldown', () => store.putCooldown({ dataset: ds1, shard: 2, reassignedAt: 5000 }, epoch(1))],
          ['putSubscriptions', () => store.putSubscriptions({ subscriptions: [], watchers: [] }, epoch(1))],
        ];
        for (const [label, write] of stale) {
          const error = await write().then(
            () => undefined,
            (e: unknown) => e,
          );
          expect(error, label).toBeInstanceOf(FencedError);
          expect(error, label).toMatchObject({ code: 'FENCED', writeEpoch: 1, currentEpoch: 2 });
        }

        expect(await store.datasets()).toEqual([datasetConfig(ds1)]);
        expect((await store.shardMaps()).map((s) => [s.dataset, s.epoch, s.version])).toEqual([[ds1, 1, 3]]);
        expect(await store.cooldowns()).toEqual([{ dataset: ds1, shard: 2, reassignedAt: 1000 }]);

        // The new holder writes at its epoch.
        await store.putDataset(datasetConfig(ds2), epoch(2));
        await store.putShardMap(shardMap(ds1, 2, 0));
        await store.putCooldown({ dataset: ds1, shard: 2, reassignedAt: 7000 }, epoch(2));
        expect((await store.datasets()).map((c) => c.ref).sort()).toEqual([ds1, ds2]);
        expect((await store.shardMaps()).map((s) => [s.dataset, s.epoch, s.version])).toEqual([[ds1, 2, 0]]);
        expect(await store.cooldowns()).toEqual([{ dataset: ds1, shard: 2, reassignedAt: 7000 }]);
      });

      it('writes are refused when nobody holds the lease, and at an epoch the lease does not have', async () => {
        await expect(store.putDataset(datasetConfig(ds1), epoch(0))).rejects.toBeInstanceOf(FencedError);
        await expect(store.putDataset(datasetConfig(ds1), epoch(1))).rejects.toBeInstanceOf(FencedError);
        await leaseForA();
        await expect(store.putDataset(datasetConfig(ds1), epoch(2))).rejects.toMatchObject({ code: 'FENCED', writeEpoch: 2, currentEpoch: 1 });
        await expect(store.putShardMap(shardMap(ds1, 2, 1))).rejects.toBeInstanceOf(FencedError);
        expect(await store.datasets()).toEqual([]);
        expect(await store.shardMaps()).toEqual([]);
      });
    });

    describe('datasets', () => {
      it('put, replace, list and delete', async () => {
        await leaseForA();
        await store.putDataset(datasetConfig(ds1), epoch(1));
        await store.putDataset(datasetConfig(ds2), epoch(1));
        await store.putDataset(datasetConfig(ds1, 16, 5), epoch(1));
        expect((await store.datasets()).sort(byRef)).toEqual([datasetConfig(ds1, 16, 5), datasetConfig(ds2)]);

        await store.deleteDataset(ds1, epoch(1));
        expect(await store.datasets()).toEqual([datasetConfig(ds2)]);
        await store.deleteDataset(ds1, epoch(1)); // deleting an unknown dataset is fine
        expect(await store.datasets()).toEqual([datasetConfig(ds2)]);
      });

      it('deleting a dataset drops its shard map and cooldowns (a re-created dataset starts afresh) but keeps its checkpoints', async () => {
        await leaseForA();
        await store.putDataset(datasetConfig(ds1), epoch(1));
        await store.putDataset(datasetConfig(ds2), epoch(1));
        await store.putShardMap(shardMap(ds1, 1, 40));
        await store.putShardMap(shardMap(ds2, 1, 2));
        await store.putCooldown({ dataset: ds1, shard: 0, reassignedAt: 10 }, epoch(1));
        await store.putCooldown({ dataset: ds2, shard: 0, reassignedAt: 20 }, epoch(1));
        await store.writeCheckpoint(ds1, 0, nodeA, 'sink', 99, TOKEN);

        await store.deleteDataset(ds1, epoch(1));
        expect((await store.shardMaps()).map((s) => s.dataset)).toEqual([ds2]);
        expect(await store.cooldowns()).toEqual([{ dataset: ds2, shard: 0, reassignedAt: 20 }]);
        expect(plainCheckpoints(await store.readCheckpoints(ds1, 0))).toEqual(onlyCopy(nodeA, { sink: 99 }));

        // Re-created: its first map is kept although its version is lower than the deleted one's.
        await store.putDataset(datasetConfig(ds1), epoch(1));
        await store.putShardMap(shardMap(ds1, 1, 1));
        expect((await store.shardMaps()).filter((s) => s.dataset === ds1).map((s) => s.version)).toEqual([1]);
      });
    });

    describe('shard maps', () => {
      it('keeps the newest (epoch, version) per dataset and ignores older ones', async () => {
        await leaseForA();
        await store.putShardMap(shardMap(ds1, 1, 5));
        await store.putShardMap(shardMap(ds1, 1, 3)); // older: ignored
        await store.putShardMap(shardMap(ds2, 1, 1)); // another dataset
        expect((await store.shardMaps()).map((s) => [s.dataset, s.version]).sort()).toEqual([
          [ds1, 5],
          [ds2, 1],
        ]);

        await store.putShardMap(shardMap(ds1, 1, 6));
        expect((await store.shardMaps()).find((s) => s.dataset === ds1)).toEqual(shardMap(ds1, 1, 6));

        // A new singleton's first map is newer than anything of the old epoch, whatever its version.
        await store.takeLease(nodeB, incB, 1);
        await store.putShardMap(shardMap(ds1, 2, 0));
        expect((await store.shardMaps()).find((s) => s.dataset === ds1)).toEqual(shardMap(ds1, 2, 0));
      });
    });

    describe('cooldowns', () => {
      it('round trip, one per (dataset, shard), the latest write winning', async () => {
        await leaseForA();
        await store.putCooldown({ dataset: ds1, shard: 0, reassignedAt: 100 }, epoch(1));
        await store.putCooldown({ dataset: ds1, shard: 3, reassignedAt: 200 }, epoch(1));
        await store.putCooldown({ dataset: ds2, shard: 0, reassignedAt: 300 }, epoch(1));
        await store.putCooldown({ dataset: ds1, shard: 0, reassignedAt: 400 }, epoch(1));
        expect((await store.cooldowns()).sort(byDataset)).toEqual([
          { dataset: ds1, shard: 0, reassignedAt: 400 },
          { dataset: ds1, shard: 3, reassignedAt: 200 },
          { dataset: ds2, shard: 0, reassignedAt: 300 },
        ]);
      });
    });

    describe('checkpoints', () => {
      it('round trip per (dataset, shard), copy and group, latest write winning, with no lease needed', async () => {
        expect(plainCheckpoints(await store.readCheckpoints(ds1, 0))).toEqual(NONE);
        await store.writeCheckpoint(ds1, 0, nodeA, 'sink', 10, TOKEN);
        await store.writeCheckpoint(ds1, 0, nodeA, 'archive', 4, TOKEN);
        await store.writeCheckpoint(ds1, 1, nodeA, 'sink', 77, TOKEN);
        await store.writeCheckpoint(ds2, 0, nodeA, 'sink', 5, TOKEN);
        await store.writeCheckpoint(ds1, 0, nodeA, 'sink', 12, TOKEN);
        expect(plainCheckpoints(await store.readCheckpoints(ds1, 0))).toEqual(onlyCopy(nodeA, { sink: 12, archive: 4 }));
        expect(plainCheckpoints(await store.readCheckpoints(ds1, 1))).toEqual(onlyCopy(nodeA, { sink: 77 }));
        expect(plainCheckpoints(await store.readCheckpoints(ds2, 0))).toEqual(onlyCopy(nodeA, { sink: 5 }));
        expect(plainCheckpoints(await store.readCheckpoints(ds2, 1))).toEqual(NONE);
      });

      it('keeps each copy of a shard apart: a copy far ahead never moves a lagging copy', async () => {
        await store.writeCheckpoint(ds1, 0, nodeA, 'sink', 900, TOKEN);
        await store.writeCheckpoint(ds1, 0, nodeB, 'sink', 15, TOKEN);
        await store.writeCheckpoint(ds1, 0, nodeA, 'sink', 1_000, TOKEN);
        await store.writeCheckpoint(ds1, 0, nodeB, 'sink', 16, TOKEN);
        expect(plainCheckpoints(await store.readCheckpoints(ds1, 0))).toEqual({ copies: { [nodeA]: { sink: 1_000 }, [nodeB]: { sink: 16 } }, shared: {} });
        expect(plainCheckpoints((await store.readCheckpointsOf(ds1, [0])).get(0))).toEqual({
          copies: { [nodeA]: { sink: 1_000 }, [nodeB]: { sink: 16 } },
          shared: {},
        });
      });

      it('are fenced by token: an older token, or the same token with a lower offset, is refused and changes nothing', async () => {
        await store.writeCheckpoint(ds1, 0, nodeA, 'sink', 100, { epoch: 2, version: 7 });
        // A former owner (older assignment version, or older epoch with any version) is refused.
        for (const [offset, token] of [
          [500, { epoch: 2, version: 6 }],
          [500, { epoch: 1, version: 99 }],
          [99, { epoch: 2, version: 7 }],
        ] as const) {
          const e = await store.writeCheckpoint(ds1, 0, nodeA, 'sink', offset, token).catch((x: unknown) => x);
          expect(e, `${offset} at ${token.epoch}/${token.version}`).toBeInstanceOf(CheckpointRefusedError);
          expect((e as CheckpointRefusedError).stored).toEqual({ offset: 100, token: { epoch: 2, version: 7 } });
          expect((e as CheckpointRefusedError).code).toBe('CHECKPOINT_REFUSED');
        }
        expect(plainCheckpoints(await store.readCheckpoints(ds1, 0))).toEqual(onlyCopy(nodeA, { sink: 100 }));
        // The same write again applies (a retry after a lost answer); a newer token may go lower
        // (a copy placed again replays from where it starts).
        await store.writeCheckpoint(ds1, 0, nodeA, 'sink', 100, { epoch: 2, version: 7 });
        await store.writeCheckpoint(ds1, 0, nodeA, 'sink', 40, { epoch: 2, version: 9 });
        const read = await store.readCheckpoints(ds1, 0);
        expect(plainCheckpoints(read)).toEqual(onlyCopy(nodeA, { sink: 40 }));
        expect(read.tokens?.get(nodeA)?.get('sink')).toEqual({ epoch: 2, version: 9 });
        // Each copy and group is fenced on its own.
        await store.writeCheckpoint(ds1, 0, nodeB, 'sink', 3, { epoch: 1, version: 1 });
        await store.writeCheckpoint(ds1, 0, nodeA, 'archive', 3, { epoch: 1, version: 1 });
        expect(plainCheckpoints(await store.readCheckpoints(ds1, 0))).toEqual({
          copies: { [nodeA]: { sink: 40, archive: 3 }, [nodeB]: { sink: 3 } },
          shared: {},
        });
      });

      it("a copy's checkpoint stored before tokens existed is read without a token and replaced by any tokened write", async () => {
        if (!fixture.withUntokenedCheckpoints) return; // memory: nothing was ever stored without a token
        const old = await fixture.withUntokenedCheckpoints([
          { dataset: ds1, shard: 0, node: nodeA, group: 'sink', offset: 700 },
          { dataset: ds1, shard: 1, node: nodeB, group: 'sink', offset: 9 },
        ]);
        const read = await old.readCheckpointsOf(ds1, [0, 1]);
        expect(plainCheckpoints(read.get(0))).toEqual(onlyCopy(nodeA, { sink: 700 }));
        expect(read.get(0)!.tokens?.get(nodeA)?.get('sink')).toBeUndefined();
        // Any token outranks none, whatever the offset; from then on the row is fenced.
        await old.writeCheckpoint(ds1, 0, nodeA, 'sink', 650, { epoch: 1, version: 1 });
        await expect(old.writeCheckpoint(ds1, 0, nodeA, 'sink', 651, { epoch: 1, version: 0 })).rejects.toBeInstanceOf(CheckpointRefusedError);
        const after = await old.readCheckpointsOf(ds1, [0, 1]);
        expect(plainCheckpoints(after.get(0))).toEqual(onlyCopy(nodeA, { sink: 650 }));
        expect(after.get(0)!.tokens?.get(nodeA)?.get('sink')).toEqual({ epoch: 1, version: 1 });
        expect(plainCheckpoints(after.get(1))).toEqual(onlyCopy(nodeB, { sink: 9 }));
      });

      it('are written by shard owners, so they are not fenced by the lease epoch', async () => {
        await leaseForA();
        await store.takeLease(nodeB, incB, 1);
        await store.writeCheckpoint(ds1, 0, nodeA, 'sink', 3, TOKEN);
        expect(plainCheckpoints(await store.readCheckpoints(ds1, 0))).toEqual(onlyCopy(nodeA, { sink: 3 }));
      });

      it('a store of an older version: its per-shard checkpoints are read as shared, beside the copies written since', async () => {
        if (!fixture.withSharedCheckpoints) {
          // A store with no older layout (memory) holds nothing but copies' checkpoints.
          await store.writeCheckpoint(ds1, 0, nodeA, 'sink', 1, TOKEN);
          expect(plainCheckpoints(await store.readCheckpoints(ds1, 0)).shared).toEqual({});
          return;
        }
        const old = await fixture.withSharedCheckpoints([
          { dataset: ds1, shard: 0, group: 'sink', offset: 500 },
          { dataset: ds1, shard: 0, group: 'archive', offset: 40 },
          { dataset: ds1, shard: 3, group: 'sink', offset: 7 },
        ]);
        expect(plainCheckpoints(await old.readCheckpoints(ds1, 0))).toEqual({ copies: {}, shared: { sink: 500, archive: 40 } });
        await old.writeCheckpoint(ds1, 0, nodeB, 'sink', 520, TOKEN);
        // A copy's write never touches the shared checkpoint: the other copies still start from it.
        const both = await old.readCheckpointsOf(ds1, [0, 1, 3]);
        expect(plainCheckpoints(both.get(0))).toEqual({ copies: { [nodeB]: { sink: 520 } }, shared: { sink: 500, archive: 40 } });
        expect(plainCheckpoints(both.get(1))).toEqual(NONE);
        expect(plainCheckpoints(both.get(3))).toEqual({ copies: {}, shared: { sink: 7 } });
      });
    });

    describe('values are copies or frozen', () => {
      it('changing what was written or what was read changes nothing stored', async () => {
        await leaseForA();
        const config = structuredClone(datasetConfig(ds1)) as { numShards: number; source: { recordsPerSecond: number } };
        await store.putDataset(config as unknown as DatasetConfig, epoch(1));
        config.numShards = 64;
        config.source.recordsPerSecond = 1;

        const map = structuredClone(shardMap(ds1, 1, 2)) as unknown as { shards: { status: { type: string } }[] };
        await store.putShardMap(map as unknown as ShardMapSnapshot);
        map.shards[0]!.status.type = 'Down';

        const cooldown = { dataset: ds1, shard: 1, reassignedAt: 50 };
        await store.putCooldown(cooldown, epoch(1));
        cooldown.reassignedAt = 0;

        const readConfig = (await store.datasets())[0] as unknown as { source: { recordsPerSecond: number } };
        tryToChange(() => {
          readConfig.source.recordsPerSecond = 2;
        });
        const readMap = (await store.shardMaps())[0] as unknown as { shards: unknown[] };
        tryToChange(() => {
          readMap.shards.length = 0;
        });
        const readCooldown = (await store.cooldowns())[0] as { reassignedAt: number };
        tryToChange(() => {
          readCooldown.reassignedAt = -1;
        });
        await store.writeCheckpoint(ds1, 0, nodeA, 'sink', 8, TOKEN);
        const readCheckpoints = await store.readCheckpoints(ds1, 0);
        tryToChange(() => {
          (readCheckpoints.copies.get(nodeA) as Map<string, number>).set('sink', 0);
        });
        tryToChange(() => {
          (readCheckpoints.copies as unknown as Map<string, unknown>).delete(nodeA);
        });
        const lease = (await store.readLease()) as { epoch: number };
        tryToChange(() => {
          lease.epoch = 42;
        });

        expect(await store.datasets()).toEqual([datasetConfig(ds1)]);
        expect(await store.shardMaps()).toEqual([shardMap(ds1, 1, 2)]);
        expect(await store.cooldowns()).toEqual([{ dataset: ds1, shard: 1, reassignedAt: 50 }]);
        expect(plainCheckpoints(await store.readCheckpoints(ds1, 0))).toEqual(onlyCopy(nodeA, { sink: 8 }));
        expect(await store.readLease()).toEqual({ epoch: 1, node: nodeA, incarnation: incA, renewal: 0 });
      });
    });

    // The largest maps shardherd accepts, with node ids of a realistic length: what a store that
    // keeps a map as one value cannot do (a 16 384 × 3 map was refused by Cassandra as one mutation).
    describe('large shard maps', () => {
      /** The one map of `dataset` the store holds, compared shard by shard with `expected`. */
      async function expectStored(expected: ShardMapSnapshot): Promise<void> {
        const stored = (await store.shardMaps()).filter((m) => m.dataset === expected.dataset);
        expect(stored).toHaveLength(1);
        expect(mapDifference(stored[0]!, expected)).toBeUndefined();
      }

      it('16 384 shards × 3 copies: written and read back equal, and so is a change of a few shards', async () => {
        await leaseForA();
        const map = largeMap(ds1, 16_384, 1, 10);
        await store.putShardMap(map);
        await expectStored(map);
        const changed = withChanges(map, [0, 1, 5_000, 16_383], 11);
        await store.putShardMap(changed);
        await expectStored(changed);
      }, 120_000);

      it('65 536 shards × 3 copies: written and read back equal; a change of a few shards; an older map ignored; a fenced write refused', async () => {
        await leaseForA();
        const map = largeMap(ds1, 65_536, 1, 100);
        await store.putShardMap(map);
        await expectStored(map);

        const moved = withChanges(map, [3, 300, 30_000, 65_535], 101);
        await store.putShardMap(moved);
        await expectStored(moved);
        // A change of status only: the assignment versions stay as they were.
        const changed = withProgress(moved, [4, 40_000], 42.5, 102);
        await store.putShardMap(changed);
        await expectStored(changed);

        await store.putShardMap(withChanges(changed, [7], 102)); // as new as the stored map: ignored
        await store.putShardMap(withChanges(map, [8], 99)); // older: ignored
        await expectStored(changed);

        expect(await store.takeLease(nodeB, incB, 1)).toBeDefined();
        await expect(store.putShardMap(withChanges(changed, [9], 103))).rejects.toMatchObject({ code: 'FENCED', writeEpoch: 1, currentEpoch: 2 });
        await expectStored(changed);

        // The new singleton's map, recovered from the old one, changes only a shard.
        const next = withChanges(changed, [10], 0, 2);
        await store.putShardMap(next);
        await expectStored(next);
      }, 120_000);

      it('a dataset of 65 536 shards deleted and created again with a smaller map holds only the smaller one', async () => {
        await leaseForA();
        await store.putShardMap(largeMap(ds1, 65_536, 1, 40));
        await store.putShardMap(largeMap(ds2, 1_024, 1, 3));
        await store.deleteDataset(ds1, epoch(1));
        expect((await store.shardMaps()).map((m) => m.dataset)).toEqual([ds2]);

        const small = largeMap(ds1, 512, 1, 2); // older than the deleted map: kept all the same
        await store.putShardMap(small);
        await expectStored(small);
        await expectStored(largeMap(ds2, 1_024, 1, 3));
        const changed = withChanges(small, [511], 3);
        await store.putShardMap(changed);
        await expectStored(changed);
      }, 120_000);

      it('readCheckpointsOf answers for thousands of shards at once, every shard asked included', async () => {
        const shards = Array.from({ length: 4_096 }, (_, s) => s);
        const written = shards.filter((s) => s % 8 === 0);
        await Promise.all(written.map((s) => store.writeCheckpoint(ds1, s, nodeA, 'sink', s * 10, TOKEN)));
        await Promise.all(written.filter((s) => s % 64 === 0).map((s) => store.writeCheckpoint(ds1, s, nodeB, 'sink', s, TOKEN)));
        await store.writeCheckpoint(ds2, 1, nodeA, 'sink', 5, TOKEN); // another dataset's: not among ds1's

        const read = await store.readCheckpointsOf(ds1, [...shards, 8, 4_096]);
        expect(read.size).toBe(4_097);
        for (const s of [...shards, 4_096]) {
          const copies: Record<string, Record<string, number>> = {};
          if (s % 8 === 0 && s < 4_096) copies[nodeA] = { sink: s * 10 };
          if (s % 64 === 0 && s < 4_096) copies[nodeB] = { sink: s };
          expect(plainCheckpoints(read.get(s)), `shard ${s}`).toEqual({ copies, shared: {} });
        }
        const other = await store.readCheckpointsOf(ds2, [0, 1]);
        expect([plainCheckpoints(other.get(0)), plainCheckpoints(other.get(1))]).toEqual([NONE, onlyCopy(nodeA, { sink: 5 })]);
        expect(await store.readCheckpointsOf(ds1, [])).toEqual(new Map());
      }, 120_000);
    });
  });
}
