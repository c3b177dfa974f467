// The shards of one dataset open here: their buffers, what reads take from them, and where the
// dataset's consumer starts, pauses and resumes each partition.
import type { Logger } from 'pino';
import type { DatasetConfig } from '../../core/dataset-config.js';
import { SharedAttempt } from '../../cluster/shared-attempt.js';
import { aTurn } from '../../cluster/turns.js';
import { IngestionFailure, type SourceRecord } from '../ingestion-source.js';
import type { IngestionKafkaClient, Watermarks } from './feed-client.js';
import { UndecodableRecord } from './fetched-run.js';
import { PartitionBuffer } from './partition-buffer.js';
import type { KafkaShardReader } from './reader.js';
import type { PackedBatch, RunConsumer, RunConsumerEvents, RunConsumerParams } from './run-consumer.js';
import type { KafkaSourceSettings } from './settings.js';

/** What the source is doing for one dataset, for operators and tests. */
export interface KafkaFeedStats {
  readonly dataset: string;
  readonly topic: string;
  /** The current consumer's group, if one runs. */
  readonly groupId: string | undefined;
  /** The partitions the current consumer was assigned at its last join (empty before it joined). */
  readonly assigned: readonly number[];
  /** Consumers created so far for this dataset. */
  readonly generations: number;
  /** From the first change of the open shards to the new consumer's join, for the last recreate. */
  readonly lastRecreateMs: number | undefined;
  /** Why the consumer stopped, when it stopped for good (reads then fail until a shard is opened again). */
  readonly failure: string | undefined;
  /**
   * Records the consumers fetched per partition, including any dropped (fetched before a seek or a
   * close, or not taken by a full buffer); a replaced kafkajs consumer's last fetch is not counted.
   */
  readonly delivered: Readonly<Record<number, number>>;
  readonly partitions: readonly {
    readonly shard: number;
    readonly bufferedRecords: number;
    readonly bufferedBytes: number;
    /** The offset the consumer fetches next (undefined before the first read). */
    readonly position: number | undefined;
    readonly paused: boolean;
  }[];
}

/** What the source lends each of its feeds. */
export interface FeedContext {
  /** The Kafka client library the source runs on (for topic checks and offsets). */
  readonly client: IngestionKafkaClient;
  /** Makes the dataset's consumer, on the main thread or the fetch thread (`fetchThread`). */
  readonly runConsumer: (params: RunConsumerParams, events: RunConsumerEvents) => RunConsumer;
  readonly settings: KafkaSourceSettings;
  readonly log: Logger;
  /** Throws once the source is closed. */
  assertOpen(): void;
}

/** Everything for one dataset: the buffers of its open shards, and its consumer (the client's `FeedConsumer`). */
export class DatasetFeed {
  private readonly buffers = new Map<number, PartitionBuffer>();
  private readonly log: Logger;
  private readonly consumer: RunConsumer;
  /** Records fetched per partition (`KafkaFeedStats.delivered`). */
  private readonly delivered = new Map<number, number>();
  private readonly topicCheck: SharedAttempt<void>;
  private failure: Error | undefined;
  private closed = false;
  /** Consumed offsets (partition → next offset) waiting for the next commit. */
  private readonly consumed = new Map<number, number>();
  private commitTimer: NodeJS.Timeout | undefined;
  /** The offsets request the calls of this moment wait for (see `topicOffsets`). */
  private offsetsBatch: ReturnType<DatasetFeed['topicOffsets']> | undefined;
  /** The watermarks of the last offsets read, by partition (what `knownHigh` answers). */
  private lastWatermarks: ReadonlyMap<number, Watermarks> | undefined;

  constructor(
    readonly dataset: DatasetConfig,
    readonly topic: string,
    private readonly ctx: FeedContext,
  ) {
    this.log = ctx.log.child({ dataset: dataset.ref, topic });
    this.topicCheck = new SharedAttempt(async () => {
      ctx.assertOpen();
      await ctx.client.checkTopic(this.dataset, 'the Kafka ingestion source');
    });
    this.consumer = ctx.runConsumer(
      { settings: ctx.settings, dataset: dataset.ref, topic, log: this.log },
      { onJoin: (assigned) => this.startJoined(assigned), onBatch: (batch) => this.onBatch(batch), onFail: (e) => this.fail(e) },
    );
  }

