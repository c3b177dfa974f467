// What a routed request or a client connection can fail with: one class, a stable `code` to switch
// on, whether trying again can help, and where it happened. Never a bare transport error: those are
// the client's to handle (failover), and only come out as the `cause` of one of these.

export type ClientErrorCode =
  /** The cluster did not answer the client in time: wrong prefix, no singleton, broker away. */
  | 'CONNECT_FAILED'
  /** The singleton does not know this dataset. */
  | 'UNKNOWN_DATASET'
  /** A shard number outside `0 .. numShards-1`. */
  | 'SHARD_OUT_OF_RANGE'
  /** The payload (or the handler's answer) is not JSON. Nothing was sent. */
  | 'NOT_SERIALIZABLE'
  /** The handler threw: the application's error, not failed over (see `RequestOptions.retryApplicationErrors`). */
  | 'HANDLER_FAILED'
  /** Every serving copy of the shard failed (transport errors, timeouts), or the map shows none. */
  | 'SHARD_UNAVAILABLE'
  /** The deadline passed before any copy answered. */
  | 'DEADLINE_EXCEEDED'
  /**
   * The client protects the cluster from its own load: it has `maxInFlight` requests in flight
   * already (refused at once, nothing sent), or a copy failed and its retry budget allows no other
   * attempt now (a copy was left that it did not ask).
   */
  | 'OVERLOADED'
  /** More redirections than `maxRedirects` (a map that keeps moving, or two nodes that disagree). */
  | 'TOO_MANY_REDIRECTS'
  /** An option of the call is not usable (a deadline that is not a positive number of ms up to 24 days). Nothing was sent. */
  | 'INVALID_OPTION'
  /** The client is closed (before the request, or while it was in flight). */
  | 'CLOSED';

export interface ClientErrorContext {
  readonly dataset?: string;
  readonly shard?: number;
  readonly node?: string;
  readonly cause?: unknown;
}

const RETRIABLE: ReadonlySet<ClientErrorCode> = new Set(['CONNECT_FAILED', 'SHARD_UNAVAILABLE', 'DEADLINE_EXCEEDED', 'OVERLOADED', 'TOO_MANY_REDIRECTS']);

/**
 * A client's typed error. `retriable` says whether the same call may succeed later (a copy coming
 * back, a handoff finishing); an application error or bad input never is.
 */
export class ShardherdClientError extends Error {
  override readonly name = 'ShardherdClientError';
  readonly retriable: boolean;
  readonly dataset: string | undefined;
  readonly shard: number | undefined;
  readonly node: string | undefined;

  constructor(
    readonly code: ClientErrorCode,
    message: string,
    context: ClientErrorContext = {},
  ) {
    super(message, context.cause === undefined ? undefined : { cause: context.cause });
    this.retriable = RETRIABLE.has(code);
    this.dataset = context.dataset;
    this.shard = context.shard;
    this.node = context.node;
  }
}

/** A handler's error as the serving node reported it: its name and message, never its stack. */
export interface RemoteError {
  readonly name: string;
  readonly message: string;
  readonly code?: string;
}

/** The handler on `node` threw: `remote` is what it threw, as the node reported it. */
export class HandlerError extends ShardherdClientError {
  constructor(
    readonly remote: RemoteError,
    context: { dataset: string; shard: number; node: string },
  ) {
    super('HANDLER_FAILED', `the handler of ${context.dataset}/${context.shard} on ${context.node} failed: ${remote.name}: ${remote.message}`, context);
  }
}
