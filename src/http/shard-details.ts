// One shard as the status page's details panel shows it: status in words, each copy with its
// ingestion (rate, lag) as last sampled, and the shard's recent changes.
import type { CopySample } from './ingestion-sampler.js';
import { placementName, statusName, type PageView, type TimelineEvent } from './page-state.js';

export interface ShardDetails {
  readonly dataset: string;
  readonly shard: number;
  readonly status: string;
  readonly progressPct?: number;
  readonly error?: string;
  readonly reason?: string;
  readonly replicationFactor: number;
  readonly copies: readonly {
    readonly node: string;
    readonly placement: string;
    readonly status: string;
    readonly error?: string;
    /** As last sampled; absent when its node was not read (no address, unreachable) or not yet. */
    readonly ingestion?: Omit<CopySample, 'node'>;
  }[];
  /** Its last changes, oldest first, since the page feed began. */
  readonly history: readonly TimelineEvent[];
  /** When the view shown was made (ms). */
  readonly at: number;
}

/** The shard of `view`, or undefined when the view has no such dataset or shard. */
export function shardDetails(
  view: PageView,
  dataset: string,
  shard: number,
  sampled: readonly CopySample[],
  history: readonly TimelineEvent[],
): ShardDetails | undefined {
  const d = view.datasets.find((x) => x.name === dataset);
  const s = d?.shards[shard];
  if (!d || !s) return undefined;
  const [status, copies, detail] = s;
  const byNode = new Map(sampled.map(({ node, ...rest }) => [node, rest]));
  return {
    dataset,
    shard,
    status: statusName(status),
    ...(detail?.p === undefined ? {} : { progressPct: detail.p }),
    ...(detail?.e === undefined ? {} : { error: detail.e }),
    ...(detail?.r === undefined ? {} : { reason: detail.r }),
    replicationFactor: d.replicationFactor,
    copies: copies.map(([node, placement, copyStatus, error]) => {
      const name = view.nodes[node] ?? `#${node}`;
      const ingestion = byNode.get(name);
      return {
        node: name,
        placement: placementName(placement),
        status: statusName(copyStatus),
        ...(error === undefined ? {} : { error }),
        ...(ingestion ? { ingestion } : {}),
      };
    }),
    history,
    at: view.at,
  };
}
