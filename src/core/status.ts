import type { FencingToken } from './fencing-token.js';
import type { DatasetRef, NodeId, ShardNum } from './ids.js';
import { assertNever } from './result.js';

/**
 * Runtime status of a shard, FiloDB's names. `Unassigned` is only the initial status: a shard that
 * lost its owner shows `Down` or `Error`.
 */
export type ShardStatus =
  | { readonly type: 'Unassigned' }
  | { readonly type: 'Assigned' }
  | { readonly type: 'Recovery'; readonly progressPct: number }
  | { readonly type: 'Active' }
  | { readonly type: 'Error'; readonly message: string }
  | { readonly type: 'Stopped' }
  | { readonly type: 'Down' };

export type ShardStatusType = ShardStatus['type'];

/**
 * The longest error message a map keeps (characters): an ingestion error's text is the user's
 * (an exception's message can hold a whole record), and every map and change carries it.
 */
export const MAX_ERROR_MESSAGE_CHARS = 1_000;

/** An error message cut to at most `MAX_ERROR_MESSAGE_CHARS`, saying that it was (cutting it again changes nothing). */
export function boundedMessage(message: string): string {
  if (message.length <= MAX_ERROR_MESSAGE_CHARS) return message;
  const marker = ` … (cut from ${message.length} characters)`;
  return message.slice(0, MAX_ERROR_MESSAGE_CHARS - marker.length) + marker;
}

/** Constructors for the statuses, so callers never spell object literals. */
export const Status = {
  unassigned: { type: 'Unassigned' } as ShardStatus,
  assigned: { type: 'Assigned' } as ShardStatus,
  active: { type: 'Active' } as ShardStatus,
  stopped: { type: 'Stopped' } as ShardStatus,
  down: { type: 'Down' } as ShardStatus,
  recovery: (progressPct: number): ShardStatus => ({ type: 'Recovery', progressPct }),
  error: (message: string): ShardStatus => ({ type: 'Error', message: boundedMessage(message) }),
} as const;

export function statusEquals(a: ShardStatus, b: ShardStatus): boolean {
  if (a.type !== b.type) return false;
  if (a.type === 'Recovery') return a.progressPct === (b as typeof a).progressPct;
  if (a.type === 'Error') return a.message === (b as typeof a).message;
  return true;
}

/** One letter per status, as in FiloDB's `prettyPrint`. */
export function statusLetter(s: ShardStatus): string {
  switch (s.type) {
    case 'Unassigned':
      return '.';
    case 'Assigned':
      return 'N';
    case 'Active':
      return 'A';
    case 'Error':
      return 'E';
    case 'Recovery':
      return 'R';
    case 'Stopped':
      return 'S';
    case 'Down':
      return 'D';
    default:
      return assertNever(s);
  }
}

/** Whether a node should be ingesting a shard it owns in this status (FiloDB's `isAnIngestionState`). */
export const isIngestionStatus = (s: ShardStatus): boolean => s.type !== 'Stopped' && s.type !== 'Down';

/**
 * M3DB's placement state of one (shard, node) assignment: `Initializing` while the node catches up,
 * `Available` once it serves, `Leaving` while a planned move hands the shard to a new owner.
 */
export type PlacementState = 'Initializing' | 'Available' | 'Leaving';

interface EventBase {
  readonly dataset: DatasetRef;
  readonly shard: ShardNum;
  readonly node: NodeId;
}

/**
 * A change to one shard, FiloDB's names for the first six. `ShardAssignmentStarted` and `ShardDown`
 * come only from the singleton; nodes report the other four, each about their own copy.
 *
 * The last four are M3DB's placement changes, also the singleton's alone: `ShardCopyAdded` gives a
 * node one more copy (a replica, or the new copy of a planned move) while the others stay;
 * `ShardLeaving` marks a copy that a planned move will remove (it keeps serving until then);
 * `ShardLeavingCancelled` takes that back; `ShardLeft` removes a copy once its successor serves.
 *
 * Gotchas: an event about a node that holds no copy keeps FiloDB's single-owner meaning:
 * `ShardAssignmentStarted`, `RecoveryInProgress` and `IngestionStarted` make that node the only
 * owner, `ShardDown` and `IngestionError` clear every copy. Only `ShardCopyAdded` adds a replica.
 */
