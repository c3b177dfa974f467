/**
 * The MetaStore on Cassandra: same semantics as `MemoryMetaStore` (see `meta-state.ts`), shared
 * by every node of a shardherd cluster.
 *
 * Why the design is what it is:
 *
 * - Fencing needs the lease's epoch and the write it guards in one atomic step. Cassandra's
 *   lightweight transactions (Paxos) are atomic within ONE partition only, so everything the
 *   singleton writes (datasets, shard map headers, cooldowns, subscriptions) lives in one partition
 *   per shardherd cluster of `singleton_state`, and the lease (`epoch`, `node`, `incarnation`) is
 *   that partition's STATIC columns. Every singleton write is then
 *   `UPDATE ... WHERE cluster = ? AND <row> IF epoch = ?`: Cassandra itself refuses a write whose
 *   epoch is not the lease's (the rule of `checkEpoch`), and a refused write returns the current
 *   epoch, which `FencedError` reports.
 * - `takeLease` is the same kind of compare-and-set on the static epoch. "Never a lease" is a
 *   missing static column, i.e. null, so the first lease is `IF epoch = null`; epochs start at 1.
 * - Because the lease and the data share one Paxos partition, taking the lease also completes
 *   (or supersedes) any write of the previous singleton still in flight: once a new singleton holds
 *   the lease, nothing of the old epoch can land any more, and plain LOCAL_QUORUM reads see every
 *   write that did.
 * - A shard map is too large for one row: 65 536 shards × 3 copies is tens of MB as JSON, and
 *   Cassandra refuses a mutation above half a commit log segment (a Paxos proposal that large
 *   failed as a write timeout, retried for ever). So a map is a small HEADER row in the singleton's
 *   partition (`kind = 'shard_map'`, format 2), which keeps the lightweight transaction, and PARTS
 *   in `map_parts` (partition `(cluster, dataset)`, clustering `(part, epoch, version)`), each a
 *   fixed range of shards in the compact encoding. The header names, per part, the stamp of the row
 *   holding it; formats and sizes are in `map-parts.ts`, the I/O in `cassandra-shard-maps.ts`.
 * - Part rows are immutable: written once (plain LOCAL_QUORUM writes, safe to repeat), keyed by the
 *   `(epoch, version)` of the map they were written for, and always BEFORE the header that refers
 *   to them. A reader that sees a header at LOCAL_QUORUM therefore finds its parts, and a map is
 *   only ever seen whole: a header never points at half-written parts.
 * - Only the parts that changed are written; the others are reused from the stored header. So the
 *   header's write is conditioned on the lease's epoch AND on the stored header being the one the
 *   reused parts belong to (`map_stamp = <known stamp> AND map_stamp < <new stamp>`, or
 *   `map_stamp = null` for a first map): a writer whose memory is stale cannot publish a header
 *   pointing at parts that were replaced. When the stored header is another one, a newer or equal
 *   map is kept (the snapshot is ignored, as before); an older one is read and written against.
 * - Part rows a header no longer refers to are deleted after it was written, by ranges of stamps
 *   per part (best effort; see `garbageOf`); `deleteDataset` removes the dataset's parts.
 * - A map written by an older version as one whole row (format 1) is still read; the first write
 *   of that dataset replaces it with a header and parts (conditioned on its `map_stamp` as usual).
 * - A map that cannot be read whole (a part missing or malformed, a header this version cannot
 *   read) is left out of `shardMaps()` and logged as `metastore.map-unreadable`: the singleton
 *   recovers it from the nodes' copies, while throwing would stop every singleton for good.
 * - Checkpoints are written by shard owners, not the singleton: a table of their own
 *   (`copy_checkpoints`), one partition per shard, a row per copy (node id) and group, each write a
 *   lightweight transaction on the row's fencing token and offset (`cassandra-checkpoints.ts`);
 *   `readCheckpointsOf` reads up to 100 shards per request. The per-shard `checkpoints` table of
 *   older versions is kept and read alongside (its rows start every copy without its own), never
 *   written: the schema only grows, so older and newer nodes may share a keyspace while upgrading.
 * - Several shardherd clusters may share a keyspace: every row is keyed by the cluster's name.
 * - At most `maxConcurrentRequests` requests are in flight; the others wait in order. Thousands of
 *   shards starting at once used to put more than the driver's 2048 requests on one connection.
 * - No statement is sent whose values exceed `maxMutationBytes`: it fails at once with the
 *   non-retriable `MetaStoreWriteTooLargeError` instead of being retried for ever.
 *
 * Values are JSON text, checked on the way back (`validateDatasetConfig`, the map codec) and
 * tagged with a `format`, so a row this version cannot read is refused with `MetaStoreRowError`
 * (or, for a map, left out) instead of being trusted.
 *
 * Errors: a Cassandra that cannot be reached, times out or lacks replicas surfaces as the retriable
 * `MetaStoreUnavailableError` (the actors retry it); anything else propagates. A write whose
 * answer is lost may have applied: retrying any write is safe (the same value again, or a map
 * that is not newer and is ignored), and `takeLease` learns its outcome with a SERIAL read.
 *
 * Gotchas: the keyspace's replication is set only when `connect` creates it. On a multi-node
 * Cassandra 5.0, let one process create the schema before starting many at once (concurrent
 * `CREATE TABLE IF NOT EXISTS` on different coordinators can disagree). Everything is read and
 * written at LOCAL_QUORUM / LOCAL_SERIAL: a singleton in another data center may briefly see a
 * header whose parts have not reached it, and leaves that map out until they have. One store
 * instance per process: what it remembers of the stored maps is its own (a second instance
 * writing the same maps is safe, only slower).
 */
