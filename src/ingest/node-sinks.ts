// Sinks for the node process when no user code embeds shardherd: records are either only logged
// and counted, or appended as JSON lines to a file (what the chaos tests read back to prove that
// every produced record was ingested). Both fence by token (see `RecordSink`). Both are per-copy
// stores: each node process has its own, so another node's checkpoint says nothing of what this
// node's sink holds, and a copy resumes from its own checkpoint.
import { appendFile } from 'node:fs/promises';
import type { Logger } from 'pino';
import type { DatasetConfig } from '../core/dataset-config.js';
import type { ShardNum } from '../core/ids.js';
import type { FencingToken } from '../core/fencing-token.js';
import type { RecordSink, SinkStorage, SourceRecord } from './ingestion-source.js';
import { TokenFence } from './token-fence.js';

/** Counts records and logs each batch at debug level; refuses a batch of an older token than one it counted. */
export class LogSink implements RecordSink {
  /** Its count is this process's. */
  readonly storage: SinkStorage = 'per-copy';
  private accepted = 0;
  private readonly fence = new TokenFence();

  constructor(private readonly log: Logger) {}

  accept(dataset: DatasetConfig, shard: ShardNum, records: readonly SourceRecord[], token?: FencingToken): Promise<void> {
    try {
      this.fence.admit(dataset.ref, shard, token);
    } catch (e) {
      return Promise.reject(e);
    }
    this.accepted += records.length;
    const first = records[0]?.offset;
    this.log.debug({ event: 'sink.batch', dataset: dataset.ref, shard, records: records.length, first }, 'records ingested');
    return Promise.resolve();
  }

  /** Records accepted since the process started, duplicates included. */
  get total(): number {
    return this.accepted;
  }
}

/**
 * One line per record: `{ dataset, shard, offset, key, value, token }`. A batch is accepted once its
 * lines are written. Appends go out one at a time, each checked against the fence just before it is
 * written, so the file's order is the order of the checks: no line of an older token follows one of
 * a newer token for the same shard.
 */
export class JsonLinesSink implements RecordSink {
  /**
   * Its file is the one this node's config names, normally this node's alone; the sink cannot know
   * whether other nodes append to the same path, and per-copy is the declaration never wrong.
   */
  readonly storage: SinkStorage = 'per-copy';
  private readonly fence = new TokenFence();
  /** The appends in order: each starts once the one before it settled. */
  private tail: Promise<void> = Promise.resolve();

  constructor(private readonly path: string) {}

  accept(dataset: DatasetConfig, shard: ShardNum, records: readonly SourceRecord[], token?: FencingToken): Promise<void> {
    const write = this.tail.then(async () => {
      this.fence.admit(dataset.ref, shard, token);
      if (records.length === 0) return;
      const lines = records
        .map((r) =>
          JSON.stringify({
            dataset: dataset.ref,
            shard,
            offset: r.offset,
            key: r.key,
            value: r.value,
            ...(token ? { token: [token.epoch, token.version] } : {}),
          }),
        )
        .join('\n');
      await appendFile(this.path, `${lines}\n`);
    });
    this.tail = write.catch(() => undefined);
    return write;
  }
}
