// The bus's writes: a queue that sends records one request at a time in the order `produce` was
// called, batching consecutive records of the same topic, through a `BusWriter` (one client
// library's producer).
import type { Logger } from 'pino';
import { KafkaBusError, kafkaError } from './errors.js';
import { batchCost } from './record-size.js';
import type { BusCompression } from './settings.js';

/** One record to write: its value (JSON text, or a chunk's bytes), their UTF-8 size, its headers. */
export interface OutgoingRecord {
  readonly value: string | Buffer;
  readonly bytes: number;
  readonly headers?: Readonly<Record<string, string>>;
}

/** One client library's writes of the bus's record batches. */
export interface BusWriter {
  /**
   * Writes the records to partition 0 of the topic, in order, compressed as asked, idempotently
   * with `acks: -1`; resolves with the offset of the first.
   */
  send(topic: string, records: readonly OutgoingRecord[], compression: BusCompression): Promise<number>;
  close(): Promise<void>;
}

/** The records of one `produce`: once one fails, the rest are not sent (a message is whole or not at all). */
interface Message {
  failed: unknown;
}

interface PendingProduce {
  readonly topic: string;
  readonly record: OutgoingRecord;
  readonly message: Message;
  readonly resolve: (offset: number) => void;
  readonly reject: (error: unknown) => void;
}

/** How many queued records of one topic go in one produce request, at most. */
const MAX_BATCH_RECORDS = 500;

export interface BusProducerParams {
  /** Fails unless the topic exists with one partition and takes the bus's records. */
  readonly checkTopic: (topic: string) => Promise<void>;
  /** What a failed produce to `topic` rejects with (the bus says `CLOSED` once it is closed). */
  readonly failure: (error: KafkaBusError, topic: string) => unknown;
  readonly log: Logger;
  /**
   * The budget of one produce request's records, values and overhead: so that a batch of records
   * fits wherever one record of the largest size does (see ./record-size.ts).
   */
  readonly maxRecordBytes: number;
  readonly compression: BusCompression;
}

/** Appends records in call order, each resolving with its offset once written with `acks: -1`. */
export class BusProducer {
  private readonly pending: PendingProduce[] = [];
  /** The pump sending `pending`, while it runs. */
  private pumping: Promise<void> | undefined;

  constructor(
    private readonly writer: BusWriter,
    private readonly p: BusProducerParams,
  ) {}

  /**
   * Queues the records of one message, consecutively (nothing this bus produces comes between
   * them); resolves with the offset of the last once all are written. If one fails, the records
   * after it are not sent and the message rejects with that failure.
   */
  produce(topic: string, records: readonly OutgoingRecord[]): Promise<number> {
    const message: Message = { failed: undefined };
    const written = records.map(
      (record) =>
        new Promise<number>((resolve, reject) => {
          this.pending.push({ topic, record, message, resolve, reject });
        }),
    );
    this.pump();
    return Promise.all(written).then((offsets) => offsets[offsets.length - 1]!);
  }

  /** Lets the records already queued be sent (or fail), then disconnects. */
  async close(): Promise<void> {
    while (this.pumping) await this.pumping;
    await this.writer.close().catch((e: unknown) => this.p.log.warn({ err: e }, 'producer disconnect failed'));
  }

  /** Sends queued records one request at a time, in order. */
  private pump(): void {
    if (this.pumping) return;
    this.pumping = this.drain().finally(() => {
      this.pumping = undefined;
      // Records queued after drain() saw the queue empty, before this ran.
      if (this.pending.length > 0) this.pump();
    });
  }

  private async drain(): Promise<void> {
    while (this.pending.length > 0) {
      // The rest of a message whose earlier record failed: never sent.
      const head = this.pending[0]!;
      if (head.message.failed !== undefined) {
        this.pending.shift();
        head.reject(head.message.failed);
        continue;
      }
      const topic = head.topic;
      let n = 0;
      let bytes = 0;
      while (n < this.pending.length && n < MAX_BATCH_RECORDS && this.pending[n]!.topic === topic && this.pending[n]!.message.failed === undefined) {
        const cost = batchCost(this.pending[n]!.record.bytes);
        if (n > 0 && bytes + cost > this.p.maxRecordBytes) break;
        bytes += cost;
        n += 1;
      }
      const batch = this.pending.splice(0, n);
      try {
        await this.p.checkTopic(topic);
        const base = await this.writer.send(
          topic,
          batch.map((p) => p.record),
          this.p.compression,
        );
        batch.forEach((p, i) => p.resolve(base + i));
      } catch (e) {
        const error = this.p.failure(e instanceof KafkaBusError ? e : produceError(topic, batch.length, bytes, this.p.maxRecordBytes, e), topic);
        for (const p of batch) {
          p.message.failed = error;
          p.reject(error);
        }
      }
    }
  }
}

/**
 * What a client's failure of a produce becomes. A batch the broker refuses as too large will be
 * refused again: `RECORD_TOO_LARGE`, not retriable (a caller that retries what may pass would
 * otherwise retry it forever).
 */
function produceError(topic: string, records: number, batchBytes: number, maxRecordBytes: number, cause: unknown): KafkaBusError {
  const type = kafkaErrorType(cause);
  // MESSAGE_TOO_LARGE: above the topic's max.message.bytes; RECORD_LIST_TOO_LARGE: above its segment.bytes.
  const config = type === 'MESSAGE_TOO_LARGE' ? 'max.message.bytes' : type === 'RECORD_LIST_TOO_LARGE' ? 'segment.bytes' : undefined;
  if (config !== undefined) {
    return new KafkaBusError(
      'RECORD_TOO_LARGE',
      `the broker refused a record batch (${records} records, at most ${batchBytes} bytes) to topic ${topic} as too large (${type}): its ${config} is below what the bus writes ` +
        `(maxRecordBytes ${maxRecordBytes} and overhead); raise the topic's ${config} or lower the bus option maxRecordBytes (kafka.maxRecordBytes in a node config)`,
      { topic, cause },
      false,
    );
  }
  return kafkaError(`producing to ${topic}`, { topic }, cause);
}

/**
 * Kafka's name of the error code the client reports (kafkajs's `type`, @platformatic/kafka's
 * `apiId`), also when it is wrapped (retries given up, a nested cause, one of several errors).
 */
function kafkaErrorType(e: unknown, depth = 0): string | undefined {
  if (typeof e !== 'object' || e === null || depth > 4) return undefined;
  const o = e as { type?: unknown; apiId?: unknown; originalError?: unknown; cause?: unknown; errors?: unknown };
  if (typeof o.type === 'string') return o.type;
  if (typeof o.apiId === 'string') return o.apiId;
  const inner = Array.isArray(o.errors) ? (o.errors as unknown[]) : [];
  return [o.originalError, o.cause, ...inner].map((c) => kafkaErrorType(c, depth + 1)).find((t) => t !== undefined);
}