import { types, type Client } from 'cassandra-driver';
import type { Logger } from 'pino';
import { z } from 'zod';
import { validateDatasetConfig, type DatasetConfig } from '../core/dataset-config.js';
import { parseDatasetRef, parseIncarnation, parseNodeId, parseSubscriberId, type DatasetRef, type Epoch, type Incarnation, type NodeId } from '../core/ids.js';
import type { ShardMapSnapshot } from '../core/shard-map-snapshot.js';
import { NO_NODE_OPERATIONS, type AppliedRequest, type NodeOperations } from '../core/shard-manager/protocol.js';
import { connectClient } from './cassandra-connect.js';
import { appliedRequestsSchema, nodeOperationsSchema } from './node-operations-schema.js';
import {
  CASSANDRA_META_FORMAT,
  CQL_KEYSPACE_NAME,
  DEFAULT_REPLICATION,
  LEASE_ROW,
  metaStoreCql,
  NO_DATASET,
  NO_SHARD,
  type KeyspaceReplication,
  type MetaStoreCql,
  type RecordKind,
} from './cassandra-schema.js';
import { CassandraSession, LWT, READ, refuseIfFenced, safeNumber, SERIAL_READ, settleAll, summarize, type ReadOptions } from './cassandra-session.js';
import { CassandraShardMaps } from './cassandra-shard-maps.js';
import { storedFence, writeFencedCheckpoint } from './cassandra-checkpoints.js';
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
import type { LimiterStats } from './request-limiter.js';

export type { KeyspaceReplication } from './cassandra-schema.js';

export interface CassandraMetaStoreOptions {
  /** `host:port` (or a host, port 9042) of one or more Cassandra nodes. */
  readonly contactPoints: readonly string[];
  /** The data center the store talks to (LOCAL_QUORUM, LOCAL_SERIAL); `datacenter1` on a default node. */
  readonly localDataCenter: string;
  /** The keyspace of shardherd's tables, created if missing: an unquoted CQL identifier (case-insensitive). */
  readonly keyspace: string;
  /** The shardherd cluster's name. Every row is keyed by it, so several clusters can share a keyspace. */
  readonly cluster: string;
  /** How the keyspace is replicated if `connect` creates it (default SimpleStrategy, replication factor 1). */
  readonly replication?: KeyspaceReplication;
  readonly log: Logger;
  /** How long a request waits for Cassandra before it fails with `MetaStoreUnavailableError` (default 12000). */
  readonly requestTimeoutMs?: number;
  /**
   * How long `connect` keeps trying, with backoff, before it throws `MetaStoreUnavailableError`
   * (default 30000). Schema requests within an attempt are bounded by `requestTimeoutMs`.
   */
  readonly connectTimeoutMs?: number;
  /**
   * The most requests this store has in flight at once (default 128, at most 2048, the driver's
   * limit per connection); the others wait in the order they were made.
   */
  readonly maxConcurrentRequests?: number;
  /**
   * The largest write this store sends, in bytes of its values (default 1 MiB, at least 1 KiB).
   * A larger one fails at once with `MetaStoreWriteTooLargeError` (not retriable). Keep it below
   * half of Cassandra's commit log segment (`commitlog_segment_size`: 32 MiB by default), above
   * which Cassandra refuses the mutation itself.
   */
  readonly maxMutationBytes?: number;
}

