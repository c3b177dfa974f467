import type { DatasetConfig } from '../core/dataset-config.js';
import { ShardherdError, ShardOutOfRangeError } from '../core/errors.js';
import { isShardInRange, type ShardNum } from '../core/ids.js';
import type { Clock } from '../cluster/clock.js';
import { IngestionFailure, type IngestionSource, type ShardReader, type SourceRecord } from './ingestion-source.js';

export interface SyntheticSourceOptions {
  /**
   * A message makes the record at that offset a poison record: a read returns the records before
   * it, and a read that starts at it throws `IngestionFailure`.
   */
  readonly failAt?: (dataset: string, shard: number, offset: number) => string | undefined;
  /** Keep only the newest this many records per shard (older ones expire); all of them if unset. */
  readonly retentionRecords?: number;
  /**
   * Each shard's rate as a multiple of its dataset's `recordsPerSecond` (default 1 for every shard),
   * fixed when the shard is opened: skewed loads for demos, tests and benchmarks of load-aware placement.
   */
  readonly shardRates?: (dataset: string, shard: number) => number;
}

/** The value of every synthetic record: enough for a sink to count records end to end. */
export interface SyntheticValue {
  readonly dataset: string;
  readonly shard: number;
  readonly n: number;
}

/**
 * Generated streams for datasets with `source.type === 'synthetic'`, driven by the injected clock
 * (deterministic under a simulated one). Every shard of a dataset produces `recordsPerSecond`
 * records a second from the moment this source was created (`start`): at time `t` the records at
 * offsets `0 .. endOffset - 1` exist, where `endOffset = floor((t - start) * recordsPerSecond / 1000)`
 * — so the record at offset `k` appears at `start + (k + 1) * 1000 / recordsPerSecond`.
 *
 * Record `k` of shard `s` has key `<dataset>/<s>/<k>` and value `{ dataset, shard: s, n: k }`.
 */
export class SyntheticSource implements IngestionSource {
  /** @internal Read by its shards' readers. */
  readonly start: number;
  /** @internal */
  readonly failAt: SyntheticSourceOptions['failAt'];
  /** @internal */
  readonly retentionRecords: number | undefined;
  private readonly shardRates: SyntheticSourceOptions['shardRates'];

  constructor(
    /** @internal */
    readonly clock: Clock,
    options: SyntheticSourceOptions = {},
  ) {
    const { retentionRecords } = options;
    if (retentionRecords !== undefined && !(Number.isSafeInteger(retentionRecords) && retentionRecords >= 1)) {
      throw new RangeError(`retentionRecords must be a positive integer, got ${retentionRecords}`);
    }
    this.start = clock.now();
    this.failAt = options.failAt;
    this.retentionRecords = retentionRecords;
    this.shardRates = options.shardRates;
  }

  /**
   * Refuses, at setup, a dataset this source cannot read: without it, a Kafka dataset set up on an
   * embedded cluster was accepted and every one of its shards then went to Error.
   */
  async validate(dataset: DatasetConfig): Promise<void> {
    syntheticSourceOf(dataset);
  }

  async open(dataset: DatasetConfig, shard: ShardNum): Promise<ShardReader> {
    const source = syntheticSourceOf(dataset);
    if (!isShardInRange(shard, dataset.numShards)) throw new ShardOutOfRangeError(shard, dataset.numShards, dataset.ref);
    const multiple = this.shardRates?.(dataset.ref, shard) ?? 1;
    if (!(Number.isFinite(multiple) && multiple > 0))
      throw new RangeError(`shardRates gave ${multiple} for ${dataset.ref}/${shard}; a rate multiple must be finite and above 0`);
    return new SyntheticShardReader(this, source.recordsPerSecond * multiple, dataset.ref, shard);
  }
}

/** A shard of the source: what all shards share is read from the source (a node holds tens of thousands of readers). */
class SyntheticShardReader implements ShardReader {
  private closed = false;

  constructor(
    private readonly source: SyntheticSource,
    private readonly recordsPerSecond: number,
    private readonly dataset: string,
    private readonly shard: number,
  ) {}

  async earliestOffset(): Promise<number> {
    this.assertOpen();
    return this.earliest(this.end());
  }

  async endOffset(): Promise<number> {
    this.assertOpen();
    return this.end();
  }

  /** Records from `max(offset, earliestOffset)` up to `max` of them, stopping at the end offset. */
  async read(offset: number, max: number): Promise<SourceRecord[]> {
    this.assertOpen();
    if (!Number.isSafeInteger(offset) || offset < 0) throw new RangeError(`read offset must be a non-negative integer, got ${offset}`);
    if (!Number.isSafeInteger(max) || max < 0) throw new RangeError(`read max must be a non-negative integer, got ${max}`);
    const end = this.end();
    const from = Math.max(offset, this.earliest(end));
    const to = Math.min(end, from + max);
    const records: SourceRecord[] = [];
    for (let k = from; k < to; k += 1) {
      const failure = this.source.failAt?.(this.dataset, this.shard, k);
      // Like a consumer that cannot decode a record: what comes before it is delivered, and the
      // read that starts at it fails, every time.
      if (failure !== undefined) {
        if (records.length > 0) return records;
        throw new IngestionFailure(failure, k);
      }
      const value: SyntheticValue = { dataset: this.dataset, shard: this.shard, n: k };
      records.push({ offset: k, key: `${this.dataset}/${this.shard}/${k}`, value });
    }
    return records;
  }

  knownEndOffset(): number | undefined {
    return this.closed ? undefined : this.end();
  }

  /** The record at `end` appears at `start + (end + 1) * 1000 / recordsPerSecond`. */
  nextRecordAt(): number {
    return this.source.start + ((this.end() + 1) * 1000) / this.recordsPerSecond;
  }

  async close(): Promise<void> {
    this.closed = true;
  }

  private end(): number {
    const { clock, start } = this.source;
    return Math.max(0, Math.floor(((clock.now() - start) * this.recordsPerSecond) / 1000));
  }

  private earliest(end: number): number {
    const { retentionRecords } = this.source;
    return retentionRecords === undefined ? 0 : Math.max(0, end - retentionRecords);
  }

  private assertOpen(): void {
    if (this.closed) throw new Error(`reader of ${this.dataset} shard ${this.shard} is closed`);
  }
}

/** The dataset's synthetic source, or a `SOURCE_MISMATCH` error saying what this cluster can read instead. */
function syntheticSourceOf(dataset: DatasetConfig): Extract<DatasetConfig['source'], { type: 'synthetic' }> {
  const source = dataset.source;
  if (source.type === 'synthetic') return source;
  throw new ShardherdError(
    'SOURCE_MISMATCH',
    `dataset ${dataset.ref} has a ${source.type} source, but this cluster reads synthetic sources only (an embedded cluster has no Kafka): ` +
      'set it up with "source": {"type": "synthetic"} here, or on nodes started with a Kafka config (shardherd node)',
    { dataset: dataset.ref },
  );
}
