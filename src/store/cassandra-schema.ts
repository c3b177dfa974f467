// The CQL of the Cassandra MetaStore: its keyspace, its four tables and every statement it runs.
// Why the tables look like this is explained at the top of cassandra-meta-store.ts.

/**
 * The layout of the rows this version writes and reads (the `format` column of `singleton_state`),
 * but for shard maps, whose rows have formats of their own (see `map-parts.ts`).
 */
export const CASSANDRA_META_FORMAT = 1;

/**
 * How long Cassandra keeps the tombstones of deleted map parts before compaction may purge them.
 * Shorter than the 10-day default because every map change deletes the part row it replaced: a
 * busy singleton leaves many tombstones. Safe because a deleted part row that came back (a replica
 * that missed the delete and was not repaired in time) is one no header refers to, or will ever
 * again (see `garbageOf`): garbage again, never a wrong map. Three hours is Cassandra's default
 * hint window, so a replica that was down a while still gets its deletes by hints.
 */
export const MAP_PARTS_GC_GRACE_SECONDS = 10_800;

/** How the keyspace is replicated when `connect` creates it (an existing keyspace is left as it is). */
export type KeyspaceReplication =
  | { readonly class: 'SimpleStrategy'; readonly replicationFactor: number }
  | { readonly class: 'NetworkTopologyStrategy'; readonly dataCenters: Readonly<Record<string, number>> };

export const DEFAULT_REPLICATION: KeyspaceReplication = { class: 'SimpleStrategy', replicationFactor: 1 };

/** An unquoted CQL identifier as Cassandra accepts it for a keyspace (at most 48 characters). */
export const CQL_KEYSPACE_NAME = /^[A-Za-z][A-Za-z0-9_]{0,47}$/;

/** What a row of `singleton_state` holds; its `value` is JSON of the matching shape. */
export type RecordKind = 'dataset' | 'shard_map' | 'cooldown' | 'subscriptions' | 'node_operations' | 'applied_requests' | 'lease';

/**
 * The row of kind `lease` holds the lease's renewal number in `value` (docs/ARCHITECTURE.md §11.9).
 * A row, not a static column: a store created before renewals existed needs no schema change, and a
 * row's column can be compared in the same condition as the static epoch.
 */
export const LEASE_ROW = { kind: 'lease', dataset: '', shard: -1 } as const satisfies { kind: RecordKind; dataset: string; shard: number };

/** The `shard` of rows that are not per shard (all but cooldowns): clustering columns cannot be null. */
export const NO_SHARD = -1;
/** The `dataset` of the one subscriptions row, which belongs to no dataset. */
export const NO_DATASET = '';

function cqlString(text: string): string {
  return `'${text.replaceAll("'", "''")}'`;
}

/** The replication map of `CREATE KEYSPACE`, e.g. `{'class': 'SimpleStrategy', 'replication_factor': 1}`. */
export function replicationCql(replication: KeyspaceReplication): string {
  const entries: [string, string | number][] =
    replication.class === 'SimpleStrategy' ? [['replication_factor', replication.replicationFactor]] : Object.entries(replication.dataCenters);
  const rendered = entries.map(([k, v]) => `${cqlString(k)}: ${typeof v === 'number' ? v : cqlString(v)}`);
  return `{${[`'class': ${cqlString(replication.class)}`, ...rendered].join(', ')}}`;
}

/**
 * The keyspace and tables, each `IF NOT EXISTS` so any number of processes may run them at any
 * time. Run in order: the tables need the keyspace.
 */
