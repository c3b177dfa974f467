// Reads the checkpoints of the shards a node starts, many per MetaStore request: a node that is
// given thousands of shards at once (a dataset set up, a node restarted) asked for each one alone,
// thousands of requests at once (8 192 of them overran the Cassandra driver's 2 048 per connection).
import type { DatasetRef } from '../core/ids.js';
import { NO_CHECKPOINTS, type MetaStore, type ShardCheckpoints } from '../store/meta-store.js';
import { nextTurn } from '../cluster/turns.js';

/** The most shards read in one `readCheckpointsOf`. */
export const CHECKPOINTS_PER_READ = 1_000;

interface Waiting {
  readonly shard: number;
  readonly resolve: (checkpoints: ShardCheckpoints) => void;
  readonly reject: (e: unknown) => void;
}

export class CheckpointLoader {
  private readonly waiting = new Map<DatasetRef, Waiting[]>();
  private scheduled = false;

  constructor(private readonly store: Pick<MetaStore, 'readCheckpointsOf'>) {}

  /**
   * A shard's checkpoints (each copy's and the shared ones), read together with those of every other shard
   * asked for in the same turn of the event loop. A failed read fails each of its shards (the
   * caller retries; its retry joins the next batch).
   */
  read(dataset: DatasetRef, shard: number): Promise<ShardCheckpoints> {
    return new Promise((resolve, reject) => {
      const list = this.waiting.get(dataset);
      if (list) list.push({ shard, resolve, reject });
      else this.waiting.set(dataset, [{ shard, resolve, reject }]);
      if (!this.scheduled) {
        this.scheduled = true;
        // After the current turn: the shards a coordinator starts in one go are asked for together.
        nextTurn(() => this.flush());
      }
    });
  }

  private flush(): void {
    this.scheduled = false;
    const batches = [...this.waiting];
    this.waiting.clear();
    for (const [dataset, all] of batches) {
      for (let i = 0; i < all.length; i += CHECKPOINTS_PER_READ) void this.load(dataset, all.slice(i, i + CHECKPOINTS_PER_READ));
    }
  }

  private async load(dataset: DatasetRef, batch: readonly Waiting[]): Promise<void> {
    try {
      const found = await this.store.readCheckpointsOf(dataset, [...new Set(batch.map((w) => w.shard))]);
      for (const w of batch) w.resolve(found.get(w.shard) ?? NO_CHECKPOINTS);
    } catch (e) {
      for (const w of batch) w.reject(e);
    }
  }
}
