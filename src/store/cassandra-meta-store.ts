/**
 * The MetaStore on Cassandra: same semantics as `MemoryMetaStore` (see `meta-state.ts`), shared
 * by every node of a shardherd cluster.
 *
 * Why the design is what it is:
 *
 * - Fencing needs the lease's epoch and the write it guards in one atomic step. Cassandra's
 *   lightweight transactions (Paxos) are atomic within ONE partition only, so everything the
 *   singleton writes (datasets, shard maps, cooldowns, subscriptions) lives in one partition per
 *   shardherd cluster of `singleton_state`, and the lease (`epoch`, `node`, `incarnation`) is that
 *   partition's STATIC columns. Every singleton write is then
 *   `UPDATE ... WHERE cluster = ? AND <row> IF epoch = ?`: Cassandra itself refuses a write whose
 *   epoch is not the lease's (the rule of `checkEpoch`), and a refused write returns the current
 *   epoch, which `FencedError` reports.
 * - `takeLease` is the same kind of compare-and-set on the static epoch. "Never a lease" is a
 *   missing static column, i.e. null, so the first lease is `IF epoch = null`; epochs start at 1.
 * - Because the lease and the data share one Paxos partition, taking the lease also completes
 *   (or supersedes) any write of the previous singleton still in flight: once a new singleton holds
 *   the lease, nothing of the old epoch can land any more, and plain LOCAL_QUORUM reads see every
 *   write that did.
 * - A shard map is kept only if its `(epoch, version)` is newer: a `map_stamp` tuple column and
 *   `IF epoch = ? AND map_stamp < ?` (or `map_stamp = null` when the dataset has no map yet).
 * - Checkpoints are written by shard owners, not the singleton: a plain table, one partition per
 *   shard, the latest write winning.
 * - Several shardherd clusters may share a keyspace: every row is keyed by the cluster's name.
 *
 * Values are JSON text, checked on the way back (`validateDatasetConfig`, `parseShardMapSnapshot`)
 * and tagged with a `format`, so a row this version cannot read is refused with `MetaStoreRowError`
 * instead of being trusted.
 *
 * Errors: a Cassandra that cannot be reached, times out or lacks replicas surfaces as the retriable
 * `MetaStoreUnavailableError` (the actors retry it); anything else propagates. A write whose
 * answer is lost may have applied: retrying any write is safe (the same value again, or a map
 * that is not newer and is ignored), and `takeLease` learns its outcome with a SERIAL read.
 *
 * Gotchas: the keyspace's replication is set only when `connect` creates it. The whole singleton
 * state is one partition, so very large shard maps (tens of thousands of shards) make it heavy.
 * On a multi-node Cassandra 5.0, let one process create the schema before starting many at once
 * (concurrent `CREATE TABLE IF NOT EXISTS` on different coordinators can disagree).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { Client, errors, policies, types } from 'cassandra-driver';
import type { Logger } from 'pino';
import { z } from 'zod';
import { validateDatasetConfig, type DatasetConfig } from '../core/dataset-config.js';
import { parseDatasetRef, parseIncarnation, parseNodeId, parseSubscriberId, type DatasetRef, type Epoch, type Incarnation, type NodeId } from '../core/ids.js';
import { compareStamps, parseShardMapSnapshot, type ShardMapSnapshot } from '../core/shard-map-snapshot.js';
import { NO_NODE_OPERATIONS, type AppliedRequest, type NodeOperations } from '../core/shard-manager/protocol.js';
import { appliedRequestsSchema, nodeOperationsSchema } from './node-operations-schema.js';
import {
  CASSANDRA_META_FORMAT,
  CQL_KEYSPACE_NAME,
  DEFAULT_REPLICATION,
  metaStoreCql,
  NO_DATASET,
  NO_SHARD,
  schemaCql,
  type KeyspaceReplication,
  type MetaStoreCql,
  type RecordKind,
} from './cassandra-schema.js';
import { FencedError, MetaStoreUnavailableError, type Lease, type MetaStore, type StoredCooldown, type StoredSubscriptions } from './meta-store.js';

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
}

const ms = (key: string) => z.number({ error: `${key} must be a number of milliseconds` }).int().min(1);
const replicationFactor = z.number().int().min(1);
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

// LWTs: Paxos among the local data center's replicas, committed at LOCAL_QUORUM. Not idempotent
// for the driver (it must not retry them blindly); the actors retry on MetaStoreUnavailableError.
const LWT = { prepare: true, consistency: types.consistencies.localQuorum, serialConsistency: types.consistencies.localSerial, isIdempotent: false };
const READ = { prepare: true, consistency: types.consistencies.localQuorum, isIdempotent: true };
/** Completes any Paxos round in flight on the partition before answering: settles an unknown LWT outcome. */
const SERIAL_READ = { prepare: true, consistency: types.consistencies.localSerial, isIdempotent: true };
/** A checkpoint write sets one value: the driver may retry it. */
const PLAIN_WRITE = { prepare: true, consistency: types.consistencies.localQuorum, isIdempotent: true };
/** Rows per page when listing a kind: shard maps can be large values. */
const ROWS_PER_PAGE = 100;
/** A shard map write that keeps losing races to other writers gives up (retriably) after this many tries. */
const MAX_SHARD_MAP_ATTEMPTS = 8;
const CONNECT_RETRY_INITIAL_MS = 200;
const CONNECT_RETRY_MAX_MS = 5_000;
/** The driver's own limit for opening one connection (its default). */
const DRIVER_CONNECT_TIMEOUT_MS = 5_000;
/** The least time worth a connection attempt; `connect` gives up when less than this is left. */
const MIN_CONNECT_ATTEMPT_MS = 100;

