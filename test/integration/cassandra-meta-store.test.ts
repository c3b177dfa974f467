// The Cassandra MetaStore against a real Cassandra: the MetaStore contract every adapter passes,
// plus what only a real, shared store shows: schema creation by several processes at once, lease
// races between processes, a fenced write that writes nothing at all, lost LWT answers, an
// unreachable server, rows this version cannot read, and clusters sharing a keyspace.
import { Client as CassandraClient, errors, types } from 'cassandra-driver';
import { pino } from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { epoch, type SubscriberId } from '../../src/core/ids.js';
import { CassandraMetaStore, MetaStoreRowError, type CassandraMetaStoreOptions } from '../../src/store/cassandra-meta-store.js';
import { CheckpointRefusedError, FencedError, MalformedCheckpointError, MetaStoreUnavailableError, type Lease } from '../../src/store/meta-store.js';
import { ShardMapper } from '../../src/core/shard-mapper.js';
import {
  datasetConfig,
  ds1,
  ds2,
  formatOneMap,
  incA,
  incB,
  metaStoreContract,
  NONE,
  nodeA,
  nodeB,
  onlyCopy,
  plainCheckpoints,
  shardMap,
} from '../contracts/meta-store-contract.js';
import { services, uniqueName } from './support.js';

/** The fencing token the checkpoints of these tests are written with (one assignment throughout). */
const TOKEN = { epoch: 1, version: 1 };

const KEYSPACE = 'shardherd_test';
const silent = pino({ level: 'silent' });

function storeOptions(overrides: Partial<CassandraMetaStoreOptions> = {}): CassandraMetaStoreOptions {
  const { cassandraContactPoints, cassandraLocalDataCenter } = services();
  return {
    contactPoints: cassandraContactPoints,
    localDataCenter: cassandraLocalDataCenter,
    keyspace: KEYSPACE,
    cluster: uniqueName('cluster'),
    log: silent,
    ...overrides,
  };
}

metaStoreContract('cassandra', async () => {
  const options = storeOptions();
  const store = await CassandraMetaStore.connect(options);
  return {
    store,
    cleanup: () => store.close(),
    // Rows of the per-shard table that versions before per-copy checkpoints wrote (and connect keeps).
    withSharedCheckpoints: async (rows) => {
      const client = store['client'];
      for (const r of rows) {
        await client.execute(
          `INSERT INTO ${KEYSPACE}.checkpoints (cluster, dataset, shard, group_name, last_offset) VALUES (?, ?, ?, ?, ?)`,
          [options.cluster, r.dataset, r.shard, r.group, types.Long.fromNumber(r.offset)],
          { prepare: true },
        );
      }
      return store;
    },
    // Rows of copy_checkpoints as versions before fencing tokens wrote them: no fence.
    withUntokenedCheckpoints: async (rows) => {
      const client = store['client'];
      for (const r of rows) {
        await client.execute(
          `UPDATE ${KEYSPACE}.copy_checkpoints SET last_offset = ? WHERE cluster = ? AND dataset = ? AND shard = ? AND node = ? AND group_name = ?`,
          [types.Long.fromNumber(r.offset), options.cluster, r.dataset, r.shard, r.node, r.group],
          { prepare: true },
        );
      }
      return store;
    },
  };
});

/** A keyspace name no other test uses (keyspace names allow no `-`). */
function freshKeyspace(): string {
  return `shardherd_t_${Date.now().toString(36)}_${Math.random().toString(36).slice(2, 8)}`;
}

/** The error a promise rejects with (undefined if it resolves). */
async function rejection(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => undefined,
    (e: unknown) => e,
  );
}

