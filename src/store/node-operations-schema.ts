import { z } from 'zod';
import { parseNodeId } from '../core/ids.js';
import type { AppliedRequest, NodeOperations } from '../core/shard-manager/protocol.js';

const nodeIdSchema = z.string().refine((s) => parseNodeId(s).ok, 'malformed node id');

/** How every MetaStore checks stored node operations on the way back. */
export const nodeOperationsSchema = z.strictObject({
  draining: z.array(nodeIdSchema),
  replacements: z.array(z.strictObject({ old: nodeIdSchema, new: nodeIdSchema })),
}) as unknown as z.ZodType<NodeOperations>;

/**
 * How every MetaStore checks the stored applied requests: reply addresses with the answer each got
 * (only its `type` is checked; the answer goes back to its asker as it was).
 */
export const appliedRequestsSchema = z.array(
  z.strictObject({ request: z.string().min(1).max(512), reply: z.looseObject({ type: z.string().min(1) }) }),
) as unknown as z.ZodType<AppliedRequest[]>;
