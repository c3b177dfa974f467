// How the Cassandra MetaStore cuts a shard map into a small header and parts of a fixed range of
// shards, and puts it together again: the row formats, which parts a new map must write, and which
// old part rows it leaves behind. Pure: no driver here (cassandra-shard-maps.ts does the I/O).
//
// Sizes, the reason for all of this. Cassandra refuses a mutation larger than half its commit log
// segment (16 MiB on a stock node; the tests' node has 2.5 MiB), and a map of 16 384 shards × 3
// copies stored whole was already 4.5 MB. Cut in parts of SHARDS_PER_PART, at the largest map
// shardherd accepts (65 536 shards, replication factor 3 plus a copy in handoff, node ids of the
// longest allowed, 128 characters, measured by test/unit/map-parts.test.ts):
// - a part is at most about 220 KB, when its 256 shards' 1 024 copies and their last nodes sit on
//   1 280 different nodes (each id once in the part's node table: 131 bytes with its quotes and
//   comma, 168 KB in all), and about 16 KB for a realistic one (48 nodes, ids of 40 characters);
//   the only text of unbounded length in a map is an Error status's message, and a part too large
//   for `maxMutationBytes` is refused clearly (`MetaStoreWriteTooLargeError`), never sent;
// - a header is at most about 10 KB (256 parts that all refer to distinct stamps of 16 digits),
//   and about 1 KB in practice (a handful of distinct stamps).
// Both are far below the 1 MiB default of `maxMutationBytes`, so the header's lightweight
// transaction can no longer hit Paxos's mutation limit, which used to surface as a retriable
// LOCAL_SERIAL write timeout retried for ever.
import { decodeRecords, encodeRecords } from '../core/map-codec.js';
import type { DatasetRef, Epoch } from '../core/ids.js';
import { err, ok, type Result } from '../core/result.js';
import { compareStamps, SHARD_MAP_FORMAT, type ShardMapSnapshot, type ShardRecord } from '../core/shard-map-snapshot.js';
import { recordEquals } from '../core/shard-record.js';
import { isValidShardCount } from '../core/spread.js';

/** A `shard_map` row of this format holds the whole map as `ShardMapSnapshot` JSON: read, never written any more. */
export const WHOLE_MAP_FORMAT = 1;
/** A `shard_map` row of this format is a header (`encodeHeader`); its parts are rows of `map_parts`. */
export const MAP_HEADER_FORMAT = 2;
/** The format of a `map_parts` row's value (`encodePart`). */
export const MAP_PART_FORMAT = 1;

/**
 * Shards per part. 256: a one-shard change rewrites about 16 KB (a realistic part), the worst part
 * stays near 220 KB, and 65 536 shards make 256 parts, so the header stays around a KB. Twice as
 * many would halve the header and the number of part reads but double every small change.
 * Readers take the size from the header, so it can change without a format change.
 */
export const SHARDS_PER_PART = 256;

/** The `(epoch, version)` of a map: it orders maps, and names the part rows written for one. */
export interface Stamp {
  readonly epoch: number;
  readonly version: number;
}

/** What a header row says: the map's stamp and shape, and for each part the stamp of its row. */
export interface MapHeader extends Stamp {
  readonly numShards: number;
  readonly shardsPerPart: number;
  /** Part p covers shards `p * shardsPerPart` up to the next part's first; its row has this stamp. */
  readonly parts: readonly Stamp[];
}

/** One part's shards as a reader gets them back. */
export interface PartContent {
  readonly records: readonly ShardRecord[];
  readonly assignmentVersions: readonly number[];
}

export const stampOf = (s: Stamp): Stamp => ({ epoch: s.epoch, version: s.version });
export const sameStamp = (a: Stamp, b: Stamp): boolean => a.epoch === b.epoch && a.version === b.version;
export const stampText = (s: Stamp): string => `${s.epoch}/${s.version}`;

export function partCount(numShards: number, shardsPerPart: number): number {
  return Math.ceil(numShards / shardsPerPart);
}

