import { mkdir, open, readFile, rename } from 'node:fs/promises';
import { dirname } from 'node:path';
import { z } from 'zod';
import { validateDatasetConfig, type DatasetConfig } from '../core/dataset-config.js';
import { parseDatasetRef, parseIncarnation, parseNodeId, parseSubscriberId, type DatasetRef, type Epoch, type Incarnation, type NodeId } from '../core/ids.js';
import { InvalidSnapshotError } from '../core/errors.js';
import { COMPACT_MAP_FORMAT, decodeSnapshot, encodeSnapshot } from '../core/map-codec.js';
import { err, type Result } from '../core/result.js';
import { parseShardMapSnapshot, type ShardMapSnapshot } from '../core/shard-map-snapshot.js';
import type { AppliedRequest, NodeOperations } from '../core/shard-manager/protocol.js';
import { appliedRequestsSchema, nodeOperationsSchema } from './node-operations-schema.js';
import * as ops from './meta-state.js';
import type { FencingToken } from '../core/fencing-token.js';
import {
  MetaStoreUnavailableError,
  RELEASED_RENEWAL,
  type Lease,
  type MetaStore,
  type ShardCheckpoints,
  type StoredCooldown,
  type StoredSubscriptions,
} from './meta-store.js';

/**
 * The version of the file layout this code writes. Format 2 keeps shard maps in the compact
 * encoding (`encodeSnapshot`): a map of 65 536 shards × 3 copies is a few MB instead of tens, and
 * the whole file is written on every write. Format 3 adds each copy's checkpoints (a `node` in a
 * checkpoint entry) and, optionally, their fencing token (`token: [epoch, version]`; entries
 * written before tokens lack it and are replaced by any tokened write). Formats 1 (maps as `ShardMapSnapshot` JSON) and 2 are still read; their
 * checkpoints, one per shard, become the shared start of every copy without one of its own.
 */
export const META_FILE_FORMAT = 3;
/** The file formats `loadMetaFile` reads. */
export const READABLE_META_FILE_FORMATS: readonly number[] = [1, 2, 3];

/** A MetaStore file this version cannot read: an unknown format or a malformed entry. Not retriable. */
export class MetaStoreFileError extends Error {
  constructor(
    readonly path: string,
    message: string,
  ) {
    super(`${path}: ${message}`);
    this.name = 'MetaStoreFileError';
  }
}

/**
 * A MetaStore in one JSON file, for embedded mode across restarts:
 * `{ format: 3, lease, datasets, shardMaps, subscriptions, nodeOperations, appliedRequests,
 * cooldowns, checkpoints }`, the shard maps in the compact encoding (`map-codec.ts`), one entry of
 * each list per line.
 *
 * - Loaded on first use (a missing file is an empty store); a file with an unknown format or an
 *   invalid entry is refused with `MetaStoreFileError` naming the file and the entry.
 * - Every operation runs in turn (one promise chain), so writes never interleave and a read sees
 *   every write called before it. A write applies to a copy of the state, writes the whole file
 *   (`<path>.tmp`, fsync, rename over `<path>`), and only then becomes visible; if the file cannot
 *   be written it rejects with `MetaStoreUnavailableError` and changes nothing.
 * - One process per file: two stores on the same path do not see each other's writes.
 * - Same semantics as `MemoryMetaStore` (both use `meta-state.ts`).
 */
export class FileMetaStore implements MetaStore {
  private state: ops.MetaState | undefined;
  private chain: Promise<unknown> = Promise.resolve();
  /**
   * The encoded text of each stored map: stored maps are frozen, so a map is encoded once, not on
   * every write of the file (a checkpoint write would otherwise re-encode every map).
   */
  private readonly mapText = new WeakMap<ShardMapSnapshot, string>();

  constructor(readonly path: string) {}

  readLease(): Promise<Lease | undefined> {
    return this.read((s) => ops.readLease(s));
  }