export function schemaCql(keyspace: string, replication: KeyspaceReplication): string[] {
  return [
    `CREATE KEYSPACE IF NOT EXISTS ${keyspace} WITH replication = ${replicationCql(replication)}`,
    // One partition per shardherd cluster: the lease (static columns) and everything the singleton
    // writes, so each of its writes is a lightweight transaction conditioned on the lease's epoch.
    `CREATE TABLE IF NOT EXISTS ${keyspace}.singleton_state (
      cluster text,
      kind text,
      dataset text,
      shard int,
      format int,
      value text,
      map_stamp frozen<tuple<bigint, bigint>>,
      epoch bigint static,
      node text static,
      incarnation text static,
      PRIMARY KEY ((cluster), kind, dataset, shard)
    ) WITH comment = 'shardherd: the singleton lease (static) and what the singleton writes, fenced by the lease epoch'`,
    // A shard map's parts: the header row in singleton_state names, per range of shards, the
    // (epoch, version) of the row holding it. Rows are written once, before a header refers to them.
    `CREATE TABLE IF NOT EXISTS ${keyspace}.map_parts (
      cluster text,
      dataset text,
      part int,
      epoch bigint,
      version bigint,
      format int,
      value text,
      PRIMARY KEY ((cluster, dataset), part, epoch, version)
    ) WITH comment = 'shardherd: the parts of each shard map, immutable, keyed by the (epoch, version) of the map they were written for'
      AND gc_grace_seconds = ${MAP_PARTS_GC_GRACE_SECONDS}`,
    // Checkpoints per shard, as versions before per-copy checkpoints wrote them: nothing writes
    // here any more, but a store that has them is read (they start every copy without its own).
    `CREATE TABLE IF NOT EXISTS ${keyspace}.checkpoints (
      cluster text,
      dataset text,
      shard int,
      group_name text,
      last_offset bigint,
      PRIMARY KEY ((cluster, dataset, shard), group_name)
    ) WITH comment = 'shardherd: ingestion checkpoints, the last offset each group accepted'`,
    // Written by shard owners, not the singleton: one partition per shard, one row per copy (the
    // node id: a restarted node resumes its copy) and group, each write conditioned on `fence`
    // (token and offset, see cassandra-checkpoints.ts). A new table, not a changed one: a primary
    // key cannot be altered, and an older store keeps its rows above. `fence` came later: a table
    // created without it gets it from `addMissingColumns`.
    `CREATE TABLE IF NOT EXISTS ${keyspace}.copy_checkpoints (
      cluster text,
      dataset text,
      shard int,
      node text,
      group_name text,
      last_offset bigint,
      fence frozen<tuple<bigint, bigint, bigint>>,
      PRIMARY KEY ((cluster, dataset, shard), node, group_name)
    ) WITH comment = 'shardherd: ingestion checkpoints of each copy, the last offset its sink accepted per group'`,
  ];
}

