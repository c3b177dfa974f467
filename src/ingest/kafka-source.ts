// Kafka behind the IngestionSource port (DESIGN.md §7): partition p of a dataset's topic is shard p.
//
// kafkajs has no assign(). So per dataset this process runs ONE consumer, in a consumer group of
// its own, whose assigner hands it exactly the partitions of the shards open here (it is the
// group's only member, hence its leader). kafkajs cannot change an assignment while it runs, so
// opening or closing a shard recreates the consumer, once per burst of changes. Records go into a
// bounded buffer per partition that `read` drains; a full buffer pauses its partition. Offsets are
// never committed to Kafka: the checkpoints in the MetaStore are the source of truth, and every
// consumer starts where the buffers end (`seek`), so a recreate loses and repeats nothing.
import { randomBytes } from 'node:crypto';
import { AssignerProtocol, type Admin, type Consumer, type EachBatchPayload, type Kafka, type PartitionAssigner } from 'kafkajs';
import type { Logger } from 'pino';
import { createKafka, type KafkaConnection } from '../cluster/kafka-client.js';
import type { DatasetConfig } from '../core/dataset-config.js';
import { ShardOutOfRangeError } from '../core/errors.js';
import { isShardInRange, type ShardNum } from '../core/ids.js';
import { IngestionFailure, type IngestionSource, type ShardReader, type SourceRecord } from './ingestion-source.js';
import { checkKafkaTopic, kafkaTopicOf } from './kafka-topic-check.js';

/** Fetch tuning of the per-dataset consumers (kafkajs's consumer options of the same names). */
export interface KafkaFetchOptions {
  /**
   * Most bytes one fetch returns per partition (default 256 KiB). Keep a fetch within half a buffer
   * (`bufferBytes`, `bufferRecords`): what does not fit is dropped and fetched again.
   */
  readonly maxBytesPerPartition?: number;
  /** Most bytes one fetch returns over all partitions (default 8 MiB). */
  readonly maxBytes?: number;
  /** The broker answers a fetch once it has this many bytes, or after `maxWaitTimeMs` (default 1). */
  readonly minBytes?: number;
  /**
   * Longest a fetch waits at the broker for `minBytes` (default 100 ms). It also bounds how long a
   * seek or a resumed partition waits for the fetch in flight (kafkajs sleeps this long when every
   * partition is paused), so it caps the throughput of a reader whose buffer keeps filling up.
   */
  readonly maxWaitTimeMs?: number;
}

/** Turns a record's value into what readers see; throwing makes the record a poison record. */
export type KafkaValueDecoder = (value: Buffer | null, key: string, offset: number) => unknown;

export interface KafkaIngestionSourceOptions extends KafkaConnection {
  /**
   * Prefix of this process's consumer group ids, e.g. `<cluster>.ingest.<node>`. Each dataset's
   * consumer is in group `<groupPrefix>.<dataset>.<instanceId>.<generation>`.
   */
  readonly groupPrefix: string;
  /** Tells this source's groups from any other incarnation's (default: 8 random hex digits per source). */
  readonly instanceId?: string;
  /** Most records buffered per open shard before its partition is paused (default 10 000). */
  readonly bufferRecords?: number;
  /**
   * Most bytes buffered per open shard before its partition is paused (default 8 MiB), counting
   * each record's key and value plus 256 bytes for its objects: about the memory it takes.
   */
  readonly bufferBytes?: number;
  /**
   * How long a change of the open shards waits before the consumer is recreated, gathering every
   * other change in that window into the same recreate (default 50 ms).
   */
  readonly recreateDelayMs?: number;
  readonly fetch?: KafkaFetchOptions;
  /** Default `decodeKafkaValue`: JSON when the value parses as JSON, else its UTF-8 text; null for a null value. */
  readonly decode?: KafkaValueDecoder;
}

interface Settings {
  readonly groupPrefix: string;
  readonly instanceId: string;
  readonly bufferRecords: number;
  readonly bufferBytes: number;
  readonly recreateDelayMs: number;
  readonly maxBytesPerPartition: number;
  readonly maxBytes: number;
  readonly minBytes: number;
  readonly maxWaitTimeMs: number;
  readonly decode: KafkaValueDecoder;
}

const MiB = 1024 * 1024;

