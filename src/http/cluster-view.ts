// The cluster as operators read it — the status routes, the web page and the CLI all show this one
// shape: members with racks and which one hosts the singleton, every dataset's map with each shard's
// copies and, for a shard without all its copies, why.
import { parseDatasetRef, type DatasetRef } from '../core/ids.js';
import { compareStamps } from '../core/shard-map-snapshot.js';
import { ShardMapper } from '../core/shard-mapper.js';
import type { DatasetDescription, MapStamp, Member, NodeOperations, OperatorProblem, Reply } from '../core/shard-manager/protocol.js';
import type { Lease } from '../store/meta-store.js';
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
  /** Failures no retry fixes, on the singleton's node and on the node that answered, the most recent first. */
  readonly problems: readonly (OperatorProblem & { readonly node: string })[];
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
  /** The shard's ingestion error (status Error), as the node that failed reported it. */
  readonly error?: string;
  /** Every copy; `error` on a copy in Error (with replicas, one copy may fail while the shard serves). */
  readonly owners: readonly { readonly node: string; readonly placement: string; readonly status: ShardStatusType; readonly error?: string }[];
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
  /** Why the shards are not shown: this node has no copy of the map as new as the singleton's and could not get one. */
  readonly mapUnavailable?: string;
}

/** The route config of a path with a dataset: a name the path's schema refuses answers as `parseDatasetParam` does. */
export const DATASET_PATH = { invalidParams: 'BadDatasetName' } as const;

export function parseDatasetParam(raw: string): DatasetRef {
  const parsed = parseDatasetRef(raw);
  if (!parsed.ok) throw new ApiError(400, 'BadDatasetName', parsed.error.message);
  return parsed.value;
}

/** A dataset's description from the singleton and the map to show with it. */
export interface DescribedDataset {
  readonly description: DatasetDescription;
  readonly map: FollowedMap;
}

/** A map as a node follows it, with its stamp. */
export interface FollowedMap {
  readonly mapper: ShardMapper;
  readonly epoch: number;
  readonly version: number;
}

/** How long a read waits for the node's own map to reach the singleton's stamp. */
const CATCH_UP_MS = 1_000;
const CATCH_UP_POLL_MS = 10;

/**
 * The node's own copy of a dataset's map — every node follows every map, so a read never carries
 * a map over the bus — once it is at least as new as `stamp` (the singleton's, from its
 * description), waiting up to a second for changes still on their way. A node that is further
 * behind (it just started, or lost changes and is catching up) asks the singleton for the map.
 */
export async function followedMap(singleton: SingletonClient, stamp: MapStamp): Promise<FollowedMap> {
  const { node } = singleton;
  // On the node's clock, as the changes it waits for come: simulated time in the simulator.
  const { clock } = node;
  const deadline = clock.now() + CATCH_UP_MS;
  for (;;) {
    const f = (await node.cache())?.maps.get(stamp.dataset);
    if (f?.mapper && f.mapper.numShards === stamp.numShards && compareStamps(f, stamp) >= 0) return { mapper: f.mapper, epoch: f.epoch, version: f.version };
    if (clock.now() >= deadline) break;
    await new Promise((resolve) => clock.schedule(CATCH_UP_POLL_MS, () => resolve(undefined)));
  }
  const reply = await singleton.ask((replyTo) => ({ type: 'GetShardMap', dataset: stamp.dataset, replyTo }));
  if (reply.type === 'DatasetUnknown') throw new ApiError(404, 'DatasetUnknown', `Dataset ${stamp.dataset} is not registered`);
  const { snapshot } = expectReply(reply, 'CurrentShardSnapshot');
  return { mapper: ShardMapper.fromSnapshot(snapshot), epoch: snapshot.epoch, version: snapshot.version };
}

/** One dataset's description from the singleton, with its map; 404 when it is not set up. */
export async function describeDataset(singleton: SingletonClient, dataset: DatasetRef): Promise<DescribedDataset> {
  const reply = expectReply(await singleton.ask((replyTo) => ({ type: 'DescribeCluster', dataset, replyTo })), 'ClusterDescription');
  const d = reply.datasets.find((x) => x.config.ref === dataset);
  if (!d) throw new ApiError(404, 'DatasetUnknown', `Dataset ${dataset} is not registered`);
  return { description: d, map: await followedMap(singleton, d.stamp) };
}

/** A dataset as the summary routes show it: its counts per status, without its shards. */
export type DatasetSummary = Omit<DatasetView, 'shards'>;

/** The cluster without any dataset's shards: what the summary routes (datasets, members, the singleton, cooldowns) need. */
export interface ClusterSummary extends Omit<ClusterView, 'datasets'> {
  readonly datasets: readonly DatasetSummary[];
}

