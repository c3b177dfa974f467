// The cluster as operators read it — the status routes, the web page and the CLI all show this one
// shape: members with racks and which one hosts the singleton, every dataset's map with each shard's
// copies and, for a shard without all its copies, why.
import { parseDatasetRef, type DatasetRef } from '../core/ids.js';
import type { DatasetDescription, Member, NodeOperations } from '../core/shard-manager/protocol.js';
import type { ShardStatusType } from '../core/status.js';
import { ApiError } from './api-error.js';
import { expectReply, type SingletonClient } from './singleton-client.js';

export interface ClusterView {
  /** The node that answered. */
  readonly answeredBy: { readonly node: string; readonly incarnation: string | undefined; readonly singleton: boolean };
  readonly singleton: SingletonView | null;
  readonly members: readonly MemberView[];
  readonly datasets: readonly DatasetView[];
  readonly operations: NodeOperations;
}

export interface SingletonView {
  readonly node: string;
  readonly incarnation: string;
  readonly epoch: number;
  /** The address the singleton's node announced (its HTTP URL when configured), if any. */
  readonly address?: string;
}

export interface MemberView {
  readonly node: string;
  readonly incarnation: string;
  readonly rack?: string;
  readonly weight: number;
  readonly address?: string;
  readonly joinedAt: number;
  readonly singleton: boolean;
  /** Shard copies it holds over every dataset. */
  readonly copies: number;
}

export interface ShardView {
  readonly shard: number;
  readonly status: ShardStatusType;
  readonly progressPct?: number;
  readonly error?: string;
  readonly owners: readonly { readonly node: string; readonly placement: string; readonly status: ShardStatusType }[];
  /** Why the shard has fewer copies than its replication factor. */
  readonly reason?: string;
}

export interface DatasetView {
  readonly name: string;
  readonly numShards: number;
  readonly replicationFactor: number;
  readonly minNumNodes: number;
  readonly strategy: string;
  readonly source: DatasetDescription['config']['source'];
  readonly epoch: number;
  readonly version: number;
  /** Shards per status. */
  readonly counts: Partial<Record<ShardStatusType, number>>;
  readonly shards: readonly ShardView[];
  readonly cooldowns: DatasetDescription['cooldowns'];
}

export function parseDatasetParam(raw: string): DatasetRef {
  const parsed = parseDatasetRef(raw);
  if (!parsed.ok) throw new ApiError(400, 'BadDatasetName', parsed.error.message);
  return parsed.value;
}

/** One dataset's description from the singleton; 404 when it is not set up. */
export async function describeDataset(singleton: SingletonClient, dataset: DatasetRef): Promise<DatasetDescription> {
  const reply = expectReply(await singleton.ask((replyTo) => ({ type: 'DescribeCluster', dataset, replyTo })), 'ClusterDescription');
  const d = reply.datasets.find((x) => x.config.ref === dataset);
  if (!d) throw new ApiError(404, 'DatasetUnknown', `Dataset ${dataset} is not registered`);
  return d;
}

export async function clusterView(singleton: SingletonClient, only?: DatasetRef): Promise<ClusterView> {
  const { node } = singleton;
  const [reply, lease, singletonHere] = await Promise.all([
    singleton.ask((replyTo) => ({ type: 'DescribeCluster', replyTo, ...(only === undefined ? {} : { dataset: only }) })),
    node.services.metaStore.readLease().catch(() => undefined),
    node.singletonState().then((s) => s !== undefined),
  ]);
  const description = expectReply(reply, 'ClusterDescription');
  const copies = new Map<string, number>();
  for (const d of description.datasets) for (const r of d.snapshot.shards) for (const a of r.assignments) copies.set(a.node, (copies.get(a.node) ?? 0) + 1);
  const isSingleton = (m: Member) => lease?.node === m.node && lease.incarnation === m.incarnation;
  const host = description.members.find(isSingleton);
  return {
    answeredBy: { node: node.node, incarnation: node.incarnation, singleton: singletonHere },
    singleton: lease ? { node: lease.node, incarnation: lease.incarnation, epoch: description.epoch, ...(host?.address ? { address: host.address } : {}) } : null,
    members: description.members.map((m) => ({
      node: m.node,
      incarnation: m.incarnation,
      ...(m.rack === undefined ? {} : { rack: m.rack }),
      weight: m.weight ?? 1,
      ...(m.address === undefined ? {} : { address: m.address }),
      joinedAt: m.joinedAt,
      singleton: isSingleton(m),
      copies: copies.get(m.node) ?? 0,
    })),
    datasets: description.datasets.map(datasetView),
    operations: description.operations,
  };
}

export function datasetView(d: DatasetDescription): DatasetView {
  const missing = new Map(d.missingCopies.map((m) => [m.shard, m.reason]));
  const counts: Partial<Record<ShardStatusType, number>> = {};
  const shards = d.snapshot.shards.map((r, shard): ShardView => {
    counts[r.status.type] = (counts[r.status.type] ?? 0) + 1;
    return {
      shard,
      status: r.status.type,
      ...(r.status.type === 'Recovery' ? { progressPct: r.status.progressPct } : {}),
      ...(r.status.type === 'Error' ? { error: r.status.message } : {}),
      owners: r.assignments.map((a) => ({ node: a.node, placement: a.placement, status: a.status.type })),
      ...(missing.has(shard) ? { reason: missing.get(shard)! } : {}),
    };
  });
  const c = d.config;
  return {
    name: c.ref,
    numShards: c.numShards,
    replicationFactor: c.replicationFactor,
    minNumNodes: c.minNumNodes,
    strategy: c.strategy,
    source: c.source,
    epoch: d.snapshot.epoch,
    version: d.snapshot.version,
    counts,
    shards,
    cooldowns: d.cooldowns,
  };
}