/** The shards of part `part`: `first` up to `end` (exclusive). */
export function partRange(numShards: number, shardsPerPart: number, part: number): { first: number; end: number } {
  const first = part * shardsPerPart;
  return { first, end: Math.min(numShards, first + shardsPerPart) };
}

/** Names a part in logs and errors: `map part 3 (shards 768..1023) of metrics`. */
export function partName(dataset: string, numShards: number, shardsPerPart: number, part: number): string {
  const { first, end } = partRange(numShards, shardsPerPart, part);
  return `map part ${part} (shards ${first}..${end - 1}) of ${dataset}`;
}

/** A format 1 map handed over in memory has no assignmentVersions: its copies date from version 0. */
export function versionsOf(s: ShardMapSnapshot): readonly number[] {
  return s.assignmentVersions ?? new Array<number>(s.numShards).fill(0);
}

// ------------------------------------------------------------------ header

/**
 * `{ numShards, epoch, version, shardsPerPart, stamps, parts }`: the distinct part stamps once each
 * in `stamps` (`[epoch, version]`), and per part the index of its stamp. Most parts of a map share a
 * few stamps, so this keeps a 65 536-shard header around a KB.
 */
export function encodeHeader(h: MapHeader): string {
  const index = new Map<string, number>();
  const stamps: [number, number][] = [];
  const parts = h.parts.map((s) => {
    const key = stampText(s);
    let i = index.get(key);
    if (i === undefined) {
      i = stamps.length;
      stamps.push([s.epoch, s.version]);
      index.set(key, i);
    }
    return i;
  });
  return JSON.stringify({ numShards: h.numShards, epoch: h.epoch, version: h.version, shardsPerPart: h.shardsPerPart, stamps, parts });
}

const isCount = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;

function parseJson(text: string): Result<unknown, string> {
  try {
    return ok(JSON.parse(text) as unknown);
  } catch (e) {
    return err(`not JSON: ${(e as Error).message}`);
  }
}

/** Reads a header's value, checking every field; the error says what is wrong. */
export function decodeHeader(text: string): Result<MapHeader, string> {
  const parsed = parseJson(text);
  if (!parsed.ok) return parsed;
  const h = parsed.value as Record<string, unknown> | null;
  if (typeof h !== 'object' || h === null) return err('not a header object');
  const { numShards, epoch, version, shardsPerPart, stamps, parts } = h;
  if (typeof numShards !== 'number' || !isValidShardCount(numShards)) return err(`numShards ${JSON.stringify(numShards)} is not a power of two in 1..65536`);
  if (!isCount(epoch) || !isCount(version)) return err('epoch and version must be whole numbers >= 0');
  if (typeof shardsPerPart !== 'number' || !isValidShardCount(shardsPerPart))
    return err(`shardsPerPart ${JSON.stringify(shardsPerPart)} is not a power of two in 1..65536`);
  if (!Array.isArray(stamps)) return err('stamps is not a list');
  const table: Stamp[] = [];
  for (const [i, s] of stamps.entries()) {
    if (!Array.isArray(s) || s.length !== 2 || !isCount(s[0]) || !isCount(s[1])) return err(`stamps[${i}] is not [epoch, version]`);
    const stamp = { epoch: s[0], version: s[1] };
    // A part is written before the header that refers to it, for that map or an older one.
    if (compareStamps(stamp, { epoch, version }) > 0) return err(`stamps[${i}] ${stampText(stamp)} is newer than the map ${epoch}/${version}`);
    table.push(stamp);
  }
  const expected = partCount(numShards, shardsPerPart);
  if (!Array.isArray(parts) || parts.length !== expected) return err(`parts must list ${expected} parts`);
  const refs: Stamp[] = [];
  for (const [p, i] of parts.entries()) {
    const stamp = typeof i === 'number' && Number.isInteger(i) ? table[i] : undefined;
    if (stamp === undefined) return err(`parts[${p}] ${JSON.stringify(i)} is not an index into stamps`);
    refs.push(stamp);
  }
  return ok({ numShards, epoch, version, shardsPerPart, parts: refs });
}