describe('CassandraMetaStore', () => {
  let raw: CassandraClient;
  const opened: CassandraMetaStore[] = [];
  const createdKeyspaces: string[] = [];

  /** Connects a store (think: one shardherd process) that is closed after the test. */
  async function open(overrides: Partial<CassandraMetaStoreOptions> = {}): Promise<CassandraMetaStore> {
    const store = await CassandraMetaStore.connect(storeOptions(overrides));
    opened.push(store);
    return store;
  }

  beforeAll(async () => {
    const { cassandraContactPoints, cassandraLocalDataCenter } = services();
    raw = new CassandraClient({ contactPoints: cassandraContactPoints, localDataCenter: cassandraLocalDataCenter });
    await raw.connect();
  });

  afterEach(async () => {
    vi.restoreAllMocks();
    await Promise.all(opened.splice(0).map((s) => s.close()));
    for (const keyspace of createdKeyspaces.splice(0)) await raw.execute(`DROP KEYSPACE IF EXISTS ${keyspace}`);
  });

  afterAll(async () => {
    await raw?.shutdown();
  });

  /** Every stored cell of a cluster's singleton partition, with its write time: proves what was (not) written. */
  async function singletonPartition(cluster: string): Promise<string[]> {
    const result = await raw.execute(
      `SELECT kind, dataset, shard, format, value, map_stamp, WRITETIME(value) AS value_written, epoch, node, incarnation, WRITETIME(epoch) AS epoch_written
       FROM ${KEYSPACE}.singleton_state WHERE cluster = ?`,
      [cluster],
      { prepare: true },
    );
    return result.rows.map((row) =>
      row
        .keys()
        .map((k) => `${k}=${String(row.get(k))}`)
        .join(' '),
    );
  }

  describe('schema', () => {
    it('is created idempotently: two processes connecting at once to a fresh keyspace both work, and so does a third later', async () => {
      const keyspace = freshKeyspace();
      createdKeyspaces.push(keyspace);
      const cluster = uniqueName('schema');
      const [a, b] = await Promise.all([open({ keyspace, cluster }), open({ keyspace, cluster })]);

      const lease = await a.takeLease(nodeA, incA, 0);
      expect(lease).toEqual({ epoch: 1, node: nodeA, incarnation: incA, renewal: 0 });
      expect(await b.readLease()).toEqual(lease);
      const later = await open({ keyspace, cluster });
      expect(await later.readLease()).toEqual(lease);

      const tables = await raw.execute('SELECT table_name FROM system_schema.tables WHERE keyspace_name = ?', [keyspace], { prepare: true });
      expect(tables.rows.map((r) => r.get('table_name')).sort()).toEqual(['checkpoints', 'copy_checkpoints', 'map_parts', 'singleton_state']);
    });

    it('creates the keyspace with the configured replication, and leaves an existing keyspace as it is', async () => {
      const keyspace = freshKeyspace();
      createdKeyspaces.push(keyspace);
      const { cassandraLocalDataCenter: dc } = services();
      const replicationOf = async () =>
        (await raw.execute('SELECT replication FROM system_schema.keyspaces WHERE keyspace_name = ?', [keyspace], { prepare: true }))
          .first()
          ?.get('replication');

      await open({ keyspace, replication: { class: 'NetworkTopologyStrategy', dataCenters: { [dc]: 1 } } });
      expect(await replicationOf()).toEqual({ class: 'org.apache.cassandra.locator.NetworkTopologyStrategy', [dc]: '1' });
      await open({ keyspace }); // the default would be SimpleStrategy
      expect(await replicationOf()).toEqual({ class: 'org.apache.cassandra.locator.NetworkTopologyStrategy', [dc]: '1' });
    });

    it('refuses bad options before connecting, naming the key', async () => {
      await expect(CassandraMetaStore.connect(storeOptions({ keyspace: 'shard-herd' }))).rejects.toThrow(/option keyspace: must be a CQL identifier/);
      await expect(CassandraMetaStore.connect(storeOptions({ cluster: '' }))).rejects.toThrow(/option cluster/);
      await expect(CassandraMetaStore.connect(storeOptions({ contactPoints: [] }))).rejects.toThrow(/option contactPoints: needs at least one/);
      await expect(CassandraMetaStore.connect(storeOptions({ connectTimeoutMs: 0 }))).rejects.toThrow(/option connectTimeoutMs/);
      await expect(CassandraMetaStore.connect(storeOptions({ maxConcurrentRequests: 0 }))).rejects.toThrow(/option maxConcurrentRequests: must be at least 1/);
      await expect(CassandraMetaStore.connect(storeOptions({ maxConcurrentRequests: 2.5 }))).rejects.toThrow(
        /option maxConcurrentRequests: must be a whole number/,
      );
      await expect(CassandraMetaStore.connect(storeOptions({ maxConcurrentRequests: 4096 }))).rejects.toThrow(
        /option maxConcurrentRequests: must be at most 2048/,
      );
      await expect(CassandraMetaStore.connect(storeOptions({ maxMutationBytes: 100 }))).rejects.toThrow(/option maxMutationBytes: must be at least 1024 bytes/);
      await expect(CassandraMetaStore.connect(storeOptions({ replication: { class: 'NetworkTopologyStrategy', dataCenters: {} } }))).rejects.toThrow(
        /option replication.dataCenters: needs at least one data center/,
      );
    });
  });

  describe('lease', () => {
    it('of two processes taking the lease from the same epoch exactly one wins, 20 rounds in a row', async () => {
      const cluster = uniqueName('race');
      const [a, b] = await Promise.all([open({ cluster }), open({ cluster })]);
      const winsOf = { a: 0, b: 0 };
      for (let round = 0; round < 20; round += 1) {
        const [la, lb] = await Promise.all([a.takeLease(nodeA, incA, round), b.takeLease(nodeB, incB, round)]);
        const winners = [la, lb].filter((l): l is Lease => l !== undefined);
        expect(winners, `round ${round}`).toHaveLength(1);
        expect(winners[0]!.epoch).toBe(round + 1);
        expect(await a.readLease()).toEqual(winners[0]);
        expect(await b.readLease()).toEqual(winners[0]);
        if (la) winsOf.a += 1;
        else winsOf.b += 1;
      }
      expect(winsOf.a + winsOf.b).toBe(20);
    });

    describe('when the answer of the compare-and-set is lost (a CAS write timeout)', () => {
      /** Makes the store's next request throw Cassandra's CAS write timeout, after `sideEffect` ran. */
      function loseNextAnswer(store: CassandraMetaStore, sideEffect: (run: () => Promise<unknown>) => Promise<unknown>): void {
        const client = store['client'];
        const execute = client.execute.bind(client) as (q: string, p: unknown[], o: object) => Promise<unknown>;
        vi.spyOn(client, 'execute').mockImplementationOnce((async (query: string, params: unknown[], options: object) => {
          await sideEffect(() => execute(query, params, options));
          const timeout = new errors.ResponseError(types.responseErrorCodes.writeTimeout, 'Server timeout during write query at consistency LOCAL_SERIAL');
          throw Object.assign(timeout, { writeType: 'CAS' });
        }) as never);
      }

      it('and it had applied, takeLease learns so with a SERIAL read and returns the lease', async () => {
        const store = await open();
        loseNextAnswer(store, (run) => run());
        expect(await store.takeLease(nodeA, incA, 0)).toEqual({ epoch: 1, node: nodeA, incarnation: incA, renewal: 0 });
        expect(await store.readLease()).toEqual({ epoch: 1, node: nodeA, incarnation: incA, renewal: 0 });
      });

      it('and it had not applied, takeLease fails retriably and a retry takes the lease', async () => {
        const store = await open();
        loseNextAnswer(store, async () => undefined);
        const error = await rejection(store.takeLease(nodeA, incA, 0));
        expect(error).toBeInstanceOf(MetaStoreUnavailableError);
        expect(error).toMatchObject({ retriable: true, message: expect.stringMatching(/takeLease failed: Server timeout/) });
        expect(await store.readLease()).toBeUndefined();
        expect(await store.takeLease(nodeA, incA, 0)).toEqual({ epoch: 1, node: nodeA, incarnation: incA, renewal: 0 });
      });

      it('and another candidate won meanwhile, takeLease says it lost', async () => {
        const cluster = uniqueName('lost');
        const [a, b] = await Promise.all([open({ cluster }), open({ cluster })]);
        loseNextAnswer(a, () => b.takeLease(nodeB, incB, 0));
        expect(await a.takeLease(nodeA, incA, 0)).toBeUndefined();
        expect(await a.readLease()).toEqual({ epoch: 1, node: nodeB, incarnation: incB, renewal: 0 });
      });
    });
  });

  describe('fencing', () => {
    it("a replaced singleton's writes are refused and write nothing at all (same cells, same write times)", async () => {
      const cluster = uniqueName('fenced');
      const [old, next] = await Promise.all([open({ cluster }), open({ cluster })]);
      await old.takeLease(nodeA, incA, 0);
      await old.putDataset(datasetConfig(ds1), epoch(1));
      await old.putShardMap(shardMap(ds1, 1, 3));
      await old.putCooldown({ dataset: ds1, shard: 2, reassignedAt: 1000 }, epoch(1));
      await old.putSubscriptions({ subscriptions: [{ dataset: ds1, subscribers: ['n1@i/router' as SubscriberId] }], watchers: [] }, epoch(1));
      expect(await next.takeLease(nodeB, incB, 1)).toEqual({ epoch: 2, node: nodeB, incarnation: incB, renewal: 0 });
      const before = await singletonPartition(cluster);
      expect(before).toHaveLength(5); // the lease's renewal row and the four written

      // A replaced singleton cannot renew the lease either.
      expect(await old.renewLease(epoch(1), 1)).toBe(false);

      const staleWrites: [string, () => Promise<void>][] = [
        ['putDataset', () => old.putDataset(datasetConfig(ds2), epoch(1))],
        ['putDataset (replace)', () => old.putDataset(datasetConfig(ds1, 8), epoch(1))],
        ['deleteDataset', () => old.deleteDataset(ds1, epoch(1))],
        ['putShardMap (newer)', () => old.putShardMap(shardMap(ds1, 1, 99))],
        ['putShardMap (first of a dataset)', () => old.putShardMap(shardMap(ds2, 1, 1))],
        ['putCooldown', () => old.putCooldown({ dataset: ds1, shard: 2, reassignedAt: 5000 }, epoch(1))],
        ['putSubscriptions', () => old.putSubscriptions({ subscriptions: [], watchers: [] }, epoch(1))],
      ];
      for (const [label, write] of staleWrites) {
        const error = await rejection(write());
        expect(error, label).toBeInstanceOf(FencedError);
        expect(error, label).toMatchObject({ writeEpoch: 1, currentEpoch: 2 });
      }
      expect(await singletonPartition(cluster)).toEqual(before);
      // Map parts are written before the header that would refer to them: the first map of ds2
      // left its part, which no header refers to (the next write of ds2 sweeps it; see
      // cassandra-map-parts.test.ts). ds1's newer map had the stored part's content: none written.
      const parts = await raw.execute(
        `SELECT dataset, part, epoch, version FROM ${KEYSPACE}.map_parts WHERE cluster = ? AND dataset IN ?`,
        [cluster, [ds1, ds2]],
        { prepare: true },
      );
      expect(parts.rows.map((r) => `${r.get('dataset')} ${r.get('part')} ${r.get('epoch')}/${r.get('version')}`).sort()).toEqual(['ds1 0 1/3', 'ds2 0 1/1']);
      expect((await next.shardMaps()).map((m) => [m.dataset, m.version])).toEqual([[ds1, 3]]);
    });
  });

  describe('shared keyspace', () => {
    it('two shardherd clusters in one keyspace neither see nor fence each other', async () => {
      const [x, y] = await Promise.all([open({ cluster: uniqueName('x') }), open({ cluster: uniqueName('y') })]);
      expect(await x.takeLease(nodeA, incA, 0)).toEqual({ epoch: 1, node: nodeA, incarnation: incA, renewal: 0 });
      expect(await y.readLease()).toBeUndefined();
      expect(await y.takeLease(nodeB, incB, 0)).toEqual({ epoch: 1, node: nodeB, incarnation: incB, renewal: 0 });

      await x.putDataset(datasetConfig(ds1), epoch(1));
      await x.putShardMap(shardMap(ds1, 1, 7));
      await x.putCooldown({ dataset: ds1, shard: 0, reassignedAt: 10 }, epoch(1));
      await x.putSubscriptions({ subscriptions: [], watchers: ['x@1/guardian' as SubscriberId] }, epoch(1));
      await x.writeCheckpoint(ds1, 0, nodeA, 'sink', 42, TOKEN);
      await y.putDataset(datasetConfig(ds1, 16), epoch(1));

      // y's epoch is its own: x moving to epoch 2 fences none of y's writes.
      expect(await x.takeLease(nodeA, incA, 1)).toEqual({ epoch: 2, node: nodeA, incarnation: incA, renewal: 0 });
      await y.putCooldown({ dataset: ds1, shard: 1, reassignedAt: 20 }, epoch(1));
      await y.deleteDataset(ds1, epoch(1));

      expect(await x.datasets()).toEqual([datasetConfig(ds1)]);
      expect((await x.shardMaps()).map((m) => [m.dataset, m.version])).toEqual([[ds1, 7]]);
      expect(await x.cooldowns()).toEqual([{ dataset: ds1, shard: 0, reassignedAt: 10 }]);
      expect(await x.subscriptions()).toEqual({ subscriptions: [], watchers: ['x@1/guardian'] });
      expect(plainCheckpoints(await x.readCheckpoints(ds1, 0))).toEqual(onlyCopy(nodeA, { sink: 42 }));

      expect(await y.readLease()).toEqual({ epoch: 1, node: nodeB, incarnation: incB, renewal: 0 });
      expect(await y.datasets()).toEqual([]);
      expect(await y.shardMaps()).toEqual([]);
      expect(await y.cooldowns()).toEqual([]);
      expect(await y.subscriptions()).toEqual({ subscriptions: [], watchers: [] });
      expect(plainCheckpoints(await y.readCheckpoints(ds1, 0))).toEqual(NONE);
    });
  });

  describe('fenced checkpoints', () => {
    // The table as the version before fencing tokens created it, verbatim.
    const oldCopyCheckpoints = (keyspace: string) => `CREATE TABLE ${keyspace}.copy_checkpoints (
      cluster text,
      dataset text,
      shard int,
      node text,
      group_name text,
      last_offset bigint,
      PRIMARY KEY ((cluster, dataset, shard), node, group_name)
    )`;

    it('migration: a keyspace of the previous version gets the fence column when stores connect (two at once), and its checkpoints are read and then fenced', async () => {
      const keyspace = freshKeyspace();
      createdKeyspaces.push(keyspace);
      const cluster = uniqueName('migrate');
      await raw.execute(`CREATE KEYSPACE ${keyspace} WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}`);
      await raw.execute(oldCopyCheckpoints(keyspace));
      const put = `INSERT INTO ${keyspace}.copy_checkpoints (cluster, dataset, shard, node, group_name, last_offset) VALUES (?, ?, ?, ?, ?, ?)`;
      await raw.execute(put, [cluster, ds1, 0, nodeA, 'sink', types.Long.fromNumber(1_000)], { prepare: true });
      await raw.execute(put, [cluster, ds1, 1, nodeB, 'sink', types.Long.fromNumber(77)], { prepare: true });

      const [a, b] = await Promise.all([open({ keyspace, cluster }), open({ keyspace, cluster })]);
      const columns = await raw.execute(
        'SELECT column_name, type FROM system_schema.columns WHERE keyspace_name = ? AND table_name = ?',
        [keyspace, 'copy_checkpoints'],
        { prepare: true },
      );
      expect(columns.rows.find((r) => r.get('column_name') === 'fence')?.get('type')).toBe('frozen<tuple<bigint, bigint, bigint>>');

      // Stored offsets survive, with no token.
      const before = await a.readCheckpointsOf(ds1, [0, 1]);
      expect(plainCheckpoints(before.get(0))).toEqual(onlyCopy(nodeA, { sink: 1_000 }));
      expect(plainCheckpoints(before.get(1))).toEqual(onlyCopy(nodeB, { sink: 77 }));
      expect(before.get(0)!.tokens?.size ?? 0).toBe(0);
      // A first tokened write replaces an untokened row; from then on an older token is refused.
      await b.writeCheckpoint(ds1, 0, nodeA, 'sink', 1_010, { epoch: 3, version: 12 });
      const refused = await a.writeCheckpoint(ds1, 0, nodeA, 'sink', 5_000, { epoch: 3, version: 11 }).catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(CheckpointRefusedError);
      expect((refused as CheckpointRefusedError).stored).toEqual({ offset: 1_010, token: { epoch: 3, version: 12 } });
      const after = await a.readCheckpoints(ds1, 0);
      expect(plainCheckpoints(after)).toEqual(onlyCopy(nodeA, { sink: 1_010 }));
      expect(after.tokens?.get(nodeA)?.get('sink')).toEqual({ epoch: 3, version: 12 });
      expect(plainCheckpoints(await a.readCheckpoints(ds1, 1))).toEqual(onlyCopy(nodeB, { sink: 77 }));
      // A store connecting later finds the column there and changes nothing.
      const later = await open({ keyspace, cluster });
      expect(plainCheckpoints(await later.readCheckpoints(ds1, 0))).toEqual(onlyCopy(nodeA, { sink: 1_010 }));
    });

    it("writers racing on one copy's row: the newest (token, offset) is what stays, every older one refused or overwritten", async () => {
      const cluster = uniqueName('race');
      const [x, y] = await Promise.all([open({ cluster }), open({ cluster })]);
      const writes = Array.from({ length: 24 }, (_, i) => ({ offset: 100 + (i % 7) * 10, token: { epoch: 1 + (i % 3), version: i % 5 } }));
      const outcomes = await Promise.all(
        writes.map((w, i) =>
          (i % 2 === 0 ? x : y).writeCheckpoint(ds1, 2, nodeA, 'sink', w.offset, w.token).then(
            () => 'applied',
            (e: unknown) => (e instanceof CheckpointRefusedError ? 'refused' : e),
          ),
        ),
      );
      expect(outcomes.every((o) => o === 'applied' || o === 'refused')).toBe(true);
      const best = [...writes].sort((p, q) => p.token.epoch - q.token.epoch || p.token.version - q.token.version || p.offset - q.offset).at(-1)!;
      const read = await x.readCheckpoints(ds1, 2);
      expect(plainCheckpoints(read)).toEqual(onlyCopy(nodeA, { sink: best.offset }));
      expect(read.tokens?.get(nodeA)?.get('sink')).toEqual(best.token);
    });

    it('a malformed fence is a typed error naming the shard, not a checkpoint', async () => {
      const cluster = uniqueName('malformed');
      const store = await open({ cluster });
      const put = `INSERT INTO ${KEYSPACE}.copy_checkpoints (cluster, dataset, shard, node, group_name, last_offset, fence) VALUES (?, ?, ?, ?, ?, ?, ?)`;
      const fence = new types.Tuple(types.Long.fromNumber(2), types.Long.fromNumber(-5), types.Long.fromNumber(10));
      await raw.execute(put, [cluster, ds1, 3, nodeA, 'sink', types.Long.fromNumber(10), fence], { prepare: true });
      const e = await store.readCheckpoints(ds1, 3).catch((x: unknown) => x);
      expect(e).toBeInstanceOf(MalformedCheckpointError);
      expect((e as Error).message).toMatch(/ds1 shard 3 is malformed/);
    });
  });

  describe('stored rows', () => {
    it('a format 1 shard map (written before replicas) is read as the same map in format 2', async () => {
      const cluster = uniqueName('upgrade');
      const store = await open({ cluster });
      const put = `UPDATE ${KEYSPACE}.singleton_state SET format = ?, value = ? WHERE cluster = ? AND kind = ? AND dataset = ? AND shard = -1`;
      await raw.execute(put, [1, JSON.stringify(formatOneMap(ds1, 1, 3)), cluster, 'shard_map', 'ds1'], { prepare: true });
      const [map] = await store.shardMaps();
      expect(map).toMatchObject({ format: 2, dataset: ds1, epoch: 1, version: 3, assignmentVersions: [0, 0, 0, 0] });
      expect(ShardMapper.fromSnapshot(map!).equals(ShardMapper.fromSnapshot(shardMap(ds1, 1, 3)))).toBe(true);
      expect(await store.nodeOperations()).toEqual({ draining: [], replacements: [] });
    });

    it('a row this version cannot read is refused with an error naming it, not trusted; a map is left out and logged', async () => {
      const cluster = uniqueName('rows');
      const errorsLogged: { event?: string; dataset?: string; reason?: string }[] = [];
      const store = await open({ cluster, log: pino({ level: 'error' }, { write: (line: string) => void errorsLogged.push(JSON.parse(line)) }) });
      const put = `UPDATE ${KEYSPACE}.singleton_state SET format = ?, value = ? WHERE cluster = ? AND kind = ? AND dataset = ? AND shard = -1`;
      await raw.execute(put, [2, '{}', cluster, 'dataset', 'ds9'], { prepare: true });
      await raw.execute(put, [1, JSON.stringify({ ...shardMap(ds1, 1, 1), numShards: 8 }), cluster, 'shard_map', 'ds1'], { prepare: true });

      const datasetsError = await rejection(store.datasets());
      expect(datasetsError).toBeInstanceOf(MetaStoreRowError);
      expect((datasetsError as Error).message).toMatch(/dataset row of ds9: unknown format 2: this version reads format 1/);
      // A map that cannot be read is left out (the singleton recovers it from the nodes), not thrown.
      expect(await store.shardMaps()).toEqual([]);
      expect(errorsLogged).toMatchObject([
        {
          event: 'metastore.map-unreadable',
          dataset: 'ds1',
          reason: expect.stringMatching(/whole map \(format 1\): shard map of ds1 lists 4 shards but numShards is 8/),
        },
      ]);
    });
  });

  describe('an unreachable Cassandra', () => {
    it('connect keeps trying for connectTimeoutMs, logging each failure, then fails retriably naming the address', async () => {
      const warnings: { msg: string; attempt?: number }[] = [];
      const log = pino({ level: 'warn' }, { write: (line: string) => void warnings.push(JSON.parse(line)) });
      const started = performance.now();
      const error = await rejection(CassandraMetaStore.connect(storeOptions({ contactPoints: ['127.0.0.1:1'], connectTimeoutMs: 1_500, log })));
      const elapsed = performance.now() - started;

      expect(error).toBeInstanceOf(MetaStoreUnavailableError);
      expect(error).toMatchObject({ code: 'METASTORE_UNAVAILABLE', retriable: true });
      expect((error as Error).message).toMatch(
        /^MetaStore connect to Cassandra at 127\.0\.0\.1:1 \(gave up after \d+ attempts in \d+ ms\) failed: .*127\.0\.0\.1:1.*ECONNREFUSED/,
      );
      expect(elapsed).toBeGreaterThanOrEqual(1_400);
      expect(elapsed).toBeLessThan(4_000);
      const retries = warnings.filter((w) => w.msg.startsWith('cannot reach Cassandra at 127.0.0.1:1'));
      expect(retries.length).toBeGreaterThanOrEqual(2);
      expect(retries.map((w) => w.attempt)).toEqual(retries.map((_, i) => i + 1));
    });

    it('requestTimeoutMs bounds each request: an answer slower than it fails retriably', async () => {
      const error = await rejection(CassandraMetaStore.connect(storeOptions({ requestTimeoutMs: 1, connectTimeoutMs: 1_000 })));
      expect(error).toBeInstanceOf(MetaStoreUnavailableError);
      expect((error as Error).message).toMatch(/did not reply before timeout 1 ms/);
    });
  });
});