const UNAVAILABLE_RESPONSES = new Set<number>([
  types.responseErrorCodes.unavailableException,
  types.responseErrorCodes.overloaded,
  types.responseErrorCodes.isBootstrapping,
  types.responseErrorCodes.writeTimeout,
  types.responseErrorCodes.readTimeout,
]);

/** Driver errors that mean "cannot reach / timed out / not enough replicas": retrying may help. */
function isUnavailable(e: unknown): boolean {
  return (
    e instanceof errors.NoHostAvailableError ||
    e instanceof errors.OperationTimedOutError ||
    e instanceof errors.BusyConnectionError ||
    (e instanceof errors.ResponseError && UNAVAILABLE_RESPONSES.has(e.code)) ||
    // The connection died under a request the driver would not retry itself (a lightweight
    // transaction is not idempotent): Cassandra went away (killed, restarting), try again later.
    (e instanceof errors.DriverError && (e as { isSocketError?: boolean }).isSocketError === true)
  );
}

function firstLine(text: string): string {
  return text.split('\n', 1)[0] ?? text;
}

/**
 * A one-line cause for logs and `MetaStoreUnavailableError` (the driver's messages embed stack
 * traces), naming each host that failed; the driver's error stays reachable as its `cause`.
 */
function summarize(e: unknown): Error {
  if (e instanceof errors.NoHostAvailableError) {
    const inner = Object.entries((e.innerErrors ?? {}) as Record<string, unknown>).map(
      ([host, err]) => `${host}: ${firstLine(err instanceof Error ? err.message : String(err))}`,
    );
    return new Error(`no Cassandra host answered (${inner.join('; ') || firstLine(e.message)})`, { cause: e });
  }
  return new Error(firstLine(e instanceof Error ? e.message : String(e)), { cause: e });
}

/** Runs a request; driver errors meaning "unavailable" become `MetaStoreUnavailableError(operation)`. */
async function request<T>(operation: string, run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (e) {
    throw isUnavailable(e) ? new MetaStoreUnavailableError(operation, summarize(e)) : e;
  }
}

/** A bigint column as a number (null stays null); epochs, versions and offsets are safe integers. */
function safeNumber(value: unknown): number | null {
  if (value === null || value === undefined) return null;
  return types.Long.isLong(value) ? (value as types.Long).toNumber() : Number(value);
}

/** The lease's epoch in the row a refused LWT returns; 0 when there has never been a lease. */
function currentEpoch(result: types.ResultSet): number {
  return safeNumber(result.first()?.get('epoch')) ?? 0;
}

