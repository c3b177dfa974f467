// Shard maps as large as shardherd accepts, shaped like a real cluster's, for the MetaStore
// contract and the Cassandra store's own tests: long node ids, three copies, some shards
// recovering, some in handoff, some down; and changes made the way the singleton makes them
// (a new shard list sharing every record that did not change).
import { nodeId, type DatasetRef, type NodeId } from '../../src/core/ids.js';
import { SHARD_MAP_FORMAT, type ShardAssignment, type ShardMapSnapshot, type ShardRecord } from '../../src/core/shard-map-snapshot.js';
import { recordEquals } from '../../src/core/shard-record.js';
import { Status } from '../../src/core/status.js';
import { epoch } from '../../src/core/ids.js';

/** A node id of a realistic length (40 characters). */
export const longNodeId = (i: number): NodeId => nodeId(`ingest-${i}.prod-eu-west-1.example.internal`);

const NODES = Array.from({ length: 48 }, (_, i) => longNodeId(i + 1));

function copies(shard: number, count: number, status: ShardAssignment['status'], placement: ShardAssignment['placement']): ShardAssignment[] {
  return Array.from({ length: count }, (_, c) => ({ node: NODES[(shard + c * 17) % NODES.length]!, placement, status }));
}

function recordFor(shard: number, salt = 0): ShardRecord {
  const s = shard + salt;
  if (s % 97 === 0) return { status: Status.down, assignments: [], lastNode: NODES[s % NODES.length]! };
  if (s % 13 === 0) {
    const status = Status.recovery(s % 100);
    return { status, assignments: copies(s, 3, status, 'Initializing') };
  }
  const serving = copies(s, 3, Status.active, 'Available');
  // A copy in handoff: a fourth, Initializing copy on another node.
  if (s % 7 === 0)
    return { status: Status.active, assignments: [...serving, { node: NODES[(s + 5) % NODES.length]!, placement: 'Initializing', status: Status.assigned }] };
  return { status: Status.active, assignments: serving };
}

/** `numShards` shards of three copies on 48 nodes, stamped `(e, version)`. */
export function largeMap(dataset: DatasetRef, numShards: number, e: number, version: number): ShardMapSnapshot {
  const shards = Array.from({ length: numShards }, (_, s) => recordFor(s));
  const assignmentVersions = Array.from({ length: numShards }, (_, s) => (s * 7) % (version + 1));
  return { format: SHARD_MAP_FORMAT, dataset, numShards, epoch: epoch(e), version, shards, assignmentVersions };
}

/**
 * `map` with `changed` shards moved to other nodes, at `version`: a new shard list that shares
 * every other record with `map`, as the singleton's successive snapshots do.
 */
export function withChanges(map: ShardMapSnapshot, changed: readonly number[], version: number, e: number = map.epoch): ShardMapSnapshot {
  const shards = map.shards.slice();
  const assignmentVersions = map.assignmentVersions.slice();
  for (const s of changed) {
    shards[s] = recordFor(s, version * 31 + 1);
    assignmentVersions[s] = version;
  }
  return { ...map, epoch: epoch(e), version, shards, assignmentVersions };
}

/**
 * `map` with the copies of `changed` shards recovering to `pct`, at `version`: a change of status
 * only, which leaves the assignment versions as they were.
 */
export function withProgress(map: ShardMapSnapshot, changed: readonly number[], pct: number, version: number): ShardMapSnapshot {
  const shards = map.shards.slice();
  for (const s of changed) {
    const status = Status.recovery(pct);
    shards[s] = { status, assignments: map.shards[s]!.assignments.map((a) => ({ ...a, placement: 'Initializing' as const, status })) };
  }
  return { ...map, version, shards };
}

/** The first difference between two maps, named; undefined when they are equal (cheaper than toEqual on 65 536 shards). */
export function mapDifference(a: ShardMapSnapshot, b: ShardMapSnapshot): string | undefined {
  for (const key of ['format', 'dataset', 'numShards', 'epoch', 'version'] as const) {
    if (a[key] !== b[key]) return `${key}: ${String(a[key])} vs ${String(b[key])}`;
  }
  if (a.shards.length !== b.shards.length) return `shards: ${a.shards.length} vs ${b.shards.length}`;
  if (a.assignmentVersions.length !== b.assignmentVersions.length)
    return `assignmentVersions: ${a.assignmentVersions.length} vs ${b.assignmentVersions.length}`;
  for (let s = 0; s < a.shards.length; s++) {
    if (!recordEquals(a.shards[s]!, b.shards[s]!)) return `shard ${s}: ${JSON.stringify(a.shards[s])} vs ${JSON.stringify(b.shards[s])}`;
    if (a.assignmentVersions[s] !== b.assignmentVersions[s]) return `assignmentVersions[${s}]: ${a.assignmentVersions[s]} vs ${b.assignmentVersions[s]}`;
  }
  return undefined;
}
