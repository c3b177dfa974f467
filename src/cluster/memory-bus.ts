import {
  encodeLabels,
  MessageTooLargeError,
  type Bus,
  type BusRecord,
  type BusSubscription,
  type ProduceOptions,
  type RecordHandler,
  type SubscribeOptions,
} from './bus.js';
import { busLimits, chunkCount, type BusLimitOptions, type BusLimits } from './bus-limits.js';
import type { ChunkPosition } from './chunk-assembly.js';
import { ChunkedReader } from './chunked-reader.js';
import { measuredJsonCopy } from '../core/json-data.js';
import type { Clock } from './clock.js';

/** What happens to one produced record: the simulator's fault injection. */
export type BusFault =
  | { readonly kind: 'deliver' }
  /** Never appended; `produce` still resolves, with -1. */
  | { readonly kind: 'drop' }
  /** Appended twice in a row; `produce` resolves with the first offset. */
  | { readonly kind: 'duplicate' }
  /** Appended `ms` later by the clock (later records may overtake it); `produce` resolves then. */
  | { readonly kind: 'delay'; readonly ms: number };

/** Which chunk of its message a chunk record is, and the bytes of JSON it stands for. */
export interface MemoryChunk extends ChunkPosition {
  readonly bytes: number;
}

export interface MemoryBusOptions extends BusLimitOptions {
  /**
   * Decides the fate of each record (called once per record, with the copied value): once per
   * `produce`, or once per chunk of a chunked value, with `chunk` saying which.
   */
  readonly faults?: (topic: string, value: unknown, chunk?: MemoryChunk) => BusFault;
  /**
   * Records kept per topic, the newest (default 2 000; chunk records count one each, and it must
   * hold the chunks of the largest message, maxMessageBytes / maxRecordBytes): like Kafka's
   * retention, older ones are dropped and a subscription behind them goes on from the oldest kept.
   * Without a bound a long-running embedded cluster would keep every record it ever sent.
   */
  readonly retainRecords?: number;
}

/**
 * A record of the memory bus's log. A chunk record carries `chunk`, and as its value the whole
 * message's frozen copy: the memory bus does not cut bytes (every chunk stands for its share of
 * the JSON by `chunk.bytes`), and the value delivered once all chunks arrived is that same copy.
 */
export interface MemoryBusRecord extends BusRecord {
  readonly chunk?: MemoryChunk;
}

/** A topic's retained records: `records[i]` has offset `base + i`. */
interface TopicLog {
  base: number;
  records: MemoryBusRecord[];
}

const DEFAULT_RETAIN_RECORDS = 2_000;

interface Subscription {
  readonly topic: string;
  readonly group: string;
  readonly handler: RecordHandler;
  readonly onError: SubscribeOptions['onError'];
  /** The next offset to deliver. */
  position: number;
  running: boolean;
  inFlight: boolean;
  closed: boolean;
  /** Made at the first chunk record the subscription reads: plain records never need it. */
  chunks: ChunkedReader<unknown> | undefined;
}

/**
 * The bus of embedded mode and of the simulator: one partition per topic, kept in memory.
 * Deterministic: records are delivered from microtasks only, and delayed records by the injected
 * clock.
 *
 * - `produce` copies the value as the Kafka bus's JSON would (`frozenJsonCopy`), so a value that
 *   is not JSON data (a function, a Map, NaN) is refused at once, as the Kafka bus refuses it, and
 *   later changes to the caller's object do not reach consumers. The copy is frozen, deeply, and
 *   every delivery shares it: a consumer that would change a record fails at once (as it could
 *   not change a Kafka record's bytes), and nothing is copied per delivery (the simulator's
 *   hottest path).
 * - A value whose JSON is larger than `maxRecordBytes` is appended as consecutive chunk records
 *   (see `MemoryBusRecord`); faults, retention and offsets apply to each chunk, and a
 *   subscription delivers the message as `Bus` says. Its size is measured cheaply: the copy's walk
 *   bounds it, and only a value whose bound passes `maxRecordBytes` is encoded to be measured.
 * - Delivery starts in a microtask after `subscribe` or `produce`, never inside those calls.
 * - Each topic keeps its newest `retainRecords` records (see the option); offsets never change.
 * - Committed positions are kept per (topic, group) for the life of the bus. Unlike Kafka, two
 *   open subscriptions of one group do not split the topic: each receives every record.
 * - `close()` stops delivery after the record in flight; it does not wait for that record.
 * - A handler error with no `onError` is dropped (the record is skipped either way).
 */