  takeLease(node: NodeId, incarnation: Incarnation, expectedEpoch: number, expectedRenewal?: number): Promise<Lease | undefined> {
    return this.write('takeLease', (s) => ops.takeLease(s, node, incarnation, expectedEpoch, expectedRenewal));
  }

  renewLease(epoch: Epoch, renewal: number): Promise<boolean> {
    return this.write('renewLease', (s) => ops.renewLease(s, epoch, renewal));
  }

  putDataset(config: DatasetConfig, epoch: Epoch): Promise<void> {
    return this.write('putDataset', (s) => ops.putDataset(s, config, epoch));
  }

  deleteDataset(dataset: DatasetRef, epoch: Epoch): Promise<void> {
    return this.write('deleteDataset', (s) => ops.deleteDataset(s, dataset, epoch));
  }

  datasets(): Promise<DatasetConfig[]> {
    return this.read((s) => ops.datasets(s));
  }

  putShardMap(snapshot: ShardMapSnapshot): Promise<void> {
    return this.write('putShardMap', (s) => ops.putShardMap(s, snapshot));
  }

  shardMaps(): Promise<ShardMapSnapshot[]> {
    return this.read((s) => ops.shardMaps(s));
  }

  putCooldown(cooldown: StoredCooldown, epoch: Epoch): Promise<void> {
    return this.write('putCooldown', (s) => ops.putCooldown(s, cooldown, epoch));
  }

  cooldowns(): Promise<StoredCooldown[]> {
    return this.read((s) => ops.cooldowns(s));
  }

  putSubscriptions(subscriptions: StoredSubscriptions, epoch: Epoch): Promise<void> {
    return this.write('putSubscriptions', (s) => ops.putSubscriptions(s, subscriptions, epoch));
  }

  subscriptions(): Promise<StoredSubscriptions> {
    return this.read((s) => ops.subscriptions(s));
  }

  putNodeOperations(operations: NodeOperations, epoch: Epoch): Promise<void> {
    return this.write('putNodeOperations', (s) => ops.putNodeOperations(s, operations, epoch));
  }

  nodeOperations(): Promise<NodeOperations> {
    return this.read((s) => ops.nodeOperations(s));
  }

  putAppliedRequests(applied: readonly AppliedRequest[], epoch: Epoch): Promise<void> {
    return this.write('putAppliedRequests', (s) => ops.putAppliedRequests(s, applied, epoch));
  }

  appliedRequests(): Promise<AppliedRequest[]> {
    return this.read((s) => ops.appliedRequests(s));
  }

  writeCheckpoint(dataset: DatasetRef, shard: number, node: NodeId, group: string, offset: number, token: FencingToken): Promise<void> {
    return this.write('writeCheckpoint', (s) => ops.writeCheckpoint(s, dataset, shard, node, group, offset, token));
  }

  readCheckpoints(dataset: DatasetRef, shard: number): Promise<ShardCheckpoints> {
    return this.read((s) => ops.readCheckpoints(s, dataset, shard));
  }

  readCheckpointsOf(dataset: DatasetRef, shards: readonly number[]): Promise<ReadonlyMap<number, ShardCheckpoints>> {
    return this.read((s) => ops.readCheckpointsOf(s, dataset, shards));
  }

  private read<T>(op: (state: ops.MetaState) => T): Promise<T> {
    return this.inTurn(async () => op(await this.loaded()));
  }

  private write<T>(operation: string, op: (state: ops.MetaState) => T): Promise<T> {
    return this.inTurn(async () => {
      const next = ops.cloneMetaState(await this.loaded());
      const result = op(next); // throws (FencedError) before anything is written
      try {
        await writeAtomically(
          this.path,
          renderDocument(toDocument(next), (map) => this.encodedMap(map)),
        );
      } catch (error) {
        throw new MetaStoreUnavailableError(`${operation} (writing ${this.path})`, error);
      }
      this.state = next;
      return result;
    });
  }

