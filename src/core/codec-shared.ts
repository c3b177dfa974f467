// What the map encodings share (the compact one, format 3, and the packed one, format 4): the
// letters, the node and message tables, and the checks of what is decoded. Decoders throw
// `Malformed` with the place a value is wrong, and turn it into a `Result` at their edge.
import { parseNodeId, type DatasetRef, type NodeId, type ShardNum } from './ids.js';
import { assertNever } from './result.js';
import { MAX_COPIES_PER_SHARD, type ShardAssignment, type ShardRecord } from './shard-map-snapshot.js';
import { primaryCopy, UNASSIGNED_RECORD } from './shard-record.js';
import type { PlacementState, ShardEvent, ShardEventType, ShardStatus } from './status.js';

/** The packed format of whole maps and of changes (./packed-records.ts, ./packed-events.ts): one number, as a reader reads both or neither. */
export const PACKED_FORMAT = 4;

export const STATUS_LETTER = { Unassigned: 'U', Assigned: 'N', Active: 'A', Stopped: 'S', Down: 'D' } as const;
// Maps, not object literals: a key read from the wire such as `constructor` must find nothing.
export const SIMPLE_STATUS: ReadonlyMap<unknown, ShardStatus> = new Map<string, ShardStatus>([
  ['U', { type: 'Unassigned' }],
  ['N', { type: 'Assigned' }],
  ['A', { type: 'Active' }],
  ['S', { type: 'Stopped' }],
  ['D', { type: 'Down' }],
]);
export const PLACEMENT_LETTER: Readonly<Record<PlacementState, 'I' | 'A' | 'L'>> = { Initializing: 'I', Available: 'A', Leaving: 'L' };
export const PLACEMENT_OF: ReadonlyMap<unknown, PlacementState> = new Map([
  ['I', 'Initializing'],
  ['A', 'Available'],
  ['L', 'Leaving'],
]);

export const EVENT_LETTER: Readonly<Record<ShardEventType, string>> = {
  ShardAssignmentStarted: 'S',
  RecoveryInProgress: 'R',
  IngestionStarted: 'I',
  IngestionError: 'E',
  IngestionStopped: 'T',
  ShardDown: 'D',
  ShardCopyAdded: 'C',
  ShardLeaving: 'L',
  ShardLeavingCancelled: 'X',
  ShardLeft: 'F',
  ShardCopyDown: 'H',
};
export const EVENT_OF: ReadonlyMap<unknown, ShardEventType> = new Map(Object.entries(EVENT_LETTER).map(([type, letter]) => [letter, type as ShardEventType]));

/** A status: a letter, or `['R', pct]` for Recovery and `['E', message]` for Error. */
export type EncodedStatus = 'U' | 'N' | 'A' | 'S' | 'D' | readonly ['R', number] | readonly ['E', string];

export function encodeStatus(s: ShardStatus): EncodedStatus {
  switch (s.type) {
    case 'Recovery':
      return ['R', s.progressPct];
    case 'Error':
      return ['E', s.message];
    case 'Unassigned':
    case 'Assigned':
    case 'Active':
    case 'Stopped':
    case 'Down':
      return STATUS_LETTER[s.type];
    default:
      return assertNever(s);
  }
}

/** A table of error messages read from the wire: a list of strings. */
export function decodeMessages(raw: unknown, where: string): string[] {
  if (!Array.isArray(raw)) return fail(where, 'not a list of error messages');
  raw.forEach((m, i) => typeof m === 'string' || fail(`${where}[${i}]`, 'not a string'));
  return raw as string[];
}

/** A progress as `String(number)` writes one within 0..100 (`40`, `12.5`, `1e-7`). */
const PROGRESS = /^\d{1,3}(?:\.\d+)?(?:e-\d{1,3})?$/;

/** Where the digits of `text` from `from` end (at `to` at most). */
export function digitsEnd(text: string, from: number, to: number): number {
  let i = from;
  while (i < to && text.charCodeAt(i) >= 48 && text.charCodeAt(i) <= 57) i++;
  return i;
}

/** The number `text` holds in `from..to` if that is 1 to 9 digits and nothing else, else -1. */
export function wholeIn(text: string, from: number, to: number): number {
  if (to <= from || to - from > 9 || digitsEnd(text, from, to) !== to) return -1;
  return Number(text.slice(from, to));
}

/** An index written in a packed string, or the text itself (which the caller's check refuses, naming it). */
export const indexIn = (text: string): number | string => {
  const n = wholeIn(text, 0, text.length);
  return n < 0 ? text : n;
};

