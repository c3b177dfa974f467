// Connecting the Cassandra MetaStore's client: retries while Cassandra cannot be reached, and
// creates the keyspace and tables (idempotently) before the store is used.
import { setTimeout as sleep } from 'node:timers/promises';
import { Client, policies, types } from 'cassandra-driver';
import type { Logger } from 'pino';
import { schemaCql, type KeyspaceReplication } from './cassandra-schema.js';
import { addMissingColumns } from './cassandra-migrations.js';
import { isUnavailable, summarize } from './cassandra-session.js';
import { MetaStoreUnavailableError } from './meta-store.js';

/** The validated options `connectClient` uses. */
export interface ConnectSettings {
  readonly contactPoints: readonly string[];
  readonly localDataCenter: string;
  readonly keyspace: string;
  readonly replication: KeyspaceReplication;
  readonly requestTimeoutMs: number;
  readonly connectTimeoutMs: number;
}

const CONNECT_RETRY_INITIAL_MS = 200;
const CONNECT_RETRY_MAX_MS = 5_000;
/** The driver's own limit for opening one connection (its default). */
const DRIVER_CONNECT_TIMEOUT_MS = 5_000;
/** The least time worth a connection attempt; `connect` gives up when less than this is left. */
const MIN_CONNECT_ATTEMPT_MS = 100;

/**
 * Connects, creating the keyspace and tables if needed. While Cassandra cannot be reached it
 * retries with backoff (logging each failure) for `connectTimeoutMs`, then throws
 * `MetaStoreUnavailableError` naming the contact points. Other errors are thrown at once.
 */
export async function connectClient(settings: ConnectSettings, log: Logger): Promise<Client> {
  const started = performance.now();
  const timeLeft = () => settings.connectTimeoutMs - (performance.now() - started);
  const where = settings.contactPoints.join(', ');
  let delay = CONNECT_RETRY_INITIAL_MS;
  for (let attempt = 1; ; attempt++) {
    const client = newClient(settings, Math.max(1, Math.min(DRIVER_CONNECT_TIMEOUT_MS, timeLeft())), log);
    try {
      await client.connect();
      await createSchema(client, settings);
      const added = await addMissingColumns(client, settings.keyspace);
      if (added.length > 0) log.info({ event: 'metastore.schema-migrated', added }, 'columns of this version added to the tables of an older one');
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

function newClient(settings: ConnectSettings, connectTimeoutMs: number, log: Logger): Client {
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
async function createSchema(client: Client, settings: ConnectSettings): Promise<void> {
  for (const statement of schemaCql(settings.keyspace, settings.replication)) {
    await client.execute(statement, [], { consistency: types.consistencies.localQuorum });
  }
}
