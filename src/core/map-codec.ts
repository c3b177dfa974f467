// The compact encoding of shard maps and shard events, for the bus and the MetaStore. A map of
// 16 384 shards × 3 copies is about 6 MB as `ShardMapSnapshot` JSON (every copy spells its node id
// and every status is an object) and about 0.8 MB here: node ids are written once in a table and
// referred to by index, statuses and placements are letters. Decoding checks everything it reads
// (the bytes come from the bus or a database) and says where a value is wrong.
import { InvalidSnapshotError } from './errors.js';
import { parseDatasetRef, parseNodeId, type DatasetRef, type Epoch, type NodeId, type ShardNum } from './ids.js';
import { assertNever, err, ok, type Result } from './result.js';
import { MAX_COPIES_PER_SHARD, parseShardMapSnapshot, SHARD_MAP_FORMAT, type ShardAssignment, type ShardMapSnapshot, type ShardRecord } from './shard-map-snapshot.js';
import { primaryCopy, UNASSIGNED_RECORD } from './shard-record.js';
import { isValidShardCount } from './spread.js';
import { ITEMS_PER_STEP, runWhole, type Steps } from './steps.js';
import type { PlacementState, ShardEvent, ShardEventType, ShardStatus } from './status.js';

/** The format of a compact snapshot (formats 1 and 2 are `ShardMapSnapshot`'s own JSON). */
export const COMPACT_MAP_FORMAT = 3;

/** A status: a letter, or `['R', pct]` for Recovery and `['E', message]` for Error. */
export type EncodedStatus = 'U' | 'N' | 'A' | 'S' | 'D' | readonly ['R', number] | readonly ['E', string];
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

/** An event: type letter, shard, node index, and the progress (`R`) or error message (`E`). */
export type EncodedEvent = readonly [string, number, number] | readonly [string, number, number, number | string];

/** Events of one dataset with the node table they refer to. */
export interface EncodedEvents {
  readonly nodes: readonly string[];
  readonly events: readonly EncodedEvent[];
}

// ------------------------------------------------------------------ letters