/** Every statement the store runs (all prepared), for one keyspace. */
export function metaStoreCql(keyspace: string) {
  const state = `${keyspace}.singleton_state`;
  const parts = `${keyspace}.map_parts`;
  const row = 'cluster = ? AND kind = ? AND dataset = ? AND shard = ?';
  const partRow = 'cluster = ? AND dataset = ? AND part = ?';
  const checkpointRow = 'cluster = ? AND dataset = ? AND shard = ? AND node = ? AND group_name = ?';
  return {
    /** The lease with its renewal (no row in a store never taken since renewals existed). */
    readLease: `SELECT epoch, node, incarnation, value FROM ${state} WHERE ${row}`,
    /** The lease's static columns alone, for a store without the lease row. */
    readLeaseStatics: `SELECT epoch, node, incarnation FROM ${state} WHERE cluster = ? LIMIT 1`,
    /** Bound with a null expected epoch for the first lease: a missing static column is null. */
    takeLease: `UPDATE ${state} SET epoch = ?, node = ?, incarnation = ?, format = ?, value = ? WHERE ${row} IF epoch = ?`,
    /** A successor's takeover: only if the renewal it saw run out is still the stored one. */
    takeRenewedLease: `UPDATE ${state} SET epoch = ?, node = ?, incarnation = ?, format = ?, value = ? WHERE ${row} IF epoch = ? AND value = ?`,
    renewLease: `UPDATE ${state} SET format = ?, value = ? WHERE ${row} IF epoch = ?`,
    putRecord: `UPDATE ${state} SET format = ?, value = ? WHERE ${row} IF epoch = ?`,
    /**
     * Replaces the header the writer knows (`map_stamp = ?`, so the parts it reuses are that
     * header's) and only with a newer map (`map_stamp < ?`). A null stamp (no map) never compares,
     * see `putFirstMapHeader`.
     */
    putMapHeader: `UPDATE ${state} SET format = ?, value = ?, map_stamp = ? WHERE ${row} IF epoch = ? AND map_stamp = ? AND map_stamp < ?`,
    putFirstMapHeader: `UPDATE ${state} SET format = ?, value = ?, map_stamp = ? WHERE ${row} IF epoch = ? AND map_stamp = null`,
    mapHeaders: `SELECT dataset, format, value, map_stamp FROM ${state} WHERE cluster = ? AND kind = ?`,
    mapHeader: `SELECT dataset, format, value, map_stamp FROM ${state} WHERE ${row}`,
    /** The fenced statement of the delete-dataset batch; the others ride on its condition. */
    deleteRecordIfEpoch: `DELETE FROM ${state} WHERE ${row} IF epoch = ?`,
    deleteRecord: `DELETE FROM ${state} WHERE ${row}`,
    deleteDatasetRows: `DELETE FROM ${state} WHERE cluster = ? AND kind = ? AND dataset = ?`,
    recordsOfKind: `SELECT dataset, shard, format, value FROM ${state} WHERE cluster = ? AND kind = ?`,
    putPart: `INSERT INTO ${parts} (cluster, dataset, part, epoch, version, format, value) VALUES (?, ?, ?, ?, ?, ?, ?)`,
    /** The rows named by a list of `(part, epoch, version)` tuples, in one partition. */
    readParts: `SELECT part, epoch, version, format, value FROM ${parts} WHERE cluster = ? AND dataset = ? AND (part, epoch, version) IN ?`,
    deletePartRowsBelow: `DELETE FROM ${parts} WHERE ${partRow} AND (epoch, version) < (?, ?)`,
    deletePartRowsBetween: `DELETE FROM ${parts} WHERE ${partRow} AND (epoch, version) > (?, ?) AND (epoch, version) <= (?, ?)`,
    deleteParts: `DELETE FROM ${parts} WHERE cluster = ? AND dataset = ?`,
    /** A copy's checkpoint over one at most as new (`fence` is `(epoch, version, offset)`; tuples compare lexicographically). */
    writeCheckpoint: `UPDATE ${keyspace}.copy_checkpoints SET last_offset = ?, fence = ? WHERE ${checkpointRow} IF fence <= ?`,
    /** Over a row without a fence (written before fences existed): a null compares with nothing, so `<=` never applies to it. */
    writeCheckpointOverUnfenced: `UPDATE ${keyspace}.copy_checkpoints SET last_offset = ?, fence = ? WHERE ${checkpointRow} IF fence = null`,
    /** A copy's first checkpoint. */
    writeFirstCheckpoint: `INSERT INTO ${keyspace}.copy_checkpoints (last_offset, fence, cluster, dataset, shard, node, group_name) VALUES (?, ?, ?, ?, ?, ?, ?) IF NOT EXISTS`,
    /** Many shards' partitions in one request (an IN on the last partition key column). */
    readCheckpointsOf: `SELECT shard, node, group_name, last_offset, fence FROM ${keyspace}.copy_checkpoints WHERE cluster = ? AND dataset = ? AND shard IN ?`,
    /** The shared checkpoints of an older store, read with each copy's. */
    readSharedCheckpointsOf: `SELECT shard, group_name, last_offset FROM ${keyspace}.checkpoints WHERE cluster = ? AND dataset = ? AND shard IN ?`,
  } as const;
}

export type MetaStoreCql = ReturnType<typeof metaStoreCql>;
