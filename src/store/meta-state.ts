import type { DatasetConfig } from '../core/dataset-config.js';
import { frozenJsonCopy } from '../core/json-data.js';
import type { DatasetRef, Epoch, Incarnation, NodeId } from '../core/ids.js';
import { compareStamps, type ShardMapSnapshot, type ShardRecord } from '../core/shard-map-snapshot.js';
import { NO_NODE_OPERATIONS, type AppliedRequest, type NodeOperations } from '../core/shard-manager/protocol.js';
import type { FencingToken } from '../core/fencing-token.js';
import type { ShardStatus } from '../core/status.js';
import {
  CheckpointRefusedError,
  checkpointAdmits,
  FencedError,
  type Lease,
  type ShardCheckpoints,
  type StoredCooldown,
  type StoredSubscriptions,
} from './meta-store.js';

/**
 * The whole content of a MetaStore as plain data, and the operations on it: the semantics shared
 * by `MemoryMetaStore` and `FileMetaStore`. Every operation either changes the state completely or
 * throws before changing anything. A write stores a deep frozen copy (`frozenJsonCopy`: what is
 * stored is JSON data, as in Cassandra), and reads hand out those frozen values: no caller can
 * change the state through a value it wrote or read, and a read copies nothing.
 */
export interface MetaState {
  lease: Lease | undefined;
  readonly datasets: Map<string, DatasetConfig>;
  readonly shardMaps: Map<string, ShardMapSnapshot>;
  subscriptions: StoredSubscriptions;
  nodeOperations: NodeOperations;
  appliedRequests: AppliedRequest[];
  /** Keyed by `cellKey(dataset, shard)`. */
  readonly cooldowns: Map<string, StoredCooldown>;
  /** Keyed by `cellKey(dataset, shard)`. */
  readonly checkpoints: Map<string, CellCheckpoints>;
}

/** One shard's checkpoints: per copy (node → group → offset, and → token), and the shared ones of older stores. */
export interface CellCheckpoints {
  readonly copies: Map<string, Map<string, number>>;
  readonly shared: Map<string, number>;
  readonly tokens: Map<string, Map<string, FencingToken>>;
}

export function emptyMetaState(): MetaState {
  return {
    lease: undefined,
    datasets: new Map(),
    shardMaps: new Map(),
    subscriptions: { subscriptions: [], watchers: [] },
    nodeOperations: NO_NODE_OPERATIONS,
    appliedRequests: [],
    cooldowns: new Map(),
    checkpoints: new Map(),
  };
}

/** A state that changes apart from `state`: the stored values are frozen, so they are shared, not copied. */
export function cloneMetaState(state: MetaState): MetaState {
  return {
    ...state,
    lease: state.lease && { ...state.lease },
    datasets: new Map(state.datasets),
    shardMaps: new Map(state.shardMaps),
    cooldowns: new Map(state.cooldowns),
    checkpoints: new Map([...state.checkpoints].map(([k, cell]) => [k, copyCell(cell)])),
  };
}

/** Freezes the values of a state built from elsewhere (a file), as writes store them. */
export function freezeStoredValues(state: MetaState): MetaState {
  for (const [k, v] of state.datasets) state.datasets.set(k, frozenJsonCopy(v));
  for (const [k, v] of state.shardMaps) state.shardMaps.set(k, frozenJsonCopy(v));
  state.subscriptions = frozenJsonCopy(state.subscriptions);
  state.nodeOperations = frozenJsonCopy(state.nodeOperations);
  state.appliedRequests = frozenJsonCopy(state.appliedRequests);
  return state;
}

export function cellKey(dataset: string, shard: number): string {
  return `${dataset}/${shard}`;
}

/** The (dataset, shard) of a `cellKey` (dataset names contain no `/`). */
export function splitCellKey(key: string): { dataset: string; shard: number } {
  const slash = key.lastIndexOf('/');
  return { dataset: key.slice(0, slash), shard: Number(key.slice(slash + 1)) };
}

/** The epoch of the current lease; 0 when there has never been one. */
export function leaseEpoch(state: MetaState): number {
  return state.lease?.epoch ?? 0;
}

/**
 * Only the lease holder may write: a write whose epoch is not the lease's is refused. A lower
 * epoch is a replaced singleton; a higher one cannot come from any singleton that took the lease
 * here (a bug or another store), so it is refused too rather than trusted.
 */
export function checkEpoch(state: MetaState, writeEpoch: number): void {
  const current = leaseEpoch(state);
  if (current === 0 || writeEpoch !== current) throw new FencedError(writeEpoch, current);
}

