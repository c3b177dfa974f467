/**
 * What a cluster put on its bus topics, read back with a plain kafkajs consumer: each record's
 * size (its value's bytes as the broker holds them, after any chunking, before compression) and
 * time, for the tests and the scale benchmark.
 */
import { Kafka, logLevel } from 'kafkajs';
import { CHUNK_ID_HEADER } from '../../src/cluster/kafka-bus/chunks.js';

export interface TopicRecord {
  readonly timestamp: number;
  readonly bytes: number;
  /** The value, for the topics asked for with `keepValues` (a chunk's slice is not whole JSON: see `chunk`). */
  readonly value?: Buffer;
  /** Whether the record is one chunk of a larger message (its headers say so). */
  readonly chunk?: boolean;
}

/** Every record of `topics` (single-partition bus topics) from the beginning to their end now; values only of `keepValues`. */
export async function readTopics(
  brokers: readonly string[],
  topics: readonly string[],
  keepValues: readonly string[] = [],
): Promise<Map<string, TopicRecord[]>> {
  const kafka = new Kafka({ clientId: 'bench-bus-traffic', brokers: [...brokers], logLevel: logLevel.NOTHING });
  const admin = kafka.admin();
  await admin.connect();
  const ends = new Map<string, number>();
  for (const topic of topics) {
    const [p] = await admin.fetchTopicOffsets(topic);
    ends.set(topic, Number(p?.high ?? 0));
  }
  await admin.disconnect();
  const out = new Map<string, TopicRecord[]>(topics.map((t) => [t, []]));
  const pending = new Set(topics.filter((t) => ends.get(t)! > 0));
  if (pending.size === 0) return out;
  const consumer = kafka.consumer({ groupId: `bench-bus-traffic-${process.pid}-${Date.now()}`, maxBytes: 64 * 1024 * 1024 });
  await consumer.connect();
  for (const topic of topics) await consumer.subscribe({ topic, fromBeginning: true });
  await new Promise<void>((resolve, reject) => {
    consumer
      .run({
        eachBatch: async ({ batch }) => {
          const list = out.get(batch.topic)!;
          const keep = keepValues.includes(batch.topic);
          for (const m of batch.messages) {
            const record = { timestamp: Number(m.timestamp), bytes: m.value?.length ?? 0 };
            list.push(keep && m.value ? { ...record, value: m.value, chunk: m.headers?.[CHUNK_ID_HEADER] !== undefined } : record);
          }
          const last = batch.messages.at(-1);
          if (last && Number(last.offset) + 1 >= ends.get(batch.topic)!) pending.delete(batch.topic);
          if (pending.size === 0) resolve();
        },
      })
      .catch(reject);
  });
  await consumer.disconnect();
  return out;
}

/** Bytes and records of `records` whose time is within [from, to). */
export function within(records: readonly TopicRecord[], from: number, to: number): { bytes: number; records: number } {
  let bytes = 0;
  let count = 0;
  for (const r of records) {
    if (r.timestamp < from || r.timestamp >= to) continue;
    bytes += r.bytes;
    count += 1;
  }
  return { bytes, records: count };
}
