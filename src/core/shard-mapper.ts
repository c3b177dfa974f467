import { DatasetMismatchError, InvalidEventError, InvalidShardCountError, InvalidSnapshotError, ShardOutOfRangeError } from './errors.js';
import type { DatasetRef, Epoch, NodeId, ShardNum } from './ids.js';
import { isShardInRange } from './ids.js';
import { assertNever, err, ok, type Result } from './result.js';
import { SHARD_MAP_FORMAT, type ShardAssignment, type ShardMapSnapshot, type ShardRecord } from './shard-map-snapshot.js';
import { applyToRecord, copyOf, isServingCopy, noOwner, primaryCopy, recordEquals, sameAssignment, soleOwner, UNASSIGNED_RECORD } from './shard-record.js';
import * as spreadMath from './spread.js';
import { type ShardEvent, ShardEvents, type ShardStatus, statusLetter } from './status.js';
import { ITEMS_PER_STEP, runWhole, type Steps } from './steps.js';

/** Why `updateFromEvent` refused an event. The mapper is unchanged. */
export type MapperError = ShardOutOfRangeError | DatasetMismatchError | InvalidEventError;

/** What applying an event did: `changed` is false when the shard already was in that state. */
export interface UpdateOutcome {
  readonly changed: boolean;
}

/** One copy of a shard on a node, as `copiesForNode` lists them. */
export interface NodeCopy {
  readonly shard: ShardNum;
  readonly copy: ShardAssignment;
}

/**
 * The shard map of one dataset: for each shard, its copies (assignments with M3DB placement states)
 * and its status. FiloDB's `ShardMapper` with the same transitions (FiloDB reference §2.5), plus a
 * `version` that grows by one on every change, and the shard arithmetic of the dataset. With one
 * copy per shard (replication factor 1, no planned move) it is exactly FiloDB's single-owner map;
 * the per-copy rules are in `shard-record.ts`.
 *
 * Records are immutable and shared, so `clone()` is a cheap copy of one array.
 *
 * Gotchas: the mapper accepts any transition (e.g. Error → Recovery re-registers an owner), like
 * FiloDB: deciding *who* may report is the ShardManager's job. Events that change nothing (a
 * repeated `IngestionStopped`) leave the version alone, so they publish nothing.
 */
export class ShardMapper {
  readonly numShards: number;
  readonly dataset: DatasetRef | undefined;
  private records: ShardRecord[];
  /** Bit s set iff shard s has no copy: finding the lowest free shards costs numShards / 32 steps. */
  private free: Uint32Array;
  /** Copies per node (Leaving and Initializing ones included): a node's load. */
  private ownerCounts: Map<NodeId, number>;
  private unassignedCount: number;
  /** Shards with a Leaving copy (a handoff in flight): planned moves are counted and finished from here, not from a walk of the map. */
  private leaving: Set<number>;
  /** Per shard, the version at which its copies last changed (`ShardMapSnapshot.assignmentVersions`). */
  private assignmentVersions: number[];
  private _version: number;

  /**
   * An empty map at `version` (0 unless a removed map of the same name must stay older than this one).
   * Throws `InvalidShardCountError` unless `numShards` is a power of two in 1..65536 (0 and 34 are refused).
   */
  constructor(numShards: number, dataset?: DatasetRef, version = 0) {
    if (!spreadMath.isValidShardCount(numShards)) throw new InvalidShardCountError(numShards);
    if (!Number.isSafeInteger(version) || version < 0) throw new RangeError(`a map version is a whole number >= 0, got ${version}`);
    this.numShards = numShards;
    this.dataset = dataset;
    this.records = new Array<ShardRecord>(numShards).fill(UNASSIGNED_RECORD);
    this.free = new Uint32Array(Math.ceil(numShards / 32));
    for (let s = 0; s < numShards; s++) this.free[s >>> 5]! |= 1 << (s & 31);
    this.ownerCounts = new Map();
    this.unassignedCount = numShards;
    this.leaving = new Set();
    this.assignmentVersions = new Array<number>(numShards).fill(0);
    this._version = version;
  }

  /** Grows by one on every applied change; equal maps may have different versions. */
  get version(): number {
    return this._version;
  }

  // ---------------------------------------------------------------- reads

