import { z } from 'zod';
import { InvalidSnapshotError } from './errors.js';
import type { DatasetRef, Epoch, NodeId } from './ids.js';
import { parseDatasetRef, parseNodeId } from './ids.js';
import { err, ok, type Result } from './result.js';
import type { PlacementState, ShardStatus } from './status.js';
import { isValidShardCount } from './spread.js';

/** One (shard, node) assignment: the node, its M3DB placement state and its runtime status. */
export interface ShardAssignment {
  readonly node: NodeId;
  readonly placement: PlacementState;
  readonly status: ShardStatus;
}

/**
 * The state of one shard. `assignments` is a list so replicas can come later; today it holds at
 * most one entry. `status` is the shard's status: the owner's status when it has one, otherwise
 * Unassigned, Down, Error or Stopped. `lastNode` names the last owner of a shard that has none.
 */
export interface ShardRecord {
  readonly status: ShardStatus;
  readonly assignments: readonly ShardAssignment[];
  readonly lastNode?: NodeId;
}

/** The current format of persisted and transmitted shard maps. */
export const SHARD_MAP_FORMAT = 1;

/**
 * A whole shard map of one dataset as plain data: what is persisted, put on the bus, sent to
 * subscribers on subscribe, and cached by node guardians. `(epoch, version)` orders snapshots.
 */
export interface ShardMapSnapshot {
  readonly format: typeof SHARD_MAP_FORMAT;
  readonly dataset: DatasetRef;
  readonly numShards: number;
  readonly epoch: Epoch;
  readonly version: number;
  readonly shards: readonly ShardRecord[];
}

/** Compares two `(epoch, version)` stamps: negative if `a` is older, 0 if equal, positive if newer. */
export function compareStamps(a: { epoch: number; version: number }, b: { epoch: number; version: number }): number {
  return a.epoch !== b.epoch ? a.epoch - b.epoch : a.version - b.version;
}

const nodeIdSchema = z.string().refine((s) => parseNodeId(s).ok, 'malformed node id');
/** A `ShardStatus` as plain data (for every reader of maps and reports). */
export const shardStatusSchema = z.discriminatedUnion('type', [
  z.strictObject({ type: z.literal('Unassigned') }),
  z.strictObject({ type: z.literal('Assigned') }),
  z.strictObject({ type: z.literal('Recovery'), progressPct: z.number().min(0).max(100) }),
  z.strictObject({ type: z.literal('Active') }),
  z.strictObject({ type: z.literal('Error'), message: z.string() }),
  z.strictObject({ type: z.literal('Stopped') }),
  z.strictObject({ type: z.literal('Down') }),
]);
const assignmentSchema = z.strictObject({
  node: nodeIdSchema,
  placement: z.enum(['Initializing', 'Available', 'Leaving']),
  status: shardStatusSchema,
});
const recordSchema = z.strictObject({
  status: shardStatusSchema,
  assignments: z.array(assignmentSchema).max(1, 'replicas are not supported yet: at most one assignment per shard'),
  lastNode: nodeIdSchema.optional(),
});
const snapshotSchema = z.strictObject({
  format: z.number(),
  dataset: z.string().refine((s) => parseDatasetRef(s).ok, 'malformed dataset name'),
  numShards: z.number().refine(isValidShardCount, 'not a power of two in 1..65536'),
  epoch: z.number().int().min(0),
  version: z.number().int().min(0),
  shards: z.array(recordSchema),
});

/**
 * Reads a snapshot from untrusted data (the bus, a file, Cassandra). Refuses, with a clear error,
 * a format it does not know, a shard list whose length is not `numShards`, and any malformed field.
 */
export function parseShardMapSnapshot(input: unknown): Result<ShardMapSnapshot, InvalidSnapshotError> {
  const format = (input as { format?: unknown } | null)?.format;
  if (format !== SHARD_MAP_FORMAT) {
    return err(new InvalidSnapshotError(`unsupported shard map format ${JSON.stringify(format)}: this version reads format ${SHARD_MAP_FORMAT}`));
  }
  const parsed = snapshotSchema.safeParse(input);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    return err(new InvalidSnapshotError(`malformed shard map at ${issue?.path.join('.') || '(root)'}: ${issue?.message}`));
  }
  const s = parsed.data;
  if (s.shards.length !== s.numShards) {
    return err(new InvalidSnapshotError(`shard map of ${s.dataset} lists ${s.shards.length} shards but numShards is ${s.numShards}`, s.dataset));
  }
  for (const [i, r] of s.shards.entries()) {
    const owner = r.assignments[0];
    if (owner && owner.status.type !== r.status.type) {
      return err(new InvalidSnapshotError(`shard ${i} of ${s.dataset}: status ${r.status.type} differs from its owner's ${owner.status.type}`, s.dataset));
    }
  }
  return ok(s as unknown as ShardMapSnapshot);
}
