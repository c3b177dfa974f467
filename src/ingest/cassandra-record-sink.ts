// A sink that stores records in Cassandra and fences them by token (the contract of `RecordSink`,
// docs/ARCHITECTURE.md §12.2): an example of a sink over a real store, exported by
// `shardherd/cassandra`. Each (dataset, shard) is one partition of its table: the records are its
// rows (clustered by offset) and the newest token applied is a static column, so a write is one
// conditional batch on one partition, `IF fence_token <= ?`: Paxos applies the records and raises the
// token together, or applies nothing and returns the newer token, which becomes `StaleTokenError`.
import { types, type Client } from 'cassandra-driver';
import type { DatasetConfig } from '../core/dataset-config.js';
import { compareTokens, isFencingToken, StaleTokenError, type FencingToken } from '../core/fencing-token.js';
import type { ShardNum } from '../core/ids.js';
import { CQL_KEYSPACE_NAME } from '../store/cassandra-schema.js';
import type { RecordSink, SinkStorage, SourceRecord } from './ingestion-source.js';

export interface CassandraRecordSinkOptions {
  /** A connected cassandra-driver client. */
  readonly client: Client;
  /** An existing keyspace (an unquoted CQL identifier). */
  readonly keyspace: string;
  /** The table, created if missing (default `shardherd_records`). */
  readonly table?: string;
  /** Records per conditional batch (default 100): a larger sink call is several batches, each fenced. */
  readonly recordsPerBatch?: number;
}

/** A stored record, with the token of the write that stored it last (none when written without one). */
export interface StoredRecord extends SourceRecord {
  readonly writtenWith: FencingToken | undefined;
}

/** What a shard's partition holds. */
export interface StoredShard {
  readonly token: FencingToken | undefined;
  readonly records: readonly StoredRecord[];
}

const LWT = { prepare: true, consistency: types.consistencies.localQuorum, serialConsistency: types.consistencies.localSerial, isIdempotent: false };
const READ = { prepare: true, consistency: types.consistencies.localQuorum, isIdempotent: true };

export class CassandraRecordSink implements RecordSink {
  /**
   * One table for every copy of every shard, on every node, fenced in the table: a shard's newest
   * fenced checkpoint vouches for what its partition holds, whichever node wrote it, so a copy
   * resumes from it (docs/ARCHITECTURE.md §12.3).
   */
  readonly storage: SinkStorage = 'shared';

  private constructor(
    private readonly client: Client,
    private readonly table: string,
    private readonly perBatch: number,
  ) {}

  /** Creates the table if missing (records are JSON text; `fence_token` is the shard's newest token applied). */
  static async create(options: CassandraRecordSinkOptions): Promise<CassandraRecordSink> {
    const tableName = options.table ?? 'shardherd_records';
    for (const [what, name] of [
      ['keyspace', options.keyspace],
      ['table', tableName],
    ] as const) {
      if (!CQL_KEYSPACE_NAME.test(name)) throw new RangeError(`invalid ${what} ${JSON.stringify(name)}: must be an unquoted CQL identifier`);
    }
    const perBatch = options.recordsPerBatch ?? 100;
    if (!Number.isInteger(perBatch) || perBatch < 1) throw new RangeError(`recordsPerBatch must be a whole number >= 1, got ${perBatch}`);
    const table = `${options.keyspace}.${tableName}`;
    await options.client.execute(`CREATE TABLE IF NOT EXISTS ${table} (
      dataset text,
      shard int,
      record_offset bigint,
      record_key text,
      record_value text,
      written_with frozen<tuple<bigint, bigint>>,
      fence_token frozen<tuple<bigint, bigint>> static,
      PRIMARY KEY ((dataset, shard), record_offset)
    ) WITH comment = 'shardherd example sink: records per shard, fenced by the newest token applied (static)'`);
    return new CassandraRecordSink(options.client, table, perBatch);
  }

  async accept(dataset: DatasetConfig, shard: ShardNum, records: readonly SourceRecord[], token?: FencingToken): Promise<void> {
    for (let i = 0; i < records.length; i += this.perBatch) await this.write(dataset.ref, shard, records.slice(i, i + this.perBatch), token);
    // An empty batch still raises the token: a newer owner's first call fences the older one.
    if (records.length === 0 && token) await this.write(dataset.ref, shard, [], token);
  }

  /** The shard's newest token and its records in offset order (for readers of the table and for tests). */
  async read(dataset: string, shard: number): Promise<StoredShard> {
    const rows: types.Row[] = [];
    const result = await this.client.execute(
      `SELECT fence_token, record_offset, record_key, record_value, written_with FROM ${this.table} WHERE dataset = ? AND shard = ?`,
      [dataset, shard],
      { ...READ, fetchSize: 5_000 },
    );
    for await (const row of result) rows.push(row);
    const token = tokenOf(rows[0]?.get('fence_token'));
    const records = rows
      .filter((r) => r.get('record_offset') !== null)
      .map((r) => ({
        offset: Number(r.get('record_offset')),
        key: r.get('record_key') as string,
        value: JSON.parse(r.get('record_value') as string) as unknown,
        writtenWith: tokenOf(r.get('written_with')),
      }));
    return { token, records };
  }

  private async write(dataset: string, shard: number, records: readonly SourceRecord[], token: FencingToken | undefined): Promise<void> {
    const tuple = token && new types.Tuple(types.Long.fromNumber(token.epoch), types.Long.fromNumber(token.version));
    const inserts = records.map((r) => ({
      query: `INSERT INTO ${this.table} (dataset, shard, record_offset, record_key, record_value, written_with) VALUES (?, ?, ?, ?, ?, ?)`,
      params: [dataset, shard, types.Long.fromNumber(r.offset), r.key, JSON.stringify(r.value) ?? 'null', tuple ?? null],
    }));
    // A caller of the three-argument API: plain writes, unfenced.
    if (token === undefined || tuple === undefined) {
      if (inserts.length > 0) await this.client.batch(inserts, { prepare: true, consistency: types.consistencies.localQuorum });
      return;
    }
    const setToken = (condition: string) => ({
      query: `UPDATE ${this.table} SET fence_token = ? WHERE dataset = ? AND shard = ? IF ${condition}`,
      params: condition === 'fence_token = null' ? [tuple, dataset, shard] : [tuple, dataset, shard, tuple],
    });
    // `fence_token <= ?` never holds for a shard without one (null compares with nothing): its first write is `IF fence_token = null`.
    let condition = 'fence_token <= ?';
    for (let round = 0; round < 4; round++) {
      const result = await this.client.batch([setToken(condition), ...inserts], LWT);
      if (result.wasApplied()) return;
      const newest = tokenOf(result.first()?.get('fence_token'));
      if (newest && compareTokens(newest, token) > 0) throw new StaleTokenError(dataset, shard, token, newest);
      // No token yet, or another writer set one no newer than ours meanwhile: compare again.
      condition = newest ? 'fence_token <= ?' : 'fence_token = null';
    }
    throw new Error(`the token of ${dataset} shard ${shard} kept changing during a write; try again`);
  }
}

function tokenOf(value: unknown): FencingToken | undefined {
  if (!(value instanceof types.Tuple)) return undefined;
  const [epoch, version] = value.elements.map((e: unknown) => (types.Long.isLong(e) ? (e as types.Long).toNumber() : Number(e)));
  const token = { epoch, version };
  return isFencingToken(token) ? token : undefined;
}
