// What one node ingests now, per copy: the offset it reads next and how far behind the end of its
// stream that is. Served at GET /api/v1/node/ingestion; the node that serves the status page reads
// every member's (directly for the nodes of its own process, over HTTP for the others).
import type { ShardherdNode } from '../actors/node-process.js';

export interface NodeIngestion {
  readonly node: string;
  readonly incarnation: string | undefined;
  /** When it was read, on the node's clock (ms): rates are positions apart over readings apart. */
  readonly at: number;
  /** False when the node keeps no metrics: it cannot say what it ingests. */
  readonly tracked: boolean;
  readonly copies: readonly CopyIngestion[];
}

export interface CopyIngestion {
  readonly dataset: string;
  readonly shard: number;
  /** The offset of the next record to ingest. */
  readonly position: number;
  /** End offset of the shard's stream minus `position`; absent when the end offset did not come in time. */
  readonly lag?: number;
}

/** How long one copy's end offset may take; a slow source leaves that copy's lag out rather than delaying every copy. */
const END_OFFSET_TIMEOUT_MS = 1_000;

export async function nodeIngestion(node: ShardherdNode): Promise<NodeIngestion> {
  // A crashed node's probes may linger until its actors are gone: a node that does not run ingests nothing.
  const probes = node.state === 'running' ? (node.metrics?.ingestionProbes() ?? []) : [];
  const at = node.services.clock.now();
  // One timer for all the node's copies (hundreds of them), not one each.
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<undefined>((resolve) => (timer = setTimeout(resolve, END_OFFSET_TIMEOUT_MS, undefined)));
  try {
    const copies = await Promise.all(
      probes.map(async (probe): Promise<CopyIngestion> => {
        const { dataset, shard } = probe;
        const position = probe.position();
        const end = await Promise.race([probe.endOffset().catch(() => undefined), late]);
        return { dataset, shard, position, ...(end === undefined ? {} : { lag: Math.max(0, end - position) }) };
      }),
    );
    return { node: node.node, incarnation: node.incarnation, at, tracked: node.metrics !== undefined, copies };
  } finally {
    clearTimeout(timer);
  }
}
