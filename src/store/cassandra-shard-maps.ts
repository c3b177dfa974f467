// The shard maps of the Cassandra MetaStore: a small header row in the singleton's partition (the
// lightweight transaction fenced by the lease) and the map's parts in `map_parts`. Why it is built
// this way is at the top of cassandra-meta-store.ts; the formats and sizes are in map-parts.ts.
import { types } from 'cassandra-driver';
import type { Logger } from 'pino';
import { processEventLoopSlice } from '../cluster/event-loop-slice.js';
import type { DatasetRef } from '../core/ids.js';
import { compareStamps, parseShardMapSnapshot, type ShardMapSnapshot } from '../core/shard-map-snapshot.js';
import { NO_SHARD, type MetaStoreCql } from './cassandra-schema.js';
import { LWT, PLAIN_WRITE, READ, refuseIfFenced, safeNumber, SERIAL_READ, settleAll, type CassandraSession, type ReadOptions } from './cassandra-session.js';
import {
  assemble,
  decodeHeader,
  decodePart,
  encodeHeader,
  encodePart,
  garbageOf,
  knownAfter,
  knownStampOnly,
  knownWhole,
  MAP_HEADER_FORMAT,
  MAP_PART_FORMAT,
  partName,
  planWrite,
  sameStamp,
  SHARDS_PER_PART,
  stampOf,
  stampText,
  WHOLE_MAP_FORMAT,
  type KnownMap,
  type MapHeader,
  type PartContent,
  type Stamp,
} from './map-parts.js';
import { MetaStoreUnavailableError } from './meta-store.js';

/** A map write that keeps losing races to other writers gives up (retriably) after this many tries. */
const MAX_WRITE_ATTEMPTS = 8;
/** A map whose header keeps moving while its parts are read is given up (retriably) after this many reads. */
const MAX_READ_ATTEMPTS = 3;
/** Parts per read request: 16 realistic parts are about 250 KB, 16 of the largest about 3.5 MB. */
const PARTS_PER_READ = 16;
/** Header rows per page; a whole map of format 1 (written before parts) can be megabytes. */
const HEADERS_PER_PAGE = 8;

/** What a `shard_map` row holds, as far as this version can tell. */
type MapRow =
  | { readonly kind: 'whole'; readonly map: ShardMapSnapshot; readonly stamp: Stamp | undefined }
  | { readonly kind: 'header'; readonly header: MapHeader }
  | { readonly kind: 'unreadable'; readonly reason: string; readonly stamp: Stamp | undefined };

function stampColumn(row: types.Row | undefined): Stamp | undefined {
  const stamp = row?.get('map_stamp') as types.Tuple | null | undefined;
  if (!stamp) return undefined;
  return { epoch: safeNumber(stamp.get(0)) ?? 0, version: safeNumber(stamp.get(1)) ?? 0 };
}

/** Reads one `shard_map` row of `dataset`: a whole map (format 1), a header (format 2), or why neither. */
function parseMapRow(row: types.Row, dataset: string): MapRow {
  const format = row.get('format') as number | null;
  const stamp = stampColumn(row);
  const value = row.get('value') as string | null;
  if (format === WHOLE_MAP_FORMAT) {
    let raw: unknown;
    try {
      raw = JSON.parse(value ?? '');
    } catch (e) {
      return { kind: 'unreadable', reason: `whole map (format 1) is not JSON: ${(e as Error).message}`, stamp };
    }
    const map = parseShardMapSnapshot(raw);
    if (!map.ok) return { kind: 'unreadable', reason: `whole map (format 1): ${map.error.message}`, stamp };
    if (map.value.dataset !== dataset) return { kind: 'unreadable', reason: `whole map (format 1) is the map of ${map.value.dataset}`, stamp };
    return { kind: 'whole', map: map.value, stamp };
  }
  if (format !== MAP_HEADER_FORMAT) {
    return {
      kind: 'unreadable',
      reason: `header format ${JSON.stringify(format)} is unknown: this version reads formats ${WHOLE_MAP_FORMAT} and ${MAP_HEADER_FORMAT} (written by a newer shardherd?)`,
      stamp,
    };
  }
  const header = decodeHeader(value ?? '');
  if (!header.ok) return { kind: 'unreadable', reason: `malformed header: ${header.error}`, stamp };
  if (!stamp || !sameStamp(stamp, header.value)) {
    return { kind: 'unreadable', reason: `header of map ${stampText(header.value)} under map_stamp ${stamp ? stampText(stamp) : 'null'}`, stamp };
  }
  return { kind: 'header', header: header.value };
}

