// Copies' checkpoints in Cassandra, fenced by token (docs/ARCHITECTURE.md §12.3). Each row of
// `copy_checkpoints` has `fence = (epoch, version, offset)`, and a write applies with a lightweight
// transaction `IF fence <= (new epoch, new version, new offset)`: Cassandra compares tuples
// lexicographically, so one condition is the whole rule of `checkpointAdmits`, decided atomically
// by Paxos on the row. A row without a fence (an older version wrote it) and a missing row never
// satisfy `<=` (null compares with nothing), so the write then goes `IF fence = null` or
// `IF NOT EXISTS`; a writer that loses a race to another goes round again.
import { types } from 'cassandra-driver';
import { isFencingToken, type FencingToken } from '../core/fencing-token.js';
import type { DatasetRef, NodeId } from '../core/ids.js';
import type { MetaStoreCql } from './cassandra-schema.js';
import { LWT, safeNumber, type CassandraSession } from './cassandra-session.js';
import { CheckpointRefusedError, MalformedCheckpointError, MetaStoreUnavailableError, type StoredCheckpoint } from './meta-store.js';

/** Rounds of the three conditional writes before the store gives up (retriably): only a writer racing others for one row loops. */
const MAX_ROUNDS = 4;

/** The `fence` tuple of a checkpoint. */
export function fenceOf(offset: number, token: FencingToken): types.Tuple {
  return new types.Tuple(types.Long.fromNumber(token.epoch), types.Long.fromNumber(token.version), types.Long.fromNumber(offset));
}

/** A stored `fence` as token and offset; undefined for none; `MalformedCheckpointError` for a value no version writes. */
export function storedFence(value: unknown, dataset: string, shard: number): StoredCheckpoint | undefined {
  if (value === null || value === undefined) return undefined;
  const elements = value instanceof types.Tuple ? value.elements : undefined;
  const [epoch, version, offset] = (elements ?? []).map(safeNumber);
  const token = { epoch, version };
  if (elements?.length !== 3 || !isFencingToken(token) || offset === null || offset === undefined || !Number.isSafeInteger(offset) || offset < 0) {
    throw new MalformedCheckpointError(dataset, shard, `fence ${JSON.stringify(elements ?? value)} is not three whole numbers >= 0`);
  }
  return { offset, token };
}

export async function writeFencedCheckpoint(
  session: CassandraSession,
  cql: MetaStoreCql,
  cluster: string,
  dataset: DatasetRef,
  shard: number,
  node: NodeId,
  group: string,
  offset: number,
  token: FencingToken,
): Promise<void> {
  if (!Number.isSafeInteger(offset) || offset < 0) throw new RangeError(`a checkpoint offset must be a safe integer >= 0, got ${offset}`);
  if (!isFencingToken(token)) throw new RangeError(`a checkpoint's token must be two safe whole numbers >= 0, got ${JSON.stringify(token)}`);
  const row = `checkpoint of ${dataset} shard ${shard} on ${node}`;
  const fence = fenceOf(offset, token);
  const key = [cluster, dataset, shard, node, group];
  const write = (query: string, params: unknown[]) => session.write('writeCheckpoint', row, query, params, LWT, dataset);
  for (let round = 0; round < MAX_ROUNDS; round++) {
    const result = await write(cql.writeCheckpoint, [types.Long.fromNumber(offset), fence, ...key, fence]);
    if (result.wasApplied()) return;
    // Not applied: the answer carries the row's current fence, or only `[applied]` when there is no row.
    const hasRow = result.columns?.some((c) => c.name === 'fence') ?? false;
    const stored = hasRow ? storedFence(result.first()?.get('fence'), dataset, shard) : undefined;
    if (stored) throw new CheckpointRefusedError(dataset, shard, node, group, offset, token, stored);
    const next = hasRow
      ? await write(cql.writeCheckpointOverUnfenced, [types.Long.fromNumber(offset), fence, ...key])
      : await write(cql.writeFirstCheckpoint, [types.Long.fromNumber(offset), fence, ...key]);
    if (next.wasApplied()) return;
    // Another writer got there first: compare with what it wrote.
  }
  throw new MetaStoreUnavailableError('writeCheckpoint', new Error(`${row}: other writers changed the row ${MAX_ROUNDS} times during the write`));
}