  private encodedMap(map: ShardMapSnapshot): string {
    let text = this.mapText.get(map);
    if (text === undefined) {
      // A format 1 map handed over in memory has no assignmentVersions: its copies date from version 0.
      const versions = map.assignmentVersions ?? new Array<number>(map.numShards).fill(0);
      text = JSON.stringify(encodeSnapshot({ ...map, assignmentVersions: versions }));
      this.mapText.set(map, text);
    }
    return text;
  }

  /** Runs `task` after every operation called before it has settled. */
  private inTurn<T>(task: () => Promise<T>): Promise<T> {
    const result = this.chain.then(task);
    this.chain = result.catch(() => undefined);
    return result;
  }

  private async loaded(): Promise<ops.MetaState> {
    this.state ??= await loadMetaFile(this.path);
    return this.state;
  }
}

async function writeAtomically(path: string, text: string): Promise<void> {
  await mkdir(dirname(path), { recursive: true });
  const tmp = `${path}.tmp`;
  const file = await open(tmp, 'w');
  try {
    await file.writeFile(text, 'utf8');
    await file.sync();
  } finally {
    await file.close();
  }
  await rename(tmp, path);
}

interface MetaDocument {
  readonly format: typeof META_FILE_FORMAT;
  readonly lease: Lease | null;
  readonly datasets: readonly DatasetConfig[];
  readonly shardMaps: readonly ShardMapSnapshot[];
  readonly subscriptions: StoredSubscriptions;
  readonly nodeOperations: NodeOperations;
  readonly appliedRequests: readonly AppliedRequest[];
  readonly cooldowns: readonly StoredCooldown[];
  readonly checkpoints: readonly CheckpointEntry[];
}

/** A copy's checkpoint, or without `node` a shared one (written per shard by format 1 and 2 files). */
interface CheckpointEntry {
  readonly dataset: string;
  readonly shard: number;
  readonly node?: string;
  readonly group: string;
  readonly offset: number;
  /** `[epoch, version]`: the fencing token a copy's checkpoint was written with (absent before tokens existed). */
  readonly token?: readonly [number, number];
}

function toDocument(state: ops.MetaState): MetaDocument {
  const checkpoints: CheckpointEntry[] = [];
  for (const [key, cell] of state.checkpoints) {
    const { dataset, shard } = ops.splitCellKey(key);
    for (const [group, offset] of cell.shared) checkpoints.push({ dataset, shard, group, offset });
    for (const [node, groups] of cell.copies) {
      for (const [group, offset] of groups) {
        const token = cell.tokens.get(node)?.get(group);
        checkpoints.push({ dataset, shard, node, group, offset, ...(token ? { token: [token.epoch, token.version] as const } : {}) });
      }
    }
  }
  return {
    format: META_FILE_FORMAT,
    lease: state.lease ?? null,
    datasets: [...state.datasets.values()],
    shardMaps: [...state.shardMaps.values()],
    subscriptions: state.subscriptions,
    nodeOperations: state.nodeOperations,
    appliedRequests: state.appliedRequests,
    cooldowns: [...state.cooldowns.values()],
    checkpoints,
  };
}