  /** The topic check, once per dataset (a failed check is asked again next time). */
  checkTopic(): Promise<void> {
    return this.topicCheck.get();
  }

  open(shard: number, reader: KafkaShardReader): void {
    const existing = this.buffers.get(shard);
    if (existing !== undefined) {
      // The buffer stays consistent whoever reads it; the old reader must not read on.
      existing.reader.supersede();
      existing.reader = reader;
      return;
    }
    this.buffers.set(shard, new PartitionBuffer(shard, reader));
    // A consumer that stopped for good is replaced by the recreate this open asks for.
    this.failure = undefined;
    this.consumer.schedule(this.ctx.settings.recreateDelayMs, [...this.buffers.keys()]);
  }

  close(shard: number, reader: KafkaShardReader): void {
    const b = this.buffers.get(shard);
    if (b === undefined || b.reader !== reader) return;
    this.buffers.delete(shard);
    // Stop fetching it at once; the recreate removes it from the assignment.
    this.consumer.stop(shard);
    this.consumer.schedule(this.ctx.settings.recreateDelayMs, [...this.buffers.keys()]);
  }

  read(shard: number, offset: number, max: number): SourceRecord[] {
    if (this.closed) throw new Error('the Kafka ingestion source is closed');
    if (this.failure !== undefined) throw this.failure;
    const b = this.buffers.get(shard);
    if (b === undefined) throw new Error(`dataset ${this.dataset.ref} shard ${shard} is not open`);
    if (!b.covers(offset)) {
      this.seek(b, offset);
      return [];
    }
    b.skipTo(offset);
    const out: SourceRecord[] = [];
    const decode = this.ctx.settings.decode;
    for (let run = b.nextRun(); run !== undefined && out.length < max; run = b.nextRun()) {
      const from = b.nextIndex;
      let n: number;
      try {
        n = run.readInto(out, from, max, decode);
      } catch (e) {
        if (!(e instanceof UndecodableRecord)) throw e;
        // A poison record: what comes before it is delivered; a read that starts at it fails, every time.
        throw new IngestionFailure(`dataset ${this.dataset.ref} shard ${shard}: the record at offset ${e.offset} cannot be decoded: ${e.message}`, e.offset);
      }
      b.bytesRead += run.bytesOf(from, n);
      b.advance(n);
      // Stopped before the run's end with room left: at a poison record, which the next read meets first.
      if (from + n < run.count && out.length < max) break;
    }
    if (b.paused && b.position !== undefined && b.hasRoomToResume(this.ctx.settings)) this.grant(b);
    return out;
  }

  /** The bytes of the records reads of the shard have taken since it was opened here. */
  bytesRead(shard: number): number {
    return this.buffers.get(shard)?.bytesRead ?? 0;
  }

  /** Calls `listener` once when the shard's buffer has records (at once if it has some now). */
  whenReadable(shard: number, listener: () => void): void {
    const b = this.buffers.get(shard);
    if (b === undefined) return;
    b.waiter = listener;
    if (b.size > 0 || this.failure !== undefined) b.wake();
  }

  /**
   * Notes that a shard's records before `nextOffset` are ingested and checkpointed; committed to
   * the consumer's group at most once per `offsetsIntervalMs`, so Kafka's lag tools see each shard.
   */
  noteConsumed(shard: number, nextOffset: number): void {
    if (!this.ctx.settings.commitOffsets || this.closed) return;
    this.consumed.set(shard, Math.max(nextOffset, this.consumed.get(shard) ?? 0));
    this.commitTimer ??= setTimeout(() => {
      this.commitTimer = undefined;
      void this.commitConsumed();
    }, this.ctx.settings.offsetsIntervalMs);
  }

  private commitConsumed(): Promise<void> {
    const offsets = [...this.consumed].map(([partition, offset]) => ({ partition, offset }));
    this.consumed.clear();
    return this.consumer.commit(offsets);
  }

  /** The partition's low and high watermarks, read after this call. */
  async watermarks(shard: number): Promise<Watermarks> {
    const p = (await this.topicOffsets()).get(shard);
    if (p === undefined) throw new Error(`dataset ${this.dataset.ref}: Kafka topic "${this.topic}" has no partition ${shard}`);
    return { low: p.low, high: p.high };
  }