const ms = (key: string) =>
  z
    .number({ error: `${key} must be a number of milliseconds` })
    .int()
    .min(1);
const replicationFactor = z.number().int().min(1);
/** The driver refuses more requests than this on one connection (`BusyConnectionError`). */
const DRIVER_REQUESTS_PER_CONNECTION = 2048;
const settingsSchema = z.strictObject({
  contactPoints: z.array(z.string().min(1)).min(1, 'needs at least one host:port'),
  localDataCenter: z.string().min(1),
  keyspace: z.string().regex(CQL_KEYSPACE_NAME, 'must be a CQL identifier: a letter, then up to 47 letters, digits or "_"'),
  cluster: z.string().min(1).max(256),
  replication: z
    .discriminatedUnion('class', [
      z.strictObject({ class: z.literal('SimpleStrategy'), replicationFactor }),
      z.strictObject({
        class: z.literal('NetworkTopologyStrategy'),
        dataCenters: z.record(z.string().min(1), replicationFactor).refine((dcs) => Object.keys(dcs).length > 0, 'needs at least one data center'),
      }),
    ])
    .default(DEFAULT_REPLICATION),
  requestTimeoutMs: ms('requestTimeoutMs').default(12_000),
  connectTimeoutMs: ms('connectTimeoutMs').default(30_000),
  maxConcurrentRequests: z
    .number()
    .int('must be a whole number')
    .min(1, 'must be at least 1')
    .max(DRIVER_REQUESTS_PER_CONNECTION, `must be at most ${DRIVER_REQUESTS_PER_CONNECTION} (the driver's limit per connection)`)
    .default(128),
  maxMutationBytes: z
    .number()
    .int('must be a whole number of bytes')
    .min(1024, 'must be at least 1024 bytes')
    .max(2 ** 31 - 1)
    .default(1024 * 1024),
});

type Settings = Readonly<z.output<typeof settingsSchema>>;

/** Validates the options (all but `log`), failing fast with a message that names the key. */
function validateSettings(options: CassandraMetaStoreOptions): Settings {
  const { log: _log, ...rest } = options;
  const r = settingsSchema.safeParse(rest);
  if (r.success) return r.data;
  const i = r.error.issues[0];
  const key = i?.code === 'unrecognized_keys' ? i.keys[0] : i?.path.join('.');
  throw new RangeError(`invalid CassandraMetaStore option ${key}: ${i?.message}`);
}

/** A row of `singleton_state` this version cannot read: a newer format or a damaged value. Not retriable. */
export class MetaStoreRowError extends Error {
  constructor(location: string, message: string) {
    super(`${location}: ${message}`);
    this.name = 'MetaStoreRowError';
  }
}

/** Rows per page when listing a kind. */
const ROWS_PER_PAGE = 100;
/** Shards per checkpoint request of `readCheckpointsOf` (an IN over that many partitions). */
const CHECKPOINT_SHARDS_PER_READ = 100;
/** Checkpoint rows per page: a shard has one per group, usually one. */
const CHECKPOINT_ROWS_PER_PAGE = 1000;

const sameLease = (a: Lease, b: Lease): boolean => a.epoch === b.epoch && a.node === b.node && a.incarnation === b.incarnation;

type Parsed<T> = { ok: true; value: T } | { ok: false; message: string };

const subscriberSchema = z.string().refine((s) => parseSubscriberId(s).ok, 'malformed subscriber id');
const subscriptionsSchema = z.strictObject({
  subscriptions: z.array(
    z.strictObject({ dataset: z.string().refine((s) => parseDatasetRef(s).ok, 'malformed dataset name'), subscribers: z.array(subscriberSchema) }),
  ),
  watchers: z.array(subscriberSchema),
});