  /** The status of a shard. Throws `ShardOutOfRangeError` for a shard outside 0..numShards-1. */
  statusForShard(shard: number): ShardStatus {
    return this.record(shard).status;
  }

  /**
   * The owner of a shard (its primary copy: a serving one first), or undefined if it has no copy.
   * With one copy per shard this is FiloDB's `coordForShard`.
   */
  nodeForShard(shard: number): NodeId | undefined {
    return primaryCopy(this.record(shard).assignments)?.node;
  }

  /** Every node holding a copy of the shard, in the record's order. */
  nodesForShard(shard: number): NodeId[] {
    return this.record(shard).assignments.map((a) => a.node);
  }

  /** Nodes whose copy serves queries now: Active and Available or Leaving (not still Initializing). */
  servingNodes(shard: number): NodeId[] {
    return this.record(shard)
      .assignments.filter(isServingCopy)
      .map((a) => a.node);
  }

  /** The copy `node` holds of a shard, if any. */
  copyOnNode(shard: number, node: NodeId): ShardAssignment | undefined {
    return copyOf(this.record(shard), node);
  }

  /** The whole record of a shard: status, copies with placement states, last owner, assignment version. */
  recordForShard(shard: number): ShardRecord {
    return this.record(shard);
  }

  /** The map version at which the shard's copies (nodes or placements) last changed; 0 if never. */
  assignmentVersion(shard: number): number {
    this.record(shard);
    return this.assignmentVersions[shard]!;
  }

  /** Shards of which `node` holds a copy, ascending. */
  shardsForNode(node: NodeId): ShardNum[] {
    if (!this.ownerCounts.has(node)) return [];
    return this.shardsWhere((r) => r.assignments.some((a) => a.node === node));
  }

  /** Every copy `node` holds, by ascending shard. */
  copiesForNode(node: NodeId): NodeCopy[] {
    const out: NodeCopy[] = [];
    if (!this.ownerCounts.has(node)) return out;
    for (let i = 0; i < this.records.length; i++) {
      const copy = copyOf(this.records[i]!, node);
      if (copy) out.push({ shard: i as ShardNum, copy });
    }
    return out;
  }

  /** How many copies `node` holds (its load), in constant time. */
  numShardsForNode(node: NodeId): number {
    return this.ownerCounts.get(node) ?? 0;
  }

  /** Shards with an owner, ascending (whatever their status). */
  assignedShards(): ShardNum[] {
    return this.shardsWhere((r) => r.assignments.length > 0);
  }

  /** Shards with a Leaving copy (a planned move in flight), lowest first. */
  shardsWithLeavingCopy(): ShardNum[] {
    return ([...this.leaving] as ShardNum[]).sort((a, b) => a - b);
  }

  /**
   * Shards without an owner, ascending (Unassigned, Down, Error, or Stopped after `unassignShard`);
   * at most `limit` of them, the lowest first.
   */
  unassignedShards(limit = Infinity): ShardNum[] {
    const out: ShardNum[] = [];
    for (let w = 0; w < this.free.length && out.length < limit; w++) {
      let word = this.free[w]!;
      while (word !== 0 && out.length < limit) {
        const low = word & -word;
        out.push((w * 32 + 31 - Math.clz32(low)) as ShardNum);
        word ^= low;
      }
    }
    return out;
  }

  get numAssignedShards(): number {
    return this.numShards - this.unassignedCount;
  }

  get numUnassignedShards(): number {
    return this.unassignedCount;
  }

  /** Distinct nodes holding copies. */
  allNodes(): Set<NodeId> {
    return new Set(this.ownerCounts.keys());
  }

  /** Number of distinct owners, in constant time. */
  get numAssignedNodes(): number {
    return this.ownerCounts.size;
  }

  /** Active shards, ascending: all of them, or those among `shards`. */
  activeShards(shards?: readonly number[]): ShardNum[] {
    return this.filterShards(shards, (r) => r.status.type === 'Active');
  }

  /** Shards that are not Active, ascending. */
  notActiveShards(): ShardNum[] {
    return this.shardsWhere((r) => r.status.type !== 'Active');
  }

  /** Active or recovering shards, ascending: all of them, or those among `shards`. */
  activeOrRecoveringShards(shards?: readonly number[]): ShardNum[] {
    return this.filterShards(shards, (r) => r.status.type === 'Active' || r.status.type === 'Recovery');
  }