export class MemoryBus implements Bus {
  private readonly logs = new Map<string, TopicLog>();
  private readonly committed = new Map<string, number>();
  private readonly subscriptions: Subscription[] = [];
  private delayed = 0;
  private readonly faults: MemoryBusOptions['faults'];
  private readonly retain: number;
  readonly limits: BusLimits;
  /** Ids of chunked messages: unique per bus, which is all a memory log ever holds. */
  private nextMessageId = 0;

  constructor(
    private readonly clock: Clock,
    options: MemoryBusOptions = {},
  ) {
    this.faults = options.faults;
    this.retain = options.retainRecords ?? DEFAULT_RETAIN_RECORDS;
    const invalid = (key: string, reason: string): never => {
      throw new RangeError(`MemoryBus option ${key} ${reason}`);
    };
    if (!Number.isSafeInteger(this.retain) || this.retain < 1) invalid('retainRecords', `must be a positive integer, got ${this.retain}`);
    this.limits = busLimits(options, invalid);
    // A message with more chunks than the log keeps would lose its first ones as it is appended.
    const chunks = chunkCount(this.limits.maxMessageBytes, this.limits.maxRecordBytes);
    if (chunks > this.retain)
      invalid('retainRecords', `(${this.retain}) must hold the chunks of the largest message: maxMessageBytes / maxRecordBytes = ${chunks}`);
  }

  /** Labels are checked as Kafka's bus checks them, and not kept: every record is delivered (`SubscribeOptions.skip`). */
  async produce(topic: string, value: unknown, options?: ProduceOptions): Promise<number> {
    if (topic.length === 0) throw new Error('topic name must not be empty');
    if (options?.labels) encodeLabels(options.labels);
    const { maxRecordBytes, maxMessageBytes } = this.limits;
    const { value: copy, maxBytes } = measuredJsonCopy(value);
    // The bound settles nearly every value without encoding it; the rest are measured exactly.
    if (maxBytes <= maxRecordBytes) return this.place(topic, copy, undefined);
    const bytes = Buffer.byteLength(JSON.stringify(copy));
    if (bytes <= maxRecordBytes) return this.place(topic, copy, undefined);
    if (bytes > maxMessageBytes) throw new MessageTooLargeError(topic, bytes, maxMessageBytes);
    const count = chunkCount(bytes, maxRecordBytes);
    const id = String(this.nextMessageId++);
    const placed: (number | Promise<number>)[] = [];
    for (let index = 0; index < count; index++) {
      placed.push(this.place(topic, copy, { id, index, count, bytes: Math.min(maxRecordBytes, bytes - index * maxRecordBytes) }));
    }
    const offsets = await Promise.all(placed);
    // A message with a lost chunk is lost whole, as a dropped record is.
    return offsets.includes(-1) ? -1 : offsets[count - 1]!;
  }

  /** Appends one record as its fault says: its offset (the first of a duplicate), -1 if dropped. */
  private place(topic: string, copy: unknown, chunk: MemoryChunk | undefined): number | Promise<number> {
    const fault = this.faults?.(topic, copy, chunk) ?? DELIVER;
    switch (fault.kind) {
      case 'deliver':
        return this.append(topic, copy, chunk);
      case 'drop':
        return -1;
      case 'duplicate': {
        const offset = this.append(topic, copy, chunk);
        this.append(topic, copy, chunk);
        return offset;
      }
      case 'delay': {
        this.delayed += 1;
        return new Promise<number>((resolve) => {
          this.clock.schedule(fault.ms, () => {
            this.delayed -= 1;
            resolve(this.append(topic, copy, chunk));
          });
        });
      }
    }
  }

  async subscribe(topic: string, group: string, handler: RecordHandler, options: SubscribeOptions = {}): Promise<BusSubscription> {
    const committed = this.committed.get(key(topic, group));
    const log = this.log(topic);
    const start = committed ?? (options.startAt !== undefined ? Math.max(log.base, options.startAt) : options.start === 'earliest' ? log.base : end(log));
    const sub: Subscription = {
      topic,
      group,
      handler,
      onError: options.onError,
      position: start,
      running: false,
      inFlight: false,
      closed: false,
      chunks: undefined,
    };
    this.subscriptions.push(sub);
    this.kick(sub);
    return {
      commit: async (offset: number) => {
        if (!Number.isSafeInteger(offset) || offset < 0) throw new RangeError(`commit offset must be a non-negative integer, got ${offset}`);
        this.committed.set(key(topic, group), sub.chunks ? sub.chunks.commitLimit(offset) : offset);
      },
      close: async () => {
        sub.closed = true;
        sub.chunks?.close();
        const i = this.subscriptions.indexOf(sub);
        if (i >= 0) this.subscriptions.splice(i, 1);
      },
    };
  }

