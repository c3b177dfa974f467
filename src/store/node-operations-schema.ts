import { z } from 'zod';
import { parseDatasetRef, parseIncarnation, parseNodeId } from '../core/ids.js';
import type { AppliedRequest, NodeOperations } from '../core/shard-manager/protocol.js';

const nodeIdSchema = z.string().refine((s) => parseNodeId(s).ok, 'malformed node id');
const datasetRefSchema = z.string().refine((s) => parseDatasetRef(s).ok, 'malformed dataset name');

const memberSchema = z.strictObject({
  node: nodeIdSchema,
  incarnation: z.string().refine((s) => parseIncarnation(s).ok, 'malformed incarnation'),
  joinedAt: z.number().finite(),
  rack: z.string().optional(),
  address: z.string().optional(),
  weight: z.number().positive().finite().optional(),
  detector: z.string().optional(),
});

/** How every MetaStore checks stored node operations on the way back (`absent`, `members`, `loadBalancePaused`, `loadMoves`: absent in older records). */
export const nodeOperationsSchema = z.strictObject({
  draining: z.array(nodeIdSchema),
  replacements: z.array(z.strictObject({ old: nodeIdSchema, new: nodeIdSchema })),
  absent: z.array(z.strictObject({ member: memberSchema, since: z.number().finite() })).optional(),
  members: z.array(memberSchema).optional(),
  loadBalancePaused: z.array(datasetRefSchema).optional(),
  loadMoves: z.array(z.strictObject({ dataset: datasetRefSchema, shard: z.number().int().min(0), at: z.number().finite() })).optional(),
}) as unknown as z.ZodType<NodeOperations>;

/**
 * How every MetaStore checks the stored applied requests: reply addresses with the answer each got
 * (only its `type` is checked; the answer goes back to its asker as it was) and what was asked.
 */
export const appliedRequestsSchema = z.array(
  z.strictObject({ request: z.string().min(1).max(512), reply: z.looseObject({ type: z.string().min(1) }), fingerprint: z.string().min(1).max(64).optional() }),
) as unknown as z.ZodType<AppliedRequest[]>;
