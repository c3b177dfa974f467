// The status page shows a map change from the node's own copy of the map as soon as the node has
// it, with the rest of the view (members, why shards lack copies) from the singleton's last answer.
import { describe, expect, it } from 'vitest';
import { datasetRef, nodeId, type ShardNum } from '../../src/core/ids.js';
import { ShardMapper } from '../../src/core/shard-mapper.js';
import { ShardEvents } from '../../src/core/status.js';
import type { ClusterView, DatasetView, ShardView } from '../../src/http/cluster-view.js';
import { withFollowedMaps } from '../../src/http/followed-view.js';

const ds = datasetRef('metrics');
const n = (s: string) => nodeId(s);

/** A map of 4 shards, one copy each on n1/n2, every shard Active. */
function activeMap(): ShardMapper {
  const m = new ShardMapper(4, ds);
  for (let s = 0; s < 4; s++) {
    const node = n(s % 2 === 0 ? 'n1' : 'n2');
    m.updateFromEvent(ShardEvents.assignmentStarted(ds, s as ShardNum, node));
    m.updateFromEvent(ShardEvents.ingestionStarted(ds, s as ShardNum, node));
  }
  return m;
}

function viewOf(m: ShardMapper, strategy: string, reasons: Record<number, string> = {}): ClusterView {
  const shards = Array.from({ length: 4 }, (_, shard): ShardView => {
    const r = m.recordForShard(shard);
    return {
      shard,
      status: r.status.type,
      owners: r.assignments.map((a) => ({ node: a.node, placement: a.placement, status: a.status.type })),
      ...(reasons[shard] ? { reason: reasons[shard] } : {}),
    };
  });
  const d: DatasetView = {
    name: 'metrics',
    numShards: 4,
    replicationFactor: 1,
    minNumNodes: 2,
    strategy,
    source: { type: 'synthetic' } as DatasetView['source'],
    epoch: 1,
    version: m.version,
    counts: { Active: 4 },
    shards,
    cooldowns: [],
  };
  return {
    answeredBy: { node: 'n1', incarnation: 'i', singleton: true },
    singleton: null,
    members: [],
    datasets: [d],
    operations: { draining: [], replacements: [] },
    problems: [],
  };
}

describe('withFollowedMaps', () => {
  it("keeps the view as it is when the node's map is not newer", () => {
    const m = activeMap();
    const view = viewOf(m, 'balanced');
    expect(withFollowedMaps(view, new Map([['metrics', { mapper: m, epoch: 1, version: m.version }]]))).toBe(view);
    expect(withFollowedMaps(view, new Map())).toBe(view);
  });

  it("takes the shards of a newer map, with counts, a copy's error, and the singleton's reason only while the shard still lacks copies", () => {
    const m = activeMap();
    m.updateFromEvent(ShardEvents.shardDown(ds, 1 as ShardNum, n('n2')));
    const view = viewOf(m, 'balanced', { 1: 'no member has room' });
    m.updateFromEvent(ShardEvents.assignmentStarted(ds, 1 as ShardNum, n('n1')));
    m.updateFromEvent(ShardEvents.ingestionError(ds, 2 as ShardNum, n('n1'), 'poison record'));
    m.updateFromEvent(ShardEvents.shardDown(ds, 3 as ShardNum, n('n2')));
    const next = withFollowedMaps(view, new Map([['metrics', { mapper: m, epoch: 1, version: m.version }]]));
    const d = next.datasets[0]!;
    expect(d.version).toBe(m.version);
    expect(d.shards.map((s) => s.status)).toEqual(['Active', 'Assigned', 'Error', 'Down']);
    expect(d.shards[1]).toEqual({ shard: 1, status: 'Assigned', owners: [{ node: 'n1', placement: 'Initializing', status: 'Assigned' }] }); // its reason gone: it has its copy
    expect(d.shards[2]!.error).toBe('poison record');
    expect(d.shards[3]!.reason).toBeUndefined(); // the singleton has not said why yet
    expect(d.counts).toEqual({ Active: 1, Assigned: 1, Error: 1, Down: 1 });
    expect(next.members).toBe(view.members);
  });

  it("keeps the singleton's reason for a shard that still lacks its copy", () => {
    const m = activeMap();
    m.updateFromEvent(ShardEvents.shardDown(ds, 1 as ShardNum, n('n2')));
    const view = viewOf(m, 'balanced', { 1: 'no member has room' });
    m.updateFromEvent(ShardEvents.ingestionError(ds, 0 as ShardNum, n('n1'), 'poison record'));
    const next = withFollowedMaps(view, new Map([['metrics', { mapper: m, epoch: 1, version: m.version }]]));
    expect(next.datasets[0]!.shards[1]).toMatchObject({ status: 'Down', owners: [], reason: 'no member has room' });
  });

  it('shows a shard that lost its last copy as its map says at once', () => {
    const m = activeMap();
    const view = viewOf(m, 'filodb-default');
    m.updateFromEvent(ShardEvents.shardDown(ds, 3 as ShardNum, n('n2')));
    const next = withFollowedMaps(view, new Map([['metrics', { mapper: m, epoch: 1, version: m.version }]]));
    expect(next.datasets[0]!.shards[3]).toEqual({ shard: 3, status: 'Down', owners: [] });
    expect(next.datasets[0]!.counts).toEqual({ Active: 3, Down: 1 });
  });
});