  /** True when every shard is Active. */
  isHealthy(): boolean {
    return this.records.every((r) => r.status.type === 'Active');
  }

  // ---------------------------------------------------------------- arithmetic

  /** The `2^spread` shards that may hold a shard key's records, ascending. Throws `InvalidSpreadError`. */
  queryShards(shardKeyHash: number, spread: number): ShardNum[] {
    return spreadMath.queryShards(this.numShards, shardKeyHash, spread);
  }

  /** The shard a record goes to. Throws `InvalidSpreadError`. */
  ingestionShard(shardKeyHash: number, partitionHash: number, spread: number): ShardNum {
    return spreadMath.ingestionShard(this.numShards, shardKeyHash, partitionHash, spread);
  }

  /**
   * FiloDB's legacy range mapping `(unsigned hash * numShards) >> 32`, with the owner.
   *
   * Gotchas: inconsistent with `ingestionShard` (FiloDB says so too); kept only for FiloDB users
   * whose single-partition queries rely on it. Route by `queryShards` instead.
   */
  partitionToShardNode(partitionHash: number): { shard: ShardNum; node: NodeId | undefined } {
    const shard = Number((BigInt(partitionHash >>> 0) * BigInt(this.numShards)) >> 32n) as ShardNum;
    return { shard, node: this.nodeForShard(shard) };
  }

  /**
   * One bit per shard, set iff Active: bit `7 - (i % 8)` of byte `i / 8` (FiloDB's ShardMapperV2
   * layout), padding bits zero. Lets a router check health from 32 bytes instead of a whole map.
   */
  activeShardsBitmap(): Uint8Array {
    const bytes = new Uint8Array(Math.ceil(this.numShards / 8));
    this.records.forEach((r, i) => {
      if (r.status.type === 'Active') bytes[i >> 3]! |= 0x80 >> (i & 7);
    });
    return bytes;
  }

  /** True iff `bitmap` has the right length for `numShards` and every shard's bit is set. */
  static isAllActive(bitmap: Uint8Array | null | undefined, numShards: number): boolean {
    if (!bitmap || bitmap.length !== Math.ceil(numShards / 8)) return false;
    for (let i = 0; i < numShards; i++) if ((bitmap[i >> 3]! & (0x80 >> (i & 7))) === 0) return false;
    return true;
  }

  // ---------------------------------------------------------------- writes

  /**
   * Applies one event with FiloDB's transitions: ShardAssignmentStarted → Assigned, RecoveryInProgress
   * → Recovery(pct), IngestionStarted → Active (each sets the owner); IngestionError → Error and
   * ShardDown → Down (each clears the owner and remembers the event's node as the last owner);
   * IngestionStopped → Stopped (owner kept). An event from a node that holds a copy changes that
   * copy only; the placement events (`ShardCopyAdded`, `ShardLeaving`, ...) change copies.
   * Refuses, unchanged, a shard out of range (including `shard == numShards`), an event for another
   * dataset, a progress outside 0..100 and a placement event that does not fit the shard's copies.
   */
  updateFromEvent(e: ShardEvent): Result<UpdateOutcome, MapperError> {
    if (this.dataset !== undefined && e.dataset !== this.dataset) return err(new DatasetMismatchError(this.dataset, e.dataset));
    if (!isShardInRange(e.shard, this.numShards)) return err(new ShardOutOfRangeError(e.shard, this.numShards, e.dataset));
    const next = applyToRecord(this.records[e.shard]!, e);
    if (!next.ok) return next;
    return ok({ changed: this.replace(e.shard, next.value) });
  }

  /**
   * Makes `node` the owner of each shard, keeping its status (FiloDB's `registerNode`: always
   * overrides). All shards are range-checked before any changes.
   */
  registerNode(shards: readonly number[], node: NodeId): Result<UpdateOutcome, ShardOutOfRangeError> {
    const bad = shards.find((s) => !isShardInRange(s, this.numShards));
    if (bad !== undefined) return err(new ShardOutOfRangeError(bad, this.numShards, this.dataset));
    let changed = false;
    for (const s of shards) {
      const r = this.records[s]!;
      const placement = primaryCopy(r.assignments)?.placement ?? 'Initializing';
      changed = this.replace(s, soleOwner(node, placement, r.status)) || changed;
    }
    return ok({ changed });
  }

