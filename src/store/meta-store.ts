import type { DatasetConfig } from '../core/dataset-config.js';
import type { DatasetRef, Epoch, Incarnation, NodeId, SubscriberId } from '../core/ids.js';
import type { AppliedRequest, NodeOperations } from '../core/shard-manager/protocol.js';
import type { ShardMapSnapshot } from '../core/shard-map-snapshot.js';
import { ShardherdError } from '../core/errors.js';
import { compareTokens, tokenText, type FencingToken } from '../core/fencing-token.js';

/** Who holds the singleton lease, at which epoch. */
export interface Lease {
  readonly epoch: Epoch;
  readonly node: NodeId;
  readonly incarnation: Incarnation;
  /**
   * How many times the holder renewed it (0 when taken), in `heartbeat` mode (docs/ARCHITECTURE.md
   * §11.9): a successor that sees the same renewal for a whole singleton lease knows it ran out.
   * Undefined in a store written before leases were renewed.
   */
  readonly renewal?: number;
}

/**
 * The renewal a holder writes when it hands its lease over on a graceful stop, having stopped acting
 * and waited out every node lease it granted: the next in line may take it at once (§11.9).
 */
export const RELEASED_RENEWAL = -1;

/** Who is subscribed to what, as the singleton last persisted it. */
export interface StoredSubscriptions {
  readonly subscriptions: readonly { readonly dataset: DatasetRef; readonly subscribers: readonly SubscriberId[] }[];
  readonly watchers: readonly SubscriberId[];
}

export interface StoredCooldown {
  readonly dataset: DatasetRef;
  readonly shard: number;
  readonly reassignedAt: number;
}

/**
 * Everything that must survive the singleton: dataset configs, the singleton lease and its epoch,
 * the latest shard map per dataset, reassignment cooldowns, and ingestion checkpoints. Cassandra in
 * production; memory or a file in embedded mode.
 *
 * Every singleton write carries its epoch and is refused with `FencedError` once a newer epoch
 * holds the lease, so a singleton that was replaced cannot change anything any more.
 */
export interface MetaStore {
  readLease(): Promise<Lease | undefined>;
  /**
   * Compare-and-set: takes the lease with epoch `expectedEpoch + 1` if the stored epoch is still
   * `expectedEpoch` (0 when there has never been a lease). Resolves with the new lease, or
   * undefined if another candidate moved the epoch first. With `expectedRenewal`, only if the
   * stored renewal is still that one too (a successor taking a lease it saw run out).
   */
  takeLease(node: NodeId, incarnation: Incarnation, expectedEpoch: number, expectedRenewal?: number): Promise<Lease | undefined>;
  /**
   * Compare-and-set: the holder of `epoch` records its renewal number `renewal`. Resolves false when
   * another epoch holds the lease (it was taken over).
   */
  renewLease(epoch: Epoch, renewal: number): Promise<boolean>;

  putDataset(config: DatasetConfig, epoch: Epoch): Promise<void>;
  deleteDataset(dataset: DatasetRef, epoch: Epoch): Promise<void>;
  datasets(): Promise<DatasetConfig[]>;

  /** Keeps the newest `(epoch, version)` snapshot per dataset; an older one is ignored. */
  putShardMap(snapshot: ShardMapSnapshot): Promise<void>;
  shardMaps(): Promise<ShardMapSnapshot[]>;

  /** Replaces the stored subscriptions (a subscriber acknowledged with a snapshot survives any failover). */
  putSubscriptions(subscriptions: StoredSubscriptions, epoch: Epoch): Promise<void>;
  subscriptions(): Promise<StoredSubscriptions>;

  /** Replaces the stored node operations (drains and replacements in flight). */
  putNodeOperations(operations: NodeOperations, epoch: Epoch): Promise<void>;
  /** The node operations in flight; none when never written (a store from before they existed). */
  nodeOperations(): Promise<NodeOperations>;