function fromZod<T>(r: z.ZodSafeParseResult<unknown>): Parsed<T> {
  if (r.success) return { ok: true, value: r.data as T };
  const issue = r.error.issues[0];
  return { ok: false, message: `${issue?.path.map(String).join('.') || '(root)'} ${issue?.message ?? 'is invalid'}` };
}

/** How each kind's JSON value is checked on the way back (what the file store checks too). */
const parseValue = {
  dataset: (raw: unknown): Parsed<DatasetConfig> => {
    const r = validateDatasetConfig(raw);
    return r.ok ? r : { ok: false, message: r.error.message };
  },
  reassignedAt: (raw: unknown): Parsed<number> => fromZod(z.number().finite().safeParse(raw)),
  subscriptions: (raw: unknown): Parsed<StoredSubscriptions> => fromZod(subscriptionsSchema.safeParse(raw)),
  node_operations: (raw: unknown): Parsed<NodeOperations> => fromZod(nodeOperationsSchema.safeParse(raw)),
  applied_requests: (raw: unknown): Parsed<AppliedRequest[]> => fromZod(appliedRequestsSchema.safeParse(raw)),
};

function leaseFrom(row: types.Row | undefined, location: string): Lease | undefined {
  const epoch = safeNumber(row?.get('epoch'));
  if (!row || epoch === null) return undefined;
  const node = parseNodeId(row.get('node'));
  const incarnation = parseIncarnation(row.get('incarnation'));
  if (!node.ok) throw new MetaStoreRowError(location, `invalid lease: ${node.error.message}`);
  if (!incarnation.ok) throw new MetaStoreRowError(location, `invalid lease: ${incarnation.error.message}`);
  const lease = { epoch: epoch as Epoch, node: node.value, incarnation: incarnation.value };
  if (!row.keys().includes('value')) return lease;
  const renewal = Number(row.get('value'));
  if (!Number.isSafeInteger(renewal) || (renewal < 0 && renewal !== RELEASED_RENEWAL))
    throw new MetaStoreRowError(location, `invalid lease renewal: ${JSON.stringify(row.get('value'))}`);
  return { ...lease, renewal };
}

/** The MetaStore on Cassandra. Create it with `CassandraMetaStore.connect`; `close` it when done. */
export class CassandraMetaStore implements MetaStore {
  private readonly cql: MetaStoreCql;
  private readonly cluster: string;
  /** Names the partition in `MetaStoreRowError`. */
  private readonly location: string;
  /** Every statement goes through it: the concurrency bound and the size check. */
  private readonly session: CassandraSession;
  private readonly maps: CassandraShardMaps;

  private constructor(
    private readonly client: Client,
    settings: Settings,
    private readonly log: Logger,
  ) {
    this.cql = metaStoreCql(settings.keyspace);
    this.cluster = settings.cluster;
    this.location = `${settings.keyspace}.singleton_state of cluster ${JSON.stringify(settings.cluster)}`;
    this.session = new CassandraSession(client, settings.maxConcurrentRequests, settings.maxMutationBytes);
    this.maps = new CassandraShardMaps(this.session, this.cql, this.cluster, log);
  }

  /**
   * Validates the options (a `RangeError` names a bad key), connects (see `connectTimeoutMs`),
   * creates the keyspace and tables if they are missing (any number of processes may do so at
   * once), and checks the store answers.
   */
  static async connect(options: CassandraMetaStoreOptions): Promise<CassandraMetaStore> {
    const settings = validateSettings(options);
    const log = options.log.child({ component: 'cassandra-meta-store', keyspace: settings.keyspace, cluster: settings.cluster });
    const client = await connectClient(settings, log);
    const store = new CassandraMetaStore(client, settings, log);
    try {
      await store.readLease(); // a first answer from the new tables
    } catch (e) {
      await store.close();
      throw e;
    }
    return store;
  }

  /** Closes the connections; the store cannot be used afterwards. */
  async close(): Promise<void> {
    await this.client.shutdown();
  }

  /**
   * The requests in flight and waiting now, and the most ever in flight at once (never above
   * `maxConcurrentRequests`): for metrics and tests.
   */
  get requests(): LimiterStats {
    return this.session.stats;
  }

  readLease(): Promise<Lease | undefined> {
    return this.readLeaseWith('readLease', READ);
  }