  /** Clears a shard's copies, keeping its status. */
  unassignShard(shard: number): Result<UpdateOutcome, ShardOutOfRangeError> {
    if (!isShardInRange(shard, this.numShards)) return err(new ShardOutOfRangeError(shard, this.numShards, this.dataset));
    const r = this.records[shard]!;
    const owner = primaryCopy(r.assignments)?.node;
    return ok({ changed: owner !== undefined && this.replace(shard, noOwner(r.status, owner)) });
  }

  /** Removes every copy `node` holds (statuses kept); returns those shards, ascending. */
  removeNode(node: NodeId): ShardNum[] {
    const shards = this.shardsForNode(node);
    for (const s of shards) {
      const r = this.records[s]!;
      const rest = r.assignments.filter((a) => a.node !== node);
      this.replace(s, rest.length === 0 ? noOwner(r.status, node) : { ...r, assignments: rest, status: primaryCopy(rest)!.status });
    }
    return shards;
  }

  /**
   * Applies `other`'s minimal events to this map: shards assigned or touched in `other` take its
   * state (all its copies); shards that are plainly Unassigned in `other` leave this map alone. A map of another
   * dataset, or with more shards, is refused and nothing changes.
   */
  mergeFrom(other: ShardMapper): Result<UpdateOutcome, MapperError> {
    const dataset = other.dataset ?? this.dataset;
    if (this.dataset !== undefined && dataset !== this.dataset) return err(new DatasetMismatchError(this.dataset, dataset ?? '?'));
    if (other.numShards > this.numShards) return err(new ShardOutOfRangeError(other.numShards - 1, this.numShards, this.dataset));
    // All or nothing: apply to a copy, keep it only if every event applied.
    const merged = this.clone();
    let changed = false;
    for (const e of other.minimalEvents(dataset ?? ('merge' as DatasetRef))) {
      const r = merged.updateFromEvent(e);
      if (!r.ok) return r;
      changed = r.value.changed || changed;
    }
    Object.assign(this, {
      records: merged.records,
      free: merged.free,
      ownerCounts: merged.ownerCounts,
      unassignedCount: merged.unassignedCount,
      leaving: merged.leaving,
      assignmentVersions: merged.assignmentVersions,
      _version: merged._version,
    });
    return ok({ changed });
  }

  // ---------------------------------------------------------------- copies and formats

  /**
   * The fewest events that rebuild this map from a fresh mapper, in shard order: Assigned →
   * ShardAssignmentStarted; Active → IngestionStarted; Recovery → RecoveryInProgress; Error →
   * IngestionError; Stopped → IngestionStarted (or ShardAssignmentStarted if it stopped before it
   * was ever active, or ShardDown if it has no owner) + IngestionStopped; Down → ShardDown (a Down
   * copy, kept for an absent node: its placement's event + ShardCopyDown). A second copy starts
   * with `ShardCopyAdded`, and a Leaving copy ends with `ShardLeaving`.
   *
   * Gotchas: FiloDB emits `IngestionStarted(owner = none)` before each `ShardDown`, because its
   * events need an owner slot; ours carry the last owner in `ShardDown` itself, so one event does.
   * States that no event sequence produces (an owner with status Error, Down or Unassigned, or no
   * owner with status Assigned, Active or Recovery, both only reachable through `registerNode`,
   * `unassignShard` and `removeNode`) cannot be rebuilt from events and are not replayed faithfully.
   */
  minimalEvents(dataset: DatasetRef | undefined = this.dataset): ShardEvent[] {
    if (dataset === undefined) throw new InvalidSnapshotError('minimalEvents needs a dataset: construct the mapper with one or pass it');
    const events: ShardEvent[] = [];
    this.records.forEach((r, i) => {
      const shard = i as ShardNum;
      if (r.assignments.length > 0) {
        r.assignments.forEach((copy, k) => events.push(...copyEvents(dataset, shard, copy, k === 0)));
        return;
      }
      const node = r.lastNode;
      if (node === undefined) return; // never owned: nothing to replay
      const s = r.status;
      switch (s.type) {
        case 'Unassigned':
        case 'Assigned':
        case 'Active':
        case 'Recovery':
          break; // no owner with a running status: only `registerNode`/`unassignShard` make these
        case 'Error':
          events.push(ShardEvents.ingestionError(dataset, shard, node, s.message));
          break;
        case 'Stopped':
          events.push(ShardEvents.shardDown(dataset, shard, node), ShardEvents.ingestionStopped(dataset, shard, node));
          break;
        case 'Down':
          events.push(ShardEvents.shardDown(dataset, shard, node));
          break;
        default:
          assertNever(s);
      }
    });
    return events;
  }

