// The compact encoding of shard maps and shard events, for the bus and the MetaStore. A map of
// 16 384 shards × 3 copies is about 6 MB as `ShardMapSnapshot` JSON (every copy spells its node id
// and every status is an object) and about 0.8 MB here: node ids are written once in a table and
// referred to by index, statuses and placements are letters. Decoding checks everything it reads
// (the bytes come from the bus or a database) and says where a value is wrong.
import { InvalidSnapshotError } from './errors.js';
import {
  checkCopyCount,
  checkedEvent,
  checkedRecord,
  decodeNodes,
  encodeStatus,
  EVENT_LETTER,
  fail,
  Malformed,
  nodeAt,
  PACKED_FORMAT,
  PLACEMENT_LETTER,
  PLACEMENT_OF,
  recoveryStatus,
  SIMPLE_STATUS,
  type EncodedStatus,
} from './codec-shared.js';
import { StringTable } from './string-table.js';
import { parseDatasetRef, type DatasetRef, type Epoch, type NodeId } from './ids.js';
import { packedEventsDecoding } from './packed-events.js';
import { packedRecordsDecoding, packingRecords, type PackedRecords } from './packed-records.js';
import { err, ok, type Result } from './result.js';
import { parseShardMapSnapshot, SHARD_MAP_FORMAT, type ShardAssignment, type ShardMapSnapshot, type ShardRecord } from './shard-map-snapshot.js';
import { isValidShardCount } from './spread.js';
import { ITEMS_PER_STEP, runWhole, type Steps } from './steps.js';
import type { ShardEvent, ShardStatus } from './status.js';

export type { EncodedStatus } from './codec-shared.js';

/** The format of a compact snapshot (formats 1 and 2 are `ShardMapSnapshot`'s own JSON). */
export const COMPACT_MAP_FORMAT = 3;
/** The format of a packed snapshot (./packed-records.ts): what the bus carries to readers that read it. */
export const PACKED_MAP_FORMAT = PACKED_FORMAT;
/**
 * The newest whole-map format this version reads. A subscriber says it when it asks for maps, and
 * the singleton writes a map in it only for readers that said so (docs/ARCHITECTURE.md, wire formats).
 */
export const NEWEST_MAP_FORMAT = PACKED_MAP_FORMAT;

/** A copy: index into the node table, placement letter (`I`nitializing, `A`vailable, `L`eaving), status. */
export type EncodedCopy = readonly [number, 'I' | 'A' | 'L', EncodedStatus];
/** A shard: its status, its copies, and the index of its last node when it has one. */
export type EncodedRecord = readonly [EncodedStatus, readonly EncodedCopy[]] | readonly [EncodedStatus, readonly EncodedCopy[], number];

/** Records with the node table they refer to: a whole map's shards, or a slice of them. */
export interface EncodedRecords {
  readonly nodes: readonly string[];
  readonly records: readonly EncodedRecord[];
}

/** A whole map in the compact encoding. */
export interface CompactSnapshot extends EncodedRecords {
  readonly format: typeof COMPACT_MAP_FORMAT;
  readonly dataset: string;
  readonly numShards: number;
  readonly epoch: number;
  readonly version: number;
  readonly assignmentVersions: readonly number[];
}

/** A whole map in the packed encoding (records one string per shard, error messages in a table). */
export interface PackedSnapshot extends PackedRecords {
  readonly format: typeof PACKED_MAP_FORMAT;
  readonly dataset: string;
  readonly numShards: number;
  readonly epoch: number;
  readonly version: number;
  readonly assignmentVersions: readonly number[];
}

/** An event: type letter, shard, node index, and the progress (`R`) or error message (`E`). */
export type EncodedEvent = readonly [string, number, number] | readonly [string, number, number, number | string];

/** Events of one dataset with the node table they refer to. */
export interface EncodedEvents {
  readonly nodes: readonly string[];
  readonly events: readonly EncodedEvent[];
}

// ------------------------------------------------------------------ letters

function encodeRecord(r: ShardRecord, table: StringTable): EncodedRecord {
  const copies = r.assignments.map((a): EncodedCopy => [table.of(a.node), PLACEMENT_LETTER[a.placement], encodeStatus(a.status)]);
  return r.lastNode === undefined ? [encodeStatus(r.status), copies] : [encodeStatus(r.status), copies, table.of(r.lastNode)];
}

// ------------------------------------------------------------------ encoding

/** Encodes records (a whole map's or a slice) with their own node table. */
export function encodeRecords(records: readonly ShardRecord[]): EncodedRecords {
  const table = new StringTable();
  const encoded = records.map((r) => encodeRecord(r, table));
  return { nodes: table.values, records: encoded };
}

export function encodeSnapshot(s: ShardMapSnapshot): CompactSnapshot {
  const { nodes, records } = encodeRecords(s.shards);
  return {
    format: COMPACT_MAP_FORMAT,
    dataset: s.dataset,
    numShards: s.numShards,
    epoch: s.epoch,
    version: s.version,
    nodes,
    records,
    assignmentVersions: s.assignmentVersions,
  };
}