  async takeLease(node: NodeId, incarnation: Incarnation, expectedEpoch: number, expectedRenewal?: number): Promise<Lease | undefined> {
    if (!Number.isSafeInteger(expectedEpoch) || expectedEpoch < 0) return undefined; // no stored epoch equals it
    const wanted: Lease = { epoch: (expectedEpoch + 1) as Epoch, node, incarnation, renewal: 0 };
    // "No lease yet" is a missing static column: compared with null, not with 0.
    const set = [wanted.epoch, node, incarnation, CASSANDRA_META_FORMAT, '0', ...this.leaseRowKey()];
    const [statement, params] =
      expectedRenewal === undefined
        ? [this.cql.takeLease, [...set, expectedEpoch === 0 ? null : expectedEpoch]]
        : [this.cql.takeRenewedLease, [...set, expectedEpoch, String(expectedRenewal)]];
    try {
      const result = await this.session.write('takeLease', 'singleton lease', statement, params, LWT);
      return result.wasApplied() ? { ...wanted } : undefined;
    } catch (e) {
      if (!(e instanceof MetaStoreUnavailableError)) throw e;
      return this.learnLeaseOutcome(wanted, expectedEpoch, e.cause ?? e);
    }
  }

  async renewLease(epoch: Epoch, renewal: number): Promise<boolean> {
    const params = [CASSANDRA_META_FORMAT, String(renewal), ...this.leaseRowKey(), epoch];
    const result = await this.session.write('renewLease', 'singleton lease', this.cql.renewLease, params, LWT);
    return result.wasApplied();
  }

  async putDataset(config: DatasetConfig, epoch: Epoch): Promise<void> {
    await this.putRecord('putDataset', 'dataset', config.ref, NO_SHARD, config, epoch);
  }

  /**
   * One conditional batch on the singleton's partition: the dataset, its shard map's header and all
   * its cooldowns go together or not at all (a re-created dataset starts afresh; see
   * `meta-state.ts`). Then the map's parts, in their own partition (a batch with a condition must
   * stay in one partition): if that fails, the call fails retriably and a retry deletes them.
   * Checkpoints stay.
   */
  async deleteDataset(dataset: DatasetRef, epoch: Epoch): Promise<void> {
    const result = await this.session.batch(
      'deleteDataset',
      `rows of ${dataset}`,
      [
        { query: this.cql.deleteRecordIfEpoch, params: [...this.rowKey('dataset', dataset, NO_SHARD), epoch] },
        { query: this.cql.deleteRecord, params: this.rowKey('shard_map', dataset, NO_SHARD) },
        { query: this.cql.deleteDatasetRows, params: [this.cluster, 'cooldown', dataset] },
      ],
      LWT,
      dataset,
    );
    refuseIfFenced(result, epoch);
    await this.maps.deleteParts(dataset);
  }

  async datasets(): Promise<DatasetConfig[]> {
    const rows = await this.records('datasets', 'dataset');
    return rows.map((row) => this.decode(row, 'dataset', parseValue.dataset));
  }

  /**
   * Fenced by the snapshot's epoch; replaces the stored map only if it is older. Writes the parts
   * that changed, then the header in one LWT (see the top of this file and `cassandra-shard-maps.ts`).
   * A map that is not newer is ignored.
   */
  putShardMap(snapshot: ShardMapSnapshot): Promise<void> {
    return this.maps.put(snapshot);
  }

  /** Every map that can be read whole; one that cannot is left out and logged (`metastore.map-unreadable`). */
  shardMaps(): Promise<ShardMapSnapshot[]> {
    return this.maps.readAll();
  }

  async putSubscriptions(subscriptions: StoredSubscriptions, epoch: Epoch): Promise<void> {
    await this.putRecord('putSubscriptions', 'subscriptions', NO_DATASET, NO_SHARD, subscriptions, epoch);
  }

  async putNodeOperations(operations: NodeOperations, epoch: Epoch): Promise<void> {
    await this.putRecord('putNodeOperations', 'node_operations', NO_DATASET, NO_SHARD, operations, epoch);
  }

  async nodeOperations(): Promise<NodeOperations> {
    const [row] = await this.records('nodeOperations', 'node_operations');
    return row ? this.decode(row, 'node_operations', parseValue.node_operations) : NO_NODE_OPERATIONS;
  }