const STATUS_LETTER = { Unassigned: 'U', Assigned: 'N', Active: 'A', Stopped: 'S', Down: 'D' } as const;
// Maps, not object literals: a key read from the wire such as `constructor` must find nothing.
const SIMPLE_STATUS: ReadonlyMap<unknown, ShardStatus> = new Map<string, ShardStatus>([
  ['U', { type: 'Unassigned' }],
  ['N', { type: 'Assigned' }],
  ['A', { type: 'Active' }],
  ['S', { type: 'Stopped' }],
  ['D', { type: 'Down' }],
]);
const PLACEMENT_LETTER: Readonly<Record<PlacementState, 'I' | 'A' | 'L'>> = { Initializing: 'I', Available: 'A', Leaving: 'L' };
const PLACEMENT_OF: ReadonlyMap<unknown, PlacementState> = new Map([['I', 'Initializing'], ['A', 'Available'], ['L', 'Leaving']]);
const EVENT_LETTER: Readonly<Record<ShardEventType, string>> = {
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
const EVENT_OF: ReadonlyMap<unknown, ShardEventType> = new Map(Object.entries(EVENT_LETTER).map(([type, letter]) => [letter, type as ShardEventType]));

/** Node ids to table indexes, in order of first use. */
class NodeTable {
  readonly nodes: string[] = [];
  private readonly index = new Map<string, number>();

  of(node: string): number {
    let i = this.index.get(node);
    if (i === undefined) {
      i = this.nodes.length;
      this.nodes.push(node);
      this.index.set(node, i);
    }
    return i;
  }
}

function encodeStatus(s: ShardStatus): EncodedStatus {
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

function encodeRecord(r: ShardRecord, table: NodeTable): EncodedRecord {
  const copies = r.assignments.map((a): EncodedCopy => [table.of(a.node), PLACEMENT_LETTER[a.placement], encodeStatus(a.status)]);
  return r.lastNode === undefined ? [encodeStatus(r.status), copies] : [encodeStatus(r.status), copies, table.of(r.lastNode)];
}

// ------------------------------------------------------------------ encoding

/** Encodes records (a whole map's or a slice) with their own node table. */
export function encodeRecords(records: readonly ShardRecord[]): EncodedRecords {
  const table = new NodeTable();
  const encoded = records.map((r) => encodeRecord(r, table));
  return { nodes: table.nodes, records: encoded };
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

export function encodeEvents(events: readonly ShardEvent[]): EncodedEvents {
  const table = new NodeTable();
  const encoded = events.map((e): EncodedEvent => {
    const head = [EVENT_LETTER[e.type], e.shard, table.of(e.node)] as const;
    if (e.type === 'RecoveryInProgress') return [...head, e.progressPct];
    if (e.type === 'IngestionError') return [...head, e.error];
    return head;
  });
  return { nodes: table.nodes, events: encoded };
}

// ------------------------------------------------------------------ decoding

/** Thrown inside the decoders and turned into a `Result` at their edge; carries where. */
class Malformed extends Error {}

const fail = (where: string, what: string): never => {
  throw new Malformed(`${where}: ${what}`);
};

function decodeNodes(raw: unknown, where: string): NodeId[] {
  if (!Array.isArray(raw)) return fail(where, 'not a list of node ids');
  return raw.map((n, i) => {
    const id = parseNodeId(n);
    return id.ok ? id.value : fail(`${where}[${i}]`, id.error.message);
  });
}

function decodeStatus(raw: unknown, where: string): ShardStatus {
  if (typeof raw === 'string') return SIMPLE_STATUS.get(raw) ?? fail(where, `unknown status ${JSON.stringify(raw)}`);
  if (!Array.isArray(raw) || raw.length !== 2) return fail(where, 'not a status');
  const [kind, detail] = raw as [unknown, unknown];
  if (kind === 'R') {
    if (typeof detail !== 'number' || !(detail >= 0 && detail <= 100)) return fail(where, `recovery progress must be a number within 0..100, got ${JSON.stringify(detail)}`);
    return { type: 'Recovery', progressPct: detail };
  }
  if (kind === 'E') {
    if (typeof detail !== 'string') return fail(where, 'an error status needs its message');
    return { type: 'Error', message: detail };
  }
  return fail(where, `unknown status ${JSON.stringify(kind)}`);
}

function nodeAt(nodes: readonly NodeId[], raw: unknown, where: string): NodeId {
  if (typeof raw !== 'number' || !Number.isInteger(raw) || raw < 0 || raw >= nodes.length) return fail(where, `node index ${JSON.stringify(raw)} is not in the node table of ${nodes.length}`);
  return nodes[raw]!;
}

function decodeRecord(raw: unknown, nodes: readonly NodeId[], where: string): ShardRecord {
  if (!Array.isArray(raw) || raw.length < 2 || raw.length > 3) return fail(where, 'not a shard record');
  const status = decodeStatus(raw[0], `${where}.status`);
  const rawCopies = raw[1] as unknown;
  if (!Array.isArray(rawCopies)) return fail(`${where}.copies`, 'not a list');
  if (rawCopies.length > MAX_COPIES_PER_SHARD) return fail(`${where}.copies`, `at most ${MAX_COPIES_PER_SHARD} copies per shard`);
  const assignments: ShardAssignment[] = [];
  const seen = new Set<NodeId>();
  for (let i = 0; i < rawCopies.length; i++) {
    const c = rawCopies[i] as unknown;
    const at = `${where}.copies[${i}]`;
    if (!Array.isArray(c) || c.length !== 3) return fail(at, 'not a copy');
    const node = nodeAt(nodes, c[0], `${at}.node`);
    if (seen.has(node)) return fail(at, `two copies on ${node}`);
    seen.add(node);
    const placement = PLACEMENT_OF.get(c[1]);
    if (placement === undefined) return fail(`${at}.placement`, `unknown placement ${JSON.stringify(c[1])}`);
    assignments.push({ node, placement, status: decodeStatus(c[2], `${at}.status`) });
  }
  const owner = primaryCopy(assignments);
  if (owner && owner.status.type !== status.type) return fail(where, `status ${status.type} differs from its owner's ${owner.status.type}`);
  if (raw.length === 3) return { status, assignments, lastNode: nodeAt(nodes, raw[2], `${where}.lastNode`) };
  // Most shards of a fresh map are exactly this: share one record instead of making thousands.
  return assignments.length === 0 && status.type === 'Unassigned' ? UNASSIGNED_RECORD : { status, assignments };
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
 * Reads a map from untrusted data: the compact format (3) or `ShardMapSnapshot`'s own JSON
 * (formats 1 and 2, through `parseShardMapSnapshot`). Refuses, naming the place, a format it does
 * not know and any malformed field.
 */
export function decodeSnapshot(raw: unknown): Result<ShardMapSnapshot, InvalidSnapshotError> {
  return runWhole(snapshotDecoding(raw));
}

/** `decodeSnapshot` in steps (a thousand shards each), to run in slices of the event loop. */
export function* snapshotDecoding(raw: unknown): Steps<Result<ShardMapSnapshot, InvalidSnapshotError>> {
  const format = (raw as { format?: unknown } | null)?.format;
  if (format !== COMPACT_MAP_FORMAT) return parseShardMapSnapshot(raw);
  const s = raw as Partial<Record<keyof CompactSnapshot, unknown>>;
  const dataset = parseDatasetRef(s.dataset);
  try {
    if (!dataset.ok) return fail('dataset', 'malformed dataset name');
    if (typeof s.numShards !== 'number' || !isValidShardCount(s.numShards)) return fail('numShards', 'not a power of two in 1..65536');
    const numShards = s.numShards;
    const epoch = checkStamp(s.epoch, 'epoch');
    const version = checkStamp(s.version, 'version');
    const shards = yield* recordsDecoding({ nodes: s.nodes, records: s.records }, numShards);
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
  return asResult(() => {
    const r = raw as { nodes?: unknown; events?: unknown } | null;
    if (typeof r !== 'object' || r === null) return fail('(root)', 'not encoded events');
    const nodes = decodeNodes(r.nodes, 'nodes');
    if (!Array.isArray(r.events)) return fail('events', 'not a list');
    return r.events.map((x: unknown, i): ShardEvent => {
      const at = `events[${i}]`;
      if (!Array.isArray(x) || x.length < 3 || x.length > 4) return fail(at, 'not an event');
      const type = EVENT_OF.get(x[0]);
      if (type === undefined) return fail(`${at}.type`, `unknown event ${JSON.stringify(x[0])}`);
      const shard = x[1] as unknown;
      if (typeof shard !== 'number' || !Number.isInteger(shard) || shard < 0 || shard >= numShards) return fail(`${at}.shard`, `${JSON.stringify(shard)} is not within 0..${numShards - 1}`);
      const node = nodeAt(nodes, x[2], `${at}.node`);
      const base = { dataset, shard: shard as ShardNum, node };
      const detail = x[3] as unknown;
      if (type === 'RecoveryInProgress') {
        if (typeof detail !== 'number' || !(detail >= 0 && detail <= 100)) return fail(`${at}.progress`, `must be a number within 0..100, got ${JSON.stringify(detail)}`);
        return { type, ...base, progressPct: detail };
      }
      if (type === 'IngestionError') {
        if (typeof detail !== 'string') return fail(`${at}.error`, 'an IngestionError needs its message');
        return { type, ...base, error: detail };
      }
      if (x.length !== 3) return fail(at, `${type} has no detail`);
      return { type, ...base };
    });
  }, dataset);
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
