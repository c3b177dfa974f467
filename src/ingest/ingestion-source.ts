import type { DatasetConfig } from '../core/dataset-config.js';
import type { ShardNum } from '../core/ids.js';
import type { FencingToken } from '../core/fencing-token.js';

/** One record of a shard's stream; with Kafka, offset is the partition offset. */
export interface SourceRecord {
  readonly offset: number;
  readonly key: string;
  readonly value: unknown;
}

/** Reads one shard's stream. */
export interface ShardReader {
  /** The offset of the first record still available (older ones expired). */
  earliestOffset(): Promise<number>;
  /** The offset after the last record that exists now (exclusive end). */
  endOffset(): Promise<number>;
  /**
   * The bytes of the records `read` has returned so far, as the source fetched them (keys and
   * values), for the load figures of datasets placed by load. Optional: a source without it
   * reports 0 bytes.
   */
  bytesRead?(): number;
  /** Up to `max` records from `offset` on, in order; fewer or none if they do not exist yet. */
  read(offset: number, max: number): Promise<SourceRecord[]>;
  /**
   * Tells the source that records before `nextOffset` are ingested and checkpointed, for sources
   * whose own tools track consumption (Kafka: consumer group offsets). Never blocks; best effort.
   */
  consumed?(nextOffset: number): void;
  /**
   * Calls `listener` once, when records may be read (after a read that found none): a source that
   * buffers what it fetched wakes its reader instead of making it wait for the next poll.
   */
  whenReadable?(listener: () => void): void;
  /**
   * When the record at the end offset will exist (ms, the source's clock), for a source that
   * knows (a generator does; a log does not): a shard with nothing to read waits until then
   * instead of polling, which is what lets a node run thousands of idle shards. Undefined: it
   * does not know (a reader that wraps another may ask it and find out).
   */
  nextRecordAt?(): number | undefined;
  /**
   * The end offset as the source knows it now, without asking anyone (undefined: not known yet),
   * for a look at the lag of thousands of shards at once (a metrics scrape). It may lag behind
   * `endOffset()`; a source may ask for a fresher one for the next look.
   */
  knownEndOffset?(): number | undefined;
  close(): Promise<void>;
}

/** Where a dataset's records come from, one reader per shard. */
export interface IngestionSource {
  open(dataset: DatasetConfig, shard: ShardNum): Promise<ShardReader>;
  /**
   * Checks that this source can carry the dataset (with Kafka: the topic exists and has exactly
   * `numShards` partitions), throwing an error a user understands when it cannot. The singleton
   * calls it before accepting SetupDataset. A source without it accepts every dataset.
   */
  validate?(dataset: DatasetConfig): Promise<void>;
  /**
   * Creates the dataset's topic with `numShards` partitions if it does not exist ('exists' when it
   * does, with that count); throws an error a user understands when it exists with another count.
   * Sources without topics leave it out.
   */
  createTopic?(dataset: DatasetConfig): Promise<'created' | 'exists'>;
}

/**
 * Where ingested records go: the user's code. A batch counts as ingested once `accept` resolves.
 *
 * **Fencing tokens.** Every batch comes with the `token` of the assignment the node acts on
 * (`FencingToken`: the map's epoch and the shard's assignment version, compared lexicographically;
 * docs/ARCHITECTURE.md §12). It only grows, and every copy the current map names holds the same
 * one. A node can be paused or cut off in the middle of `accept` and have its write land after
 * another node took the shard over; to refuse such a late write a sink keeps, per (dataset, shard),
 * the newest token it has applied and, atomically with applying a write:
 *
 * - applies it when its token is as new as that one or newer (and remembers the newer);
 * - refuses it when its token is older, by throwing `StaleTokenError(dataset, shard, given,
 *   newest)` (nothing of the batch applied). The node does not count the batch as ingested: it
 *   tries it again once its own map gives it a newer token, or stops the shard when the map says
 *   the copy moved. Refusals are expected around every move and failover; the node logs them once
 *   per shard at info and counts them (`shardherd_fenced_writes_total`).
 *
 * `TokenFence` does this for a sink whose state is in the process; the bundled sinks use it. The
 * parameter is optional so that sinks written for the three-argument API still compile and work,
 * unfenced: a late write of a node that lost its shard then lands.
 *
 * Gotchas: delivery is at least once, and one shard's records can reach `accept` on two nodes at
 * the same time: on every copy of a replicated dataset (`replicationFactor` > 1), and during a
 * planned move (rebalance, drain, replace) on both the Leaving copy and the Initializing one that
 * replays from the shard's checkpoint until it has caught up (docs/ARCHITECTURE.md I1's declared handoff).
 * Make `accept` idempotent by (dataset, shard, offset). A refusal must be a `StaleTokenError` whose
 * `newest` is newer than `given`: any other error, or a refusal that names no newer token, is the
 * sink failing (the shard reports `IngestionError`), and so is a call that does not settle within
 * `sinkTimeoutMs`.
 *
 * **Storage.** `storage` says whether the shard's copies keep their own data or all write one
 * store, which decides where a copy resumes (docs/ARCHITECTURE.md §12.3):
 *
 * - `per-copy` (the default, also when left out, so sinks written before it are unchanged): each
 *   copy holds what it ingested itself (a node's memory, file or database). A copy resumes from its
 *   own checkpoint: another copy's progress says nothing about what this copy holds.
 * - `shared`: every copy of a shard, on every node, writes the same store (one database table),
 *   which keeps what it accepted. A copy resumes after the shard's newest fenced checkpoint, of
 *   whichever copy, when that is further than where it would start otherwise (its own checkpoint,
 *   or `copyStartFrom`'s rule): the records up to it are in the store already. A shard moved back
 *   to a node then replays almost nothing.
 *
 * Declare `shared` only if it is true: a per-copy sink declared shared skips, on a copy coming
 * back, the records another copy ingested meanwhile, and that copy never holds them.
 */
export interface RecordSink {
  accept(dataset: DatasetConfig, shard: ShardNum, records: readonly SourceRecord[], token?: FencingToken): Promise<void>;
  /** Whether the copies of a shard write one store (`shared`) or each its own (`per-copy`, the default). */
  readonly storage?: SinkStorage;
}

/** Where a sink keeps a shard's records: one store for all copies, or one per copy (see `RecordSink`). */
export type SinkStorage = 'shared' | 'per-copy';

/** What `sink` declares: `per-copy` when it says nothing. */
export function sinkStorage(sink: Pick<RecordSink, 'storage'>): SinkStorage {
  return sink.storage ?? 'per-copy';
}

/** A record the source cannot read (a poison record): the shard reports `IngestionError`. */
export class IngestionFailure extends Error {
  constructor(
    message: string,
    readonly offset: number,
  ) {
    super(message);
    this.name = 'IngestionFailure';
  }
}