const datasetSchema = z.string().refine((s) => parseDatasetRef(s).ok, 'malformed dataset name');
const shardSchema = z.number().int().min(0);
const leaseSchema = z.strictObject({
  epoch: z.number().int().min(1),
  node: z.string().refine((s) => parseNodeId(s).ok, 'malformed node id'),
  incarnation: z.string().refine((s) => parseIncarnation(s).ok, 'malformed incarnation'),
  renewal: z.number().int().min(RELEASED_RENEWAL).optional(),
});
const cooldownSchema = z.strictObject({ dataset: datasetSchema, shard: shardSchema, reassignedAt: z.number().finite() });
const checkpointSchema = z.strictObject({
  dataset: datasetSchema,
  shard: shardSchema,
  node: z
    .string()
    .refine((s) => parseNodeId(s).ok, 'malformed node id')
    .optional(),
  group: z.string(),
  offset: z.number().int(),
  // An optional field of format 3: files written before tokens lack it.
  token: z.tuple([z.number().int().min(0).max(Number.MAX_SAFE_INTEGER), z.number().int().min(0).max(Number.MAX_SAFE_INTEGER)]).optional(),
});
const subscriberSchema = z.string().refine((s) => parseSubscriberId(s).ok, 'malformed subscriber id');
const subscriptionsSchema = z.strictObject({
  subscriptions: z.array(z.strictObject({ dataset: datasetSchema, subscribers: z.array(subscriberSchema) })),
  watchers: z.array(subscriberSchema),
});
const documentSchema = z.strictObject({
  format: z.union([z.literal(1), z.literal(2), z.literal(3)]),
  lease: z.unknown(),
  datasets: z.array(z.unknown()),
  shardMaps: z.array(z.unknown()),
  subscriptions: z.unknown().optional(),
  // Absent in files written before node operations existed: none in flight.
  nodeOperations: z.unknown().optional(),
  // Absent in files written before request dedupe existed: none applied.
  appliedRequests: z.unknown().optional(),
  cooldowns: z.array(z.unknown()),
  checkpoints: z.array(z.unknown()),
});

function issueText(error: z.ZodError): string {
  const issue = error.issues[0];
  return `${issue?.path.map(String).join('.') || '(root)'} ${issue?.message ?? 'is invalid'}`;
}

/** Reads and checks a MetaStore file; a missing file is an empty store. */
export async function loadMetaFile(path: string): Promise<ops.MetaState> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return ops.emptyMetaState();
    throw new MetaStoreUnavailableError(`load (reading ${path})`, error);
  }
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (error) {
    throw new MetaStoreFileError(path, `not a JSON document: ${(error as Error).message}`);
  }
  return parseMetaDocument(raw, path);
}