type PartsRead = { readonly ok: true; readonly parts: PartContent[] } | { readonly ok: false; readonly missing: boolean; readonly reason: string };

/** The shard maps of one store: writes in parts, reads whole, and what it remembers between them. */
export class CassandraShardMaps {
  /** Per dataset, the header this store last wrote or read, with what it knows of its parts. */
  private readonly known = new Map<string, KnownMap>();
  /** Datasets whose old part rows this store has swept since it started (see `collectGarbage`). */
  private readonly swept = new Set<string>();

  constructor(
    private readonly session: CassandraSession,
    private readonly cql: MetaStoreCql,
    private readonly cluster: string,
    private readonly log: Logger,
    private readonly shardsPerPart = SHARDS_PER_PART,
  ) {}

  /**
   * Writes the parts that differ from the stored header's, then the header, conditioned on the
   * lease's epoch and on the stored header being the one those reused parts belong to. A snapshot
   * that is not newer than the stored map is ignored; a fenced one throws `FencedError`.
   */
  async put(snapshot: ShardMapSnapshot): Promise<void> {
    const dataset = snapshot.dataset;
    const written = new Set<number>(); // parts already written for this snapshot: the same rows
    let known = this.known.get(dataset);
    let fromMemory = true; // false once the stored header was not the one this store remembered
    for (let attempt = 1; attempt <= MAX_WRITE_ATTEMPTS; attempt++) {
      const plan = planWrite(snapshot, known, written, this.shardsPerPart);
      const header = encodeHeader(plan.header);
      const headerParams = this.headerParams(snapshot, header, known);
      this.session.checkSize(`shard_map header of ${dataset}`, headerParams, dataset);
      // Not newer than the header this store knows: no part is worth writing, and the header's
      // condition (`map_stamp = known AND map_stamp < snapshot`) cannot hold; it still tells
      // whether this writer is fenced.
      if (known === undefined || compareStamps(snapshot, known.stamp) > 0) {
        await this.writeParts(snapshot, plan.write);
        for (const p of plan.write) written.add(p);
      }
      const result = await this.session.write(
        'putShardMap',
        `shard_map header of ${dataset}`,
        known === undefined ? this.cql.putFirstMapHeader : this.cql.putMapHeader,
        headerParams,
        LWT,
        dataset,
      );
      refuseIfFenced(result, snapshot.epoch);
      if (result.wasApplied()) {
        this.known.set(dataset, knownWhole(plan.header, snapshot));
        await this.collectGarbage(dataset, plan.header, fromMemory && this.swept.has(dataset) ? [...written] : undefined);
        return;
      }
      const stored = stampColumn(result.first() ?? undefined);
      if (stored && compareStamps(snapshot, stored) <= 0) return; // not newer: ignored
      // Another header than the remembered one: learn which parts it refers to, and go again.
      fromMemory = false;
      known = stored === undefined ? undefined : await this.readKnown(dataset, known);
      this.log.debug(
        { dataset, stored: stored && stampText(stored), attempt },
        'the stored shard map header was not the one remembered; writing again against it',
      );
    }
    throw new MetaStoreUnavailableError('putShardMap', new Error(`the stored map of ${dataset} kept changing under ${MAX_WRITE_ATTEMPTS} attempts`));
  }

  /** Every map that can be read whole. One that cannot is left out and logged (`metastore.map-unreadable`). */
  async readAll(): Promise<ShardMapSnapshot[]> {
    const rows = await this.session.readAll('shardMaps', this.cql.mapHeaders, [this.cluster, 'shard_map'], HEADERS_PER_PAGE);
    const maps = await settleAll(rows.map((row) => this.readMap(row)));
    return maps.filter((m): m is ShardMapSnapshot => m !== undefined);
  }

  /** After the dataset's header row is gone: its parts go too, and this store forgets the map. */
  async deleteParts(dataset: DatasetRef): Promise<void> {
    this.known.delete(dataset);
    this.swept.delete(dataset);
    await this.session.write('deleteDataset', `map parts of ${dataset}`, this.cql.deleteParts, [this.cluster, dataset], PLAIN_WRITE, dataset);
  }

