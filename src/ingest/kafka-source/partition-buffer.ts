// One open shard's records between the consumer and the reader: a bounded queue whose fullness
// decides when its partition is paused and resumed.
import type { SourceRecord } from '../ingestion-source.js';
import type { KafkaShardReader } from './reader.js';
import type { KafkaSourceSettings } from './settings.js';

/** The bounds of a buffer. */
type Bounds = Pick<KafkaSourceSettings, 'bufferRecords' | 'bufferBytes'>;

/**
 * A record as fetched, already decoded (so it holds no slice of the fetch response): the very
 * object a read hands to the sink (no copy per record), or a `PoisonRecord` the decoder refused.
 */
export type Buffered = SourceRecord | PoisonRecord;

/** A record the decoder refused, and why. */
export class PoisonRecord {
  constructor(
    readonly offset: number,
    readonly key: string,
    readonly reason: string,
  ) {}
}

/** A buffered record's objects (the record, its key string and decoded value: about 260 bytes measured on Node 20), on top of its key and value bytes. */
export const RECORD_OVERHEAD_BYTES = 256;

/**
 * One open shard's records between the consumer and the reader. Invariant: every record of the
 * partition in `[cursor, position)` is in `records` (in order), so a read at an offset in that
 * range is answered from here; any other offset needs a seek.
 */
export class PartitionBuffer {
  private records: (Buffered | undefined)[] = [];
  /** What each record costs the buffer, beside it in `records`. */
  private sizes: number[] = [];
  private head = 0;
  bytes = 0;
  /** Everything before it was handed out (or skipped by a read further on). */
  cursor = 0;
  /** The offset the consumer fetches next; undefined until the first read says where to start. */
  position: number | undefined = undefined;
  /** Paused by us: the buffer is full or the start is not known yet. */
  paused = false;
  /** The reader waiting for records, called once when some arrive. */
  waiter: (() => void) | undefined;

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
    this.sizes = [];
    this.head = 0;
    this.bytes = 0;
    this.cursor = offset;
    this.position = offset;
  }

  /** Appends a record that costs `bytes` of the buffer. */
  push(record: Buffered, bytes: number): void {
    this.records.push(record);
    this.sizes.push(bytes);
    this.bytes += bytes;
  }

  /** Wakes the waiting reader, if any (once). */
  wake(): void {
    const w = this.waiter;
    this.waiter = undefined;
    w?.();
  }

  peek(): Buffered | undefined {
    return this.records[this.head];
  }

  shift(): void {
    const r = this.records[this.head];
    if (r === undefined) return;
    this.records[this.head] = undefined;
    this.bytes -= this.sizes[this.head]!;
    this.head += 1;
    this.cursor = r.offset + 1;
    // Compact now and then instead of Array.shift on every record.
    if (this.head >= 1024 && this.head * 2 >= this.records.length) {
      this.records = this.records.slice(this.head);
      this.sizes = this.sizes.slice(this.head);
      this.head = 0;
    }
  }

  /** Drops the records before `offset` (a read that starts further on). */
  skipTo(offset: number): void {
    for (let r = this.peek(); r !== undefined && r.offset < offset; r = this.peek()) this.shift();
    this.cursor = Math.max(this.cursor, offset);
  }

  isFull(s: Bounds): boolean {
    return this.size >= s.bufferRecords || this.bytes >= s.bufferBytes;
  }

  /** Resume at half: a resumed partition gets a whole fetch in before it pauses again. */
  hasRoomToResume(s: Bounds): boolean {
    return this.size <= s.bufferRecords / 2 && this.bytes <= s.bufferBytes / 2;
  }
}