/**
 * `checkEpoch`'s rule, decided by Cassandra: a conditional write refused because its epoch is not
 * the lease's (or there is no lease) throws `FencedError` with the lease's current epoch.
 */
function refuseIfFenced(result: types.ResultSet, writeEpoch: number): void {
  if (result.wasApplied()) return;
  const current = currentEpoch(result);
  if (current === 0 || current !== writeEpoch) throw new FencedError(writeEpoch, current);
}

/** The `(epoch, version)` of the stored map in a refused map write's row; undefined when there is none. */
function storedStamp(result: types.ResultSet): { epoch: number; version: number } | undefined {
  const stamp = result.first()?.get('map_stamp') as types.Tuple | null | undefined;
  if (!stamp) return undefined;
  return { epoch: safeNumber(stamp.get(0)) ?? 0, version: safeNumber(stamp.get(1)) ?? 0 };
}

const sameLease = (a: Lease, b: Lease): boolean => a.epoch === b.epoch && a.node === b.node && a.incarnation === b.incarnation;

type Parsed<T> = { ok: true; value: T } | { ok: false; message: string };

const subscriberSchema = z.string().refine((s) => parseSubscriberId(s).ok, 'malformed subscriber id');
const subscriptionsSchema = z.strictObject({
  subscriptions: z.array(z.strictObject({ dataset: z.string().refine((s) => parseDatasetRef(s).ok, 'malformed dataset name'), subscribers: z.array(subscriberSchema) })),
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
  shard_map: (raw: unknown): Parsed<ShardMapSnapshot> => {
    const r = parseShardMapSnapshot(raw);
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
  return { epoch: epoch as Epoch, node: node.value, incarnation: incarnation.value };
}

/**
 * Connects, creating the keyspace and tables if needed. While Cassandra cannot be reached it
 * retries with backoff (logging each failure) for `connectTimeoutMs`, then throws
 * `MetaStoreUnavailableError` naming the contact points. Other errors are thrown at once.
 */
async function connectClient(settings: Settings, log: Logger): Promise<Client> {
  const started = performance.now();
  const timeLeft = () => settings.connectTimeoutMs - (performance.now() - started);
  const where = settings.contactPoints.join(', ');
  let delay = CONNECT_RETRY_INITIAL_MS;
  for (let attempt = 1; ; attempt++) {
    const client = newClient(settings, Math.max(1, Math.min(DRIVER_CONNECT_TIMEOUT_MS, timeLeft())), log);
    try {
      await client.connect();
      await createSchema(client, settings);
      log.info({ contactPoints: settings.contactPoints, attempt }, 'connected to Cassandra; schema ready');
      return client;
    } catch (e) {
      await client.shutdown().catch(() => undefined);
      if (!isUnavailable(e)) throw e;
      // Stop rather than start an attempt too short to connect: its "Connection timeout" would
      // hide the real reason (e.g. ECONNREFUSED) in the error.
      const left = timeLeft();
      if (left < MIN_CONNECT_ATTEMPT_MS) {
        const spent = Math.round(performance.now() - started);
        throw new MetaStoreUnavailableError(`connect to Cassandra at ${where} (gave up after ${attempt} attempts in ${spent} ms)`, summarize(e));
      }
      const retryInMs = Math.min(delay, left - MIN_CONNECT_ATTEMPT_MS);
      log.warn({ err: summarize(e), attempt, retryInMs, contactPoints: settings.contactPoints }, `cannot reach Cassandra at ${where}; retrying`);
      await sleep(retryInMs);
      delay = Math.min(delay * 2, CONNECT_RETRY_MAX_MS);
    }
  }
}

/** Reconnection to a Cassandra host that went down: 250 ms, doubling, at most every 2 s. */
const RECONNECT_BASE_MS = 250;
const RECONNECT_MAX_MS = 2_000;

function newClient(settings: Settings, connectTimeoutMs: number, log: Logger): Client {
  const client = new Client({
    contactPoints: [...settings.contactPoints],
    localDataCenter: settings.localDataCenter,
    socketOptions: { connectTimeout: connectTimeoutMs, readTimeout: settings.requestTimeoutMs },
    // The driver's default waits up to 10 minutes between reconnections to a host it saw go down;
    // a coordinator must find Cassandra within seconds of its return (measured: 16 s after a restart).
    policies: { reconnection: new policies.reconnection.ExponentialReconnectionPolicy(RECONNECT_BASE_MS, RECONNECT_MAX_MS, true) },
  });
  const driverLog = log.child({ component: 'cassandra-driver' });
  client.on('log', (level: string, className: string, message: string) => {
    if (level === 'error' || level === 'warning') driverLog.warn({ className }, message);
    else if (level === 'info') driverLog.debug({ className }, message);
    else driverLog.trace({ className }, message);
  });
  return client;
}

// Schema changes have no bind values: preparing them would only add a round trip.
async function createSchema(client: Client, settings: Settings): Promise<void> {
  for (const statement of schemaCql(settings.keyspace, settings.replication)) {
    await client.execute(statement, [], { consistency: types.consistencies.localQuorum });
  }
}

/** The MetaStore on Cassandra. Create it with `CassandraMetaStore.connect`; `close` it when done. */
export class CassandraMetaStore implements MetaStore {
  private readonly cql: MetaStoreCql;
  private readonly cluster: string;
  /** Names the partition in `MetaStoreRowError`. */
  private readonly location: string;

  private constructor(
    private readonly client: Client,
    settings: Settings,
    private readonly log: Logger,
  ) {
    this.cql = metaStoreCql(settings.keyspace);
    this.cluster = settings.cluster;
    this.location = `${settings.keyspace}.singleton_state of cluster ${JSON.stringify(settings.cluster)}`;
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

  readLease(): Promise<Lease | undefined> {
    return this.readLeaseWith('readLease', READ);
  }

  async takeLease(node: NodeId, incarnation: Incarnation, expectedEpoch: number): Promise<Lease | undefined> {
    if (!Number.isSafeInteger(expectedEpoch) || expectedEpoch < 0) return undefined; // no stored epoch equals it
    const wanted: Lease = { epoch: (expectedEpoch + 1) as Epoch, node, incarnation };
    // "No lease yet" is a missing static column: compared with null, not with 0.
    const params = [wanted.epoch, node, incarnation, this.cluster, expectedEpoch === 0 ? null : expectedEpoch];
    try {
      const result = await this.client.execute(this.cql.takeLease, params, LWT);
      return result.wasApplied() ? { ...wanted } : undefined;
    } catch (e) {
      if (!isUnavailable(e)) throw e;
      return this.learnLeaseOutcome(wanted, expectedEpoch, e);
    }
  }

  async putDataset(config: DatasetConfig, epoch: Epoch): Promise<void> {
    await this.putRecord('putDataset', 'dataset', config.ref, NO_SHARD, config, epoch);
  }

  /**
   * One conditional batch on the singleton's partition: the dataset, its shard map and all its
   * cooldowns go together or not at all (a re-created dataset starts afresh; see `meta-state.ts`).
   * Checkpoints stay.
   */
  async deleteDataset(dataset: DatasetRef, epoch: Epoch): Promise<void> {
    const result = await request('deleteDataset', () =>
      this.client.batch(
        [
          { query: this.cql.deleteRecordIfEpoch, params: [...this.rowKey('dataset', dataset, NO_SHARD), epoch] },
          { query: this.cql.deleteRecord, params: this.rowKey('shard_map', dataset, NO_SHARD) },
          { query: this.cql.deleteDatasetRows, params: [this.cluster, 'cooldown', dataset] },
        ],
        LWT,
      ),
    );
    refuseIfFenced(result, epoch);
  }

  async datasets(): Promise<DatasetConfig[]> {
    const rows = await this.records('datasets', 'dataset');
    return rows.map((row) => this.decode(row, 'dataset', parseValue.dataset));
  }

  /**
   * Fenced by the snapshot's epoch; replaces the stored map only if it is older, in the same LWT,
   * so two writers cannot interleave a read and a write. A map that is not newer is ignored.
   */
  async putShardMap(snapshot: ShardMapSnapshot): Promise<void> {
    const key = this.rowKey('shard_map', snapshot.dataset, NO_SHARD);
    const value = JSON.stringify(snapshot);
    const stamp = new types.Tuple(snapshot.epoch, snapshot.version);
    let noMapStored = false; // the usual case is replacing a map; `map_stamp < ?` never holds against null
    for (let attempt = 1; attempt <= MAX_SHARD_MAP_ATTEMPTS; attempt++) {
      const result = noMapStored
        ? await this.lwt('putShardMap', this.cql.putFirstShardMap, [CASSANDRA_META_FORMAT, value, stamp, ...key, snapshot.epoch])
        : await this.lwt('putShardMap', this.cql.putNewerShardMap, [CASSANDRA_META_FORMAT, value, stamp, ...key, snapshot.epoch, stamp]);
      refuseIfFenced(result, snapshot.epoch);
      if (result.wasApplied()) return;
      const stored = storedStamp(result);
      if (stored && compareStamps(snapshot, stored) <= 0) return; // not newer: ignored
      noMapStored = stored === undefined; // the stored map appeared or vanished meanwhile: try the other condition
    }
    throw new MetaStoreUnavailableError('putShardMap', new Error(`the stored map of ${snapshot.dataset} kept changing under ${MAX_SHARD_MAP_ATTEMPTS} attempts`));
  }

  async shardMaps(): Promise<ShardMapSnapshot[]> {
    const rows = await this.records('shardMaps', 'shard_map');
    return rows.map((row) => this.decode(row, 'shard_map', parseValue.shard_map));
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

  /** Not fenced (shard owners write it); the latest write wins, even if its offset is lower. */
  async writeCheckpoint(dataset: DatasetRef, shard: number, group: string, offset: number): Promise<void> {
    if (!Number.isSafeInteger(offset)) throw new RangeError(`a checkpoint offset must be a safe integer, got ${offset}`);
    await request('writeCheckpoint', () =>
      this.client.execute(this.cql.writeCheckpoint, [types.Long.fromNumber(offset), this.cluster, dataset, shard, group], PLAIN_WRITE),
    );
  }

  async readCheckpoints(dataset: DatasetRef, shard: number): Promise<ReadonlyMap<string, number>> {
    const rows = await request('readCheckpoints', async () => {
      const result = await this.client.execute(this.cql.readCheckpoints, [this.cluster, dataset, shard], READ);
      return result.rows;
    });
    return new Map(rows.map((row) => [row.get('group_name') as string, safeNumber(row.get('last_offset')) ?? 0]));
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

  private async readLeaseWith(operation: string, options: typeof READ | typeof SERIAL_READ): Promise<Lease | undefined> {
    const result = await request(operation, () => this.client.execute(this.cql.readLease, [this.cluster], options));
    return leaseFrom(result.first() ?? undefined, this.location);
  }

  /** The primary key of one row of the singleton's partition, as bind values. */
  private rowKey(kind: RecordKind, dataset: string, shard: number): [string, RecordKind, string, number] {
    return [this.cluster, kind, dataset, shard];
  }

  private lwt(operation: string, query: string, params: unknown[]): Promise<types.ResultSet> {
    return request(operation, () => this.client.execute(query, params, LWT));
  }

  /** A singleton write: replaces one row's value if `epoch` is the lease's, else `FencedError`. */
  private async putRecord(operation: string, kind: RecordKind, dataset: string, shard: number, value: unknown, epoch: Epoch): Promise<void> {
    const result = await this.lwt(operation, this.cql.putRecord, [CASSANDRA_META_FORMAT, JSON.stringify(value), ...this.rowKey(kind, dataset, shard), epoch]);
    refuseIfFenced(result, epoch);
  }

  /** Every row of one kind, all pages. */
  private records(operation: string, kind: RecordKind): Promise<types.Row[]> {
    return request(operation, async () => {
      const rows: types.Row[] = [];
      const result = await this.client.execute(this.cql.recordsOfKind, [this.cluster, kind], { ...READ, fetchSize: ROWS_PER_PAGE });
      for await (const row of result) rows.push(row);
      return rows;
    });
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
