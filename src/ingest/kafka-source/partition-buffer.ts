// One open shard's records between the consumer and the reader: a bounded queue of fetched runs
// whose fullness decides when its partition is paused and resumed.
import { BatchEstimate, type Bounds, type Room } from './batch-estimate.js';
import type { FetchedRun } from './fetched-run.js';
import type { KafkaShardReader } from './reader.js';

/**
 * One open shard's records between the consumer and the reader. Invariant: every record of the
 * partition in `[cursor, position)` is in `runs` (in order), so a read at an offset in that range
 * is answered from here; any other offset needs a seek. A run's memory counts until its last
 * record is read.
 */
export class PartitionBuffer {
  private runs: (FetchedRun | undefined)[] = [];
  private head = 0;
  /** The next record's index in `runs[head]`. */
  private index = 0;
  /** Records not read yet. */
  size = 0;
  /** Bytes (keys and values) of the records reads took, since the buffer was made. */
  bytesRead = 0;
  bytes = 0;
  /** Everything before it was handed out (or skipped by a read further on). */
  cursor = 0;
  /** The offset the consumer fetches next; undefined until the first read says where to start. */
  position: number | undefined = undefined;
  /** Paused by us: the buffer is full or the start is not known yet. */
  paused = false;
  /** Grows at every start of the partition at an offset: runs of an earlier start are not where it goes on. */
  epoch = 0;
  /** The reader waiting for records, called once when some arrive. */
  waiter: (() => void) | undefined;
  /** The size of the last fetched batch. */
  private readonly lastFetched = new BatchEstimate();

  constructor(
    readonly partition: number,
    public reader: KafkaShardReader,
  ) {}

  covers(offset: number): boolean {
    return this.position !== undefined && offset >= this.cursor && offset <= this.position;
  }

  reset(offset: number): void {
    this.runs = [];
    this.head = 0;
    this.index = 0;
    this.size = 0;
    this.bytes = 0;
    this.cursor = offset;
    this.position = offset;
  }

  push(run: FetchedRun): void {
    this.runs.push(run);
    this.size += run.count;
    this.bytes += run.bytes;
  }

  /** Wakes the waiting reader, if any (once). */
  wake(): void {
    const w = this.waiter;
    this.waiter = undefined;
    w?.();
  }

  /** The run of the next record (at `nextIndex` in it), or undefined when the buffer is empty. */
  nextRun(): FetchedRun | undefined {
    return this.runs[this.head];
  }

  get nextIndex(): number {
    return this.index;
  }

  /** Moves past the next record. */
  shift(): void {
    this.advance(1);
  }

  /** Moves past the next `n` records, all in the next run. */
  advance(n: number): void {
    const run = this.runs[this.head];
    if (run === undefined || n <= 0) return;
    this.index += n;
    this.size -= n;
    this.cursor = run.offset(this.index - 1) + 1;
    if (this.index < run.count) return;
    this.bytes -= run.bytes;
    this.runs[this.head] = undefined;
    this.head += 1;
    this.index = 0;
    // Compact now and then instead of Array.shift on every run.
    if (this.head >= 64 && this.head * 2 >= this.runs.length) {
      this.runs = this.runs.slice(this.head);
      this.head = 0;
    }
  }

  /** Drops the records before `offset` (a read that starts further on). */
  skipTo(offset: number): void {
    for (let run = this.nextRun(); run !== undefined && run.offset(this.index) < offset; run = this.nextRun()) this.shift();
    this.cursor = Math.max(this.cursor, offset);
  }

  isFull(s: Bounds): boolean {
    return this.size >= s.bufferRecords || this.bytes >= s.bufferBytes;
  }

  /** See `BatchEstimate.note`. */
  noteFetched(records: number, taken: number, takenBytes: number): void {
    this.lastFetched.note(records, taken, takenBytes);
  }

  /** What the buffer can still take before it holds its bounds. */
  room(s: Bounds): Room {
    return { records: s.bufferRecords - this.size, bytes: s.bufferBytes - this.bytes };
  }

  /** Whether a batch like the last one fetched fits (see `BatchEstimate.fits`). */
  hasRoomForBatch(s: Bounds): boolean {
    return this.lastFetched.fits(this.room(s), s);
  }

  /** Resume at half, and once a batch like the last one fits: a resumed partition gets a whole fetch in before it pauses again. */
  hasRoomToResume(s: Bounds): boolean {
    return this.lastFetched.fits(this.room(s), s, { records: s.bufferRecords / 2, bytes: s.bufferBytes / 2 });
  }
}
