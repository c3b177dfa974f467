import type { DatasetConfig } from '../core/dataset-config.js';
import type { ShardNum } from '../core/ids.js';
import type { FencingToken } from '../core/fencing-token.js';
import type { RecordSink, SinkStorage, SourceRecord } from './ingestion-source.js';
import { TokenFence } from './token-fence.js';

/** What one shard's sink has seen. */
export interface ShardTally {
  /** Every offset below this was ingested at least once. */
  covered: number;
  /** Records accepted, duplicates included (at-least-once delivery replays after a restart). */
  accepted: number;
  /** Offsets ingested more than once. */
  duplicates: number;
  /** Offsets at or beyond `covered` that arrived out of order. */
  readonly ahead: Set<number>;
  /** Batches refused for a token older than one already applied (late writes of a former owner). */
  refused: number;
}

/**
 * A sink that counts records per shard so a demo, a test or the simulator can prove nothing was
 * lost (every offset below the source's end was ingested at least once) and say how much was
 * ingested twice. It fences by token (see `RecordSink`): a batch whose token is older than one
 * it applied for the shard is refused with `StaleTokenError` and counted in `refused`.
 *
 * Gotchas: whether it is a shared store depends on how it is used, which the object cannot see.
 * One instance given to every node (an embedded cluster's default sink, the simulator's) holds
 * every copy's records in one tally: it is one shared store, and may say so with
 * `new CountingSink({ storage: 'shared' })`. One instance per node (a sink factory) is per-copy.
 * The default is `per-copy`, the declaration that is never wrong: it costs replays, never records.
 */
export class CountingSink implements RecordSink {
  readonly storage: SinkStorage;
  private readonly tallies = new Map<string, ShardTally>();
  private readonly fence = new TokenFence();

  constructor(options: { readonly storage?: SinkStorage } = {}) {
    this.storage = options.storage ?? 'per-copy';
  }

  async accept(dataset: DatasetConfig, shard: ShardNum, records: readonly SourceRecord[], token?: FencingToken): Promise<void> {
    const t = this.tally(dataset.ref, shard);
    try {
      this.fence.admit(dataset.ref, shard, token);
    } catch (e) {
      t.refused += 1;
      throw e;
    }
    for (const r of records) {
      t.accepted += 1;
      if (r.offset < t.covered || t.ahead.has(r.offset)) {
        t.duplicates += 1;
        continue;
      }
      if (r.offset === t.covered) {
        t.covered += 1;
        while (t.ahead.delete(t.covered)) t.covered += 1;
      } else {
        t.ahead.add(r.offset);
      }
    }
  }

  tally(dataset: string, shard: number): ShardTally {
    const key = `${dataset}/${shard}`;
    let t = this.tallies.get(key);
    if (!t) {
      t = { covered: 0, accepted: 0, duplicates: 0, ahead: new Set(), refused: 0 };
      this.tallies.set(key, t);
    }
    return t;
  }

  /** Records accepted over all shards of a dataset (or all datasets). */
  total(dataset?: string): { accepted: number; duplicates: number } {
    let accepted = 0;
    let duplicates = 0;
    for (const [key, t] of this.tallies) {
      if (dataset !== undefined && !key.startsWith(`${dataset}/`)) continue;
      accepted += t.accepted;
      duplicates += t.duplicates;
    }
    return { accepted, duplicates };
  }
}