/** A recovery progress written in a packed string, or the text itself (which the caller's check refuses). */
export const progressIn = (text: string): number | string => (PROGRESS.test(text) ? Number(text) : text);

/** The message at `raw` in the table, or `Malformed`. */
export function messageAt(messages: readonly string[], raw: unknown, where: string): string {
  if (typeof raw !== 'number' || !Number.isInteger(raw) || raw < 0 || raw >= messages.length)
    return fail(where, `error message index ${JSON.stringify(raw)} is not in the message table of ${messages.length}`);
  return messages[raw]!;
}

/** Thrown inside the decoders and turned into a `Result` at their edge; carries where. */
export class Malformed extends Error {}

export const fail = (where: string, what: string): never => {
  throw new Malformed(`${where}: ${what}`);
};

export function decodeNodes(raw: unknown, where: string): NodeId[] {
  if (!Array.isArray(raw)) return fail(where, 'not a list of node ids');
  return raw.map((n, i) => {
    const id = parseNodeId(n);
    return id.ok ? id.value : fail(`${where}[${i}]`, id.error.message);
  });
}

export function nodeAt(nodes: readonly NodeId[], raw: unknown, where: string): NodeId {
  if (typeof raw !== 'number' || !Number.isInteger(raw) || raw < 0 || raw >= nodes.length)
    return fail(where, `node index ${JSON.stringify(raw)} is not in the node table of ${nodes.length}`);
  return nodes[raw]!;
}

export function checkCopyCount(count: number, where: string): void {
  if (count > MAX_COPIES_PER_SHARD) fail(where, `at most ${MAX_COPIES_PER_SHARD} copies per shard`);
}

/** A progress read from the wire: a number within 0..100, or `Malformed`. */
export function checkedProgress(raw: unknown, where: string): number {
  if (typeof raw !== 'number' || !(raw >= 0 && raw <= 100)) return fail(where, `recovery progress must be a number within 0..100, got ${JSON.stringify(raw)}`);
  return raw;
}

export function recoveryStatus(progress: unknown, where: string): ShardStatus {
  return { type: 'Recovery', progressPct: checkedProgress(progress, where) };
}

/**
 * A shard's record from its decoded parts, checked as a whole: one copy per node, and the shard's
 * status its owner's. `where` names the record.
 */
export function checkedRecord(status: ShardStatus, assignments: ShardAssignment[], lastNode: NodeId | undefined, where: string): ShardRecord {
  for (let i = 1; i < assignments.length; i++) {
    const node = assignments[i]!.node;
    for (let j = 0; j < i; j++) if (assignments[j]!.node === node) return fail(`${where}.copies[${i}]`, `two copies on ${node}`);
  }
  const owner = primaryCopy(assignments);
  if (owner && owner.status.type !== status.type) return fail(where, `status ${status.type} differs from its owner's ${owner.status.type}`);
  if (lastNode !== undefined) return { status, assignments, lastNode };
  // Most shards of a fresh map are exactly this: share one record instead of making thousands.
  return assignments.length === 0 && status.type === 'Unassigned' ? UNASSIGNED_RECORD : { status, assignments };
}

/** An event's parts as read from either encoding, the node already looked up. */
export interface EventParts {
  readonly letter: unknown;
  readonly shard: unknown;
  readonly node: NodeId;
  readonly detail: unknown;
  readonly hasDetail: boolean;
}

/** An event from its parts, checked: its type, its shard within `0..numShards-1`, its detail. */
export function checkedEvent(p: EventParts, dataset: DatasetRef, numShards: number, at: string): ShardEvent {
  const type = EVENT_OF.get(p.letter);
  if (type === undefined) return fail(`${at}.type`, `unknown event ${JSON.stringify(p.letter)}`);
  const { shard, detail } = p;
  if (typeof shard !== 'number' || !Number.isInteger(shard) || shard < 0 || shard >= numShards)
    return fail(`${at}.shard`, `${JSON.stringify(shard)} is not within 0..${numShards - 1}`);
  // Object literals, not a spread of a shared base: a wave's changes are tens of thousands of
  // events, and spreading made a third of their decoding.
  const { node } = p;
  const num = shard as ShardNum;
  if (type === 'RecoveryInProgress') return { type, dataset, shard: num, node, progressPct: checkedProgress(detail, `${at}.progress`) };
  if (type === 'IngestionError') {
    if (typeof detail !== 'string') return fail(`${at}.error`, 'an IngestionError needs its message');
    return { type, dataset, shard: num, node, error: detail };
  }
  if (p.hasDetail) return fail(at, `${type} has no detail`);
  return { type, dataset, shard: num, node };
}
