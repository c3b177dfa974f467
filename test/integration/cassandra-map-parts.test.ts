// The Cassandra MetaStore's shard maps in parts and its bounded requests, on a real Cassandra whose
// mutations are capped at 2.5 MiB (a 5 MiB commit log segment): what only the real store shows.
// A change of one shard writes one part; a map that cannot be read whole is left out and logged;
// a header written against a stale memory is refused and the store recovers; maps written whole
// by an older version are read and then rewritten in parts; old part rows are deleted; no more
// than `maxConcurrentRequests` requests reach the driver at once; a write too large for
// `maxMutationBytes` is never sent. The shared contract (large maps included) runs in
// cassandra-meta-store.test.ts.
import { Client as CassandraClient, types } from 'cassandra-driver';
import { pino, type Logger } from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { epoch } from '../../src/core/ids.js';
import type { ShardMapSnapshot } from '../../src/core/shard-map-snapshot.js';
import { metaStoreOptions, parseNodeConfig } from '../../src/node/node-config.js';
import { CassandraMetaStore, type CassandraMetaStoreOptions } from '../../src/store/cassandra-meta-store.js';
import { decodeHeader } from '../../src/store/map-parts.js';
import { MetaStoreWriteTooLargeError } from '../../src/store/meta-store.js';
import { largeMap, mapDifference, withChanges } from '../contracts/large-maps.js';
import { ds1, ds2, incA, incB, nodeA, nodeB } from '../contracts/meta-store-contract.js';
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
    cluster: uniqueName('parts'),
    log: silent,
    ...overrides,
  };
}

/** A pino logger whose lines (JSON) are kept, for checking what was logged. */
function capturingLog(level = 'error'): { log: Logger; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  return { log: pino({ level }, { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) }), lines };
}

/** Counts the statements a store sends to the driver, by what they do, and the most in flight at once. */
function countStatements(store: CassandraMetaStore) {
  const client = store['client'];
  const execute = client.execute.bind(client) as (q: string, p: unknown[], o: object) => Promise<types.ResultSet>;
  const counts = { partWrites: 0, headerWrites: 0, partDeletes: 0, inFlight: 0, mostInFlight: 0 };
  vi.spyOn(client, 'execute').mockImplementation((async (query: string, params: unknown[], options: object) => {
    if (query.startsWith(`INSERT INTO ${KEYSPACE}.map_parts`)) counts.partWrites += 1;
    if (query.startsWith(`DELETE FROM ${KEYSPACE}.map_parts`)) counts.partDeletes += 1;
    if (query.includes('SET format = ?, value = ?, map_stamp = ?')) counts.headerWrites += 1;
    counts.inFlight += 1;
    counts.mostInFlight = Math.max(counts.mostInFlight, counts.inFlight);
    try {
      return await execute(query, params, options);
    } finally {
      counts.inFlight -= 1;
    }
  }) as never);
  return counts;
}

