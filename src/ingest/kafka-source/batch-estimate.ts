// How big the next fetched batch of a partition will be, judged by the last one: what decides when
// a partition pauses (before a batch would not fit) and when it resumes (once one fits again).
import type { KafkaSourceSettings } from './settings.js';

/** The bounds of a shard's buffer. */
export type Bounds = Pick<KafkaSourceSettings, 'bufferRecords' | 'bufferBytes'>;

/** Records and bytes a buffer can still take. */
export interface Room {
  readonly records: number;
  readonly bytes: number;
}

const NOTHING: Room = { records: 0, bytes: 0 };

/** The last fetched batch's records, and its bytes as a run would hold them (estimated from what was taken). */
export class BatchEstimate {
  private records = 0;
  private bytes = 0;

  /**
   * Notes a fetched batch of `records` records, of which `taken` were packed into a run of
   * `takenBytes` bytes (none taken: the last estimate of bytes per record stands).
   */
  note(records: number, taken: number, takenBytes: number): void {
    const perRecord = taken > 0 ? takenBytes / taken : this.records > 0 ? this.bytes / this.records : 0;
    this.records = records;
    this.bytes = perRecord * records;
  }

  /**
   * Whether `room` takes a batch like the last one, counted as at least `atLeast`; both capped at
   * the bounds (a larger batch needs an empty buffer). A batch that does not fit is cut, and what
   * was cut is fetched and decoded again: a partition pauses when the next batch would not fit, not
   * only when its buffer is full (small records fill a 1 MiB fetch with more records than half the
   * default bound).
   */
  fits(room: Room, bounds: Bounds, atLeast: Room = NOTHING): boolean {
    return (
      Math.min(Math.max(atLeast.records, this.records), bounds.bufferRecords) <= room.records &&
      Math.min(Math.max(atLeast.bytes, this.bytes), bounds.bufferBytes) <= room.bytes
    );
  }
}
