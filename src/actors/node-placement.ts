// A node's rack and weight, checked where the node is made (an embedded cluster's node, a node
// built by hand, `startNode`'s config, which may be built without `parseNodeConfig`): a weight of 0
// or below, NaN or Infinity, or an empty rack would otherwise be refused only later, by the strategy
// dataset by dataset, or make the node's membership metadata unreadable to the other members.
import { ShardherdError } from '../core/errors.js';

/** The largest weight a node may have (the node config's and the membership metadata's bound). */
export const MAX_NODE_WEIGHT = 1_000_000;

/** Throws a `ShardherdError` `INVALID_PLACEMENT` naming the node for a weight or rack that cannot work. */
export function checkNodePlacement(name: string, placement: { readonly rack?: string | undefined; readonly weight?: number | undefined }): void {
  const { rack, weight } = placement;
  if (weight !== undefined && (typeof weight !== 'number' || !Number.isFinite(weight) || weight <= 0 || weight > MAX_NODE_WEIGHT)) {
    throw new ShardherdError(
      'INVALID_PLACEMENT',
      `node ${name}: weight must be a finite number above 0 and at most ${MAX_NODE_WEIGHT}, got ${String(weight)}`,
      {
        node: name,
      },
    );
  }
  if (rack !== undefined && (typeof rack !== 'string' || rack.length === 0 || rack.length > 200)) {
    throw new ShardherdError('INVALID_PLACEMENT', `node ${name}: rack must be a non-empty string of at most 200 characters, got ${JSON.stringify(rack)}`, {
      node: name,
    });
  }
}
