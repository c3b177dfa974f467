// The bus's writes: one kafkajs producer, and a queue that sends records one request at a time in
// the order `produce` was called, batching consecutive records of the same topic.
import { Partitioners, type Kafka, type Producer } from 'kafkajs';
import type { Logger } from 'pino';
import { IDEMPOTENT_PRODUCER } from '../kafka-client.js';
import { SharedAttempt } from '../shared-attempt.js';
import { KafkaBusError, kafkaCall, kafkaError } from './errors.js';

interface PendingProduce {
  readonly topic: string;
  readonly value: string;
  readonly resolve: (offset: number) => void;
  readonly reject: (error: unknown) => void;
}

/** How many queued records of one topic go in one produce request, at most, and how many bytes. */
const MAX_BATCH_RECORDS = 500;
const MAX_BATCH_BYTES = 512 * 1024;

export interface BusProducerParams {
  /** Fails unless the topic exists with one partition. */
  readonly checkTopic: (topic: string) => Promise<void>;
  /** What a failed produce to `topic` rejects with (the bus says `CLOSED` once it is closed). */
  readonly failure: (error: KafkaBusError, topic: string) => unknown;
  readonly log: Logger;
}

/** Appends records in call order, each resolving with its offset once written with `acks: -1`. */
export class BusProducer {
  private readonly producer: Producer;
  private readonly connection: SharedAttempt<void>;
  private readonly pending: PendingProduce[] = [];
  /** The pump sending `pending`, while it runs. */
  private pumping: Promise<void> | undefined;

  constructor(
    kafka: Kafka,
    private readonly p: BusProducerParams,
  ) {
    this.producer = kafka.producer({
      allowAutoTopicCreation: false,
      // Never used (every record names partition 0); naming one keeps kafkajs from warning about its default.
      createPartitioner: Partitioners.DefaultPartitioner,
      // A retried produce is written once (the pump sends one request at a time anyway).
      ...IDEMPOTENT_PRODUCER,
      // A topic deleted under a running bus, or a broker gone: fail within a few seconds, not 10+.
      retry: { retries: 4, initialRetryTime: 100, maxRetryTime: 1_000 },
    });
    this.connection = new SharedAttempt(() => kafkaCall('connecting the producer', {}, () => this.producer.connect()));
  }

  /** Queues an encoded record; resolves with its offset. */
  produce(topic: string, value: string): Promise<number> {
    return new Promise<number>((resolve, reject) => {
      this.pending.push({ topic, value, resolve, reject });
      this.pump();
    });
  }

  /** Lets the records already queued be sent (or fail), then disconnects. */
  async close(): Promise<void> {
    while (this.pumping) await this.pumping;
    if (this.connection.current) await this.producer.disconnect().catch((e: unknown) => this.p.log.warn({ err: e }, 'producer disconnect failed'));
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
      const topic = this.pending[0]!.topic;
      let n = 0;
      let bytes = 0;
      while (n < this.pending.length && n < MAX_BATCH_RECORDS && this.pending[n]!.topic === topic) {
        bytes += this.pending[n]!.value.length;
        if (n > 0 && bytes > MAX_BATCH_BYTES) break;
        n += 1;
      }
      const batch = this.pending.splice(0, n);
      try {
        await this.p.checkTopic(topic);
        await this.connection.get();
        const sent = await this.producer.send({ topic, acks: -1, messages: batch.map((p) => ({ value: p.value, partition: 0 })) });
        const meta = sent.find((m) => m.topicName === topic && m.partition === 0);
        if (meta?.baseOffset === undefined) throw new Error('the broker returned no offset for partition 0');
        const base = Number(meta.baseOffset);
        batch.forEach((p, i) => p.resolve(base + i));
      } catch (e) {
        const error = this.p.failure(e instanceof KafkaBusError ? e : kafkaError(`producing to ${topic}`, { topic }, e), topic);
        for (const p of batch) p.reject(error);
      }
    }
  }
}