  /** An independent copy with the same records and version. */
  clone(): ShardMapper {
    const c = Object.create(ShardMapper.prototype) as ShardMapper;
    Object.assign(c, {
      numShards: this.numShards,
      dataset: this.dataset,
      records: this.records.slice(),
      free: this.free.slice(),
      ownerCounts: new Map(this.ownerCounts),
      unassignedCount: this.unassignedCount,
      leaving: new Set(this.leaving),
      assignmentVersions: this.assignmentVersions.slice(),
      _version: this._version,
    });
    return c;
  }

  /** Same shard count and the same record for every shard. Versions are not compared. */
  equals(other: ShardMapper): boolean {
    return this.numShards === other.numShards && this.records.every((r, i) => recordEquals(r, other.records[i]!));
  }

  /** Plain data for persistence, the bus and subscribers, stamped with the given epoch. */
  toSnapshot(epoch: Epoch, dataset: DatasetRef | undefined = this.dataset): ShardMapSnapshot {
    if (dataset === undefined) throw new InvalidSnapshotError('a snapshot needs a dataset: construct the mapper with one or pass it');
    return {
      format: SHARD_MAP_FORMAT,
      dataset,
      numShards: this.numShards,
      epoch,
      version: this._version,
      shards: this.records.slice(),
      assignmentVersions: this.assignmentVersions.slice(),
    };
  }

  /** Rebuilds a mapper from a snapshot (already parsed with `parseShardMapSnapshot` if untrusted). */
  static fromSnapshot(snapshot: ShardMapSnapshot): ShardMapper {
    return runWhole(ShardMapper.buildingFrom(snapshot));
  }

  /** `fromSnapshot` in steps (a thousand shards each), to run in slices of the event loop. */
  static *buildingFrom(snapshot: ShardMapSnapshot): Steps<ShardMapper> {
    const m = new ShardMapper(snapshot.numShards, snapshot.dataset);
    if (snapshot.shards.length !== snapshot.numShards) {
      throw new InvalidSnapshotError(
        `snapshot of ${snapshot.dataset} lists ${snapshot.shards.length} shards, expected ${snapshot.numShards}`,
        snapshot.dataset,
      );
    }
    for (let i = 0; i < snapshot.numShards; i++) {
      m.replace(i, snapshot.shards[i]!);
      if (i % ITEMS_PER_STEP === ITEMS_PER_STEP - 1) yield;
    }
    m._version = snapshot.version;
    // A format 1 map handed over in memory (not parsed) has none: its copies date from version 0.
    m.assignmentVersions = snapshot.assignmentVersions?.slice() ?? new Array<number>(snapshot.numShards).fill(0);
    return m;
  }

  /**
   * A grid of one letter per shard, 16 per row (`.` Unassigned, `N` Assigned, `A` Active, `E` Error,
   * `R` Recovery, `S` Stopped, `D` Down), then the shards of each node: FiloDB's `prettyPrint`.
   */
  prettyPrint(): string {
    const rows: string[] = [];
    for (let start = 0; start < this.numShards; start += 16) {
      const letters = this.records
        .slice(start, start + 16)
        .map((r) => statusLetter(r.status))
        .join('');
      rows.push(`${String(start).padStart(5)}: ${letters.replace(/(.{4})(?=.)/g, '$1 ')}`);
    }
    const nodes = [...this.ownerCounts.keys()].sort();
    for (const n of nodes) rows.push(`  ${n}: ${this.shardsForNode(n).join(', ')}`);
    return rows.join('\n');
  }

  toString(): string {
    return `ShardMapper(${this.dataset ?? '?'}, ${this.numShards} shards, v${this._version})\n${this.prettyPrint()}`;
  }

  // ---------------------------------------------------------------- internals