// ------------------------------------------------------------------ parts

/** Part `part` of the map: `{ numShards, shardsPerPart, part, nodes, records, assignmentVersions }`. */
export function encodePart(s: ShardMapSnapshot, shardsPerPart: number, part: number): string {
  const { first, end } = partRange(s.numShards, shardsPerPart, part);
  const { nodes, records } = encodeRecords(s.shards.slice(first, end));
  const assignmentVersions = versionsOf(s).slice(first, end);
  return JSON.stringify({ numShards: s.numShards, shardsPerPart, part, nodes, records, assignmentVersions });
}

/** Reads part `part` of the map `header` describes, checking that it is that part and every field. */
export function decodePart(text: string, header: MapHeader, part: number): Result<PartContent, string> {
  const parsed = parseJson(text);
  if (!parsed.ok) return parsed;
  const v = parsed.value as Record<string, unknown> | null;
  if (typeof v !== 'object' || v === null) return err('not a part object');
  if (v.numShards !== header.numShards || v.shardsPerPart !== header.shardsPerPart || v.part !== part) {
    return err(
      `it is part ${JSON.stringify(v.part)} of ${JSON.stringify(v.numShards)} shards by ${JSON.stringify(v.shardsPerPart)}, not part ${part} of ${header.numShards} by ${header.shardsPerPart}`,
    );
  }
  const { first, end } = partRange(header.numShards, header.shardsPerPart, part);
  const count = end - first;
  const records = decodeRecords({ nodes: v.nodes, records: v.records }, count);
  if (!records.ok) return err(records.error.message);
  const versions = v.assignmentVersions;
  if (!Array.isArray(versions) || versions.length !== count || !versions.every(isCount)) return err(`assignmentVersions must list ${count} whole numbers >= 0`);
  return ok({ records: records.value.map(freezeRecord), assignmentVersions: versions });
}

/**
 * Records read back are handed to the caller and also remembered as the base of the next write:
 * frozen, a caller cannot change what the store compares against.
 */
function freezeRecord(r: ShardRecord): ShardRecord {
  if (Object.isFrozen(r)) return r;
  Object.freeze(r.status);
  for (const a of r.assignments) {
    Object.freeze(a.status);
    Object.freeze(a);
  }
  Object.freeze(r.assignments);
  return Object.freeze(r);
}

/** The map a header and its parts (in part order) make. */
export function assemble(dataset: DatasetRef, header: MapHeader, parts: readonly PartContent[]): ShardMapSnapshot {
  return {
    format: SHARD_MAP_FORMAT,
    dataset,
    numShards: header.numShards,
    epoch: header.epoch as Epoch,
    version: header.version,
    shards: parts.flatMap((p) => p.records),
    assignmentVersions: parts.flatMap((p) => p.assignmentVersions),
  };
}

// ------------------------------------------------------------------ what to write

/**
 * What a store knows of the map stored for a dataset: the header its next write is conditioned on
 * and, for the parts whose content it knows, that content (the part rows are immutable, so a part
 * row named by the same stamp always holds the same shards).
 */
export interface KnownMap {
  /** The stored header's stamp (`map_stamp`). */
  readonly stamp: Stamp;
  /** Its parts; undefined when the stored row is a whole map (format 1) or cannot be read. */
  readonly header: MapHeader | undefined;
  /** The shards and assignment versions of the known parts (others are ignored). */
  readonly content: { readonly shards: readonly ShardRecord[]; readonly assignmentVersions: readonly number[] } | undefined;
  /** Per part, whether `content` holds it. */
  readonly known: readonly boolean[];
}

/** Knows everything of a map this store wrote or read whole under `header`. */
export function knownWhole(header: MapHeader, map: ShardMapSnapshot): KnownMap {
  // Copies of the arrays (not the records, which are immutable): a caller may reuse its arrays.
  return {
    stamp: stampOf(header),
    header,
    content: { shards: map.shards.slice(), assignmentVersions: versionsOf(map).slice() },
    known: header.parts.map(() => true),
  };
}

