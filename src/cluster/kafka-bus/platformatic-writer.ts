// The bus's writes on @platformatic/kafka: one producer, made at the first send, each send
// idempotent (the library numbers the batches, so the broker drops one retried after its answer
// was lost).
import type { Producer } from '@platformatic/kafka';
import type { KafkaConnection } from '../kafka-client.js';
import { loadPlatformaticKafka, platformaticOptions } from '../platformatic-kafka.js';
import { SharedAttempt } from '../shared-attempt.js';
import type { BusWriter, OutgoingRecord } from './producer.js';
import type { BusCompression } from './settings.js';

/** Kafka's `acks` for "every in-sync replica has it". */
const ALL_IN_SYNC_REPLICAS = -1;

export class PlatformaticBusWriter implements BusWriter {
  private readonly producer: SharedAttempt<Producer>;

  constructor(connection: KafkaConnection) {
    this.producer = new SharedAttempt(async () => {
      const { Producer } = await loadPlatformaticKafka();
      // Topics are never auto-created. A topic deleted under a running bus, or a broker gone: fail
      // within a few seconds, as on kafkajs. Idempotence is asked for by each send: made idempotent,
      // the producer (2.12) never answers a metadata request for a missing topic.
      return new Producer({ ...platformaticOptions(connection), autocreateTopics: false, retries: 4, retryDelay: 250 });
    });
  }

  async send(topic: string, records: readonly OutgoingRecord[], compression: BusCompression): Promise<number> {
    const producer = await this.producer.get();
    const written = await producer.send({
      messages: records.map((record) => ({
        topic,
        partition: 0,
        value: typeof record.value === 'string' ? Buffer.from(record.value, 'utf8') : record.value,
        ...(record.headers === undefined
          ? {}
          : { headers: new Map(Object.entries(record.headers).map(([k, v]) => [Buffer.from(k, 'utf8'), Buffer.from(v, 'utf8')])) }),
      })),
      idempotent: true,
      acks: ALL_IN_SYNC_REPLICAS,
      compression,
    });
    const offset = written.offsets?.find((o) => o.topic === topic && o.partition === 0)?.offset;
    if (offset === undefined) throw new Error('the broker returned no offset for partition 0');
    return Number(offset);
  }

  async close(): Promise<void> {
    const made = this.producer.take();
    const producer = made === undefined ? undefined : await made.catch(() => undefined);
    await producer?.close();
  }
}