  private headerParams(snapshot: ShardMapSnapshot, header: string, known: KnownMap | undefined): unknown[] {
    const stamp = new types.Tuple(snapshot.epoch, snapshot.version);
    const key = [this.cluster, 'shard_map', snapshot.dataset, NO_SHARD];
    return known === undefined
      ? [MAP_HEADER_FORMAT, header, stamp, ...key, snapshot.epoch]
      : [MAP_HEADER_FORMAT, header, stamp, ...key, snapshot.epoch, new types.Tuple(known.stamp.epoch, known.stamp.version), stamp];
  }

  /**
   * Writes parts as rows stamped with the snapshot's stamp; every size is checked before any is sent.
   * Parts are encoded in slices of the event loop: a decision that touches every shard of a
   * 65 536-shard map (a join wave's round) has every part to write, and encoding them at once held
   * the singleton's loop for hundreds of milliseconds.
   */
  private async writeParts(snapshot: ShardMapSnapshot, parts: readonly number[]): Promise<void> {
    const slice = processEventLoopSlice();
    const statements: { row: string; params: unknown[] }[] = [];
    for (const p of parts) {
      await slice.yieldIfSpent();
      const params = [this.cluster, snapshot.dataset, p, snapshot.epoch, snapshot.version, MAP_PART_FORMAT, encodePart(snapshot, this.shardsPerPart, p)];
      const row = partName(snapshot.dataset, snapshot.numShards, this.shardsPerPart, p);
      this.session.checkSize(row, params, snapshot.dataset);
      statements.push({ row, params });
    }
    await settleAll(statements.map((s) => this.session.write('putShardMap', s.row, this.cql.putPart, s.params, PLAIN_WRITE, snapshot.dataset)));
  }

  /** The stored header after a write against another one, read with SERIAL to see the latest. */
  private async readKnown(dataset: string, before: KnownMap | undefined): Promise<KnownMap | undefined> {
    const row = await this.readHeaderRow('putShardMap (reading the stored header)', dataset, SERIAL_READ);
    if (!row) return undefined;
    const parsed = parseMapRow(row, dataset);
    if (parsed.kind === 'header') return knownAfter(parsed.header, before);
    // A whole map or a header this version cannot read: every part is written, against its stamp.
    return parsed.stamp === undefined ? undefined : knownStampOnly(parsed.stamp);
  }

  private async readHeaderRow(operation: string, dataset: string, options: ReadOptions): Promise<types.Row | undefined> {
    const result = await this.session.read(operation, this.cql.mapHeader, [this.cluster, 'shard_map', dataset, NO_SHARD], options);
    return result.first() ?? undefined;
  }

  /**
   * Deletes, best effort, the part rows no header refers to any more (see `garbageOf`). After a
   * write based on the remembered header, only the rows the written parts replaced (`parts`);
   * otherwise (the first write of the dataset by this store, e.g. after a takeover, or after a
   * header this store did not know) the old rows of every part, which also removes the parts of
   * a replaced singleton that no header ever referred to. By ranges of stamps per part rather than
   * by listing the partition: a listing would read every tombstone the earlier changes left.
   */
  private async collectGarbage(dataset: string, header: MapHeader, parts: readonly number[] | undefined): Promise<void> {
    const all = parts === undefined;
    const garbage = garbageOf(header, parts ?? header.parts.map((_, p) => p));
    const deletes = garbage.map((g) =>
      'below' in g
        ? this.session.write(
            'putShardMap (deleting old parts)',
            `old map parts of ${dataset}`,
            this.cql.deletePartRowsBelow,
            [this.cluster, dataset, g.part, g.below.epoch, g.below.version],
            PLAIN_WRITE,
            dataset,
          )
        : this.session.write(
            'putShardMap (deleting old parts)',
            `old map parts of ${dataset}`,
            this.cql.deletePartRowsBetween,
            [this.cluster, dataset, g.part, g.after.epoch, g.after.version, g.upTo.epoch, g.upTo.version],
            PLAIN_WRITE,
            dataset,
          ),
    );
    try {
      await settleAll(deletes);
      if (all) this.swept.add(dataset);
    } catch (e) {
      // Left for the next sweep: an unreferenced row costs space, never correctness.
      this.log.warn({ event: 'metastore.parts-cleanup-failed', dataset, err: e }, 'old shard map parts were not deleted; a later write deletes them');
    }
  }

