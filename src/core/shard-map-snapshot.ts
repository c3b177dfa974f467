import { z } from 'zod';
import { InvalidSnapshotError } from './errors.js';
import type { DatasetRef, Epoch, NodeId } from './ids.js';
import { parseDatasetRef, parseNodeId } from './ids.js';
import { err, ok, type Result } from './result.js';
import type { PlacementState, ShardStatus } from './status.js';
import { primaryCopy } from './shard-record.js';
import { isValidShardCount } from './spread.js';

/** One (shard, node) assignment: the node, its M3DB placement state and its runtime status. */
export interface ShardAssignment {
  readonly node: NodeId;
  readonly placement: PlacementState;
  readonly status: ShardStatus;
}

/**
 * The state of one shard. `assignments` holds its copies (replicas, and both copies of a planned
 * move), never two on one node. `status` is the shard's status: its primary copy's (a serving copy
 * first) when it has one, otherwise Unassigned, Down, Error or Stopped. `lastNode` names the last
 * owner of a shard that has none.
 */
export interface ShardRecord {
  readonly status: ShardStatus;
  readonly assignments: readonly ShardAssignment[];
  readonly lastNode?: NodeId;
}

/**
 * The current format of persisted and transmitted shard maps. Format 2 added replicas (several
 * copies per shard) and `assignmentVersion`; format 1 maps (one copy at most) are still read.
 */
export const SHARD_MAP_FORMAT = 2;
/** The formats `parseShardMapSnapshot` reads. */
export const READABLE_SHARD_MAP_FORMATS: readonly number[] = [1, 2];
/** The most copies one shard may have (the largest replication factor plus a planned move's). */
export const MAX_COPIES_PER_SHARD = 16;

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
  /**
   * Per shard, the map version at which its copies (nodes or placements) last changed: a query
   * router whose map is older than that is stale for the shard. Format 1 maps have none (all 0).
   */
  readonly assignmentVersions: readonly number[];
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
const recordV1Schema = z.strictObject({
  status: shardStatusSchema,
  assignments: z.array(assignmentSchema).max(1, 'a format 1 map has at most one assignment per shard'),
  lastNode: nodeIdSchema.optional(),
});
const recordV2Schema = z.strictObject({
  status: shardStatusSchema,
  assignments: z
    .array(assignmentSchema)
    .max(MAX_COPIES_PER_SHARD, `at most ${MAX_COPIES_PER_SHARD} copies per shard`)
    .refine((copies) => new Set(copies.map((c) => c.node)).size === copies.length, 'two copies on one node'),
  lastNode: nodeIdSchema.optional(),
});
const snapshotFields = {
  dataset: z.string().refine((s) => parseDatasetRef(s).ok, 'malformed dataset name'),
  numShards: z.number().refine(isValidShardCount, 'not a power of two in 1..65536'),
  epoch: z.number().int().min(0),
  version: z.number().int().min(0),
};
const snapshotSchemas = {
  1: z.strictObject({ format: z.literal(1), ...snapshotFields, shards: z.array(recordV1Schema) }),
  2: z.strictObject({ format: z.literal(2), ...snapshotFields, shards: z.array(recordV2Schema), assignmentVersions: z.array(z.number().int().min(0)) }),
} as const;

/**
 * Reads a snapshot from untrusted data (the bus, a file, Cassandra). Refuses, with a clear error,
 * a format it does not know, a shard list whose length is not `numShards`, and any malformed field.
 * A format 1 map (written before replicas) is read as the same map in the current format.
 */
export function parseShardMapSnapshot(input: unknown): Result<ShardMapSnapshot, InvalidSnapshotError> {
  const format = (input as { format?: unknown } | null)?.format;
  if (format !== 1 && format !== 2) {
    return err(
      new InvalidSnapshotError(
        `unsupported shard map format ${JSON.stringify(format)}: this version reads formats ${READABLE_SHARD_MAP_FORMATS.join(' and ')}`,
      ),
    );
  }
  const parsed = snapshotSchemas[format].safeParse(input);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    return err(new InvalidSnapshotError(`malformed shard map at ${issue?.path.join('.') || '(root)'}: ${issue?.message}`));
  }
  const s = parsed.data;
  if (s.shards.length !== s.numShards) {
    return err(new InvalidSnapshotError(`shard map of ${s.dataset} lists ${s.shards.length} shards but numShards is ${s.numShards}`, s.dataset));
  }
  for (const [i, r] of s.shards.entries()) {
    const owner = primaryCopy(r.assignments as unknown as readonly ShardAssignment[]);
    if (owner && owner.status.type !== r.status.type) {
      return err(new InvalidSnapshotError(`shard ${i} of ${s.dataset}: status ${r.status.type} differs from its owner's ${owner.status.type}`, s.dataset));
    }
  }
  const assignmentVersions = 'assignmentVersions' in s ? s.assignmentVersions : new Array<number>(s.numShards).fill(0);
  if (assignmentVersions.length !== s.numShards) {
    return err(
      new InvalidSnapshotError(
        `shard map of ${s.dataset}: assignmentVersions lists ${assignmentVersions.length} versions but numShards is ${s.numShards}`,
        s.dataset,
      ),
    );
  }
  return ok({ ...(s as unknown as ShardMapSnapshot), format: SHARD_MAP_FORMAT, assignmentVersions });
}