  /** Replaces the stored list of the last requests applied, with their answers. */
  putAppliedRequests(applied: readonly AppliedRequest[], epoch: Epoch): Promise<void>;
  /** The last requests applied; none when never written. */
  appliedRequests(): Promise<AppliedRequest[]>;

  putCooldown(cooldown: StoredCooldown, epoch: Epoch): Promise<void>;
  cooldowns(): Promise<StoredCooldown[]>;

  /**
   * Ingestion checkpoints are written by shard owners, not the singleton: not fenced by the lease's
   * epoch but by the copy's fencing token (docs/ARCHITECTURE.md §12.3). Each copy of a shard has its
   * own, keyed by the node that holds it (its id, not its incarnation: a restarted node resumes the
   * same copy), so a copy that restarts resumes where its own sink stopped, not where the furthest
   * copy is.
   *
   * The write applies only if `(token, offset)` is at least the stored `(token, offset)`, compared
   * lexicographically (a stored checkpoint without a token, written before tokens existed, is
   * older than any): a former owner can neither overwrite a newer owner's checkpoint nor move its
   * own backwards. Otherwise nothing changes and it throws `CheckpointRefusedError` with what is
   * stored. Writing the same checkpoint again applies (a retry after a lost answer).
   */
  writeCheckpoint(dataset: DatasetRef, shard: number, node: NodeId, group: string, offset: number, token: FencingToken): Promise<void>;
  /** A shard's checkpoints: each copy's, and the shared ones of a store written before copies had their own. */
  readCheckpoints(dataset: DatasetRef, shard: number): Promise<ShardCheckpoints>;
  /**
   * The checkpoints of many shards of one dataset at once. Every shard asked is in the result, with
   * empty maps when it has no checkpoint. For a node starting many shards: one call instead of one
   * request per shard.
   */
  readCheckpointsOf(dataset: DatasetRef, shards: readonly number[]): Promise<ReadonlyMap<number, ShardCheckpoints>>;
}

/**
 * Every MetaStore method: the operations whose failures a node counts (`shardherd_metastore_errors_total`
 * starts each at 0, so a dashboard's rate has a series before the first failure). The type below
 * fails to compile when a method is added to `MetaStore` and not here.
 */
export const META_STORE_OPERATIONS = [
  'readLease',
  'takeLease',
  'renewLease',
  'putDataset',
  'deleteDataset',
  'datasets',
  'putShardMap',
  'shardMaps',
  'putSubscriptions',
  'subscriptions',
  'putNodeOperations',
  'nodeOperations',
  'putAppliedRequests',
  'appliedRequests',
  'putCooldown',
  'cooldowns',
  'writeCheckpoint',
  'readCheckpoints',
  'readCheckpointsOf',
] as const satisfies readonly (keyof MetaStore)[];
type UnlistedOperation = Exclude<keyof MetaStore, (typeof META_STORE_OPERATIONS)[number]>;
const _everyOperationListed: [UnlistedOperation] extends [never] ? true : UnlistedOperation = true;

/**
 * What is stored of one shard's ingestion progress. An offset is the last one a sink accepted
 * (inclusive), per checkpoint group; `tokens` has the fencing token each copy's checkpoint was
 * written with (none for a checkpoint written before tokens existed).
 *
 * Gotchas: `shared` holds checkpoints written per shard by versions before each copy had its own
 * (every copy wrote the same row, so it is the furthest copy's offset). Nothing writes them any
 * more; they are read as the start of every copy that has no checkpoint of its own.
 */
export interface ShardCheckpoints {
  /** node → group → offset: each copy's own checkpoints. */
  readonly copies: ReadonlyMap<NodeId, ReadonlyMap<string, number>>;
  /** group → offset: the shard's checkpoints from before they were per copy. */
  readonly shared: ReadonlyMap<string, number>;
  /** node → group → token: the token of each copy's checkpoint that has one. */
  readonly tokens?: ReadonlyMap<NodeId, ReadonlyMap<string, FencingToken>>;
}

