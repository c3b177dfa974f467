// Sinks for the node process when no user code embeds shardherd: records are either only logged
// and counted, or appended as JSON lines to a file (what the chaos tests read back to prove that
// every produced record was ingested).
import { appendFile } from 'node:fs/promises';
import type { Logger } from 'pino';
import type { DatasetConfig } from '../core/dataset-config.js';
import type { ShardNum } from '../core/ids.js';
import type { RecordSink, SourceRecord } from './ingestion-source.js';

/** Counts records and logs each batch at debug level. */
export class LogSink implements RecordSink {
  private accepted = 0;

  constructor(private readonly log: Logger) {}

  accept(dataset: DatasetConfig, shard: ShardNum, records: readonly SourceRecord[]): Promise<void> {
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

/** One line per record: `{ dataset, shard, offset, key, value }`. A batch is accepted once its lines are written. */
export class JsonLinesSink implements RecordSink {
  constructor(private readonly path: string) {}

  async accept(dataset: DatasetConfig, shard: ShardNum, records: readonly SourceRecord[]): Promise<void> {
    if (records.length === 0) return;
    const lines = records.map((r) => JSON.stringify({ dataset: dataset.ref, shard, offset: r.offset, key: r.key, value: r.value })).join('\n');
    await appendFile(this.path, `${lines}\n`);
  }
}
