// The cluster view with each dataset's shards as this node's own copy of the map has them now.
// Map changes reach every node over the bus, while the view's other parts (members, operations,
// why shards lack copies) come from the singleton: a round trip that a busy singleton (a drain's
// hundreds of reports ahead in its inbox) stretches to hundreds of milliseconds. The status page
// shows a map change from the node's copy at once, and the rest when the singleton answers.
import { compareStamps } from '../core/shard-map-snapshot.js';
import type { ShardMapper } from '../core/shard-mapper.js';
import type { ShardStatusType } from '../core/status.js';
import type { ClusterView, DatasetView, ShardView } from './cluster-view.js';

export interface FollowedMapLike {
  readonly mapper?: ShardMapper | undefined;
  readonly epoch: number;
  readonly version: number;
}

/** `view` with the shards of every dataset whose map `maps` holds newer; the same view when none is. */
export function withFollowedMaps(view: ClusterView, maps: ReadonlyMap<string, FollowedMapLike>): ClusterView {
  let newer = false;
  const datasets = view.datasets.map((d) => {
    const f = maps.get(d.name);
    if (!f?.mapper || d.mapUnavailable !== undefined || f.mapper.numShards !== d.numShards || compareStamps(f, d) <= 0) return d;
    newer = true;
    return followedDataset(d, f.mapper, f.epoch, f.version);
  });
  return newer ? { ...view, datasets } : view;
}

function followedDataset(d: DatasetView, mapper: ShardMapper, epoch: number, version: number): DatasetView {
  const counts: Partial<Record<ShardStatusType, number>> = {};
  const shards = Array.from({ length: mapper.numShards }, (_, shard): ShardView => {
    const r = mapper.recordForShard(shard);
    const was = d.shards[shard];
    const s: ShardView = {
      shard,
      status: r.status.type,
      ...(r.status.type === 'Recovery' ? { progressPct: r.status.progressPct } : {}),
      ...(r.status.type === 'Error' ? { error: r.status.message } : {}),
      // A copy's own error rides along: with replicas one copy may fail while the shard serves.
      owners: r.assignments.map((a) => ({
        node: a.node,
        placement: a.placement,
        status: a.status.type,
        ...(a.status.type === 'Error' ? { error: a.status.message } : {}),
      })),
      // The singleton's reason while the shard still lacks copies; its next answer brings new ones.
      ...(was?.reason !== undefined && r.assignments.length < d.replicationFactor ? { reason: was.reason } : {}),
    };
    counts[s.status] = (counts[s.status] ?? 0) + 1;
    return s;
  });
  return { ...d, epoch, version, counts, shards };
}
