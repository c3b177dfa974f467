// The nodes of one embedded cluster, found from any one of them: they share one `ClusterServices`
// object. The status page reads their ingestion (rate, lag) directly, since they run in this
// process and have no HTTP address of their own; the nodes of a real deployment are asked over HTTP.
import type { ShardherdNode } from '../actors/node-process.js';

// Keyed weakly by the services: a cluster that is dropped takes its nodes with it.
const clusters = new WeakMap<object, Set<ShardherdNode>>();

/** Records `node` as one of the nodes built on its services. */
export function registerLocalNode(node: ShardherdNode): void {
  let nodes = clusters.get(node.services);
  if (!nodes) clusters.set(node.services, (nodes = new Set()));
  nodes.add(node);
}

/** The nodes built on the same services as `node`, itself included (only itself when none was registered). */
export function localNodes(node: ShardherdNode): readonly ShardherdNode[] {
  const nodes = clusters.get(node.services);
  return nodes ? [...nodes] : [node];
}
