// How the Cassandra MetaStore sends statements: every one through a FIFO limiter (at most
// `maxConcurrentRequests` in flight), every write's values measured first (none larger than
// `maxMutationBytes` is sent), and the driver's "cannot reach / timed out" errors turned into the
// retriable `MetaStoreUnavailableError`. Also the small readers of driver values and LWT results.
import { Client, errors, types } from 'cassandra-driver';
import { FencedError, MetaStoreUnavailableError, MetaStoreWriteTooLargeError } from './meta-store.js';
import { FifoLimiter, type LimiterStats } from './request-limiter.js';

// LWTs: Paxos among the local data center's replicas, committed at LOCAL_QUORUM. Not idempotent
// for the driver (it must not retry them blindly); the actors retry on MetaStoreUnavailableError.
export const LWT = { prepare: true, consistency: types.consistencies.localQuorum, serialConsistency: types.consistencies.localSerial, isIdempotent: false };
export const READ = { prepare: true, consistency: types.consistencies.localQuorum, isIdempotent: true };
/** Completes any Paxos round in flight on the partition before answering: settles an unknown LWT outcome. */
export const SERIAL_READ = { prepare: true, consistency: types.consistencies.localSerial, isIdempotent: true };
/**
 * A write that sets the same values however often it is applied (a checkpoint, an immutable map
 * part, a delete): the driver may retry it. LOCAL_QUORUM like every read, so a reader sees it.
 */
export const PLAIN_WRITE = { prepare: true, consistency: types.consistencies.localQuorum, isIdempotent: true };

export type ReadOptions = typeof READ | typeof SERIAL_READ;
export type WriteOptions = typeof LWT | typeof PLAIN_WRITE;

const UNAVAILABLE_RESPONSES = new Set<number>([
  types.responseErrorCodes.unavailableException,
  types.responseErrorCodes.overloaded,
  types.responseErrorCodes.isBootstrapping,
  types.responseErrorCodes.writeTimeout,
  types.responseErrorCodes.readTimeout,
]);

/** Driver errors that mean "cannot reach / timed out / not enough replicas": retrying may help. */
export function isUnavailable(e: unknown): boolean {
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
export function summarize(e: unknown): Error {
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
export function safeNumber(value: unknown): number | null {
  if (value === null || value === undefined) return null;
  return types.Long.isLong(value) ? (value as types.Long).toNumber() : Number(value);
}

/**
 * `checkEpoch`'s rule, decided by Cassandra: a conditional write refused because its epoch is not
 * the lease's (or there is no lease) throws `FencedError` with the lease's current epoch.
 */
export function refuseIfFenced(result: types.ResultSet, writeEpoch: number): void {
  if (result.wasApplied()) return;
  const current = safeNumber(result.first()?.get('epoch')) ?? 0;
  if (current === 0 || current !== writeEpoch) throw new FencedError(writeEpoch, current);
}

/** The size of a bound value as Cassandra stores it, near enough (a few bytes of framing aside). */
function valueBytes(v: unknown): number {
  if (v === null || v === undefined) return 0;
  if (typeof v === 'string') return Buffer.byteLength(v, 'utf8');
  if (typeof v === 'number' || typeof v === 'bigint' || types.Long.isLong(v)) return 8;
  if (typeof v === 'boolean') return 1;
  if (Buffer.isBuffer(v)) return v.length;
  if (v instanceof types.Tuple) return v.elements.reduce((n: number, e: unknown) => n + valueBytes(e), 0);
  if (Array.isArray(v)) return v.reduce((n: number, e: unknown) => n + valueBytes(e), 0);
  return Buffer.byteLength(JSON.stringify(v) ?? '', 'utf8');
}

/** The encoded size of a statement's values: what its mutation is made of. */
export function valuesBytes(params: readonly unknown[]): number {
  return params.reduce((n: number, v) => n + valueBytes(v), 0);
}

export interface Statement {
  readonly query: string;
  readonly params: unknown[];
}

/** The client of one store with its limiter and its size limit; every statement goes through here. */
export class CassandraSession {
  private readonly limiter: FifoLimiter;

  constructor(
    readonly client: Client,
    maxConcurrentRequests: number,
    private readonly maxMutationBytes: number,
  ) {
    this.limiter = new FifoLimiter(maxConcurrentRequests);
  }

  get stats(): LimiterStats {
    return this.limiter.stats;
  }

  /**
   * Throws `MetaStoreWriteTooLargeError` if a write of these values cannot succeed. Callers that
   * send several statements for one change check them all before sending any.
   */
  checkSize(row: string, params: readonly unknown[], dataset?: string): void {
    const bytes = valuesBytes(params);
    if (bytes > this.maxMutationBytes) throw new MetaStoreWriteTooLargeError(row, bytes, this.maxMutationBytes, dataset);
  }

  read(operation: string, query: string, params: unknown[], options: ReadOptions = READ): Promise<types.ResultSet> {
    return this.limiter.run(() => request(operation, () => this.client.execute(query, params, options)));
  }

  /** Every row of a paged read; all its pages are fetched within one slot of the limiter. */
  readAll(operation: string, query: string, params: unknown[], fetchSize: number): Promise<types.Row[]> {
    return this.limiter.run(() =>
      request(operation, async () => {
        const rows: types.Row[] = [];
        const result = await this.client.execute(query, params, { ...READ, fetchSize });
        for await (const row of result) rows.push(row);
        return rows;
      }),
    );
  }

  /** A write of `row` (named in a size error): size checked, then sent through the limiter. */
  write(operation: string, row: string, query: string, params: unknown[], options: WriteOptions, dataset?: string): Promise<types.ResultSet> {
    this.checkSize(row, params, dataset);
    return this.limiter.run(() => request(operation, () => this.client.execute(query, params, options)));
  }

  /** A batch (one partition: one mutation), its statements' values measured together. */
  batch(operation: string, row: string, statements: readonly Statement[], options: WriteOptions, dataset?: string): Promise<types.ResultSet> {
    this.checkSize(
      row,
      statements.flatMap((s) => s.params),
      dataset,
    );
    return this.limiter.run(() => request(operation, () => this.client.batch([...statements], options)));
  }
}

/** Waits for every promise, then throws the first failure: no request is left running behind an error. */
export async function settleAll<T>(promises: readonly Promise<T>[]): Promise<T[]> {
  const settled = await Promise.allSettled(promises);
  const failed = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
  if (failed) throw failed.reason;
  return settled.map((s) => (s as PromiseFulfilledResult<T>).value);
}