/** Knows only the stamp: a whole-map row, or a header this version cannot read. Every part must be written. */
export function knownStampOnly(stamp: Stamp): KnownMap {
  return { stamp: stampOf(stamp), header: undefined, content: undefined, known: [] };
}

/**
 * What is known after reading a header that is not the remembered one: a part whose row is the one
 * remembered still has the remembered content; every other part is unknown.
 */
export function knownAfter(header: MapHeader, before: KnownMap | undefined): KnownMap {
  const comparable = before?.header !== undefined && before.header.numShards === header.numShards && before.header.shardsPerPart === header.shardsPerPart;
  return {
    stamp: stampOf(header),
    header,
    content: comparable ? before.content : undefined,
    known: header.parts.map((s, p) => comparable && before.known[p] === true && sameStamp(s, before.header!.parts[p]!)),
  };
}

export interface WritePlan {
  /** The header to write: the snapshot's stamp, and per part the row it refers to. */
  readonly header: MapHeader;
  /** The parts to write, as rows stamped with the snapshot's stamp. */
  readonly write: readonly number[];
}

/**
 * Which parts of `snapshot` must be written, given what is stored (`known`) and the parts already
 * written for this snapshot (`written`, by an earlier attempt of the same write: same rows, same
 * content). A part is reused when its content is known and equal: the same record objects first
 * (the singleton's successive maps share the records that did not change, so this is one
 * comparison per shard), then equal values, and equal assignment versions.
 */
export function planWrite(snapshot: ShardMapSnapshot, known: KnownMap | undefined, written: ReadonlySet<number>, shardsPerPart = SHARDS_PER_PART): WritePlan {
  const stamp = stampOf(snapshot);
  const count = partCount(snapshot.numShards, shardsPerPart);
  const base =
    known?.header !== undefined && known.content !== undefined && known.header.numShards === snapshot.numShards && known.header.shardsPerPart === shardsPerPart
      ? known
      : undefined;
  const versions = versionsOf(snapshot);
  const parts: Stamp[] = [];
  const write: number[] = [];
  for (let p = 0; p < count; p++) {
    if (written.has(p)) parts.push(stamp);
    else if (
      base !== undefined &&
      base.known[p] === true &&
      samePart(snapshot.shards, versions, base.content!, partRange(snapshot.numShards, shardsPerPart, p))
    )
      parts.push(base.header!.parts[p]!);
    else {
      parts.push(stamp);
      write.push(p);
    }
  }
  return { header: { numShards: snapshot.numShards, epoch: snapshot.epoch, version: snapshot.version, shardsPerPart, parts }, write };
}

function samePart(
  shards: readonly ShardRecord[],
  versions: readonly number[],
  base: NonNullable<KnownMap['content']>,
  { first, end }: { first: number; end: number },
): boolean {
  for (let s = first; s < end; s++) {
    const a = shards[s]!;
    const b = base.shards[s]!;
    if (a !== b && !recordEquals(a, b)) return false;
    if (versions[s] !== base.assignmentVersions[s]) return false;
  }
  return true;
}

/** A range of one part's rows to delete: stamps below `below`, or in `(after, upTo]`. */
export type PartGarbage = { readonly part: number; readonly below: Stamp } | { readonly part: number; readonly after: Stamp; readonly upTo: Stamp };

/**
 * The rows of the given parts that `header` (just written) does not refer to and no later header
 * can: for part p referring to row R, every row older than R, and every row newer than R up to the
 * header's own stamp (parts of a write that lost, or of a replaced singleton). A header only ever
 * reuses the rows of the header it replaces (its write is conditioned on that header's stamp), so
 * nothing older comes back into use; rows newer than the header are a newer singleton's, and stay.
 */
export function garbageOf(header: MapHeader, parts: readonly number[]): PartGarbage[] {
  const out: PartGarbage[] = [];
  for (const part of parts) {
    const ref = header.parts[part]!;
    out.push({ part, below: ref });
    if (compareStamps(ref, header) < 0) out.push({ part, after: ref, upTo: stampOf(header) });
  }
  return out;
}
