// Schema changes that are not new tables: a column added to a table an older version created.
// `CREATE TABLE IF NOT EXISTS` leaves an existing table as it is, so a store that connects also
// adds what its version needs, idempotently, before it prepares a statement that names it.
import type { Client } from 'cassandra-driver';
import { types } from 'cassandra-driver';

/** A column this version needs in a table an older version may have created without it. */
export interface AddedColumn {
  readonly table: string;
  readonly column: string;
  readonly type: string;
}

/**
 * The columns added since the tables were first created. `copy_checkpoints.fence`: the fencing token
 * and offset of each copy's checkpoint, `(epoch, version, offset)`, which its conditional writes
 * compare (docs/ARCHITECTURE.md §12.3). Rows written before it have none: any write replaces them.
 */
export const ADDED_COLUMNS: readonly AddedColumn[] = [{ table: 'copy_checkpoints', column: 'fence', type: 'frozen<tuple<bigint, bigint, bigint>>' }];

/**
 * Adds each column of `ADDED_COLUMNS` that the keyspace's table lacks. Any number of processes may
 * run it at once: a column another one added meanwhile is not an error. (`ALTER TABLE ... ADD IF NOT
 * EXISTS` would do, but only from Cassandra 4.1 on.)
 */
export async function addMissingColumns(client: Client, keyspace: string): Promise<string[]> {
  const added: string[] = [];
  for (const c of ADDED_COLUMNS) {
    // Unquoted identifiers are stored in lower case.
    const existing = await client.execute(
      'SELECT column_name FROM system_schema.columns WHERE keyspace_name = ? AND table_name = ?',
      [keyspace.toLowerCase(), c.table],
      { prepare: true, consistency: types.consistencies.localOne },
    );
    if (existing.rows.some((r) => r.get('column_name') === c.column)) continue;
    try {
      await client.execute(`ALTER TABLE ${keyspace}.${c.table} ADD ${c.column} ${c.type}`, [], { consistency: types.consistencies.localQuorum });
      added.push(`${c.table}.${c.column}`);
    } catch (e) {
      if (!/conflicts with an existing column|already exists/i.test(e instanceof Error ? e.message : String(e))) throw e;
    }
  }
  return added;
}