export function readLease(state: MetaState): Lease | undefined {
  return state.lease === undefined ? undefined : { ...state.lease };
}

/** Compare-and-set on the epoch, and the renewal when given (see `MetaStore.takeLease`). */
export function takeLease(state: MetaState, node: NodeId, incarnation: Incarnation, expectedEpoch: number, expectedRenewal?: number): Lease | undefined {
  if (leaseEpoch(state) !== expectedEpoch) return undefined;
  if (expectedRenewal !== undefined && state.lease?.renewal !== expectedRenewal) return undefined;
  const lease: Lease = { epoch: (expectedEpoch + 1) as Epoch, node, incarnation, renewal: 0 };
  state.lease = lease;
  return { ...lease };
}

/** Compare-and-set on the epoch (see `MetaStore.renewLease`). */
export function renewLease(state: MetaState, epoch: Epoch, renewal: number): boolean {
  if (state.lease === undefined || state.lease.epoch !== epoch) return false;
  state.lease = { ...state.lease, renewal };
  return true;
}

export function putDataset(state: MetaState, config: DatasetConfig, epoch: Epoch): void {
  checkEpoch(state, epoch);
  state.datasets.set(config.ref, frozenJsonCopy(config));
}

/**
 * Removes the dataset with its shard map and cooldowns, so a dataset created again under the same
 * name starts afresh (its new map would otherwise be older than the stale one and be ignored).
 * Ingestion checkpoints stay: they describe the source, and belong to the shard owners.
 */
export function deleteDataset(state: MetaState, dataset: DatasetRef, epoch: Epoch): void {
  checkEpoch(state, epoch);
  state.datasets.delete(dataset);
  state.shardMaps.delete(dataset);
  for (const [k, c] of state.cooldowns) if (c.dataset === dataset) state.cooldowns.delete(k);
}

export function datasets(state: MetaState): DatasetConfig[] {
  return [...state.datasets.values()];
}

/** Fenced by the snapshot's epoch; keeps the newest `(epoch, version)` per dataset. */
export function putShardMap(state: MetaState, snapshot: ShardMapSnapshot): void {
  checkEpoch(state, snapshot.epoch);
  const stored = state.shardMaps.get(snapshot.dataset);
  if (stored && compareStamps(snapshot, stored) <= 0) return;
  state.shardMaps.set(snapshot.dataset, frozenSnapshot(snapshot));
}

/**
 * Frozen copies of the shard records written lately, by the record they copy. The singleton's
 * successive maps share every record that did not change (records are immutable: a change makes a
 * new one), so a write copies only the records that changed, not all 65 536 of a large map.
 */
const recordCopies = new WeakMap<ShardRecord, ShardRecord>();

function frozenSnapshot(snapshot: ShardMapSnapshot): ShardMapSnapshot {
  const shards = snapshot.shards.map((r) => {
    let copy = recordCopies.get(r);
    if (!copy) recordCopies.set(r, (copy = frozenRecordCopy(r)));
    return copy;
  });
  return Object.freeze({ ...frozenJsonCopy({ ...snapshot, shards: [] }), shards: Object.freeze(shards) });
}

/** The statuses without a payload, frozen once and shared by every stored record. */
const SHARED_STATUSES: ReadonlyMap<string, ShardStatus> = new Map(
  (['Unassigned', 'Assigned', 'Active', 'Stopped', 'Down'] as const).map((type) => [type, Object.freeze({ type }) as ShardStatus]),
);

const frozenStatusCopy = (s: ShardStatus): ShardStatus => SHARED_STATUSES.get(s.type) ?? Object.freeze({ ...s });

/**
 * A frozen copy of a record, field by field: the generic JSON walk (`frozenJsonCopy`) took about
 * 80 ms for the 65 536 records of a new large map, in one turn of the event loop. A record is
 * typed data of the core (strings, a status), so a walk that checks for what JSON would drop
 * finds nothing here.
 */
function frozenRecordCopy(r: ShardRecord): ShardRecord {
  const assignments = Object.freeze(r.assignments.map((a) => Object.freeze({ node: a.node, placement: a.placement, status: frozenStatusCopy(a.status) })));
  const status = frozenStatusCopy(r.status);
  return Object.freeze(r.lastNode === undefined ? { status, assignments } : { status, assignments, lastNode: r.lastNode });
}

export function shardMaps(state: MetaState): ShardMapSnapshot[] {
  return [...state.shardMaps.values()];
}

