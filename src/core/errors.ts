/**
 * Errors that are thrown (programming errors and bad arguments to constructors). Expected outcomes
 * of requests (an unknown dataset, a bad shard list) are returned as values instead; see the
 * `Reply` union in `shard-manager/protocol.ts`.
 */
export type ShardherdErrorCode =
  | 'INVALID_SHARD_COUNT'
  | 'SHARD_OUT_OF_RANGE'
  | 'INVALID_SPREAD'
  | 'INVALID_ID'
  | 'INVALID_PLACEMENT'
  | 'INVALID_SNAPSHOT'
  | 'DATASET_MISMATCH'
  | 'INVALID_EVENT'
  | 'FENCED'
  | 'STALE_TOKEN'
  | 'CHECKPOINT_REFUSED'
  | 'MALFORMED_CHECKPOINT'
  | 'SINK_TIMEOUT'
  | 'LEASE_LAPSED'
  | 'SINK_CONTRACT'
  | 'NOT_A_MEMBER'
  | 'METASTORE_UNAVAILABLE'
  | 'METASTORE_WRITE_TOO_LARGE'
  | 'SOURCE_MISMATCH'
  | 'UNSUPPORTED_BROKER'
  | 'WAIT_TIMEOUT';

export interface ShardherdErrorContext {
  readonly dataset?: string;
  readonly shard?: number;
  readonly node?: string;
  readonly cause?: unknown;
}

/** Base class: every error carries a stable `code`, whether retrying can help, and its context. */
export class ShardherdError extends Error {
  readonly code: ShardherdErrorCode;
  readonly retriable: boolean;
  readonly dataset: string | undefined;
  readonly shard: number | undefined;
  readonly node: string | undefined;

  constructor(code: ShardherdErrorCode, message: string, context: ShardherdErrorContext = {}, retriable = false) {
    super(message, context.cause === undefined ? undefined : { cause: context.cause });
    this.name = new.target.name;
    this.code = code;
    this.retriable = retriable;
    this.dataset = context.dataset;
    this.shard = context.shard;
    this.node = context.node;
  }
}

/** A shard count that is not a power of two in 1..65536. */
export class InvalidShardCountError extends ShardherdError {
  constructor(readonly numShards: number) {
    super('INVALID_SHARD_COUNT', `numShards must be a power of two between 1 and 65536, got ${numShards}`);
  }
}

/** A shard number outside `0 .. numShards-1` (including `shard == numShards`). */
export class ShardOutOfRangeError extends ShardherdError {
  constructor(
    shard: number,
    readonly numShards: number,
    dataset?: string,
  ) {
    super(
      'SHARD_OUT_OF_RANGE',
      `shard ${shard} is out of range: valid shards are 0..${numShards - 1}${dataset ? ` for dataset ${dataset}` : ''}`,
      dataset === undefined ? { shard } : { shard, dataset },
    );
  }
}

/** A spread outside `0 .. log2(numShards)`. */
export class InvalidSpreadError extends ShardherdError {
  constructor(
    readonly spread: number,
    readonly numShards: number,
  ) {
    super('INVALID_SPREAD', `Invalid spread ${spread}: must be an integer in 0..${Math.log2(numShards)} for ${numShards} shards`);
  }
}

/** A malformed identifier (node id, dataset name, ...). */
export class InvalidIdError extends ShardherdError {
  constructor(kind: string, raw: unknown, rule: string) {
    super('INVALID_ID', `malformed ${kind} ${JSON.stringify(raw)}: ${rule}`);
  }
}

/** A persisted or transmitted shard map this version cannot read. */
export class InvalidSnapshotError extends ShardherdError {
  constructor(message: string, dataset?: string) {
    super('INVALID_SNAPSHOT', message, dataset === undefined ? {} : { dataset });
  }
}

/** An event for another dataset than the mapper's. */
export class DatasetMismatchError extends ShardherdError {
  constructor(expected: string, got: string) {
    super('DATASET_MISMATCH', `event for dataset ${got} applied to the map of dataset ${expected}`, { dataset: got });
  }
}

/** An event whose fields are out of their domain (e.g. a progress outside 0..100). */
export class InvalidEventError extends ShardherdError {
  constructor(message: string, dataset?: string, shard?: number) {
    super('INVALID_EVENT', message, { ...(dataset === undefined ? {} : { dataset }), ...(shard === undefined ? {} : { shard }) });
  }
}
