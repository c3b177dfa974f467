import { InvalidIdError } from './errors.js';
import { err, ok, type Result } from './result.js';

declare const brand: unique symbol;
/** A primitive that has been checked at the edge and carries its meaning in its type. */
export type Brand<T, Name extends string> = T & { readonly [brand]: Name };

/** A dataset's name: a letter, then letters, digits, `_` or `-`; at most 64 characters. */
export type DatasetRef = Brand<string, 'DatasetRef'>;
/** A node's stable identity (survives restarts): letters, digits, `.`, `_`, `-`; at most 128 characters. */
export type NodeId = Brand<string, 'NodeId'>;
/** Changes on every restart of a node: reports from an older incarnation are refused. */
export type Incarnation = Brand<string, 'Incarnation'>;
/** A shard number, range-checked against its dataset's `numShards`. */
export type ShardNum = Brand<number, 'ShardNum'>;
/** Bumped each time a singleton takes over; orders maps from different singletons. */
export type Epoch = Brand<number, 'Epoch'>;
/** Someone who receives shard events (a query router, a node guardian, a test). */
export type SubscriberId = Brand<string, 'SubscriberId'>;
/** Where a reply to a request goes; opaque to the core. */
export type ReplyTo = Brand<string, 'ReplyTo'>;

/** The longest dataset name. */
export const MAX_DATASET_REF_LENGTH = 64;
/** The longest node id. */
export const MAX_NODE_ID_LENGTH = 128;
/**
 * What `parseDatasetRef` accepts, as the source of a regular expression that means the same in
 * JavaScript and in JSON Schema: the API's OpenAPI description uses it, so it cannot allow a name
 * the server refuses.
 */
export const DATASET_REF_PATTERN = `^[A-Za-z][A-Za-z0-9_-]{0,${MAX_DATASET_REF_LENGTH - 1}}$`;
/** What `parseNodeId` accepts (see `DATASET_REF_PATTERN`). */
export const NODE_ID_PATTERN = `^[A-Za-z0-9][A-Za-z0-9._-]{0,${MAX_NODE_ID_LENGTH - 1}}$`;

const DATASET_REF = new RegExp(DATASET_REF_PATTERN);
const NODE_ID = new RegExp(NODE_ID_PATTERN);
const TOKEN = /^[\x21-\x7e]{1,256}$/; // printable ASCII, no spaces

function parseWith<T>(kind: string, pattern: RegExp, rule: string, raw: unknown): Result<T, InvalidIdError> {
  if (typeof raw === 'string' && pattern.test(raw)) return ok(raw as T);
  return err(new InvalidIdError(kind, raw, rule));
}

export const parseDatasetRef = (raw: unknown): Result<DatasetRef, InvalidIdError> =>
  parseWith('dataset name', DATASET_REF, 'a letter, then up to 63 letters, digits, "_" or "-"', raw);

export const parseNodeId = (raw: unknown): Result<NodeId, InvalidIdError> =>
  parseWith('node id', NODE_ID, 'a letter or digit, then up to 127 letters, digits, ".", "_" or "-"', raw);

export const parseIncarnation = (raw: unknown): Result<Incarnation, InvalidIdError> =>
  parseWith('incarnation', TOKEN, '1 to 256 printable ASCII characters without spaces', raw);

export const parseSubscriberId = (raw: unknown): Result<SubscriberId, InvalidIdError> =>
  parseWith('subscriber id', TOKEN, '1 to 256 printable ASCII characters without spaces', raw);

function orThrow<T>(r: Result<T, InvalidIdError>): T {
  if (!r.ok) throw r.error;
  return r.value;
}

/** Parses or throws `InvalidIdError`: for trusted call sites (tests, config already validated). */
export const datasetRef = (raw: string): DatasetRef => orThrow(parseDatasetRef(raw));
/** Parses or throws `InvalidIdError`. */
export const nodeId = (raw: string): NodeId => orThrow(parseNodeId(raw));
/** Parses or throws `InvalidIdError`. */
export const incarnation = (raw: string): Incarnation => orThrow(parseIncarnation(raw));
/** Parses or throws `InvalidIdError`. */
export const subscriberId = (raw: string): SubscriberId => orThrow(parseSubscriberId(raw));
/** Any non-empty string is a valid reply address. */
export const replyTo = (raw: string): ReplyTo => raw as ReplyTo;

/** An epoch is a non-negative safe integer. */
export function epoch(n: number): Epoch {
  if (!Number.isSafeInteger(n) || n < 0) throw new InvalidIdError('epoch', n, 'a non-negative integer');
  return n as Epoch;
}

/** True if `shard` is an integer in `0 .. numShards-1`. Note `shard == numShards` is out of range. */
export function isShardInRange(shard: number, numShards: number): boolean {
  return Number.isInteger(shard) && shard >= 0 && shard < numShards;
}

/**
 * Brands a shard number after checking it is a non-negative integer. Whether it is below the
 * dataset's `numShards` is checked where the dataset is known (`ShardMapper`, `ShardManager`).
 */
export function shardNum(n: number): ShardNum {
  if (!Number.isSafeInteger(n) || n < 0) throw new InvalidIdError('shard number', n, 'a non-negative integer');
  return n as ShardNum;
}
