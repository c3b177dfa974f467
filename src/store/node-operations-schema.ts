import { z } from 'zod';
import { parseNodeId } from '../core/ids.js';
import type { NodeOperations } from '../core/shard-manager/protocol.js';

const nodeIdSchema = z.string().refine((s) => parseNodeId(s).ok, 'malformed node id');

/** How every MetaStore checks stored node operations on the way back. */
export const nodeOperationsSchema = z.strictObject({
  draining: z.array(nodeIdSchema),
  replacements: z.array(z.strictObject({ old: nodeIdSchema, new: nodeIdSchema })),
}) as unknown as z.ZodType<NodeOperations>;
