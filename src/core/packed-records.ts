// The packed encoding of a whole map's records (map format 4): one short string per shard instead
// of nested lists. A reader parses a map's JSON in one call, the one step of reading a map that
// cannot be cut into slices; nested lists made that call create five objects per shard (about
// 130 ms and most of a collection for 65 536 × 3 on a quiet core, far more on a busy one), strings
// one, and the map is a third of the bytes. The strings are then unpacked in slices.
//
// A shard is `status;copies[;lastNode]`; copies are comma-separated `<node index><placement><status>`;
// a status is a letter (`U N A S D`), `R<progress>`, or `E<index>` into the map's table of error
// messages (messages are free text: kept out of the strings so nothing needs escaping). E.g.
// `A;0AA,3AA,5IN` is an Active shard owned on node 0, served on node 3, and being added on node 5.
import type { NodeId } from './ids.js';
import { checkCopyCount, checkedRecord, decodeMessages, decodeNodes, fail, indexIn, messageAt, MessageTable, NodeTable, nodeAt, PLACEMENT_LETTER, PLACEMENT_OF, progressIn, recoveryStatus, SIMPLE_STATUS, STATUS_LETTER } from './codec-shared.js';
import { assertNever } from './result.js';
import type { ShardAssignment, ShardRecord } from './shard-map-snapshot.js';
import { ITEMS_PER_STEP, type Steps } from './steps.js';
import type { ShardStatus } from './status.js';

/** A whole map's records packed, with the tables they refer to. */
export interface PackedRecords {
  readonly nodes: readonly string[];
  readonly messages: readonly string[];
  readonly records: readonly string[];
}

function packStatus(s: ShardStatus, messages: MessageTable): string {
  switch (s.type) {
    case 'Recovery':
      return `R${s.progressPct}`;
    case 'Error':
      return `E${messages.of(s.message)}`;
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

/** Packs a whole map's records, a thousand per step (a singleton packs one for each node that asks). */
export function* packingRecords(records: readonly ShardRecord[]): Steps<PackedRecords> {
  const nodes = new NodeTable();
  const messages = new MessageTable();
  const packed = new Array<string>(records.length);
  for (let i = 0; i < records.length; i++) {
    const r = records[i]!;
    let text = `${packStatus(r.status, messages)};`;
    for (let c = 0; c < r.assignments.length; c++) {
      const a = r.assignments[c]!;
      text += `${c === 0 ? '' : ','}${nodes.of(a.node)}${PLACEMENT_LETTER[a.placement]}${packStatus(a.status, messages)}`;
    }
    packed[i] = r.lastNode === undefined ? text : `${text};${nodes.of(r.lastNode)}`;
    if (i % ITEMS_PER_STEP === ITEMS_PER_STEP - 1) yield;
  }
  return { nodes: nodes.nodes, messages: messages.messages, records: packed };
}

// ------------------------------------------------------------------ unpacking

const COPY = /^(\d{1,9})([IAL])(.+)$/;

function unpackStatus(token: string, messages: readonly string[], where: string): ShardStatus {
  const simple = SIMPLE_STATUS.get(token);
  if (simple) return simple;
  const detail = token.slice(1);
  if (token[0] === 'R') return recoveryStatus(progressIn(detail), where);
  if (token[0] === 'E') return { type: 'Error', message: messageAt(messages, indexIn(detail), where) };
  return fail(where, `unknown status ${JSON.stringify(token)}`);
}

function unpackRecord(raw: unknown, nodes: readonly NodeId[], messages: readonly string[], where: string): ShardRecord {
  if (typeof raw !== 'string') return fail(where, 'not a packed shard record');
  const parts = raw.split(';');
  if (parts.length < 2 || parts.length > 3) return fail(where, `not a packed shard record (status;copies[;lastNode]): ${JSON.stringify(raw.slice(0, 80))}`);
  const status = unpackStatus(parts[0]!, messages, `${where}.status`);
  const copies = parts[1] === '' ? [] : parts[1]!.split(',');
  checkCopyCount(copies.length, `${where}.copies`);
  const assignments: ShardAssignment[] = [];
  for (let i = 0; i < copies.length; i++) {
    const at = `${where}.copies[${i}]`;
    const c = COPY.exec(copies[i]!);
    if (!c) return fail(at, `not a copy (node index, placement letter, status): ${JSON.stringify(copies[i]!.slice(0, 40))}`);
    assignments.push({ node: nodeAt(nodes, Number(c[1]), `${at}.node`), placement: PLACEMENT_OF.get(c[2])!, status: unpackStatus(c[3]!, messages, `${at}.status`) });
  }
  const last = parts[2];
  const lastNode = last === undefined ? undefined : nodeAt(nodes, indexIn(last), `${where}.lastNode`);
  return checkedRecord(status, assignments, lastNode, where);
}

/** Unpacks `count` records, checking every field, a thousand per step; throws `Malformed`. */
export function* packedRecordsDecoding(raw: { readonly nodes?: unknown; readonly messages?: unknown; readonly records?: unknown }, count: number): Steps<ShardRecord[]> {
  const nodes = decodeNodes(raw.nodes, 'nodes');
  const messages = decodeMessages(raw.messages, 'messages');
  if (!Array.isArray(raw.records)) return fail('records', 'not a list');
  if (raw.records.length !== count) return fail('records', `${raw.records.length} records where ${count} were expected`);
  const records: ShardRecord[] = new Array<ShardRecord>(count);
  for (let i = 0; i < count; i++) {
    records[i] = unpackRecord(raw.records[i], nodes, messages, `records[${i}]`);
    if (i % ITEMS_PER_STEP === ITEMS_PER_STEP - 1) yield;
  }
  return records;
}