  /**
   * The partition's high watermark as last read (undefined before the first read), at once; the
   * next read is asked for now (one request for every shard asking at the same moment). For a
   * metrics scrape of thousands of copies: a promise per copy per scrape cost a node of 65 536 a
   * pause of its event loop of about 150 ms, most of it the collector's.
   */
  knownHigh(shard: number): number | undefined {
    void this.topicOffsets().catch(() => undefined);
    return this.lastWatermarks?.get(shard)?.high;
  }

  /**
   * The topic's offsets. Calls of one moment share one request, sent once they have all called:
   * each still gets offsets read after its call (a starting copy needs the end as it is then), and
   * a look at the lag of hundreds of shards (a metrics scrape, the status page) costs one request,
   * not one per shard, each answering every partition.
   */
  private topicOffsets(): Promise<ReadonlyMap<number, Watermarks>> {
    this.offsetsBatch ??= aTurn().then(async () => {
      this.offsetsBatch = undefined;
      this.ctx.assertOpen();
      // By partition: each of 65 536 shards looking its partition up in a list was quadratic.
      const byPartition = await this.ctx.client.topicOffsets(this.topic);
      this.lastWatermarks = byPartition;
      return byPartition;
    });
    return this.offsetsBatch;
  }

  stats(): KafkaFeedStats {
    return {
      dataset: this.dataset.ref,
      topic: this.topic,
      ...this.consumer.stats(),
      delivered: Object.fromEntries(this.delivered),
      failure: this.failure?.message,
      partitions: [...this.buffers.values()]
        .sort((a, b) => a.partition - b.partition)
        .map((b) => ({ shard: b.partition, bufferedRecords: b.size, bufferedBytes: b.bytes, position: b.position, paused: b.paused })),
    };
  }

  async shutdown(): Promise<void> {
    clearTimeout(this.commitTimer);
    this.commitTimer = undefined;
    await this.commitConsumed();
    this.closed = true;
    await this.consumer.shutdown();
  }

  /** Starts each assigned partition where its buffer ends, unless that is unknown (no read yet) or the buffer is full. */
  private startJoined(assigned: readonly number[]): void {
    for (const p of assigned) {
      const b = this.buffers.get(p);
      if (b === undefined) continue;
      if (b.position === undefined || b.isFull(this.ctx.settings)) b.paused = true;
      else this.start(b, b.position);
    }
  }

  private fail(e: unknown): void {
    const reason = e instanceof Error ? e.message : String(e);
    this.failure = new Error(`dataset ${this.dataset.ref}: the Kafka consumer of topic "${this.topic}" stopped: ${reason}`, { cause: e });
    this.log.error({ err: e }, 'Kafka ingestion consumer stopped for good; reads of this dataset fail until a shard is opened again');
  }

  /** Buffers a run of the shard's current start; anything else was fetched for nothing (and is only counted). */
  private onBatch(batch: PackedBatch): void {
    const p = batch.partition;
    this.delivered.set(p, (this.delivered.get(p) ?? 0) + batch.fetched);
    const b = this.buffers.get(p);
    if (b === undefined || b.position === undefined || batch.epoch !== b.epoch) return;
    if (batch.fetchedOffset < b.position) {
      // The consumer started over from its default offset (kafkajs restarted without our seek): back to the buffer's end.
      this.start(b, b.position);
      return;
    }
    b.noteFetched(batch.fetched, batch.run?.count ?? 0, batch.run?.bytes ?? 0);
    // Above the position: the client skipped records no reader sees (aborted or control records).
    b.position = batch.nextOffset;
    if (batch.run !== undefined) {
      b.push(batch.run);
      b.wake();
    }
    if (batch.paused) b.paused = true;
  }

  private seek(b: PartitionBuffer, offset: number): void {
    b.reset(offset);
    this.start(b, offset);
  }

  /** Fetches the partition from where its buffer ends, into the room the buffer has; runs of earlier starts are dropped. */
  private start(b: PartitionBuffer, at: number): void {
    b.epoch += 1;
    b.paused = false;
    this.consumer.start(b.partition, at, b.epoch, b.room(this.ctx.settings));
  }

  /** Room again for a paused partition. */
  private grant(b: PartitionBuffer): void {
    b.paused = false;
    this.consumer.grant(b.partition, b.epoch, b.room(this.ctx.settings));
  }
}