  async putAppliedRequests(applied: readonly AppliedRequest[], epoch: Epoch): Promise<void> {
    await this.putRecord('putAppliedRequests', 'applied_requests', NO_DATASET, NO_SHARD, applied, epoch);
  }

  async appliedRequests(): Promise<AppliedRequest[]> {
    const [row] = await this.records('appliedRequests', 'applied_requests');
    return row ? this.decode(row, 'applied_requests', parseValue.applied_requests) : [];
  }

  async subscriptions(): Promise<StoredSubscriptions> {
    const [row] = await this.records('subscriptions', 'subscriptions');
    return row ? this.decode(row, 'subscriptions', parseValue.subscriptions) : { subscriptions: [], watchers: [] };
  }

  /** One cooldown per (dataset, shard): the latest write wins. */
  async putCooldown(cooldown: StoredCooldown, epoch: Epoch): Promise<void> {
    await this.putRecord('putCooldown', 'cooldown', cooldown.dataset, cooldown.shard, cooldown.reassignedAt, epoch);
  }

  async cooldowns(): Promise<StoredCooldown[]> {
    const rows = await this.records('cooldowns', 'cooldown');
    return rows.map((row) => ({
      dataset: row.get('dataset') as DatasetRef,
      shard: row.get('shard') as number,
      reassignedAt: this.decode(row, 'cooldown', parseValue.reassignedAt),
    }));
  }

  /** Per copy, fenced by token with a lightweight transaction on the copy's row (see `cassandra-checkpoints.ts`). */
  writeCheckpoint(dataset: DatasetRef, shard: number, node: NodeId, group: string, offset: number, token: FencingToken): Promise<void> {
    return writeFencedCheckpoint(this.session, this.cql, this.cluster, dataset, shard, node, group, offset, token);
  }

  async readCheckpoints(dataset: DatasetRef, shard: number): Promise<ShardCheckpoints> {
    return (await this.readCheckpointsOf(dataset, [shard])).get(shard)!;
  }

  /**
   * Up to 100 shards' partitions per request (an IN on the partition key), the requests within the
   * limit; each copy's checkpoints and the shared ones of an older store are read side by side.
   */
  async readCheckpointsOf(dataset: DatasetRef, shards: readonly number[]): Promise<ReadonlyMap<number, ShardCheckpoints>> {
    const result = new Map<number, { copies: Map<NodeId, Map<string, number>>; shared: Map<string, number>; tokens: Map<NodeId, Map<string, FencingToken>> }>();
    for (const shard of shards) {
      if (!Number.isInteger(shard) || shard < 0 || shard > 0x7fffffff) throw new RangeError(`a shard is a whole number >= 0, got ${shard}`);
      result.set(shard, { copies: new Map(), shared: new Map(), tokens: new Map() });
    }
    const unique = [...result.keys()];
    const slices: number[][] = [];
    for (let i = 0; i < unique.length; i += CHECKPOINT_SHARDS_PER_READ) slices.push(unique.slice(i, i + CHECKPOINT_SHARDS_PER_READ));
    const read = (operation: 'readCheckpointsOf' | 'readSharedCheckpointsOf', slice: number[]) =>
      this.session.readAll(operation, this.cql[operation], [this.cluster, dataset, slice], CHECKPOINT_ROWS_PER_PAGE);
    const [copyPages, sharedPages] = await Promise.all([
      settleAll(slices.map((slice) => read('readCheckpointsOf', slice))),
      settleAll(slices.map((slice) => read('readSharedCheckpointsOf', slice))),
    ]);
    for (const row of copyPages.flat()) {
      const shard = row.get('shard') as number;
      const cell = result.get(shard);
      if (!cell) continue;
      const node = row.get('node') as NodeId;
      const group = row.get('group_name') as string;
      let groups = cell.copies.get(node);
      if (!groups) cell.copies.set(node, (groups = new Map()));
      // `last_offset` is the offset (an older version's node writes only that during a rolling
      // upgrade); the fence gives the token. A malformed fence fails the read: the shard stops
      // with the reason instead of resuming from a checkpoint nobody can vouch for.
      groups.set(group, safeNumber(row.get('last_offset')) ?? 0);
      const fence = storedFence(row.get('fence'), dataset, shard);
      if (fence?.token) {
        let tokens = cell.tokens.get(node);
        if (!tokens) cell.tokens.set(node, (tokens = new Map()));
        tokens.set(group, fence.token);
      }
    }
    for (const row of sharedPages.flat())
      result.get(row.get('shard') as number)?.shared.set(row.get('group_name') as string, safeNumber(row.get('last_offset')) ?? 0);
    return result;
  }