export function putSubscriptions(state: MetaState, subscriptions: StoredSubscriptions, epoch: Epoch): void {
  checkEpoch(state, epoch);
  state.subscriptions = frozenJsonCopy(subscriptions);
}

export function subscriptions(state: MetaState): StoredSubscriptions {
  return state.subscriptions;
}

export function putNodeOperations(state: MetaState, operations: NodeOperations, epoch: Epoch): void {
  checkEpoch(state, epoch);
  state.nodeOperations = frozenJsonCopy(operations);
}

export function nodeOperations(state: MetaState): NodeOperations {
  return state.nodeOperations;
}

export function putAppliedRequests(state: MetaState, applied: readonly AppliedRequest[], epoch: Epoch): void {
  checkEpoch(state, epoch);
  state.appliedRequests = frozenJsonCopy([...applied]);
}

export function appliedRequests(state: MetaState): AppliedRequest[] {
  return state.appliedRequests;
}

/** One cooldown per (dataset, shard): the latest write wins. */
export function putCooldown(state: MetaState, cooldown: StoredCooldown, epoch: Epoch): void {
  checkEpoch(state, epoch);
  state.cooldowns.set(cellKey(cooldown.dataset, cooldown.shard), { dataset: cooldown.dataset, shard: cooldown.shard, reassignedAt: cooldown.reassignedAt });
}

export function cooldowns(state: MetaState): StoredCooldown[] {
  return [...state.cooldowns.values()].map((c) => ({ ...c }));
}

function copyCell(cell: CellCheckpoints): CellCheckpoints {
  return {
    copies: new Map([...cell.copies].map(([node, groups]) => [node, new Map(groups)])),
    shared: new Map(cell.shared),
    tokens: new Map([...cell.tokens].map(([node, groups]) => [node, new Map(groups)])),
  };
}

function cellOf(state: MetaState, dataset: string, shard: number): CellCheckpoints {
  const k = cellKey(dataset, shard);
  let cell = state.checkpoints.get(k);
  if (!cell) {
    cell = { copies: new Map(), shared: new Map(), tokens: new Map() };
    state.checkpoints.set(k, cell);
  }
  return cell;
}

/**
 * Per copy (the node's id), fenced by token (`checkpointAdmits`): throws `CheckpointRefusedError`,
 * changing nothing, when the stored checkpoint is newer. Without a token only when loading a file
 * written before tokens existed.
 */
export function writeCheckpoint(
  state: MetaState,
  dataset: DatasetRef,
  shard: number,
  node: NodeId,
  group: string,
  offset: number,
  token: FencingToken | undefined,
): void {
  const cell = cellOf(state, dataset, shard);
  if (token !== undefined) {
    const stored = cell.copies.get(node)?.get(group);
    if (stored !== undefined) {
      const storedToken = cell.tokens.get(node)?.get(group);
      if (!checkpointAdmits({ offset: stored, token: storedToken }, offset, token))
        throw new CheckpointRefusedError(dataset, shard, node, group, offset, token, { offset: stored, token: storedToken });
    }
  }
  let groups = cell.copies.get(node);
  if (!groups) cell.copies.set(node, (groups = new Map()));
  groups.set(group, offset);
  let tokens = cell.tokens.get(node);
  if (token === undefined) tokens?.delete(group);
  else {
    if (!tokens) cell.tokens.set(node, (tokens = new Map()));
    tokens.set(group, { epoch: token.epoch, version: token.version });
  }
}

/** A shard's checkpoint of the kind written before copies had their own (a file of an older version). */
export function loadSharedCheckpoint(state: MetaState, dataset: DatasetRef, shard: number, group: string, offset: number): void {
  cellOf(state, dataset, shard).shared.set(group, offset);
}

/** Copies, so a caller that changes what it read changes nothing stored. */
export function readCheckpoints(state: MetaState, dataset: DatasetRef, shard: number): ShardCheckpoints {
  const cell = state.checkpoints.get(cellKey(dataset, shard));
  if (!cell) return { copies: new Map(), shared: new Map(), tokens: new Map() };
  return copyCell(cell) as unknown as ShardCheckpoints;
}

/** Every shard asked, with empty maps when it has none; a shard asked twice is there once. */
export function readCheckpointsOf(state: MetaState, dataset: DatasetRef, shards: readonly number[]): Map<number, ShardCheckpoints> {
  return new Map(shards.map((shard) => [shard, readCheckpoints(state, dataset, shard)]));
}
