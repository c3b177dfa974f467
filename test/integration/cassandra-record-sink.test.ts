// The example sink over Cassandra keeps the fencing contract against a real server: a late write of
// an older token, issued after a newer owner wrote, applies nothing; racing owners leave exactly the
// newest owner's token, and no record of an older token lands after a newer token's first write.
import { Client, types } from 'cassandra-driver';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StaleTokenError, type FencingToken } from '../../src/core/fencing-token.js';
import { validateDatasetConfig, type DatasetConfig } from '../../src/core/dataset-config.js';
import type { ShardNum } from '../../src/core/ids.js';
import { CassandraRecordSink } from '../../src/ingest/cassandra-record-sink.js';
import { services, uniqueName } from './support.js';

const KEYSPACE = 'shardherd_test';
/** A table of this run's own (records of earlier runs stay in theirs). */
const TABLE = `records_${Date.now().toString(36)}`;
let client: Client;
let sink: CassandraRecordSink;

const valid = validateDatasetConfig({ ref: uniqueName('sink').replace(/-/g, '_'), numShards: 4, minNumNodes: 1, source: { type: 'synthetic' } });
if (!valid.ok) throw new Error('bad test dataset');
const ds: DatasetConfig = valid.value;
const recs = (from: number, n: number) => Array.from({ length: n }, (_, i) => ({ offset: from + i, key: `k${from + i}`, value: { n: from + i } }));
const t = (epoch: number, version: number): FencingToken => ({ epoch, version });

beforeAll(async () => {
  const s = services();
  client = new Client({ contactPoints: s.cassandraContactPoints, localDataCenter: s.cassandraLocalDataCenter });
  await client.connect();
  await client.execute(`CREATE KEYSPACE IF NOT EXISTS ${KEYSPACE} WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}`);
  sink = await CassandraRecordSink.create({ client, keyspace: KEYSPACE, table: TABLE, recordsPerBatch: 10 });
});

afterAll(async () => {
  await client?.shutdown();
});

describe('CassandraRecordSink', () => {
  it('stores records with the token; a late write of an older token is refused and applies nothing', async () => {
    const shard = 0 as ShardNum;
    await sink.accept(ds, shard, recs(0, 25), t(1, 3));
    // The next owner (newer token) writes; then the former owner's call, held until now, lands.
    await sink.accept(ds, shard, recs(25, 5), t(2, 1));
    const late = await sink.accept(ds, shard, recs(25, 40), t(1, 3)).catch((e: unknown) => e);
    expect(late).toBeInstanceOf(StaleTokenError);
    expect((late as StaleTokenError).newest).toEqual(t(2, 1));
    const stored = await sink.read(ds.ref, shard);
    expect(stored.token).toEqual(t(2, 1));
    expect(stored.records.map((r) => r.offset)).toEqual(Array.from({ length: 30 }, (_, i) => i));
    expect(stored.records[7]).toEqual({ offset: 7, key: 'k7', value: { n: 7 }, writtenWith: t(1, 3) });
    expect(stored.records[27]!.writtenWith).toEqual(t(2, 1));
  });

  it('owners racing on one shard: the newest token stays, and every refused call names a newer one', async () => {
    const shard = 1 as ShardNum;
    const calls = Array.from({ length: 12 }, (_, i) => ({ token: t(1 + (i % 3), i % 4), records: recs(100 * i, 3) }));
    const outcomes = await Promise.all(
      calls.map((c) =>
        sink.accept(ds, shard, c.records, c.token).then(
          () => undefined,
          (e: unknown) => e,
        ),
      ),
    );
    for (const [i, o] of outcomes.entries()) {
      if (o === undefined) continue;
      expect(o).toBeInstanceOf(StaleTokenError);
      const e = o as StaleTokenError;
      expect(e.newest.epoch * 100 + e.newest.version, `call ${i}`).toBeGreaterThan(calls[i]!.token.epoch * 100 + calls[i]!.token.version);
    }
    const newest = calls
      .map((c) => c.token)
      .sort((a, b) => a.epoch - b.epoch || a.version - b.version)
      .at(-1)!;
    expect((await sink.read(ds.ref, shard)).token).toEqual(newest);
    // Every applied call's records are there; no refused call's.
    const stored = new Set((await sink.read(ds.ref, shard)).records.map((r) => r.offset));
    for (const [i, o] of outcomes.entries())
      for (const r of calls[i]!.records) expect(stored.has(r.offset), `record ${r.offset} of call ${i}`).toBe(o === undefined);
  });

  it('a caller without a token writes unfenced (the three-argument API keeps working)', async () => {
    const shard = 2 as ShardNum;
    await sink.accept(ds, shard, recs(0, 3));
    const stored = await sink.read(ds.ref, shard);
    expect(stored.token).toBeUndefined();
    expect(stored.records.length).toBe(3);
    const raw = await client.execute(`SELECT count(*) FROM ${KEYSPACE}.${TABLE} WHERE dataset = ? AND shard = ?`, [ds.ref, 2], { prepare: true });
    expect(types.Long.fromValue(raw.first().get(0) as types.Long).toNumber()).toBe(3);
  });
});
