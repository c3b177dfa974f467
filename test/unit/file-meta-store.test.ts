// FileMetaStore keeps embedded mode's MetaStore across restarts in one JSON file: the shared
// contract, plus restart, refusal of files it cannot read, serialised concurrent writes, atomic
// replacement of the file, and maps in the compact encoding (format 2; format 1 files still read).
import { mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { epoch } from '../../src/core/ids.js';
import { FileMetaStore, MetaStoreFileError } from '../../src/store/file-meta-store.js';
import { FencedError, MetaStoreUnavailableError } from '../../src/store/meta-store.js';
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
  nodeA as a,
  nodeB as b,
  onlyCopy,
  plainCheckpoints,
  shardMap,
} from '../contracts/meta-store-contract.js';
import { largeMap, mapDifference } from '../contracts/large-maps.js';
import { encodeSnapshot } from '../../src/core/map-codec.js';

/** The fencing token the checkpoints of these tests are written with (one assignment throughout). */
const TOKEN = { epoch: 1, version: 1 };

metaStoreContract('FileMetaStore', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'shardherd-meta-'));
  return {
    store: new FileMetaStore(join(dir, 'meta.json')),
    cleanup: () => rm(dir, { recursive: true, force: true }),
    // A format 2 file, as versions before per-copy checkpoints wrote it: one checkpoint per shard and group.
    withSharedCheckpoints: async (rows) => {
      const old = join(dir, 'format-2.json');
      await writeFile(old, JSON.stringify({ format: 2, lease: null, datasets: [], shardMaps: [], cooldowns: [], checkpoints: rows }));
      return new FileMetaStore(old);
    },
    withUntokenedCheckpoints: async (rows) => {
      const old = join(dir, 'format-3-untokened.json');
      await writeFile(old, JSON.stringify({ format: 3, lease: null, datasets: [], shardMaps: [], cooldowns: [], checkpoints: rows }));
      return new FileMetaStore(old);
    },
  };
});