export type ShardEvent =
  | (EventBase & { readonly type: 'ShardAssignmentStarted' })
  | (EventBase & { readonly type: 'RecoveryInProgress'; readonly progressPct: number })
  | (EventBase & { readonly type: 'IngestionStarted' })
  /**
   * `token`: the assignment (fencing token) of the copy that failed, as the node knew it. The
   * singleton ignores the report when the map has given the copy a newer assignment since
   * (a report of a former assignment, delivered late or to the next singleton).
   */
  | (EventBase & { readonly type: 'IngestionError'; readonly error: string; readonly token?: FencingToken })
  | (EventBase & { readonly type: 'IngestionStopped' })
  | (EventBase & { readonly type: 'ShardDown' })
  | (EventBase & { readonly type: 'ShardCopyAdded' })
  | (EventBase & { readonly type: 'ShardLeaving' })
  | (EventBase & { readonly type: 'ShardLeavingCancelled' })
  | (EventBase & { readonly type: 'ShardLeft' })
  /**
   * The singleton's too: the copy's node is away (it left or stopped answering) but the copy stays
   * in the map, Down (neither serving nor run), kept for the node until it comes back or its
   * dataset's replacement delay ends. `ShardAssignmentStarted` restarts it on the node's return.
   */
  | (EventBase & { readonly type: 'ShardCopyDown' });

export type ShardEventType = ShardEvent['type'];

/** Event types a node may report; the other two are the singleton's own decisions. */
export const NODE_REPORTED_EVENTS: ReadonlySet<ShardEventType> = new Set<ShardEventType>([
  'RecoveryInProgress',
  'IngestionStarted',
  'IngestionError',
  'IngestionStopped',
]);

/** Constructors for shard events. */
export const ShardEvents = {
  assignmentStarted: (dataset: DatasetRef, shard: ShardNum, node: NodeId): ShardEvent => ({ type: 'ShardAssignmentStarted', dataset, shard, node }),
  recoveryInProgress: (dataset: DatasetRef, shard: ShardNum, node: NodeId, progressPct: number): ShardEvent => ({
    type: 'RecoveryInProgress',
    dataset,
    shard,
    node,
    progressPct,
  }),
  ingestionStarted: (dataset: DatasetRef, shard: ShardNum, node: NodeId): ShardEvent => ({ type: 'IngestionStarted', dataset, shard, node }),
  ingestionError: (dataset: DatasetRef, shard: ShardNum, node: NodeId, error: string, token?: FencingToken): ShardEvent => ({
    type: 'IngestionError',
    dataset,
    shard,
    node,
    error: boundedMessage(error),
    ...(token ? { token } : {}),
  }),
  ingestionStopped: (dataset: DatasetRef, shard: ShardNum, node: NodeId): ShardEvent => ({ type: 'IngestionStopped', dataset, shard, node }),
  shardDown: (dataset: DatasetRef, shard: ShardNum, node: NodeId): ShardEvent => ({ type: 'ShardDown', dataset, shard, node }),
  copyAdded: (dataset: DatasetRef, shard: ShardNum, node: NodeId): ShardEvent => ({ type: 'ShardCopyAdded', dataset, shard, node }),
  leaving: (dataset: DatasetRef, shard: ShardNum, node: NodeId): ShardEvent => ({ type: 'ShardLeaving', dataset, shard, node }),
  leavingCancelled: (dataset: DatasetRef, shard: ShardNum, node: NodeId): ShardEvent => ({ type: 'ShardLeavingCancelled', dataset, shard, node }),
  left: (dataset: DatasetRef, shard: ShardNum, node: NodeId): ShardEvent => ({ type: 'ShardLeft', dataset, shard, node }),
  copyDown: (dataset: DatasetRef, shard: ShardNum, node: NodeId): ShardEvent => ({ type: 'ShardCopyDown', dataset, shard, node }),
} as const;