/** `packSnapshot` in steps (a thousand shards each), to run in slices of the event loop. */
export function* snapshotPacking(s: ShardMapSnapshot): Steps<PackedSnapshot> {
  const { nodes, messages, records } = yield* packingRecords(s.shards);
  return {
    format: PACKED_MAP_FORMAT,
    dataset: s.dataset,
    numShards: s.numShards,
    epoch: s.epoch,
    version: s.version,
    nodes,
    messages,
    records,
    assignmentVersions: s.assignmentVersions,
  };
}

export function packSnapshot(s: ShardMapSnapshot): PackedSnapshot {
  return runWhole(snapshotPacking(s));
}

export function encodeEvents(events: readonly ShardEvent[]): EncodedEvents {
  const table = new StringTable();
  const encoded = events.map((e): EncodedEvent => {
    const head = [EVENT_LETTER[e.type], e.shard, table.of(e.node)] as const;
    if (e.type === 'RecoveryInProgress') return [...head, e.progressPct];
    if (e.type === 'IngestionError') return [...head, e.error];
    return head;
  });
  return { nodes: table.values, events: encoded };
}

// ------------------------------------------------------------------ decoding

function decodeStatus(raw: unknown, where: string): ShardStatus {
  if (typeof raw === 'string') return SIMPLE_STATUS.get(raw) ?? fail(where, `unknown status ${JSON.stringify(raw)}`);
  if (!Array.isArray(raw) || raw.length !== 2) return fail(where, 'not a status');
  const [kind, detail] = raw as [unknown, unknown];
  if (kind === 'R') return recoveryStatus(detail, where);
  if (kind === 'E') {
    if (typeof detail !== 'string') return fail(where, 'an error status needs its message');
    return { type: 'Error', message: detail };
  }
  return fail(where, `unknown status ${JSON.stringify(kind)}`);
}

function decodeRecord(raw: unknown, nodes: readonly NodeId[], where: string): ShardRecord {
  if (!Array.isArray(raw) || raw.length < 2 || raw.length > 3) return fail(where, 'not a shard record');
  const status = decodeStatus(raw[0], `${where}.status`);
  const rawCopies = raw[1] as unknown;
  if (!Array.isArray(rawCopies)) return fail(`${where}.copies`, 'not a list');
  checkCopyCount(rawCopies.length, `${where}.copies`);
  const assignments: ShardAssignment[] = [];
  for (let i = 0; i < rawCopies.length; i++) {
    const c = rawCopies[i] as unknown;
    const at = `${where}.copies[${i}]`;
    if (!Array.isArray(c) || c.length !== 3) return fail(at, 'not a copy');
    const node = nodeAt(nodes, c[0], `${at}.node`);
    const placement = PLACEMENT_OF.get(c[1]);
    if (placement === undefined) return fail(`${at}.placement`, `unknown placement ${JSON.stringify(c[1])}`);
    assignments.push({ node, placement, status: decodeStatus(c[2], `${at}.status`) });
  }
  return checkedRecord(status, assignments, raw.length === 3 ? nodeAt(nodes, raw[2], `${where}.lastNode`) : undefined, where);
}

function asResult<T>(decode: () => T, dataset?: string): Result<T, InvalidSnapshotError> {
  try {
    return ok(decode());
  } catch (e) {
    return malformedResult(e, dataset);
  }
}

/** A decoder's `Malformed` as its result (anything else thrown is a bug, and goes on). */
function malformedResult(e: unknown, dataset: string | undefined): Result<never, InvalidSnapshotError> {
  if (e instanceof Malformed) return err(new InvalidSnapshotError(`malformed shard map ${e.message}`, dataset));
  throw e;
}

/** Decodes records encoded by `encodeRecords`, checking every field; `count` is how many there must be. */
export function decodeRecords(raw: unknown, count: number): Result<ShardRecord[], InvalidSnapshotError> {
  return asResult(() => runWhole(recordsDecoding(raw, count)));
}

/** `decodeRecords` in steps; throws `Malformed`. */
function* recordsDecoding(raw: unknown, count: number): Steps<ShardRecord[]> {
  const r = raw as { nodes?: unknown; records?: unknown } | null;
  if (typeof r !== 'object' || r === null) return fail('(root)', 'not encoded records');
  const nodes = decodeNodes(r.nodes, 'nodes');
  if (!Array.isArray(r.records)) return fail('records', 'not a list');
  if (r.records.length !== count) return fail('records', `${r.records.length} records where ${count} were expected`);
  const records: ShardRecord[] = new Array<ShardRecord>(count);
  for (let i = 0; i < count; i++) {
    records[i] = decodeRecord(r.records[i], nodes, `records[${i}]`);
    if (i % ITEMS_PER_STEP === ITEMS_PER_STEP - 1) yield;
  }
  return records;
}

function checkStamp(raw: unknown, where: string): number {
  return typeof raw === 'number' && Number.isSafeInteger(raw) && raw >= 0 ? raw : fail(where, `must be a whole number >= 0, got ${JSON.stringify(raw)}`);
}