describe('FileMetaStore', () => {
  let dir: string;
  let path: string;

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'shardherd-meta-'));
    path = join(dir, 'state', 'meta.json'); // the directory does not exist yet
  });

  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  /** A store on `path` with one of everything, written at epoch 1. */
  async function populated(): Promise<FileMetaStore> {
    const store = new FileMetaStore(path);
    await store.takeLease(a, incA, 0);
    await store.putDataset(datasetConfig(ds1), epoch(1));
    await store.putDataset(datasetConfig(ds2, 8, 50), epoch(1));
    await store.putShardMap(shardMap(ds1, 1, 4));
    await store.putCooldown({ dataset: ds1, shard: 2, reassignedAt: 1234 }, epoch(1));
    await store.writeCheckpoint(ds1, 2, a, 'sink', 99, TOKEN);
    await store.writeCheckpoint(ds1, 2, a, 'archive', 7, TOKEN);
    return store;
  }

  async function readJson(): Promise<Record<string, unknown>> {
    return JSON.parse(await readFile(path, 'utf8')) as Record<string, unknown>;
  }

  it('survives a restart: a new store on the same file sees everything, and still fences the old epoch', async () => {
    await populated();
    const restarted = new FileMetaStore(path);
    expect(await restarted.readLease()).toEqual({ epoch: 1, node: a, incarnation: incA, renewal: 0 });
    expect((await restarted.datasets()).map((c) => c.ref).sort()).toEqual([ds1, ds2]);
    expect((await restarted.datasets()).find((c) => c.ref === ds2)).toEqual(datasetConfig(ds2, 8, 50));
    expect(await restarted.shardMaps()).toEqual([shardMap(ds1, 1, 4)]);
    expect(await restarted.cooldowns()).toEqual([{ dataset: ds1, shard: 2, reassignedAt: 1234 }]);
    expect(plainCheckpoints(await restarted.readCheckpoints(ds1, 2))).toEqual(onlyCopy(a, { sink: 99, archive: 7 }));

    expect(await restarted.takeLease(b, incB, 1)).toEqual({ epoch: 2, node: b, incarnation: incB, renewal: 0 });
    const again = new FileMetaStore(path);
    await expect(again.putDataset(datasetConfig(ds1), epoch(1))).rejects.toBeInstanceOf(FencedError);
    expect(await again.readLease()).toEqual({ epoch: 2, node: b, incarnation: incB, renewal: 0 });
  });

  it('writes the documented format and leaves no temporary file behind', async () => {
    await populated();
    const doc = await readJson();
    expect(Object.keys(doc).sort()).toEqual([
      'appliedRequests',
      'checkpoints',
      'cooldowns',
      'datasets',
      'format',
      'lease',
      'nodeOperations',
      'shardMaps',
      'subscriptions',
    ]);
    expect(doc.format).toBe(3);
    expect(doc.shardMaps).toEqual([JSON.parse(JSON.stringify(encodeSnapshot(shardMap(ds1, 1, 4))))]);
    expect(doc.lease).toEqual({ epoch: 1, node: a, incarnation: incA, renewal: 0 });
    expect(doc.checkpoints).toEqual([
      { dataset: ds1, shard: 2, node: a, group: 'sink', offset: 99, token: [1, 1] },
      { dataset: ds1, shard: 2, node: a, group: 'archive', offset: 7, token: [1, 1] },
    ]);
    expect(await readdir(join(dir, 'state'))).toEqual(['meta.json']);
  });

  it('reads a file written before replicas: format 1 shard maps, no node operations', async () => {
    await mkdir(join(dir, 'state'));
    const lease = { epoch: 1, node: a, incarnation: incA, renewal: 0 };
    await writeFile(
      path,
      JSON.stringify({
        format: 1,
        lease,
        datasets: [datasetConfig(ds1)],
        shardMaps: [formatOneMap(ds1, 1, 3)],
        subscriptions: { subscriptions: [], watchers: [] },
        cooldowns: [],
        checkpoints: [],
      }),
    );
    const store = new FileMetaStore(path);
    const [map] = await store.shardMaps();
    expect(map).toMatchObject({ format: 2, dataset: ds1, epoch: 1, version: 3, assignmentVersions: [0, 0, 0, 0] });
    expect(ShardMapper.fromSnapshot(map!).equals(ShardMapper.fromSnapshot(shardMap(ds1, 1, 3)))).toBe(true);
    expect(await store.nodeOperations()).toEqual({ draining: [], replacements: [] });
  });

  it('reads a file of format 1 with a current map, and rewrites it in format 2 at the next write', async () => {
    await mkdir(join(dir, 'state'));
    const lease = { epoch: 1, node: a, incarnation: incA, renewal: 0 };
    const map = largeMap(ds1, 1_024, 1, 7);
    await writeFile(path, JSON.stringify({ format: 1, lease, datasets: [], shardMaps: [map], cooldowns: [], checkpoints: [] }, null, 2));
    const store = new FileMetaStore(path);
    expect(mapDifference((await store.shardMaps())[0]!, map)).toBeUndefined();
    await store.writeCheckpoint(ds1, 0, a, 'sink', 1, TOKEN);
    const doc = await readJson();
    expect(doc.format).toBe(3);
    expect((doc.shardMaps as { format: number }[])[0]!.format).toBe(3);
    expect(mapDifference((await new FileMetaStore(path).shardMaps())[0]!, map)).toBeUndefined();
  });

  it('keeps a map of 65 536 shards × 3 copies with long node ids in a few MB, and reads it back after a restart', async () => {
    const store = new FileMetaStore(path);
    await store.takeLease(a, incA, 0);
    const map = largeMap(ds1, 65_536, 1, 9);
    await store.putShardMap(map);
    const { size } = await stat(path);
    expect(size).toBeLessThan(5_000_000);
    expect(size).toBeGreaterThan(1_000_000);
    // Written in format 1, the same map is more than five times larger.
    expect(JSON.stringify(map).length).toBeGreaterThan(5 * size);
    expect(mapDifference((await new FileMetaStore(path).shardMaps())[0]!, map)).toBeUndefined();
  }, 60_000);

  it('refuses a format 2 file whose map is not in the compact encoding, naming the entry', async () => {
    await mkdir(join(dir, 'state'));
    await writeFile(path, JSON.stringify({ format: 2, lease: null, datasets: [], shardMaps: [shardMap(ds1, 1, 1)], cooldowns: [], checkpoints: [] }));
    const error = await new FileMetaStore(path).shardMaps().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(MetaStoreFileError);
    expect((error as Error).message).toMatch(/shardMaps\[0\] \(ds1\): unsupported shard map format 2: a file of format 2 holds compact maps \(format 3\)/);
  });

  it('refuses a checkpoint with a malformed token, naming the entry', async () => {
    await mkdir(join(dir, 'state'));
    await writeFile(
      path,
      JSON.stringify({
        format: 3,
        lease: null,
        datasets: [],
        shardMaps: [],
        cooldowns: [],
        checkpoints: [{ dataset: ds1, shard: 0, node: a, group: 'sink', offset: 5, token: [1, -2] }],
      }),
    );
    const error = await new FileMetaStore(path).readCheckpoints(ds1, 0).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(MetaStoreFileError);
    expect((error as Error).message).toMatch(/invalid entry checkpoints\[0\]: token/);
  });

  it('a missing file is an empty store, and reading it creates no file', async () => {
    const store = new FileMetaStore(path);
    expect(await store.readLease()).toBeUndefined();
    expect(await store.datasets()).toEqual([]);
    expect(plainCheckpoints(await store.readCheckpoints(ds1, 0))).toEqual(NONE);
    await expect(readFile(path)).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('refuses a file of an unknown format, naming the file and the format', async () => {
    await mkdir(join(dir, 'state'));
    await writeFile(path, JSON.stringify({ format: 4, lease: null, datasets: [], shardMaps: [], cooldowns: [], checkpoints: [] }));
    const error = await new FileMetaStore(path).readLease().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(MetaStoreFileError);
    expect((error as Error).message).toContain(path);
    expect((error as Error).message).toContain('format 4: this version reads formats 1, 2, 3');
  });

  it('refuses a corrupt dataset entry, naming the file and the entry, instead of skipping it', async () => {
    await populated();
    const doc = await readJson();
    (doc.datasets as { numShards: number }[])[1]!.numShards = 3;
    await writeFile(path, JSON.stringify(doc));

    const store = new FileMetaStore(path);
    const error = await store.datasets().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(MetaStoreFileError);
    const message = (error as Error).message;
    expect(message).toContain(path);
    expect(message).toContain('datasets[1] (ds2)');
    expect(message).toContain('numShards');
    // Every operation refuses: nothing is served from a half-read file, and nothing overwrites it.
    await expect(store.writeCheckpoint(ds1, 0, a, 'sink', 1, TOKEN)).rejects.toBeInstanceOf(MetaStoreFileError);
    expect(((await readJson()).datasets as { numShards: number }[])[1]!.numShards).toBe(3);
  });

  it('refuses a corrupt shard map, lease, cooldown or checkpoint entry, naming it', async () => {
    const cases: [string, (doc: Record<string, unknown>) => void, string][] = [
      ['shard map', (d) => ((d.shardMaps as { numShards: number }[])[0]!.numShards = 5), 'shardMaps[0] (ds1)'],
      ['lease', (d) => ((d.lease as { epoch: number }).epoch = -1), 'lease'],
      ['cooldown', (d) => ((d.cooldowns as { shard: unknown }[])[0]!.shard = 'two'), 'cooldowns[0]'],
      ['checkpoint', (d) => ((d.checkpoints as { dataset: string }[])[1]!.dataset = 'no spaces allowed'), 'checkpoints[1]'],
      ['duplicate dataset', (d) => (d.datasets as unknown[]).push((d.datasets as unknown[])[0]), 'ds1 is listed twice'],
    ];
    await populated();
    const good = await readJson();
    for (const [label, corrupt, named] of cases) {
      const doc = structuredClone(good);
      corrupt(doc);
      await writeFile(path, JSON.stringify(doc));
      const error = await new FileMetaStore(path).shardMaps().catch((e: unknown) => e);
      expect(error, label).toBeInstanceOf(MetaStoreFileError);
      expect((error as Error).message, label).toContain(named);
      expect((error as Error).message, label).toContain(path);
    }
  });

  it('refuses a file that is not JSON', async () => {
    await mkdir(join(dir, 'state'));
    await writeFile(path, '{"format": 1, "lease": ');
    await expect(new FileMetaStore(path).readLease()).rejects.toThrow(/not a JSON document/);
  });

  it('concurrent writes all land, in the file too', async () => {
    const store = new FileMetaStore(path);
    await store.takeLease(a, incA, 0);
    const writes: Promise<void>[] = [];
    for (let shard = 0; shard < 20; shard += 1) writes.push(store.writeCheckpoint(ds1, shard, a, 'sink', shard * 10, TOKEN));
    writes.push(store.putDataset(datasetConfig(ds1), epoch(1)), store.putDataset(datasetConfig(ds2), epoch(1)));
    for (let shard = 0; shard < 4; shard += 1) writes.push(store.putCooldown({ dataset: ds2, shard, reassignedAt: shard }, epoch(1)));
    await Promise.all(writes);

    const restarted = new FileMetaStore(path);
    for (let shard = 0; shard < 20; shard += 1) {
      expect(plainCheckpoints(await restarted.readCheckpoints(ds1, shard))).toEqual(onlyCopy(a, { sink: shard * 10 }));
    }
    expect((await restarted.datasets()).map((c) => c.ref).sort()).toEqual([ds1, ds2]);
    expect(await restarted.cooldowns()).toHaveLength(4);
  });

  it('a racing pair of candidates on one store: exactly one wins, and the file records the winner', async () => {
    const store = new FileMetaStore(path);
    const [first, second] = await Promise.all([store.takeLease(a, incA, 0), store.takeLease(b, incB, 0)]);
    expect(first).toEqual({ epoch: 1, node: a, incarnation: incA, renewal: 0 });
    expect(second).toBeUndefined();
    expect((await readJson()).lease).toEqual({ epoch: 1, node: a, incarnation: incA, renewal: 0 });
  });

  it('a write that cannot be saved rejects as retriable, changes nothing, and a later write succeeds', async () => {
    const store = await populated();
    await mkdir(`${path}.tmp`); // the temporary file cannot be created
    const error = await store.writeCheckpoint(ds2, 0, a, 'sink', 5, TOKEN).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(MetaStoreUnavailableError);
    expect(error).toMatchObject({ retriable: true });
    expect(plainCheckpoints(await store.readCheckpoints(ds2, 0))).toEqual(NONE);
    expect((await readJson()).checkpoints).toHaveLength(2);

    await rm(`${path}.tmp`, { recursive: true });
    await store.writeCheckpoint(ds2, 0, a, 'sink', 5, TOKEN);
    expect(plainCheckpoints(await new FileMetaStore(path).readCheckpoints(ds2, 0))).toEqual(onlyCopy(a, { sink: 5 }));
  });
});
