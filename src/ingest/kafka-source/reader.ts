// A reader of one shard: reads go to the dataset's feed until the reader is closed or a newer
// reader of the same shard replaces it.
import type { ShardReader, SourceRecord } from '../ingestion-source.js';
import type { DatasetFeed } from './feed.js';

export class KafkaShardReader implements ShardReader {
  private state: 'open' | 'superseded' | 'closed' = 'open';

  constructor(
    private readonly feed: DatasetFeed,
    private readonly dataset: string,
    private readonly shard: number,
  ) {}

  consumed(nextOffset: number): void {
    if (this.state === 'open') this.feed.noteConsumed(this.shard, nextOffset);
  }

  whenReadable(listener: () => void): void {
    if (this.state === 'open') this.feed.whenReadable(this.shard, listener);
  }

  async earliestOffset(): Promise<number> {
    this.assertOpen();
    return (await this.feed.watermarks(this.shard)).low;
  }

  async endOffset(): Promise<number> {
    this.assertOpen();
    return (await this.feed.watermarks(this.shard)).high;
  }

  bytesRead(): number {
    return this.state === 'open' ? this.feed.bytesRead(this.shard) : 0;
  }

  knownEndOffset(): number | undefined {
    return this.state === 'open' ? this.feed.knownHigh(this.shard) : undefined;
  }

  async read(offset: number, max: number): Promise<SourceRecord[]> {
    this.assertOpen();
    if (!Number.isSafeInteger(offset) || offset < 0) throw new RangeError(`read offset must be a non-negative integer, got ${offset}`);
    if (!Number.isSafeInteger(max) || max < 0) throw new RangeError(`read max must be a non-negative integer, got ${max}`);
    return this.feed.read(this.shard, offset, max);
  }

  async close(): Promise<void> {
    if (this.state === 'open') this.feed.close(this.shard, this);
    this.state = 'closed';
  }

  supersede(): void {
    this.state = 'superseded';
  }

  private assertOpen(): void {
    if (this.state === 'closed') throw new Error(`reader of ${this.dataset} shard ${this.shard} is closed`);
    if (this.state === 'superseded') throw new Error(`reader of ${this.dataset} shard ${this.shard} was replaced by a newer reader of the same shard`);
  }
}