  /**
   * Work not yet done: records appended but not yet handled by each open subscription (the one in
   * its handler included), plus delayed records not yet appended. Zero means the bus is quiet.
   */
  pending(): number {
    let n = this.delayed;
    for (const sub of this.subscriptions) {
      const log = this.log(sub.topic);
      n += Math.max(0, end(log) - Math.max(sub.position, log.base)) + (sub.inFlight ? 1 : 0);
    }
    return n;
  }

  /** Every record of `topic` still retained (for tests and the simulator); records are frozen. */
  topic(name: string): readonly MemoryBusRecord[] {
    return [...this.log(name).records];
  }

  committedOffset(topic: string, group: string): Promise<number | undefined> {
    return Promise.resolve(this.committedPosition(topic, group));
  }

  /** The committed position of `group` on `topic`, if it committed one. */
  committedPosition(topic: string, group: string): number | undefined {
    return this.committed.get(key(topic, group));
  }

  private log(topic: string): TopicLog {
    let log = this.logs.get(topic);
    if (!log) {
      log = { base: 0, records: [] };
      this.logs.set(topic, log);
    }
    return log;
  }

  private append(topic: string, value: unknown, chunk: MemoryChunk | undefined): number {
    const log = this.log(topic);
    const offset = end(log);
    log.records.push(Object.freeze(chunk === undefined ? { topic, offset, value } : { topic, offset, value, chunk }));
    // Dropped in chunks (twice the bound, then back to it), so appending stays O(1) amortised.
    if (log.records.length >= 2 * this.retain) {
      const drop = log.records.length - this.retain;
      log.records.splice(0, drop);
      log.base += drop;
    }
    for (const sub of this.subscriptions) if (sub.topic === topic) this.kick(sub);
    return offset;
  }

  /** Starts the subscription's delivery loop in a microtask, unless it is already running. */
  private kick(sub: Subscription): void {
    if (sub.running || sub.closed) return;
    sub.running = true;
    void Promise.resolve().then(() => this.deliver(sub));
  }

  private async deliver(sub: Subscription): Promise<void> {
    try {
      for (;;) {
        if (sub.closed) return;
        const log = this.log(sub.topic);
        if (sub.position < log.base) sub.position = log.base; // behind retention: the oldest kept
        const read = log.records[sub.position - log.base];
        if (!read) return;
        sub.position += 1;
        const record = read.chunk === undefined ? read : this.assemble(sub, read, read.chunk);
        if (record === undefined) continue;
        sub.inFlight = true;
        sub.chunks?.handlerStarted();
        try {
          await sub.handler(record);
        } catch (error) {
          report(sub, error, record);
        } finally {
          sub.inFlight = false;
          sub.chunks?.handlerEnded();
        }
      }
    } finally {
      sub.running = false;
    }
  }

  /** Reads a chunk record: the whole message if it completed it, else nothing to deliver. */
  private assemble(sub: Subscription, read: MemoryBusRecord, chunk: MemoryChunk): BusRecord | undefined {
    sub.chunks ??= new ChunkedReader<unknown>({ topic: sub.topic, clock: this.clock, limits: this.limits, report: (e, r) => report(sub, e, r) });
    const outcome = sub.chunks.read({ position: chunk, offset: read.offset, piece: read.value, bytes: chunk.bytes });
    // Every piece is the one frozen copy `produce` made: delivering it is the reassembly.
    return outcome.kind === 'complete' ? Object.freeze({ topic: sub.topic, offset: read.offset, value: outcome.pieces[0] }) : undefined;
  }
}

const DELIVER: BusFault = { kind: 'deliver' };

function report(sub: Subscription, error: unknown, record: BusRecord): void {
  try {
    sub.onError?.(error, record);
  } catch {
    // An error handler that throws must not stop delivery either.
  }
}

function end(log: TopicLog): number {
  return log.base + log.records.length;
}

function key(topic: string, group: string): string {
  return `${topic}\u0000${group}`;
}