/**
 * Reads a map from untrusted data: the packed (4) or compact format (3), or `ShardMapSnapshot`'s
 * own JSON (formats 1 and 2, through `parseShardMapSnapshot`). Refuses, naming the place, a format
 * it does not know and any malformed field.
 */
export function decodeSnapshot(raw: unknown): Result<ShardMapSnapshot, InvalidSnapshotError> {
  return runWhole(snapshotDecoding(raw));
}

/** `decodeSnapshot` in steps (a thousand shards each), to run in slices of the event loop. */
export function* snapshotDecoding(raw: unknown): Steps<Result<ShardMapSnapshot, InvalidSnapshotError>> {
  const format = (raw as { format?: unknown } | null)?.format;
  if (format !== COMPACT_MAP_FORMAT && format !== PACKED_MAP_FORMAT) return parseShardMapSnapshot(raw);
  const s = raw as Partial<Record<keyof CompactSnapshot | keyof PackedSnapshot, unknown>>;
  const dataset = parseDatasetRef(s.dataset);
  try {
    if (!dataset.ok) return fail('dataset', 'malformed dataset name');
    if (typeof s.numShards !== 'number' || !isValidShardCount(s.numShards)) return fail('numShards', 'not a power of two in 1..65536');
    const numShards = s.numShards;
    const epoch = checkStamp(s.epoch, 'epoch');
    const version = checkStamp(s.version, 'version');
    const shards =
      format === PACKED_MAP_FORMAT ? yield* packedRecordsDecoding(s, numShards) : yield* recordsDecoding({ nodes: s.nodes, records: s.records }, numShards);
    const versions = s.assignmentVersions;
    if (!Array.isArray(versions) || versions.length !== numShards) return fail('assignmentVersions', `must list ${numShards} versions`);
    const assignmentVersions = versions.map((v, i) => checkStamp(v, `assignmentVersions[${i}]`));
    return ok({ format: SHARD_MAP_FORMAT, dataset: dataset.value, numShards, epoch: epoch as Epoch, version, shards, assignmentVersions });
  } catch (e) {
    return malformedResult(e, dataset.ok ? dataset.value : undefined);
  }
}

/**
 * Reads events encoded by `encodeEvents` for `dataset`, checking every field: types, shards within
 * `0..numShards-1`, node indexes, progress within 0..100, error messages.
 */
export function decodeEvents(raw: unknown, dataset: DatasetRef, numShards: number): Result<ShardEvent[], InvalidSnapshotError> {
  return runWhole(eventsDecoding(raw, dataset, numShards));
}

/** `decodeEvents` in steps (a thousand events each), of either encoding (compact, or packed: ./packed-events.ts): one decision's changes can be tens of thousands. */
export function* eventsDecoding(raw: unknown, dataset: DatasetRef, numShards: number): Steps<Result<ShardEvent[], InvalidSnapshotError>> {
  try {
    const r = raw as { format?: unknown; nodes?: unknown; events?: unknown } | null;
    if (typeof r !== 'object' || r === null) return fail('(root)', 'not encoded events');
    if (r.format === PACKED_FORMAT) return ok(yield* packedEventsDecoding(r, dataset, numShards));
    if (r.format !== undefined) return fail('format', `unknown events format ${JSON.stringify(r.format)}`);
    const nodes = decodeNodes(r.nodes, 'nodes');
    if (!Array.isArray(r.events)) return fail('events', 'not a list');
    const events = new Array<ShardEvent>(r.events.length);
    for (let i = 0; i < events.length; i++) {
      events[i] = decodeEvent(r.events[i], nodes, dataset, numShards, `events[${i}]`);
      if (i % ITEMS_PER_STEP === ITEMS_PER_STEP - 1) yield;
    }
    return ok(events);
  } catch (e) {
    return malformedResult(e, dataset);
  }
}

function decodeEvent(x: unknown, nodes: readonly NodeId[], dataset: DatasetRef, numShards: number, at: string): ShardEvent {
  if (!Array.isArray(x) || x.length < 3 || x.length > 4) return fail(at, 'not an event');
  return checkedEvent({ letter: x[0], shard: x[1], node: nodeAt(nodes, x[2], `${at}.node`), detail: x[3], hasDetail: x.length === 4 }, dataset, numShards, at);
}

/**
 * An upper bound of a compact snapshot's JSON size for a dataset placed on `nodes` (bytes), with
 * every copy in its longest form (a Recovery status, a planned move's extra copy, a last node),
 * error messages aside: what must fit in a bus message for the dataset to be carried at all.
 */
export function worstCaseMapBytes(numShards: number, replicationFactor: number, nodes: readonly string[]): number {
  const index = String(Math.max(1, nodes.length)).length;
  const copy = 16 + index; // [12,"L",["R",100]],
  const record = 12 + index + (replicationFactor + 1) * copy; // [["R",100],[...],12],
  const version = 11; // an assignment version and its comma
  const table = nodes.reduce((n, id) => n + id.length + 3, 0);
  return 256 + table + numShards * (record + version);
}