  /**
   * The answer of a lease compare-and-set was lost (a timeout, or the connection went away): it
   * may have applied. A SERIAL read completes any Paxos round in flight and tells: ours → we hold
   * the lease; still the expected epoch → nothing happened, and the caller may simply retry;
   * anything else → another candidate won.
   */
  private async learnLeaseOutcome(wanted: Lease, expectedEpoch: number, cause: unknown): Promise<Lease | undefined> {
    this.log.warn({ err: summarize(cause), epoch: wanted.epoch }, 'taking the singleton lease had an unknown outcome; reading it back with SERIAL consistency');
    const current = await this.readLeaseWith('takeLease (reading back an unknown outcome)', SERIAL_READ);
    if (current && sameLease(current, wanted)) return current;
    if ((current?.epoch ?? 0) === expectedEpoch) throw new MetaStoreUnavailableError('takeLease', summarize(cause));
    return undefined;
  }

  private async readLeaseWith(operation: string, options: ReadOptions): Promise<Lease | undefined> {
    const withRenewal = await this.session.read(operation, this.cql.readLease, this.leaseRowKey(), options);
    const row = withRenewal.first() ?? undefined;
    if (row) return leaseFrom(row, this.location);
    // No lease row: never taken since renewals existed (or never taken at all).
    const statics = await this.session.read(operation, this.cql.readLeaseStatics, [this.cluster], options);
    return leaseFrom(statics.first() ?? undefined, this.location);
  }

  private leaseRowKey(): [string, string, string, number] {
    return [this.cluster, LEASE_ROW.kind, LEASE_ROW.dataset, LEASE_ROW.shard];
  }

  /** The primary key of one row of the singleton's partition, as bind values. */
  private rowKey(kind: RecordKind, dataset: string, shard: number): [string, RecordKind, string, number] {
    return [this.cluster, kind, dataset, shard];
  }

  /** A singleton write: replaces one row's value if `epoch` is the lease's, else `FencedError`. */
  private async putRecord(operation: string, kind: RecordKind, dataset: string, shard: number, value: unknown, epoch: Epoch): Promise<void> {
    const name = `${kind} row${dataset === NO_DATASET ? '' : ` of ${dataset}`}${shard === NO_SHARD ? '' : ` shard ${shard}`}`;
    const params = [CASSANDRA_META_FORMAT, JSON.stringify(value), ...this.rowKey(kind, dataset, shard), epoch];
    const result = await this.session.write(operation, name, this.cql.putRecord, params, LWT, dataset === NO_DATASET ? undefined : dataset);
    refuseIfFenced(result, epoch);
  }

  /** Every row of one kind, all pages. */
  private records(operation: string, kind: RecordKind): Promise<types.Row[]> {
    return this.session.readAll(operation, this.cql.recordsOfKind, [this.cluster, kind], ROWS_PER_PAGE);
  }

  /** A row's JSON value, checked; a row this version cannot read throws `MetaStoreRowError` naming it. */
  private decode<T>(row: types.Row, kind: RecordKind, parse: (raw: unknown) => Parsed<T>): T {
    const dataset = row.get('dataset') as string;
    const shard = row.get('shard') as number;
    const name = `${kind} row${dataset === NO_DATASET ? '' : ` of ${dataset}`}${shard === NO_SHARD ? '' : ` shard ${shard}`}`;
    const format = row.get('format') as number | null;
    if (format !== CASSANDRA_META_FORMAT) {
      throw new MetaStoreRowError(this.location, `${name}: unknown format ${JSON.stringify(format)}: this version reads format ${CASSANDRA_META_FORMAT}`);
    }
    let raw: unknown;
    try {
      raw = JSON.parse(row.get('value') as string);
    } catch (e) {
      throw new MetaStoreRowError(this.location, `${name}: not JSON: ${(e as Error).message}`);
    }
    const parsed = parse(raw);
    if (!parsed.ok) throw new MetaStoreRowError(this.location, `${name}: ${parsed.message}`);
    return parsed.value;
  }
}