describe('CassandraMetaStore: shard maps in parts, bounded requests', () => {
  let raw: CassandraClient;
  const opened: CassandraMetaStore[] = [];

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
  });

  afterAll(async () => {
    await raw?.shutdown();
  });

  /** The part rows of a dataset as `part epoch/version`, sorted. */
  async function partRows(cluster: string, dataset: string): Promise<string[]> {
    const result = await raw.execute(`SELECT part, epoch, version FROM ${KEYSPACE}.map_parts WHERE cluster = ? AND dataset = ?`, [cluster, dataset], {
      prepare: true,
      fetchSize: 5000,
    });
    return result.rows.map((r) => `${String(r.get('part')).padStart(3, '0')} ${r.get('epoch')}/${r.get('version')}`).sort();
  }

  /** The stored header row of a dataset: its format and the part stamps its value names. */
  async function headerRow(cluster: string, dataset: string): Promise<{ format: number; parts: string[] }> {
    const row = (
      await raw.execute(
        `SELECT format, value FROM ${KEYSPACE}.singleton_state WHERE cluster = ? AND kind = 'shard_map' AND dataset = ? AND shard = -1`,
        [cluster, dataset],
        { prepare: true },
      )
    ).first();
    const format = row.get('format') as number;
    const header = format === 2 ? decodeHeader(row.get('value') as string) : undefined;
    return { format, parts: header?.ok ? header.value.parts.map((s, p) => `${String(p).padStart(3, '0')} ${s.epoch}/${s.version}`) : [] };
  }

  async function expectStored(store: CassandraMetaStore, expected: ShardMapSnapshot): Promise<void> {
    const stored = (await store.shardMaps()).filter((m) => m.dataset === expected.dataset);
    expect(stored).toHaveLength(1);
    expect(mapDifference(stored[0]!, expected)).toBeUndefined();
  }

  it('65 536 shards × 3: the first write, a change of one shard (one part and one header written, the part it replaced deleted) and a full read, timed', async () => {
    const cluster = uniqueName('big');
    const store = await open({ cluster });
    await store.takeLease(nodeA, incA, 0);
    const map = largeMap(ds1, 65_536, 1, 500);
    let started = performance.now();
    await store.putShardMap(map);
    const firstWriteMs = performance.now() - started;
    expect(await partRows(cluster, ds1)).toHaveLength(256);

    const counts = countStatements(store);
    const changed = withChanges(map, [40_000], 501); // shard 40 000 is in part 156
    started = performance.now();
    await store.putShardMap(changed);
    const changeMs = performance.now() - started;
    expect(counts).toMatchObject({ partWrites: 1, headerWrites: 1, partDeletes: 1 });
    const rows = await partRows(cluster, ds1);
    expect(rows).toHaveLength(256);
    expect(rows.filter((r) => r.endsWith('1/501'))).toEqual(['156 1/501']);
    expect(await headerRow(cluster, ds1)).toEqual({ format: 2, parts: rows });

    const reader = await open({ cluster }); // a fresh process: nothing remembered
    started = performance.now();
    await expectStored(reader, changed);
    const readMs = performance.now() - started;
    console.info(
      `[cassandra-map-parts] 65 536 × 3: first write ${Math.round(firstWriteMs)} ms, one-shard change ${Math.round(changeMs)} ms, full read ${Math.round(readMs)} ms`,
    );
  });

  it('a map that cannot be read whole is left out and logged as metastore.map-unreadable, while the others are read; the next write replaces it whole', async () => {
    const cluster = uniqueName('unreadable');
    const { log, lines } = capturingLog();
    const store = await open({ cluster, log });
    await store.takeLease(nodeA, incA, 0);
    const a = largeMap(ds1, 1_024, 1, 5);
    const b = largeMap(ds2, 1_024, 1, 6);
    await store.putShardMap(a);
    await store.putShardMap(b);

    await raw.execute(`DELETE FROM ${KEYSPACE}.map_parts WHERE cluster = ? AND dataset = ? AND part = 2`, [cluster, ds1], { prepare: true });
    expect((await store.shardMaps()).map((m) => m.dataset)).toEqual([ds2]);
    expect(lines).toMatchObject([
      { level: 50, event: 'metastore.map-unreadable', dataset: ds1, reason: 'map part 2 (shards 512..767) of ds1 (stamp 1/5) is missing' },
    ]);

    // The singleton recovered the map from the nodes and writes it again: every part is written
    // (the store does not reuse the part it knows is gone) and the map is whole again.
    const counts = countStatements(store);
    const recovered = withChanges(a, [1], 7);
    await store.putShardMap(recovered);
    expect(counts.partWrites).toBe(4);
    await expectStored(store, recovered);

    // A malformed part, and a header written by a newer version, are left out the same way.
    await raw.execute(
      `UPDATE ${KEYSPACE}.map_parts SET value = '{"numShards": 1024}' WHERE cluster = ? AND dataset = ? AND part = 1 AND epoch = 1 AND version = 7`,
      [cluster, ds1],
      { prepare: true },
    );
    await raw.execute(
      `UPDATE ${KEYSPACE}.singleton_state SET format = 3 WHERE cluster = ? AND kind = 'shard_map' AND dataset = ? AND shard = -1`,
      [cluster, ds2],
      { prepare: true },
    );
    lines.length = 0;
    expect(await store.shardMaps()).toEqual([]);
    expect(lines.map((l) => [l.dataset, l.reason]).sort()).toEqual([
      [ds1, expect.stringMatching(/^map part 1 \(shards 256\.\.511\) of ds1 \(stamp 1\/7\) is malformed: it is part undefined of 1024 shards/)],
      [ds2, expect.stringMatching(/^header format 3 is unknown: this version reads formats 1 and 2/)],
    ]);
  });

  it('a header written against a stale memory is refused and the store recovers: two stores writing in turn, each after the other', async () => {
    const cluster = uniqueName('turns');
    const [a, b, reader] = await Promise.all([open({ cluster }), open({ cluster }), open({ cluster })]);
    await a.takeLease(nodeA, incA, 0); // both write at epoch 1: think of one singleton through two stores
    let map = largeMap(ds1, 4_096, 1, 1);
    await a.putShardMap(map);
    await expectStored(b, map); // b now remembers a's header and its 16 parts

    const turns: [CassandraMetaStore, number][] = [
      [a, 100],
      [b, 1_400],
      [a, 2_900],
      [b, 100],
      [a, 4_095],
    ];
    let writtenLast = new Set<number>(); // the parts the other store's last header refers to anew
    for (const [i, [writer, shard]] of turns.entries()) {
      const counts = countStatements(writer);
      map = withChanges(map, [shard], map.version + 1);
      await writer.putShardMap(map);
      // The first attempt, against the header the writer remembers, is refused (but on the first
      // turn, whose writer wrote that header); the second, against the header it then reads,
      // writes the part it changed and those whose rows it does not know: the other's last ones.
      expect(counts.headerWrites, `turn ${i}`).toBe(i === 0 ? 1 : 2);
      const written = new Set([Math.floor(shard / 256), ...(i === 0 ? [] : writtenLast)]);
      expect(counts.partWrites, `turn ${i}`).toBe(written.size);
      expect(new Set((await headerRow(cluster, ds1)).parts.filter((r) => r.endsWith(`1/${map.version}`)).map((r) => Number(r.slice(0, 3))))).toEqual(written);
      await expectStored(reader, map); // a third store: the writers remember only what they wrote
      vi.restoreAllMocks();
      writtenLast = written;
    }
    // A map older than the stored one is ignored, whoever writes it; only referenced part rows are left.
    await b.putShardMap(withChanges(map, [7], map.version - 1));
    await a.putShardMap(withChanges(map, [8], map.version - 2));
    await expectStored(reader, map);
    expect(await partRows(cluster, ds1)).toEqual((await headerRow(cluster, ds1)).parts);
  });

  it('a map written whole by an older version (format 1) is read, then rewritten in parts by the first write', async () => {
    const cluster = uniqueName('migrate');
    const store = await open({ cluster });
    await store.takeLease(nodeA, incA, 0);
    const old = largeMap(ds1, 2_048, 1, 30);
    // What the previous version wrote: the whole map as JSON, format 1, with its stamp.
    await raw.execute(
      `UPDATE ${KEYSPACE}.singleton_state SET format = ?, value = ?, map_stamp = ? WHERE cluster = ? AND kind = ? AND dataset = ? AND shard = -1`,
      [1, JSON.stringify(old), new types.Tuple(types.Long.fromNumber(1), types.Long.fromNumber(30)), cluster, 'shard_map', ds1],
      { prepare: true },
    );
    await expectStored(store, old);
    const next = withChanges(old, [2], 31);
    await store.putShardMap(next);
    expect((await headerRow(cluster, ds1)).format).toBe(2);
    expect(await partRows(cluster, ds1)).toHaveLength(8);
    await expectStored(await open({ cluster }), next);

    // A store that never read the old row migrates it too (its first guess, "no map", is refused).
    const other = uniqueName('migrate');
    await raw.execute(`UPDATE ${KEYSPACE}.singleton_state SET epoch = 1, node = 'node-a', incarnation = 'a#1' WHERE cluster = ?`, [other], { prepare: true });
    await raw.execute(
      `UPDATE ${KEYSPACE}.singleton_state SET format = ?, value = ?, map_stamp = ? WHERE cluster = ? AND kind = ? AND dataset = ? AND shard = -1`,
      [1, JSON.stringify(old), new types.Tuple(types.Long.fromNumber(1), types.Long.fromNumber(30)), other, 'shard_map', ds1],
      { prepare: true },
    );
    const fresh = await open({ cluster: other });
    await fresh.putShardMap(next);
    expect((await headerRow(other, ds1)).format).toBe(2);
    await expectStored(fresh, next);
  });

  it("a replaced singleton's part rows, which no header refers to, are deleted by the next singleton's first write; a replaced part row by the write that replaced it", async () => {
    const cluster = uniqueName('sweep');
    const [zombie, next] = await Promise.all([open({ cluster }), open({ cluster })]);
    await zombie.takeLease(nodeA, incA, 0);
    const map = largeMap(ds1, 1_024, 1, 10);
    await zombie.putShardMap(map);
    await next.takeLease(nodeB, incB, 1);
    const recovered = (await next.shardMaps())[0]!;
    await expect(zombie.putShardMap(withChanges(map, [0, 300], 11))).rejects.toMatchObject({ code: 'FENCED' });
    expect(await partRows(cluster, ds1)).toEqual(['000 1/10', '000 1/11', '001 1/10', '001 1/11', '002 1/10', '003 1/10']);

    const first = withChanges(recovered, [900], 0, 2);
    await next.putShardMap(first);
    expect(await partRows(cluster, ds1)).toEqual(['000 1/10', '001 1/10', '002 1/10', '003 2/0']);
    expect((await headerRow(cluster, ds1)).parts).toEqual(await partRows(cluster, ds1));
    await next.putShardMap(withChanges(first, [1], 1));
    expect(await partRows(cluster, ds1)).toEqual(['000 2/1', '001 1/10', '002 1/10', '003 2/0']);

    // Deleting the dataset deletes its parts.
    await next.deleteDataset(ds1, epoch(2));
    expect(await partRows(cluster, ds1)).toEqual([]);
  });

  it('5 000 checkpoint reads at once all succeed with never more than maxConcurrentRequests at the driver', async () => {
    const store = await open({ maxConcurrentRequests: 32 });
    await Promise.all(Array.from({ length: 50 }, (_, i) => store.writeCheckpoint(ds1, i * 100, nodeA, 'sink', i, TOKEN)));
    const counts = countStatements(store);
    const reads = await Promise.all(Array.from({ length: 5_000 }, (_, shard) => store.readCheckpoints(ds1, shard)));
    reads.forEach((r, shard) => expect(r.copies.get(nodeA)?.get('sink')).toBe(shard % 100 === 0 ? shard / 100 : undefined));
    expect(counts.mostInFlight).toBe(32);
    expect(store.requests).toEqual({ running: 0, waiting: 0, highWater: 32 });

    // The same through the batch read: 50 requests of 100 shards to each checkpoint table.
    const batch = await store.readCheckpointsOf(
      ds1,
      Array.from({ length: 5_000 }, (_, shard) => shard),
    );
    expect([...batch].filter(([, c]) => c.copies.size > 0).map(([shard]) => shard)).toEqual(Array.from({ length: 50 }, (_, i) => i * 100));
  });

  it('a write larger than maxMutationBytes fails at once, not retriable, naming the row and both sizes, and writes nothing', async () => {
    const cluster = uniqueName('large');
    const store = await open({ cluster, maxMutationBytes: 4_096 });
    await store.takeLease(nodeA, incA, 0);
    const counts = countStatements(store);
    const error = await store.putShardMap(largeMap(ds1, 4_096, 1, 1)).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(MetaStoreWriteTooLargeError);
    expect(error).toMatchObject({
      code: 'METASTORE_WRITE_TOO_LARGE',
      retriable: false,
      maxBytes: 4_096,
      dataset: ds1,
      row: 'map part 0 (shards 0..255) of ds1',
    });
    expect((error as MetaStoreWriteTooLargeError).bytes).toBeGreaterThan(4_096);
    expect((error as Error).message).toMatch(/^MetaStore write of map part 0 \(shards 0\.\.255\) of ds1 is \d+ bytes, above maxMutationBytes 4096/);
    expect(counts).toMatchObject({ partWrites: 0, headerWrites: 0 });
    expect(await partRows(cluster, ds1)).toEqual([]);
    // Smaller writes go through.
    await store.putShardMap(largeMap(ds1, 16, 1, 2));
    await expectStored(store, largeMap(ds1, 16, 1, 2));
  });

  it("a node config's cassandra.maxConcurrentRequests and cassandra.maxMutationBytes change what its store does", async () => {
    const { cassandraContactPoints } = services();
    const config = parseNodeConfig({
      node: 'node-1',
      cluster: uniqueName('cfg').replaceAll('-', '_'),
      kafka: { brokers: ['127.0.0.1:9092'] },
      cassandra: { contactPoints: cassandraContactPoints, keyspace: KEYSPACE, maxConcurrentRequests: 8, maxMutationBytes: 2_048 },
    });
    const store = await CassandraMetaStore.connect(metaStoreOptions(config, silent));
    opened.push(store);
    await Promise.all(Array.from({ length: 500 }, (_, shard) => store.readCheckpoints(ds1, shard)));
    expect(store.requests.highWater).toBe(8);
    await store.takeLease(nodeA, incA, 0);
    await expect(store.putShardMap(largeMap(ds1, 1_024, 1, 1))).rejects.toMatchObject({ code: 'METASTORE_WRITE_TOO_LARGE', maxBytes: 2_048 });
  });
});