  /** One map, read whole, or undefined (logged) when it cannot be. */
  private async readMap(first: types.Row): Promise<ShardMapSnapshot | undefined> {
    const dataset = first.get('dataset') as DatasetRef;
    let row: types.Row | undefined = first;
    for (let attempt = 1; attempt <= MAX_READ_ATTEMPTS && row; attempt++) {
      const parsed = parseMapRow(row, dataset);
      if (parsed.kind === 'unreadable') return this.unreadable(dataset, parsed.reason, parsed.stamp);
      if (parsed.kind === 'whole') {
        if (parsed.stamp) this.remember(dataset, knownStampOnly(parsed.stamp));
        return parsed.map;
      }
      const parts = await this.readParts(dataset, parsed.header);
      if (parts.ok) {
        const map = assemble(dataset, parsed.header, parts.parts);
        this.remember(dataset, knownWhole(parsed.header, map));
        return map;
      }
      if (!parts.missing) return this.unreadable(dataset, parts.reason, stampOf(parsed.header));
      // A part can vanish because a newer header replaced it meanwhile (and its row was deleted):
      // only a part missing under the header that is still stored makes the map unreadable.
      row = await this.readHeaderRow('shardMaps', dataset, READ);
      const now = row && stampColumn(row);
      if (!now || !sameStamp(now, parsed.header)) continue;
      return this.unreadable(dataset, parts.reason, stampOf(parsed.header));
    }
    if (!row) return undefined; // deleted while being read
    throw new MetaStoreUnavailableError('shardMaps', new Error(`the map of ${dataset} kept changing while it was read (${MAX_READ_ATTEMPTS} attempts)`));
  }

  private async readParts(dataset: string, header: MapHeader): Promise<PartsRead> {
    const keys = header.parts.map((s, p) => new types.Tuple(p, s.epoch, s.version));
    const slices: types.Tuple[][] = [];
    for (let i = 0; i < keys.length; i += PARTS_PER_READ) slices.push(keys.slice(i, i + PARTS_PER_READ));
    const rows = (
      await settleAll(slices.map((slice) => this.session.readAll('shardMaps', this.cql.readParts, [this.cluster, dataset, slice], PARTS_PER_READ)))
    ).flat();
    const parts = new Array<PartContent | undefined>(header.parts.length);
    for (const row of rows) {
      const p = row.get('part') as number;
      const stamp = { epoch: safeNumber(row.get('epoch')) ?? -1, version: safeNumber(row.get('version')) ?? -1 };
      const name = `${partName(dataset, header.numShards, header.shardsPerPart, p)} (stamp ${stampText(stamp)})`;
      if (!(p >= 0 && p < parts.length) || !sameStamp(stamp, header.parts[p]!))
        return { ok: false, missing: false, reason: `${name} is not one the header names` };
      const format = row.get('format') as number | null;
      if (format !== MAP_PART_FORMAT)
        return { ok: false, missing: false, reason: `${name} has format ${JSON.stringify(format)}: this version reads format ${MAP_PART_FORMAT}` };
      const content = decodePart((row.get('value') as string | null) ?? '', header, p);
      if (!content.ok) return { ok: false, missing: false, reason: `${name} is malformed: ${content.error}` };
      parts[p] = content.value;
    }
    const missing = parts.findIndex((p) => p === undefined);
    if (missing >= 0) {
      const name = partName(dataset, header.numShards, header.shardsPerPart, missing);
      return { ok: false, missing: true, reason: `${name} (stamp ${stampText(header.parts[missing]!)}) is missing` };
    }
    return { ok: true, parts: parts as PartContent[] };
  }

  /**
   * Leaves the map out: a store that threw here would stop every singleton for good, while the
   * singleton recovers a map it did not find from the nodes' copies.
   */
  private unreadable(dataset: string, reason: string, stamp: Stamp | undefined): undefined {
    this.log.error(
      { event: 'metastore.map-unreadable', dataset, reason },
      `the shard map of ${dataset} cannot be read whole and is left out; the singleton recovers it from the nodes`,
    );
    // The next write must replace the whole map, against the stored stamp, even if this store
    // remembers that header with its parts (one of them is gone or damaged): reusing them would
    // leave the map unreadable.
    const current = this.known.get(dataset);
    if (stamp === undefined) this.known.delete(dataset);
    else if (current === undefined || compareStamps(current.stamp, stamp) <= 0) this.known.set(dataset, knownStampOnly(stamp));
    return undefined;
  }

  /** Keeps what a read learned unless this store already knows a newer or as new a header. */
  private remember(dataset: string, k: KnownMap): void {
    const current = this.known.get(dataset);
    if (current === undefined || compareStamps(k.stamp, current.stamp) > 0 || (current.content === undefined && sameStamp(k.stamp, current.stamp)))
      this.known.set(dataset, k);
  }
}