/** The cluster with every dataset's shards, owners and reasons (the overview, the page, its feed). */
export async function clusterView(singleton: SingletonClient, only?: DatasetRef): Promise<ClusterView> {
  const described = await describedCluster(singleton, only);
  const datasets = await Promise.all(
    described.description.datasets.map(async (d): Promise<DatasetView> => {
      try {
        return datasetView({ description: d, map: await followedMap(singleton, d.stamp) });
      } catch (e) {
        // One dataset this node cannot show must not hide the others (nor the problems that say why).
        return { ...datasetSummary(d), shards: [], mapUnavailable: e instanceof Error ? e.message : String(e) };
      }
    }),
  );
  return clusterAs(singleton, described, datasets);
}

/**
 * The cluster with each dataset's counts only, from the singleton's description alone. A route
 * that shows no shard needs no map: it neither builds 65 536 shard objects to throw away nor waits
 * for this node to apply a new map (a read right after a 65 536-shard setup waited 700 ms for it).
 */
export async function clusterSummary(singleton: SingletonClient, only?: DatasetRef): Promise<ClusterSummary> {
  const described = await describedCluster(singleton, only);
  return clusterAs(singleton, described, described.description.datasets.map(datasetSummary));
}

interface DescribedCluster {
  readonly description: Extract<Reply, { type: 'ClusterDescription' }>;
  readonly lease: Lease | undefined;
}

async function describedCluster(singleton: SingletonClient, only: DatasetRef | undefined): Promise<DescribedCluster> {
  const [reply, lease] = await Promise.all([
    singleton.ask((replyTo) => ({ type: 'DescribeCluster', replyTo, ...(only === undefined ? {} : { dataset: only }) })),
    singleton.node.services.metaStore.readLease().catch(() => undefined),
  ]);
  return { description: expectReply(reply, 'ClusterDescription'), lease };
}

function clusterAs<V extends DatasetSummary>(
  singleton: SingletonClient,
  { description, lease }: DescribedCluster,
  datasets: readonly V[],
): ClusterSummary & { readonly datasets: readonly V[] } {
  const { node } = singleton;
  // From the node's own flag, not by asking the singleton's actor: it waits behind a decision.
  const singletonHere = node.actingSingletonEpoch !== undefined;
  const copies = new Map<string, number>();
  for (const d of description.datasets) for (const [n, c] of Object.entries(d.copies)) copies.set(n, (copies.get(n) ?? 0) + c);
  const isSingleton = (m: Member) => lease?.node === m.node && lease.incarnation === m.incarnation;
  const host = description.members.find(isSingleton);
  return {
    answeredBy: { node: node.node, incarnation: node.incarnation, singleton: singletonHere },
    singleton: lease
      ? { node: lease.node, incarnation: lease.incarnation, epoch: description.epoch, ...(host?.address ? { address: host.address } : {}) }
      : null,
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
    datasets,
    operations: description.operations,
    problems: [
      ...(description.problems ?? []).map((p) => ({ ...p, node: lease?.node ?? 'singleton' })),
      ...(singletonHere ? [] : node.problems.list().map((p) => ({ ...p, node: node.node }))),
    ].sort((a, b) => b.lastAt - a.lastAt),
  };
}

/** Shard → why it lacks copies, from the singleton's grouped answer. */
export function missingReasons(d: DatasetDescription): Map<number, string> {
  const out = new Map<number, string>();
  for (const group of d.missingCopies) for (const shard of group.shards) out.set(shard, group.reason);
  return out;
}

const configFields = (d: DatasetDescription) => {
  const c = d.config;
  return { name: c.ref, numShards: c.numShards, replicationFactor: c.replicationFactor, minNumNodes: c.minNumNodes, strategy: c.strategy, source: c.source };
};

/** A dataset's config, stamp, cooldowns and shards per status, as the singleton described it. */
export function datasetSummary(d: DatasetDescription): DatasetSummary {
  return { ...configFields(d), epoch: d.stamp.epoch, version: d.stamp.version, counts: d.counts, cooldowns: d.cooldowns };
}

/** A dataset's summary with every shard: its status, copies and, when it lacks copies, why. */
export function datasetView(described: DescribedDataset): DatasetView {
  const missing = missingReasons(described.description);
  const { mapper } = described.map;
  const shards = Array.from({ length: mapper.numShards }, (_, shard): ShardView => {
    const r = mapper.recordForShard(shard);
    return {
      shard,
      status: r.status.type,
      ...(r.status.type === 'Recovery' ? { progressPct: r.status.progressPct } : {}),
      ...(r.status.type === 'Error' ? { error: r.status.message } : {}),
      owners: r.assignments.map((a) => ({
        node: a.node,
        placement: a.placement,
        status: a.status.type,
        ...(a.status.type === 'Error' ? { error: a.status.message } : {}),
      })),
      ...(missing.has(shard) ? { reason: missing.get(shard)! } : {}),
    };
  });
  // Counted from the map shown, which may be newer than the description.
  const counts: Partial<Record<ShardStatusType, number>> = {};
  for (const s of shards) counts[s.status] = (counts[s.status] ?? 0) + 1;
  return { ...datasetSummary(described.description), epoch: described.map.epoch, version: described.map.version, counts, shards };
}