function settingsOf(o: KafkaIngestionSourceOptions): Settings {
  const int = (key: string, value: number | undefined, fallback: number, min: number): number => {
    if (value === undefined) return fallback;
    if (!Number.isSafeInteger(value) || value < min) {
      throw new RangeError(`invalid KafkaIngestionSource option ${key}: must be an integer of at least ${min}, got ${value}`);
    }
    return value;
  };
  if (!/^[A-Za-z0-9._-]{1,1000}$/.test(o.groupPrefix)) {
    throw new RangeError(`invalid KafkaIngestionSource option groupPrefix: must be 1 to 1000 of letters, digits, ".", "_", "-", got ${JSON.stringify(o.groupPrefix)}`);
  }
  const instanceId = o.instanceId ?? randomBytes(4).toString('hex');
  if (!/^[A-Za-z0-9_-]{1,64}$/.test(instanceId)) {
    throw new RangeError(`invalid KafkaIngestionSource option instanceId: must be 1 to 64 of letters, digits, "_", "-", got ${JSON.stringify(instanceId)}`);
  }
  const f = o.fetch ?? {};
  return {
    groupPrefix: o.groupPrefix,
    instanceId,
    bufferRecords: int('bufferRecords', o.bufferRecords, 10_000, 2),
    bufferBytes: int('bufferBytes', o.bufferBytes, 8 * MiB, 1024),
    recreateDelayMs: int('recreateDelayMs', o.recreateDelayMs, 50, 0),
    // Measured on 16 partitions of small records: 256 KiB per partition fetched ~30% more records/s
    // than 1 MiB (which overfills a 10 000-record buffer and fetches the rest twice) or 128 KiB.
    maxBytesPerPartition: int('fetch.maxBytesPerPartition', f.maxBytesPerPartition, 256 * 1024, 1024),
    maxBytes: int('fetch.maxBytes', f.maxBytes, 8 * MiB, 1024),
    minBytes: int('fetch.minBytes', f.minBytes, 1, 1),
    maxWaitTimeMs: int('fetch.maxWaitTimeMs', f.maxWaitTimeMs, 100, 1),
    decode: o.decode ?? decodeKafkaValue,
  };
}

/**
 * The default decoding of a record value: the parsed JSON when the value is JSON, otherwise its
 * UTF-8 text; `null` for a null value (a tombstone).
 *
 * Gotchas: a value that happens to be JSON text becomes the parsed value, so the text `42` is read
 * as the number 42 and `"a"` (with the quotes) as the string `a`. The `ShardedProducer` writes every
 * value as JSON, so what it sends is read back unchanged.
 */