/** Checks a parsed MetaStore document entry by entry; `path` names the file in errors. */
export function parseMetaDocument(raw: unknown, path: string): ops.MetaState {
  const format = (raw as { format?: unknown } | null)?.format;
  if (typeof format !== 'number' || !READABLE_META_FILE_FORMATS.includes(format)) {
    throw new MetaStoreFileError(
      path,
      `unknown MetaStore file format ${JSON.stringify(format)}: this version reads formats ${READABLE_META_FILE_FORMATS.join(', ')}`,
    );
  }
  const doc = documentSchema.safeParse(raw);
  if (!doc.success) throw new MetaStoreFileError(path, `malformed MetaStore file: ${issueText(doc.error)}`);
  const state = ops.emptyMetaState();
  const d = doc.data;

  if (d.lease !== null) {
    const lease = leaseSchema.safeParse(d.lease);
    if (!lease.success) throw new MetaStoreFileError(path, `invalid lease: ${issueText(lease.error)}`);
    state.lease = lease.data as Lease;
  }
  d.datasets.forEach((entry, i) => {
    const r = validateDatasetConfig(entry);
    const name = `datasets[${i}]${describeRef(entry, 'ref')}`;
    if (!r.ok) throw new MetaStoreFileError(path, `invalid entry ${name}: ${r.error.message}`);
    if (state.datasets.has(r.value.ref)) throw new MetaStoreFileError(path, `invalid entry ${name}: dataset ${r.value.ref} is listed twice`);
    state.datasets.set(r.value.ref, r.value);
  });
  d.shardMaps.forEach((entry, i) => {
    const r = d.format === 1 ? parseShardMapSnapshot(entry) : decodeCompactMap(entry, d.format);
    const name = `shardMaps[${i}]${describeRef(entry, 'dataset')}`;
    if (!r.ok) throw new MetaStoreFileError(path, `invalid entry ${name}: ${r.error.message}`);
    if (state.shardMaps.has(r.value.dataset)) throw new MetaStoreFileError(path, `invalid entry ${name}: a shard map of ${r.value.dataset} is listed twice`);
    state.shardMaps.set(r.value.dataset, r.value);
  });
  if (d.subscriptions !== undefined) {
    const r = subscriptionsSchema.safeParse(d.subscriptions);
    if (!r.success) throw new MetaStoreFileError(path, `invalid entry subscriptions: ${issueText(r.error)}`);
    state.subscriptions = r.data as unknown as StoredSubscriptions;
  }
  if (d.nodeOperations !== undefined) {
    const r = nodeOperationsSchema.safeParse(d.nodeOperations);
    if (!r.success) throw new MetaStoreFileError(path, `invalid entry nodeOperations: ${issueText(r.error)}`);
    state.nodeOperations = r.data;
  }
  if (d.appliedRequests !== undefined) {
    const r = appliedRequestsSchema.safeParse(d.appliedRequests);
    if (!r.success) throw new MetaStoreFileError(path, `invalid entry appliedRequests: ${issueText(r.error)}`);
    state.appliedRequests = r.data;
  }
  d.cooldowns.forEach((entry, i) => {
    const r = cooldownSchema.safeParse(entry);
    if (!r.success) throw new MetaStoreFileError(path, `invalid entry cooldowns[${i}]: ${issueText(r.error)}`);
    state.cooldowns.set(ops.cellKey(r.data.dataset, r.data.shard), r.data as StoredCooldown);
  });
  d.checkpoints.forEach((entry, i) => {
    const r = checkpointSchema.safeParse(entry);
    if (!r.success) throw new MetaStoreFileError(path, `invalid entry checkpoints[${i}]: ${issueText(r.error)}`);
    const { dataset, shard, node, group, offset, token } = r.data;
    // A copy's checkpoint needs format 3: an older file holds only shared ones.
    if ((node !== undefined || token !== undefined) && d.format < 3)
      throw new MetaStoreFileError(path, `invalid entry checkpoints[${i}]: a file of format ${d.format} holds no per-copy checkpoints (node)`);
    if (node === undefined) ops.loadSharedCheckpoint(state, dataset as DatasetRef, shard, group, offset);
    else ops.writeCheckpoint(state, dataset as DatasetRef, shard, node as NodeId, group, offset, token && { epoch: token[0], version: token[1] });
  });
  return ops.freezeStoredValues(state);
}

/** A map of a format 2 or 3 file: the compact encoding only (a `ShardMapSnapshot` there is refused). */
function decodeCompactMap(entry: unknown, fileFormat: number): Result<ShardMapSnapshot, InvalidSnapshotError> {
  const format = (entry as { format?: unknown } | null)?.format;
  if (format !== COMPACT_MAP_FORMAT) {
    return err(
      new InvalidSnapshotError(
        `unsupported shard map format ${JSON.stringify(format)}: a file of format ${fileFormat} holds compact maps (format ${COMPACT_MAP_FORMAT})`,
      ),
    );
  }
  return decodeSnapshot(entry);
}

/**
 * The document as text: one key per line and one list entry per line. Not `JSON.stringify` with an
 * indent, which would put every number of a compact map on a line of its own (ten times the size).
 */
function renderDocument(doc: MetaDocument, encodedMap: (map: ShardMapSnapshot) => string): string {
  const lines = Object.entries(doc).map(([key, value]) => {
    const name = JSON.stringify(key);
    if (!Array.isArray(value)) return `  ${name}: ${JSON.stringify(value)}`;
    if (value.length === 0) return `  ${name}: []`;
    const entries = key === 'shardMaps' ? (value as ShardMapSnapshot[]).map(encodedMap) : value.map((v) => JSON.stringify(v));
    return `  ${name}: [\n${entries.map((e) => `    ${e}`).join(',\n')}\n  ]`;
  });
  return `{\n${lines.join(',\n')}\n}\n`;
}

function describeRef(entry: unknown, field: string): string {
  const value = (entry as Record<string, unknown> | null)?.[field];
  return typeof value === 'string' ? ` (${value})` : '';
}
