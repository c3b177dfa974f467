// Fencing tokens (Kleppmann, "How to do distributed locking"): every write a node makes for a shard
// carries the token of the assignment it acts on, and whatever stores the write refuses one whose
// token is older than one it has already seen for that shard. A node that was paused or cut off in
// the middle of a write can then no longer land it after its successor wrote (docs/ARCHITECTURE.md §12).
import { ShardherdError } from './errors.js';

/**
 * The token of a shard's assignment: the epoch of the map a node acts on, and the shard's
 * assignment version in that map (the map version at which its copies last changed). Compared
 * lexicographically, epoch first.
 *
 * It only grows: within an epoch the singleton is the only writer of the map and every change of a
 * shard's copies stamps it with a new, higher map version; a failover raises the epoch (the
 * MetaStore's compare-and-set), which orders every map of the new singleton above every map of the
 * old one, even if the new singleton recovered an older version of the map. Every copy the current
 * map names holds the same token, so replicas are never fenced by each other; a copy that was
 * removed, or a node still acting on an older map, holds an older one.
 */
export interface FencingToken {
  readonly epoch: number;
  readonly version: number;
}

/** Negative when `a` is older than `b`, 0 when equal, positive when newer. */
export function compareTokens(a: FencingToken, b: FencingToken): number {
  return a.epoch !== b.epoch ? a.epoch - b.epoch : a.version - b.version;
}

/** Whether `v` is a well-formed token: two safe whole numbers ≥ 0. */
export function isFencingToken(v: unknown): v is FencingToken {
  if (typeof v !== 'object' || v === null) return false;
  const t = v as Record<string, unknown>;
  return isCount(t.epoch) && isCount(t.version);
}

function isCount(v: unknown): v is number {
  return typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
}

/** `epoch/version`, as logs and errors show a token. */
export function tokenText(t: FencingToken): string {
  return `${t.epoch}/${t.version}`;
}

/**
 * What a sink throws when it refuses a write whose token is older than one it has seen for the
 * shard (see `RecordSink`): the node does not count the batch as ingested and tries it again with
 * its newer token once it has one, or stops the shard once its map says the copy moved.
 */
export class StaleTokenError extends ShardherdError {
  constructor(
    dataset: string,
    shard: number,
    /** The token the write carried. */
    readonly given: FencingToken,
    /** The newest token the sink has seen for the shard. */
    readonly newest: FencingToken,
  ) {
    super('STALE_TOKEN', `write to ${dataset} shard ${shard} with token ${tokenText(given)} refused: token ${tokenText(newest)} was seen`, { dataset, shard });
  }
}
