// How one shard's record changes under one event. A record holds a list of copies (assignments),
// each with its node, M3DB placement state and runtime status. Events from a node that holds a copy
// change that copy only; events from a node that holds none keep FiloDB's single-owner meaning
// (the node becomes the owner, or the shard goes down), so an RF 1 map behaves exactly as FiloDB's.
import { InvalidEventError } from './errors.js';
import type { NodeId } from './ids.js';
import { assertNever, err, ok, type Result } from './result.js';
import type { ShardAssignment, ShardRecord } from './shard-map-snapshot.js';
import { type PlacementState, type ShardEvent, type ShardStatus, Status, statusEquals } from './status.js';

export const UNASSIGNED_RECORD: ShardRecord = Object.freeze({ status: Status.unassigned, assignments: Object.freeze([]) });

const PLACEMENT_RANK: Record<PlacementState, number> = { Available: 0, Leaving: 1, Initializing: 2 };

/**
 * The copy that speaks for the shard (its status, FiloDB's "owner"): a serving (Active) copy first,
 * then Available before Leaving before Initializing, then list order.
 */
export function primaryCopy(assignments: readonly ShardAssignment[]): ShardAssignment | undefined {
  let best: ShardAssignment | undefined;
  for (const a of assignments) {
    if (best === undefined || copyRank(a) < copyRank(best)) best = a;
  }
  return best;
}

const copyRank = (a: ShardAssignment): number => (a.status.type === 'Active' ? 0 : 3) + PLACEMENT_RANK[a.placement];

/** The copy `node` holds, if any. */
export function copyOf(r: ShardRecord, node: NodeId): ShardAssignment | undefined {
  return r.assignments.find((a) => a.node === node);
}

/** A copy serves queries when it is Active and not still catching up (Available or Leaving). */
export const isServingCopy = (a: ShardAssignment): boolean => a.status.type === 'Active' && a.placement !== 'Initializing';

/** A record whose status is its primary copy's, or `fallback` when it has no copy. */
function recordOf(assignments: readonly ShardAssignment[], fallback: ShardStatus, lastNode: NodeId | undefined): ShardRecord {
  const status = primaryCopy(assignments)?.status ?? fallback;
  return lastNode === undefined ? { status, assignments } : { status, assignments, lastNode };
}

function withCopy(r: ShardRecord, copy: ShardAssignment): ShardRecord {
  const i = r.assignments.findIndex((a) => a.node === copy.node);
  const next = i < 0 ? [...r.assignments, copy] : r.assignments.map((a, j) => (j === i ? copy : a));
  return recordOf(next, r.status, r.lastNode);
}

function withoutCopy(r: ShardRecord, node: NodeId, statusIfLast: ShardStatus): ShardRecord {
  const next = r.assignments.filter((a) => a.node !== node);
  return recordOf(next, next.length === 0 ? statusIfLast : r.status, node);
}

/** FiloDB's single-owner record: `node` owns the shard alone. */
export function soleOwner(node: NodeId, placement: PlacementState, status: ShardStatus): ShardRecord {
  return recordOf([{ node, placement, status }], status, undefined);
}

/** No copy; the status kept or given; `lastNode` remembers who had it. */
export function noOwner(status: ShardStatus, lastNode: NodeId | undefined): ShardRecord {
  return recordOf([], status, lastNode);
}

/** A Leaving copy keeps its placement when it restarts or reports; others take the event's. */
const keepLeaving = (existing: ShardAssignment | undefined, placement: PlacementState): PlacementState =>
  existing?.placement === 'Leaving' ? 'Leaving' : placement;

/**
 * The record after `e`. Refuses (with a reason) only the singleton's copy events that do not fit:
 * `ShardCopyAdded` for a node that already holds a copy, `ShardLeaving`/`ShardLeft`/`ShardCopyDown`
 * for one that holds none, `ShardLeavingCancelled` for a copy that is not Leaving.
 */
export function applyToRecord(r: ShardRecord, e: ShardEvent): Result<ShardRecord, InvalidEventError> {
  const mine = copyOf(r, e.node);
  const bad = (why: string) => err(new InvalidEventError(`${e.type} for shard ${e.shard} of ${e.dataset}: ${why}`, e.dataset, e.shard));
  switch (e.type) {
    case 'ShardAssignmentStarted':
      return ok(
        mine
          ? withCopy(r, { node: e.node, placement: keepLeaving(mine, 'Initializing'), status: Status.assigned })
          : soleOwner(e.node, 'Initializing', Status.assigned),
      );
    case 'RecoveryInProgress': {
      if (!(e.progressPct >= 0 && e.progressPct <= 100)) return bad(`progressPct must be within 0..100, got ${e.progressPct}`);
      const status = Status.recovery(e.progressPct);
      return ok(mine ? withCopy(r, { node: e.node, placement: keepLeaving(mine, 'Initializing'), status }) : soleOwner(e.node, 'Initializing', status));
    }
    case 'IngestionStarted':
      return ok(
        mine ? withCopy(r, { node: e.node, placement: keepLeaving(mine, 'Available'), status: Status.active }) : soleOwner(e.node, 'Available', Status.active),
      );
    case 'IngestionError':
      return ok(mine ? withoutCopy(r, e.node, Status.error(e.error)) : noOwner(Status.error(e.error), e.node));
    case 'IngestionStopped': {
      if (mine) return ok(withCopy(r, { ...mine, status: Status.stopped }));
      // FiloDB: a stop from anyone stops the owner's copy, or marks an ownerless shard stopped.
      const owner = primaryCopy(r.assignments);
      return ok(owner ? withCopy(r, { ...owner, status: Status.stopped }) : noOwner(Status.stopped, r.lastNode ?? e.node));
    }
    case 'ShardDown':
      return ok(mine ? withoutCopy(r, e.node, Status.down) : noOwner(Status.down, e.node));
    case 'ShardCopyAdded':
      if (mine) return bad(`${e.node} already holds a copy`);
      return ok(withCopy(r, { node: e.node, placement: 'Initializing', status: Status.assigned }));
    case 'ShardLeaving':
      if (!mine) return bad(`${e.node} holds no copy`);
      return ok(withCopy(r, { ...mine, placement: 'Leaving' }));
    case 'ShardLeavingCancelled':
      if (mine?.placement !== 'Leaving') return bad(`${e.node} holds no Leaving copy`);
      return ok(withCopy(r, { ...mine, placement: mine.status.type === 'Active' ? 'Available' : 'Initializing' }));
    case 'ShardLeft':
      if (!mine) return bad(`${e.node} holds no copy`);
      return ok(withoutCopy(r, e.node, Status.down));
    case 'ShardCopyDown':
      if (!mine) return bad(`${e.node} holds no copy`);
      return ok(withCopy(r, { ...mine, status: Status.down }));
    default:
      return assertNever(e);
  }
}

/** Same copies (node and placement), in any order: a change of these is a change of assignment. */
export function sameAssignment(a: ShardRecord, b: ShardRecord): boolean {
  if (a.assignments.length !== b.assignments.length) return false;
  return a.assignments.every((x) => b.assignments.some((y) => y.node === x.node && y.placement === x.placement));
}

/** Equal statuses, last owners and copies in the same order. */
export function recordEquals(a: ShardRecord, b: ShardRecord): boolean {
  if (a === b) return true;
  if (!statusEquals(a.status, b.status) || a.lastNode !== b.lastNode || a.assignments.length !== b.assignments.length) return false;
  return a.assignments.every((x, i) => {
    const y = b.assignments[i]!;
    return x.node === y.node && x.placement === y.placement && statusEquals(x.status, y.status);
  });
}