export function decodeKafkaValue(value: Buffer | null): unknown {
  if (value === null) return null;
  const text = value.toString('utf8');
  // Only text that can start a JSON value pays for a parse attempt (and a thrown SyntaxError).
  if (!/^\s*[{["\-0-9tfn]/.test(text)) return text;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}

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
  /** Records the consumers delivered per partition, including any dropped (after a seek or a close). */
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

/**
 * The `IngestionSource` for datasets whose source is Kafka: shard p reads partition p of
 * `source.topic`. One per process; `open` and the readers are cheap, `close` ends everything.
 *
 * - One consumer per dataset, in a group of its own (`<groupPrefix>.<dataset>.<instanceId>.<generation>`),
 *   assigned exactly the partitions of the open shards. Opening or closing shards recreates it once
 *   per `recreateDelayMs` window; reads of the other shards go on from their buffers meanwhile and
 *   the new consumer continues where each buffer ends.
 * - `read(offset, max)` drains the shard's buffer; a read at any other offset than the buffer's
 *   continues from that offset (a seek), and returns nothing until the consumer fetched it.
 * - A full buffer (`bufferRecords` or `bufferBytes`) pauses its partition until reads drain it to
 *   half, so memory stays bounded however far behind the reader is.
 * - `earliestOffset`/`endOffset` are the partition's low and high watermarks (admin `fetchTopicOffsets`).
 * - Offsets are never committed to Kafka: the MetaStore checkpoints are the source of truth.
 *
 * Gotchas: a new consumer group waits the broker's `group.initial.rebalance.delay.ms` (3 s by
 * default; set it to 0 on brokers that only serve shardherd) before its first join, so a shard
 * opened later starts that much later. With transactional producers the high watermark counts the
 * commit markers, which no read returns. A consumer that stops for good (an error kafkajs does not
 * retry, or a deleted topic) fails every read of the dataset with that error until a shard is opened again.
 */
export class KafkaIngestionSource implements IngestionSource {
  /** Names this source's consumer groups (see `instanceId` in the options). */
  readonly instanceId: string;
  private readonly settings: Settings;
  private readonly kafka: Kafka;
  private readonly log: Logger;
  private readonly feeds = new Map<string, DatasetFeed>();
  private readonly retiring = new Set<Promise<void>>();
  private adminConnection: Promise<Admin> | undefined;
  private closed = false;

  constructor(options: KafkaIngestionSourceOptions) {
    this.settings = settingsOf(options);
    this.instanceId = this.settings.instanceId;
    this.log = options.log;
    this.kafka = createKafka(options);
  }

  /** Resolves when the dataset's topic exists with exactly `numShards` partitions; see `checkKafkaTopic`. */
  async validate(dataset: DatasetConfig): Promise<void> {
    this.assertOpen();
    kafkaTopicOf(dataset, 'the Kafka ingestion source');
    await checkKafkaTopic(await this.admin(), dataset, 'the Kafka ingestion source');
  }

  /**
   * A reader of partition `shard` of the dataset's topic. The first open of a dataset checks its
   * topic (as `validate` does). Opening a shard that is already open here hands the shard's buffer
   * to the new reader; the old one fails its reads from then on.
   */
  async open(dataset: DatasetConfig, shard: ShardNum): Promise<ShardReader> {
    this.assertOpen();
    const topic = kafkaTopicOf(dataset, 'the Kafka ingestion source');
    if (!isShardInRange(shard, dataset.numShards)) throw new ShardOutOfRangeError(shard, dataset.numShards, dataset.ref);
    const key = `${dataset.ref}\u0000${topic}\u0000${dataset.numShards}`;
    let feed = this.feeds.get(key);
    if (feed === undefined) {
      feed = new DatasetFeed(dataset, topic, this.feedContext());
      this.feeds.set(key, feed);
    }
    await feed.checkTopic();
    this.assertOpen();
    const reader = new KafkaShardReader(feed, dataset.ref, shard);
    feed.open(shard, reader);
    return reader;
  }

  /** What the source does for a dataset (the newest of its configs), or undefined if no shard of it was opened. */
  stats(dataset: string): KafkaFeedStats | undefined {
    let found: DatasetFeed | undefined;
    for (const feed of this.feeds.values()) if (feed.dataset.ref === dataset) found = feed;
    return found?.stats();
  }

  /** Stops every consumer (each leaves and deletes its group) and disconnects. Readers fail afterwards. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await Promise.all([...this.feeds.values()].map((feed) => feed.shutdown()));
    await Promise.all([...this.retiring]);
    const admin = this.adminConnection;
    this.adminConnection = undefined;
    if (admin !== undefined) await admin.then((a) => a.disconnect()).catch((e: unknown) => this.log.warn({ err: e }, 'disconnecting the Kafka admin client failed'));
  }

  private feedContext(): FeedContext {
    return {
      kafka: this.kafka,
      settings: this.settings,
      log: this.log,
      admin: () => {
        this.assertOpen();
        return this.admin();
      },
      retire: (consumer, groupId) => this.retire(consumer, groupId),
    };
  }

  /**
   * One admin connection for offsets, topic checks and group deletion, made on first use. After
   * `close` only the consumers being retired still use it (close disconnects it after them).
   */
  private admin(): Promise<Admin> {
    if (this.adminConnection === undefined) {
      if (this.closed) return Promise.reject(new Error('the Kafka ingestion source is closed'));
      const admin = this.kafka.admin();
      const connecting = admin.connect().then(() => admin);
      this.adminConnection = connecting;
      // A failed connection is not kept: the next call tries again.
      connecting.catch(() => {
        if (this.adminConnection === connecting) this.adminConnection = undefined;
      });
    }
    return this.adminConnection;
  }

  /**
   * Stops a consumer in the background: disconnect waits for its fetch in flight, and the next
   * consumer need not wait for that. Its group is deleted afterwards so groups do not pile up.
   */
  private retire(consumer: Consumer, groupId: string): void {
    const done = (async () => {
      try {
        await consumer.disconnect();
      } catch (e) {
        this.log.warn({ err: e, groupId }, 'stopping a Kafka ingestion consumer failed');
      }
      try {
        await (await this.admin()).deleteGroups([groupId]);
      } catch (e) {
        // Harmless: an empty group without offsets expires on the broker by itself.
        this.log.debug({ err: e, groupId }, 'deleting a retired consumer group failed');
      }
    })();
    this.retiring.add(done);
    void done.finally(() => this.retiring.delete(done));
  }

  private assertOpen(): void {
    if (this.closed) throw new Error('the Kafka ingestion source is closed');
  }
}

interface FeedContext {
  readonly kafka: Kafka;
  readonly settings: Settings;
  readonly log: Logger;
  admin(): Promise<Admin>;
  retire(consumer: Consumer, groupId: string): void;
}

interface Buffered {
  readonly offset: number;
  readonly key: Buffer | null;
  readonly value: Buffer | null;
  readonly bytes: number;
}

/** A buffered record's objects (the record and two Buffers: about 260 bytes measured on Node 20), on top of its key and value bytes. */
const RECORD_OVERHEAD_BYTES = 256;

/**
 * One open shard's records between the consumer and the reader. Invariant: every record of the
 * partition in `[cursor, position)` is in `records` (in order), so a read at an offset in that
 * range is answered from here; any other offset needs a seek.
 */
class PartitionBuffer {
  private records: (Buffered | undefined)[] = [];
  private head = 0;
  bytes = 0;
  /** Everything before it was handed out (or skipped by a read further on). */
  cursor = 0;
  /** The offset the consumer fetches next; undefined until the first read says where to start. */
  position: number | undefined = undefined;
  /** Paused by us: the buffer is full or the start is not known yet. */
  paused = false;

  constructor(
    readonly partition: number,
    public reader: KafkaShardReader,
  ) {}

  get size(): number {
    return this.records.length - this.head;
  }

  covers(offset: number): boolean {
    return this.position !== undefined && offset >= this.cursor && offset <= this.position;
  }

  reset(offset: number): void {
    this.records = [];
    this.head = 0;
    this.bytes = 0;
    this.cursor = offset;
    this.position = offset;
  }

  push(record: Buffered): void {
    this.records.push(record);
    this.bytes += record.bytes;
  }

  peek(): Buffered | undefined {
    return this.records[this.head];
  }

  shift(): void {
    const r = this.records[this.head];
    if (r === undefined) return;
    this.records[this.head] = undefined;
    this.head += 1;
    this.bytes -= r.bytes;
    this.cursor = r.offset + 1;
    // Compact now and then instead of Array.shift on every record.
    if (this.head >= 1024 && this.head * 2 >= this.records.length) {
      this.records = this.records.slice(this.head);
      this.head = 0;
    }
  }

  /** Drops the records before `offset` (a read that starts further on). */
  skipTo(offset: number): void {
    for (let r = this.peek(); r !== undefined && r.offset < offset; r = this.peek()) this.shift();
    this.cursor = Math.max(this.cursor, offset);
  }

  isFull(s: Settings): boolean {
    return this.size >= s.bufferRecords || this.bytes >= s.bufferBytes;
  }

  /** Resume at half: a resumed partition gets a whole fetch in before it pauses again. */
  hasRoomToResume(s: Settings): boolean {
    return this.size <= s.bufferRecords / 2 && this.bytes <= s.bufferBytes / 2;
  }
}

interface LiveConsumer {
  readonly consumer: Consumer;
  readonly groupId: string;
  /** The partitions its assigner hands out. */
  readonly partitions: readonly number[];
  /** When the first change that led to it happened. */
  readonly requestedAt: number;
  joined: boolean;
  assigned: readonly number[];
}

/** Everything for one dataset: its consumer, the buffers of its open shards, the recreate schedule. */
class DatasetFeed {
  private readonly buffers = new Map<number, PartitionBuffer>();
  private readonly delivered = new Map<number, number>();
  private readonly log: Logger;
  private current: LiveConsumer | undefined;
  private generation = 0;
  private timer: NodeJS.Timeout | undefined;
  private changedAt: number | undefined;
  private work: Promise<void> = Promise.resolve();
  private retryDelayMs = 0;
  private failure: Error | undefined;
  private topicChecked: Promise<void> | undefined;
  private lastRecreateMs: number | undefined;
  private closed = false;

  constructor(
    readonly dataset: DatasetConfig,
    readonly topic: string,
    private readonly ctx: FeedContext,
  ) {
    this.log = ctx.log.child({ dataset: dataset.ref, topic });
  }

  /** The topic check, once per dataset (a failed check is asked again next time). */
  checkTopic(): Promise<void> {
    if (this.topicChecked === undefined) {
      const checking = this.ctx.admin().then((admin) => checkKafkaTopic(admin, this.dataset, 'the Kafka ingestion source'));
      this.topicChecked = checking;
      checking.catch(() => {
        if (this.topicChecked === checking) this.topicChecked = undefined;
      });
    }
    return this.topicChecked;
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
    this.schedule(this.ctx.settings.recreateDelayMs);
  }

  close(shard: number, reader: KafkaShardReader): void {
    const b = this.buffers.get(shard);
    if (b === undefined || b.reader !== reader) return;
    this.buffers.delete(shard);
    // Stop fetching it at once; the recreate removes it from the assignment.
    this.pause(shard);
    this.schedule(this.ctx.settings.recreateDelayMs);
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
    while (out.length < max) {
      const r = b.peek();
      if (r === undefined) break;
      const key = r.key === null ? '' : r.key.toString('utf8');
      let value: unknown;
      try {
        value = this.ctx.settings.decode(r.value, key, r.offset);
      } catch (e) {
        // A poison record: what comes before it is delivered; a read that starts at it fails, every time.
        if (out.length > 0) break;
        const reason = e instanceof Error ? e.message : String(e);
        throw new IngestionFailure(`dataset ${this.dataset.ref} shard ${shard}: the record at offset ${r.offset} cannot be decoded: ${reason}`, r.offset);
      }
      b.shift();
      out.push({ offset: r.offset, key, value });
    }
    if (b.paused && b.position !== undefined && b.hasRoomToResume(this.ctx.settings)) this.resume(b);
    return out;
  }

  /** The partition's low and high watermarks. */
  async watermarks(shard: number): Promise<{ low: number; high: number }> {
    const offsets = await (await this.ctx.admin()).fetchTopicOffsets(this.topic);
    const p = offsets.find((o) => o.partition === shard);
    if (p === undefined) throw new Error(`dataset ${this.dataset.ref}: Kafka topic "${this.topic}" has no partition ${shard}`);
    return { low: Number(p.low), high: Number(p.high) };
  }

  stats(): KafkaFeedStats {
    return {
      dataset: this.dataset.ref,
      topic: this.topic,
      groupId: this.current?.groupId,
      assigned: this.current?.assigned ?? [],
      generations: this.generation,
      lastRecreateMs: this.lastRecreateMs,
      failure: this.failure?.message,
      delivered: Object.fromEntries(this.delivered),
      partitions: [...this.buffers.values()]
        .sort((a, b) => a.partition - b.partition)
        .map((b) => ({ shard: b.partition, bufferedRecords: b.size, bufferedBytes: b.bytes, position: b.position, paused: b.paused })),
    };
  }

  async shutdown(): Promise<void> {
    this.closed = true;
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    await this.work;
    const live = this.current;
    this.current = undefined;
    if (live !== undefined) this.ctx.retire(live.consumer, live.groupId);
  }

  /**
   * Recreates the consumer `delayMs` after the first change not yet applied; changes in the
   * meantime ride along (opening 8 shards at once recreates once). Recreates never overlap.
   */
  private schedule(delayMs: number): void {
    if (this.closed || this.timer !== undefined) return;
    this.changedAt ??= Date.now();
    this.timer = setTimeout(() => {
      this.timer = undefined;
      // reconcile handles Kafka's errors itself; anything else it throws stops the dataset's reads loudly.
      this.work = this.work.then(() => this.reconcile()).catch((e: unknown) => this.fail(e));
    }, delayMs);
  }

  private async reconcile(): Promise<void> {
    if (this.closed) return;
    const wanted = [...this.buffers.keys()].sort((a, b) => a - b);
    const requestedAt = this.changedAt ?? Date.now();
    this.changedAt = undefined;
    const old = this.current;
    if (old !== undefined && sameNumbers(old.partitions, wanted)) return;
    if (old !== undefined) {
      this.current = undefined;
      this.ctx.retire(old.consumer, old.groupId);
    }
    if (wanted.length === 0) return;

    this.generation += 1;
    const s = this.ctx.settings;
    const groupId = `${s.groupPrefix}.${this.dataset.ref}.${s.instanceId}.${this.generation}`;
    const consumer = this.ctx.kafka.consumer({
      groupId,
      partitionAssigners: [ownedPartitionsAssigner(this.topic, wanted, groupId)],
      allowAutoTopicCreation: false,
      maxBytesPerPartition: s.maxBytesPerPartition,
      maxBytes: s.maxBytes,
      minBytes: s.minBytes,
      maxWaitTimeInMs: s.maxWaitTimeMs,
    });
    const live: LiveConsumer = { consumer, groupId, partitions: wanted, requestedAt, joined: false, assigned: [] };
    this.current = live;
    consumer.on(consumer.events.GROUP_JOIN, (e) => this.onJoin(live, e.payload.memberAssignment[this.topic] ?? []));
    consumer.on(consumer.events.CRASH, (e) => this.onCrash(live, e.payload.error, e.payload.restart));
    try {
      await consumer.connect();
      await consumer.subscribe({ topics: [this.topic], fromBeginning: true });
      // Resolves once the group is joined (a failed join is a CRASH event instead).
      await consumer.run({ autoCommit: false, eachBatchAutoResolve: false, eachBatch: (payload) => this.onBatch(live, payload) });
      this.retryDelayMs = 0;
    } catch (e) {
      if (this.current !== live) return;
      this.current = undefined;
      this.ctx.retire(consumer, groupId);
      if (isRetriable(e)) {
        this.retryDelayMs = Math.min(Math.max(this.retryDelayMs * 2, 200), 5_000);
        this.log.warn({ err: e, retryInMs: this.retryDelayMs }, 'starting the Kafka ingestion consumer failed; trying again');
        this.schedule(this.retryDelayMs);
      } else {
        this.fail(e);
      }
    }
  }

  /** Every join (the first, and any rejoin or restart inside kafkajs) starts each partition where its buffer ends. */
  private onJoin(live: LiveConsumer, assigned: readonly number[]): void {
    if (this.current !== live) return;
    live.assigned = [...assigned].sort((a, b) => a - b);
    if (!sameNumbers(live.assigned, live.partitions)) {
      this.log.warn({ expected: live.partitions, assigned: live.assigned, groupId: live.groupId }, 'the Kafka ingestion consumer was assigned other partitions than the open shards');
    }
    const pause: number[] = [];
    const resume: number[] = [];
    for (const p of live.assigned) {
      const b = this.buffers.get(p);
      if (b === undefined || b.position === undefined || b.isFull(this.ctx.settings)) {
        if (b !== undefined) b.paused = true;
        pause.push(p);
        continue;
      }
      const offset = String(b.position);
      tryConsumer(() => live.consumer.seek({ topic: this.topic, partition: p, offset }));
      b.paused = false;
      resume.push(p);
    }
    if (pause.length > 0) tryConsumer(() => live.consumer.pause([{ topic: this.topic, partitions: pause }]));
    if (resume.length > 0) tryConsumer(() => live.consumer.resume([{ topic: this.topic, partitions: resume }]));
    if (!live.joined) {
      live.joined = true;
      this.lastRecreateMs = Date.now() - live.requestedAt;
      this.log.info(
        { event: 'ingest.consumer-joined', groupId: live.groupId, partitions: live.assigned, durationMs: this.lastRecreateMs },
        'Kafka ingestion consumer joined',
      );
    }
  }

  private onCrash(live: LiveConsumer, error: Error, restart: boolean): void {
    if (this.current !== live) return;
    if (restart) {
      this.log.warn({ err: error, groupId: live.groupId }, 'Kafka ingestion consumer crashed; kafkajs restarts it');
      return;
    }
    this.current = undefined;
    this.ctx.retire(live.consumer, live.groupId);
    this.fail(error);
  }

  private fail(e: unknown): void {
    const reason = e instanceof Error ? e.message : String(e);
    this.failure = new Error(`dataset ${this.dataset.ref}: the Kafka consumer of topic "${this.topic}" stopped: ${reason}`, { cause: e });
    this.log.error({ err: e }, 'Kafka ingestion consumer stopped for good; reads of this dataset fail until a shard is opened again');
  }

  private async onBatch(live: LiveConsumer, payload: EachBatchPayload): Promise<void> {
    const { batch } = payload;
    const p = batch.partition;
    this.delivered.set(p, (this.delivered.get(p) ?? 0) + batch.messages.length);
    // The last fetch of a consumer being replaced: the next one fetches the same records again.
    if (this.current !== live || this.closed) return;
    const b = this.buffers.get(p);
    if (b === undefined) {
      payload.pause();
      return;
    }
    // A seek is pending: these records come from before it.
    if (payload.isStale()) return;
    if (b.position === undefined) {
      b.paused = true;
      payload.pause();
      return;
    }
    const fetchedOffset = Number((batch as { fetchedOffset?: string }).fetchedOffset ?? batch.firstOffset());
    if (fetchedOffset < b.position) {
      // kafkajs started over from its default offset (it rejoined without our seek): back to the buffer's end.
      const offset = String(b.position);
      tryConsumer(() => live.consumer.seek({ topic: this.topic, partition: p, offset }));
      return;
    }
    // Above the position: kafkajs skipped records no reader sees (aborted or control records).
    const s = this.ctx.settings;
    let last: string | undefined;
    let accepted = 0;
    for (const m of batch.messages) {
      if (b.isFull(s)) break;
      const offset = Number(m.offset);
      // Copies: kafkajs's buffers are slices of the whole fetch response, which they would keep alive.
      const key = m.key === null ? null : Buffer.from(m.key);
      const value = m.value === null ? null : Buffer.from(m.value);
      b.push({ offset, key, value, bytes: (key?.length ?? 0) + (value?.length ?? 0) + RECORD_OVERHEAD_BYTES });
      last = m.offset;
      accepted += 1;
    }
    if (last !== undefined) {
      // Resolving the batch's last record moves kafkajs past any trailing control records too.
      payload.resolveOffset(last);
      b.position = accepted === batch.messages.length ? Number(batch.lastOffset()) + 1 : Number(last) + 1;
    }
    if (accepted < batch.messages.length || b.isFull(s)) {
      // Backpressure: the rest is fetched again once reads drained the buffer to half.
      b.paused = true;
      payload.pause();
    }
  }

  private seek(b: PartitionBuffer, offset: number): void {
    b.reset(offset);
    const live = this.current;
    // Before the consumer runs (or joins) the join applies the position instead.
    if (live !== undefined) tryConsumer(() => live.consumer.seek({ topic: this.topic, partition: b.partition, offset: String(offset) }));
    this.resume(b);
  }

  private resume(b: PartitionBuffer): void {
    b.paused = false;
    const live = this.current;
    if (live !== undefined) tryConsumer(() => live.consumer.resume([{ topic: this.topic, partitions: [b.partition] }]));
  }

  private pause(partition: number): void {
    const live = this.current;
    if (live !== undefined) tryConsumer(() => live.consumer.pause([{ topic: this.topic, partitions: [partition] }]));
  }
}

class KafkaShardReader implements ShardReader {
  private state: 'open' | 'superseded' | 'closed' = 'open';

  constructor(
    private readonly feed: DatasetFeed,
    private readonly dataset: string,
    private readonly shard: number,
  ) {}

  async earliestOffset(): Promise<number> {
    this.assertOpen();
    return (await this.feed.watermarks(this.shard)).low;
  }

  async endOffset(): Promise<number> {
    this.assertOpen();
    return (await this.feed.watermarks(this.shard)).high;
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

/**
 * The group's assignment: exactly `partitions` of `topic`, to the member that is this consumer
 * (recognised by `token` in its metadata). Any other member (one whose leave failed) gets nothing.
 */
function ownedPartitionsAssigner(topic: string, partitions: readonly number[], token: string): PartitionAssigner {
  const name = 'ShardherdOwnedPartitions';
  const version = 1;
  return () => ({
    name,
    version,
    async assign({ members }) {
      return members.map(({ memberId, memberMetadata }) => {
        const mine = AssignerProtocol.MemberMetadata.decode(memberMetadata)?.userData.toString('utf8') === token;
        return {
          memberId,
          memberAssignment: AssignerProtocol.MemberAssignment.encode({ version, assignment: mine ? { [topic]: [...partitions] } : {}, userData: Buffer.alloc(0) }),
        };
      });
    },
    protocol({ topics }) {
      return { name, metadata: AssignerProtocol.MemberMetadata.encode({ version, topics, userData: Buffer.from(token, 'utf8') }) };
    },
  });
}

function sameNumbers(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

function isRetriable(e: unknown): boolean {
  return typeof e === 'object' && e !== null && (e as { retriable?: unknown }).retriable === true && (e as { type?: unknown }).type !== 'UNKNOWN_TOPIC_OR_PARTITION';
}

/** kafkajs refuses seek/pause/resume while its consumer is between runs; the next join applies them. */
function tryConsumer(op: () => void): void {
  try {
    op();
  } catch {
    // Nothing to do: see above.
  }
}