/** A copy's stored checkpoint as the fencing rule compares it. */
export interface StoredCheckpoint {
  readonly offset: number;
  /** Undefined for a checkpoint written before tokens existed. */
  readonly token: FencingToken | undefined;
}

/**
 * Whether a checkpoint write of `(token, offset)` may replace `stored`: no stored checkpoint, or one
 * without a token, or `(token, offset) >= (stored.token, stored.offset)` lexicographically. The rule
 * every MetaStore applies atomically with the write.
 */
export function checkpointAdmits(stored: StoredCheckpoint | undefined, offset: number, token: FencingToken): boolean {
  if (stored === undefined || stored.token === undefined) return true;
  const c = compareTokens(token, stored.token);
  return c > 0 || (c === 0 && offset >= stored.offset);
}

/**
 * A checkpoint write refused by its fencing token: the stored checkpoint has a newer token (a newer
 * owner wrote it, or this node acts on an older map) or the same token and a higher offset (a late
 * write of an earlier incarnation). Nothing was changed; not retriable.
 */
export class CheckpointRefusedError extends ShardherdError {
  constructor(
    dataset: string,
    shard: number,
    node: string,
    readonly group: string,
    readonly offset: number,
    readonly token: FencingToken,
    readonly stored: StoredCheckpoint,
  ) {
    super(
      'CHECKPOINT_REFUSED',
      `checkpoint ${offset} of ${dataset} shard ${shard} on ${node} (group ${group}) with token ${tokenText(token)} refused: the stored one is ${stored.offset} with token ${stored.token ? tokenText(stored.token) : 'none'}`,
      { dataset, shard, node },
    );
  }
}

/** A stored checkpoint this version cannot read (a malformed token or offset): the shard stops with this reason. */
export class MalformedCheckpointError extends ShardherdError {
  constructor(dataset: string, shard: number, detail: string) {
    super('MALFORMED_CHECKPOINT', `the stored checkpoint of ${dataset} shard ${shard} is malformed: ${detail}`, { dataset, shard });
  }
}

/** A shard with no checkpoint at all. */
export const NO_CHECKPOINTS: ShardCheckpoints = Object.freeze({ copies: new Map(), shared: new Map() });

/** A write from a singleton whose epoch is no longer the lease's: that singleton must stop at once. */
export class FencedError extends ShardherdError {
  constructor(
    readonly writeEpoch: number,
    readonly currentEpoch: number,
  ) {
    super('FENCED', `write at epoch ${writeEpoch} refused: epoch ${currentEpoch} holds the singleton lease`);
  }
}

/**
 * A write the store refused to send because it is larger than the store's `maxMutationBytes`: the
 * database would reject it (Cassandra refuses a mutation above half its commit log segment), so it
 * can never succeed and retrying it would only loop. Not retriable.
 */
export class MetaStoreWriteTooLargeError extends ShardherdError {
  constructor(
    /** What the write is, e.g. `map part 3 (shards 768..1023) of metrics`. */
    readonly row: string,
    /** The encoded size of the write's values. */
    readonly bytes: number,
    readonly maxBytes: number,
    dataset?: string,
  ) {
    super(
      'METASTORE_WRITE_TOO_LARGE',
      `MetaStore write of ${row} is ${bytes} bytes, above maxMutationBytes ${maxBytes}: it cannot succeed and is not retried`,
      dataset === undefined ? {} : { dataset },
    );
  }
}

/** The store could not be reached or failed; the write may be retried. */
export class MetaStoreUnavailableError extends ShardherdError {
  constructor(operation: string, cause?: unknown) {
    super(
      'METASTORE_UNAVAILABLE',
      `MetaStore ${operation} failed${cause instanceof Error ? `: ${cause.message}` : ''}`,
      cause === undefined ? {} : { cause },
      true,
    );
  }
}
