// How many bytes the broker sees for what the bus writes, so that a topic's `max.message.bytes` can
// be checked before anything is refused: Kafka's record format v2 (KIP-98), as kafkajs writes it.
//
// The broker compares `max.message.bytes` with a whole record batch as sent (after compression):
// a 61-byte batch header (base offset 8, length 4, leader epoch 4, magic 1, CRC 4, attributes 2,
// last offset delta 4, first and max timestamp 8 + 8, producer id 8, producer epoch 2, base
// sequence 4, record count 4) and the records. A record is its length (a varint, at most 5 bytes),
// attributes (1), timestamp delta (a varlong, at most 10; kafkajs writes 0), offset delta (a varint,
// at most 5), key length (1: no key), value length (at most 5), the value, and its headers.
//
// The producer fills a batch with records whose values and overheads (counted at the most each can
// be) add up to at most maxRecordBytes, or with one record of at most maxRecordBytes: so the
// records of a batch never exceed maxRecordBytes + MAX_RECORD_OVERHEAD_BYTES. With gzip the
// records are compressed, which can grow data that does not compress, by at most zlib's
// deflateBound for Node's default settings (windowBits 15, memLevel 8): n/4096 + n/16384 + n/2^25
// + 7 bytes, plus gzip's 18-byte header and trailer.
import { MAX_CHUNK_HEADER_BYTES } from './chunks.js';
import type { BusCompression } from './settings.js';

export const RECORD_BATCH_HEADER_BYTES = 61;

/** A record's bytes beyond its value, at most (a chunk record's headers included). */
export const MAX_RECORD_OVERHEAD_BYTES = 5 + 1 + 10 + 5 + 1 + 5 + MAX_CHUNK_HEADER_BYTES;

/** Kafka's default `message.max.bytes` (1 MiB + 12): a topic the bus creates never gets less. */
export const KAFKA_DEFAULT_MAX_MESSAGE_BYTES = 1_048_588;

/** The most gzip can add to `n` bytes that do not compress. */
export function gzipGrowth(n: number): number {
  return Math.floor(n / 4096) + Math.floor(n / 16384) + Math.floor(n / 2 ** 25) + 7 + 18;
}

/**
 * The largest record batch the bus sends with these settings: what every bus topic's
 * `max.message.bytes` must allow (262 453 bytes for the default 256 KiB records with gzip).
 */
export function brokerBytesNeeded(maxRecordBytes: number, compression: BusCompression): number {
  const records = maxRecordBytes + MAX_RECORD_OVERHEAD_BYTES;
  return RECORD_BATCH_HEADER_BYTES + records + (compression === 'gzip' ? gzipGrowth(records) : 0);
}

/** What one record costs in a producer batch's budget of maxRecordBytes. */
export function batchCost(valueBytes: number): number {
  return valueBytes + MAX_RECORD_OVERHEAD_BYTES;
}
