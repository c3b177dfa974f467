// The CQL of the Cassandra MetaStore: its keyspace, its two tables and every statement it runs.
// Why the tables look like this is explained at the top of cassandra-meta-store.ts.

/** The layout of the rows this version writes and reads (the `format` column of `singleton_state`). */
export const CASSANDRA_META_FORMAT = 1;

/** How the keyspace is replicated when `connect` creates it (an existing keyspace is left as it is). */
export type KeyspaceReplication =
  | { readonly class: 'SimpleStrategy'; readonly replicationFactor: number }
  | { readonly class: 'NetworkTopologyStrategy'; readonly dataCenters: Readonly<Record<string, number>> };

export const DEFAULT_REPLICATION: KeyspaceReplication = { class: 'SimpleStrategy', replicationFactor: 1 };

/** An unquoted CQL identifier as Cassandra accepts it for a keyspace (at most 48 characters). */
export const CQL_KEYSPACE_NAME = /^[A-Za-z][A-Za-z0-9_]{0,47}$/;

/** What a row of `singleton_state` holds; its `value` is JSON of the matching shape. */
export type RecordKind = 'dataset' | 'shard_map' | 'cooldown' | 'subscriptions' | 'node_operations' | 'applied_requests';

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
    replication.class === 'SimpleStrategy'
      ? [['replication_factor', replication.replicationFactor]]
      : Object.entries(replication.dataCenters);
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
    // Written by shard owners, not the singleton: plain writes, one partition per shard.
    `CREATE TABLE IF NOT EXISTS ${keyspace}.checkpoints (
      cluster text,
      dataset text,
      shard int,
      group_name text,
      last_offset bigint,
      PRIMARY KEY ((cluster, dataset, shard), group_name)
    ) WITH comment = 'shardherd: ingestion checkpoints, the last offset each group accepted'`,
  ];
}

/** Every statement the store runs (all prepared), for one keyspace. */
export function metaStoreCql(keyspace: string) {
  const state = `${keyspace}.singleton_state`;
  const row = 'cluster = ? AND kind = ? AND dataset = ? AND shard = ?';
  return {
    readLease: `SELECT epoch, node, incarnation FROM ${state} WHERE cluster = ? LIMIT 1`,
    /** Bound with a null expected epoch for the first lease: a missing static column is null. */
    takeLease: `UPDATE ${state} SET epoch = ?, node = ?, incarnation = ? WHERE cluster = ? IF epoch = ?`,
    putRecord: `UPDATE ${state} SET format = ?, value = ? WHERE ${row} IF epoch = ?`,
    /** Replaces the stored map only if it is older; a null stamp (no map) never compares, see `putFirstShardMap`. */
    putNewerShardMap: `UPDATE ${state} SET format = ?, value = ?, map_stamp = ? WHERE ${row} IF epoch = ? AND map_stamp < ?`,
    putFirstShardMap: `UPDATE ${state} SET format = ?, value = ?, map_stamp = ? WHERE ${row} IF epoch = ? AND map_stamp = null`,
    /** The fenced statement of the delete-dataset batch; the others ride on its condition. */
    deleteRecordIfEpoch: `DELETE FROM ${state} WHERE ${row} IF epoch = ?`,
    deleteRecord: `DELETE FROM ${state} WHERE ${row}`,
    deleteDatasetRows: `DELETE FROM ${state} WHERE cluster = ? AND kind = ? AND dataset = ?`,
    recordsOfKind: `SELECT dataset, shard, format, value FROM ${state} WHERE cluster = ? AND kind = ?`,
    writeCheckpoint: `UPDATE ${keyspace}.checkpoints SET last_offset = ? WHERE cluster = ? AND dataset = ? AND shard = ? AND group_name = ?`,
    readCheckpoints: `SELECT group_name, last_offset FROM ${keyspace}.checkpoints WHERE cluster = ? AND dataset = ? AND shard = ?`,
  } as const;
}

export type MetaStoreCql = ReturnType<typeof metaStoreCql>;
