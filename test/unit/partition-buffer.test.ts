// When a shard's buffer pauses and resumes its partition. A fetched batch that does not fit is cut,
// and the cut records are fetched and decoded again; so a partition pauses as soon as a batch like
// the last one would not fit, and resumes once one does (and the buffer is at most half full), while
// the buffer never holds more than its bounds.
import { describe, expect, it } from 'vitest';
import { fetchedMessages, type FetchedMessage } from '../../src/ingest/kafka-source/feed-client.js';
import { FetchedRun } from '../../src/ingest/kafka-source/fetched-run.js';
import { PartitionBuffer } from '../../src/ingest/kafka-source/partition-buffer.js';
import type { KafkaShardReader } from '../../src/ingest/kafka-source/reader.js';

const bounds = { bufferRecords: 1_500, bufferBytes: 1 << 30 };

/** `count` messages of a 20-byte value each, from `offset` on. */
function messages(offset: number, count: number): FetchedMessage[] {
  const bytes = Buffer.alloc(20 * count, 0x31);
  return Array.from({ length: count }, (_, i) => ({ offset: offset + i, value: bytes.subarray(20 * i, 20 * i + 20) }));
}

/** What the feed does with a fetched batch: packs what the bounds allow and notes the batch's size. */
function fetched(buffer: PartitionBuffer, count: number): number {
  const batch = messages(buffer.position!, count);
  const run = FetchedRun.pack(fetchedMessages(batch), bounds.bufferRecords - buffer.size, bounds.bufferBytes - buffer.bytes);
  buffer.noteFetched(count, run?.count ?? 0, run?.bytes ?? 0);
  if (run !== undefined) {
    buffer.push(run);
    buffer.position = run.lastOffset() + 1;
  }
  return run?.count ?? 0;
}

function newBuffer(): PartitionBuffer {
  const buffer = new PartitionBuffer(0, {} as KafkaShardReader);
  buffer.reset(0);
  return buffer;
}

describe('PartitionBuffer', () => {
  it('asks for a pause once a batch like the last would not fit, and resumes once it fits again at half or less', () => {
    const buffer = newBuffer();
    expect(fetched(buffer, 1_000)).toBe(1_000);
    // 1 000 + 1 000 > 1 500: the next batch would be cut.
    expect(buffer.hasRoomForBatch(bounds)).toBe(false);
    expect(buffer.hasRoomToResume(bounds)).toBe(false);
    buffer.advance(400);
    // 600 buffered: under the old rule (half, 750) it resumed here and cut the next batch at 900.
    expect(buffer.hasRoomToResume(bounds)).toBe(false);
    buffer.advance(100);
    expect(buffer.hasRoomToResume(bounds)).toBe(true);
    expect(fetched(buffer, 1_000)).toBe(1_000);
    expect(buffer.size).toBe(1_500);
  });

  it('with batches of a third of the bounds, resumes at half and pauses when the next would not fit', () => {
    const buffer = newBuffer();
    fetched(buffer, 500);
    fetched(buffer, 500);
    expect(buffer.hasRoomForBatch(bounds)).toBe(true);
    fetched(buffer, 500);
    expect(buffer.hasRoomForBatch(bounds)).toBe(false);
    buffer.advance(500);
    expect(buffer.hasRoomToResume(bounds)).toBe(false);
    buffer.advance(250);
    expect(buffer.hasRoomToResume(bounds)).toBe(true);
  });

  it('waits for an empty buffer when the last batch was larger than the bounds, and never holds more than them', () => {
    const buffer = newBuffer();
    expect(fetched(buffer, 4_000)).toBe(1_500);
    buffer.advance(1_499);
    expect(buffer.hasRoomToResume(bounds)).toBe(false);
    buffer.shift();
    expect(buffer.hasRoomToResume(bounds)).toBe(true);
  });
});