  private record(shard: number): ShardRecord {
    if (!isShardInRange(shard, this.numShards)) throw new ShardOutOfRangeError(shard, this.numShards, this.dataset);
    return this.records[shard]!;
  }

  private shardsWhere(pred: (r: ShardRecord) => boolean): ShardNum[] {
    const out: ShardNum[] = [];
    for (let i = 0; i < this.records.length; i++) if (pred(this.records[i]!)) out.push(i as ShardNum);
    return out;
  }

  private filterShards(shards: readonly number[] | undefined, pred: (r: ShardRecord) => boolean): ShardNum[] {
    if (shards === undefined) return this.shardsWhere(pred);
    return [...new Set(shards)].filter((s) => isShardInRange(s, this.numShards) && pred(this.records[s]!)).sort((a, b) => a - b) as ShardNum[];
  }

  /**
   * Replaces a shard's record; keeps the counters right; bumps the version, and stamps the record
   * with it when its copies changed. Returns whether anything changed.
   */
  private replace(shard: number, next: ShardRecord): boolean {
    const prev = this.records[shard]!;
    if (recordEquals(prev, next)) return false;
    this._version += 1;
    if (!sameAssignment(prev, next)) {
      this.assignmentVersions[shard] = this._version;
      // Only the nodes that gained or lost a copy: a setup adds a shard's copies one at a time, and
      // counting them all again at each step was most of a 65 536 × 3 setup's counting.
      for (const a of prev.assignments) if (!holds(next, a.node)) this.count(a.node, -1);
      for (const a of next.assignments) if (!holds(prev, a.node)) this.count(a.node, +1);
      if (next.assignments.some((a) => a.placement === 'Leaving')) this.leaving.add(shard);
      else this.leaving.delete(shard);
      const wasFree = prev.assignments.length === 0;
      const isFree = next.assignments.length === 0;
      if (wasFree !== isFree) {
        this.unassignedCount += isFree ? 1 : -1;
        if (isFree) this.free[shard >>> 5]! |= 1 << (shard & 31);
        else this.free[shard >>> 5]! &= ~(1 << (shard & 31));
      }
    }
    this.records[shard] = next;
    return true;
  }

  private count(node: NodeId, delta: number): void {
    const n = (this.ownerCounts.get(node) ?? 0) + delta;
    if (n === 0) this.ownerCounts.delete(node);
    else this.ownerCounts.set(node, n);
  }
}

/** The events that rebuild one copy: the first copy of a shard as its owner, later ones added beside it. */
function copyEvents(dataset: DatasetRef, shard: ShardNum, copy: ShardAssignment, first: boolean): ShardEvent[] {
  const node = copy.node;
  const out: ShardEvent[] = first ? [] : [ShardEvents.copyAdded(dataset, shard, node)];
  const s = copy.status;
  switch (s.type) {
    case 'Active':
      out.push(ShardEvents.ingestionStarted(dataset, shard, node));
      break;
    case 'Recovery':
      out.push(ShardEvents.recoveryInProgress(dataset, shard, node, s.progressPct));
      break;
    case 'Stopped':
      if (copy.placement === 'Available') out.push(ShardEvents.ingestionStarted(dataset, shard, node));
      else if (first) out.push(ShardEvents.assignmentStarted(dataset, shard, node));
      out.push(ShardEvents.ingestionStopped(dataset, shard, node));
      break;
    case 'Down':
      // A copy kept for its absent node: its placement first, then marked down.
      if (copy.placement === 'Available') out.push(ShardEvents.ingestionStarted(dataset, shard, node));
      else if (first) out.push(ShardEvents.assignmentStarted(dataset, shard, node));
      out.push(ShardEvents.copyDown(dataset, shard, node));
      break;
    default:
      // Assigned; Unassigned/Error copies exist only through `registerNode` and replay as Assigned.
      if (first) out.push(ShardEvents.assignmentStarted(dataset, shard, node));
  }
  if (copy.placement === 'Leaving') out.push(ShardEvents.leaving(dataset, shard, node));
  return out;
}

/** Whether `r` has a copy on `node` (a record holds a few copies: a loop beats a set). */
function holds(r: ShardRecord, node: NodeId): boolean {
  for (const a of r.assignments) if (a.node === node) return true;
  return false;
}
