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
import {
  checkCopyCount,
  checkedRecord,
  decodeMessages,
  decodeNodes,
  digitsEnd,
  encodeStatus,
  fail,
  indexIn,
  messageAt,
  nodeAt,
  PLACEMENT_LETTER,
  PLACEMENT_OF,
  progressIn,
  recoveryStatus,
  SIMPLE_STATUS,
  wholeIn,
} from './codec-shared.js';
import { StringTable } from './string-table.js';
import type { ShardAssignment, ShardRecord } from './shard-map-snapshot.js';
import { ITEMS_PER_STEP, type Steps } from './steps.js';
import type { ShardStatus } from './status.js';

/** A whole map's records packed, with the tables they refer to. */
export interface PackedRecords {
  readonly nodes: readonly string[];
  readonly messages: readonly string[];
  readonly records: readonly string[];
}

function packStatus(s: ShardStatus, messages: StringTable): string {
  const e = encodeStatus(s);
  if (typeof e === 'string') return e;
  return e[0] === 'R' ? `R${e[1]}` : `E${messages.of(e[1])}`;
}

/** Packs a whole map's records, a thousand per step (a singleton packs one for each node that asks). */
export function* packingRecords(records: readonly ShardRecord[]): Steps<PackedRecords> {
  const nodes = new StringTable();
  const messages = new StringTable();
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
  return { nodes: nodes.values, messages: messages.values, records: packed };
}

// ------------------------------------------------------------------ unpacking

/** A status that is not a plain letter (`SIMPLE_STATUS`, which callers look up first). */
function detailedStatus(token: string, messages: readonly string[], where: string): ShardStatus {
  const detail = token.slice(1);
  if (token[0] === 'R') return recoveryStatus(progressIn(detail), where);
  if (token[0] === 'E') return { type: 'Error', message: messageAt(messages, indexIn(detail), where) };
  return fail(where, `unknown status ${JSON.stringify(token)}`);
}

function notRecord(raw: string, where: string): never {
  return fail(where, `not a packed shard record (status;copies[;lastNode]): ${JSON.stringify(raw.slice(0, 80))}`);
}

// Read by scanning, not by split and a pattern per copy: those made unpacking twice as slow as the
// compact decoding (the strings of 65 536 × 3 copies are read by every node that lacks the map).
function unpackRecord(raw: unknown, nodes: readonly NodeId[], messages: readonly string[], where: string): ShardRecord {
  if (typeof raw !== 'string') return fail(where, 'not a packed shard record');
  const head = raw.indexOf(';');
  if (head < 0) return notRecord(raw, where);
  const tail = raw.indexOf(';', head + 1);
  if (tail >= 0 && raw.indexOf(';', tail + 1) >= 0) return notRecord(raw, where);
  const copiesEnd = tail < 0 ? raw.length : tail;
  const statusToken = raw.slice(0, head);
  const status = SIMPLE_STATUS.get(statusToken) ?? detailedStatus(statusToken, messages, `${where}.status`);
  const assignments: ShardAssignment[] = [];
  // Copies are the comma-separated parts of head+1..copiesEnd (none when that is empty).
  for (let from = head + 1, end = from; from < copiesEnd || end < copiesEnd; from = end + 1) {
    const comma = raw.indexOf(',', from);
    end = comma < 0 || comma > copiesEnd ? copiesEnd : comma;
    const n = assignments.length;
    const nodeEnd = digitsEnd(raw, from, end);
    const placement = PLACEMENT_OF.get(raw[nodeEnd]);
    if (nodeEnd === from || placement === undefined || nodeEnd + 1 >= end)
      return fail(`${where}.copies[${n}]`, `not a copy (node index, placement letter, status): ${JSON.stringify(raw.slice(from, Math.min(end, from + 40)))}`);
    checkCopyCount(n + 1, `${where}.copies`);
    const token = raw.slice(nodeEnd + 1, end);
    assignments.push({
      node: nodeAt(nodes, wholeIn(raw, from, nodeEnd), `${where}.copies[${n}].node`),
      placement,
      status: SIMPLE_STATUS.get(token) ?? detailedStatus(token, messages, `${where}.copies[${n}].status`),
    });
  }
  const lastNode = tail < 0 ? undefined : nodeAt(nodes, indexIn(raw.slice(tail + 1)), `${where}.lastNode`);
  return checkedRecord(status, assignments, lastNode, where);
}

/** Unpacks `count` records, checking every field, a thousand per step; throws `Malformed`. */
export function* packedRecordsDecoding(
  raw: { readonly nodes?: unknown; readonly messages?: unknown; readonly records?: unknown },
  count: number,
): Steps<ShardRecord[]> {
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
