// The ShardedProducer's writer on @platformatic/kafka: an idempotent producer (the library numbers
// each partition's batches, so the broker drops a batch retried after its answer was lost) and an
// admin client for the topic list.
import type { Admin, Producer } from '@platformatic/kafka';
import type { KafkaConnection } from '../../cluster/kafka-client.js';
import { loadPlatformaticKafka, platformaticOptions, platformaticPartitionCount, requireBrokerApis } from '../../cluster/platformatic-kafka.js';
import { SharedAttempt } from '../../cluster/shared-attempt.js';
import type { PartitionRecord, PartitionWriter } from './writer.js';

/** The Kafka APIs the writer uses: idempotent produce, metadata, and the topic list. */
const WRITER_APIS = ['Produce', 'InitProducerId', 'Metadata'] as const;
/** Kafka's `acks` for "every in-sync replica has it". */
const ALL_IN_SYNC_REPLICAS = -1;

export class PlatformaticPartitionWriter implements PartitionWriter {
  private readonly clients: SharedAttempt<{ readonly producer: Producer; readonly admin: Admin }>;

  constructor(connection: KafkaConnection) {
    const options = platformaticOptions(connection);
    const library = loadPlatformaticKafka();
    // Awaited at the first write; a failed load is reported there, not as an unhandled rejection.
    library.catch(() => undefined);
    this.clients = new SharedAttempt(async () => {
      const loaded = await library;
      const { Producer, Admin } = loaded;
      // Topics are never auto-created: a typo in a topic name must fail, not create a 1-partition topic.
      // Idempotence is asked for by each send: made idempotent, the producer (2.12) never answers a
      // metadata request for a missing topic.
      const producer = new Producer({ ...options, autocreateTopics: false });
      const admin = new Admin(options);
      try {
        // At the first write: a broker too old for the library is named as such, with the option that avoids it.
        await requireBrokerApis(producer, loaded, { apis: WRITER_APIS, setting: 'kafkaClient', brokers: connection.brokers, clientId: connection.clientId });
      } catch (e) {
        await Promise.all([producer.close(), admin.close()]).catch(() => undefined);
        throw e;
      }
      return { producer, admin };
    });
  }

  async write(topic: string, records: readonly PartitionRecord[]): Promise<ReadonlyMap<number, number>> {
    const { producer } = await this.clients.get();
    const messages = records.map((r) => ({ topic, partition: r.partition, ...(r.key === null ? {} : { key: Buffer.from(r.key, 'utf8') }), value: r.value }));
    const written = await producer.send({ messages, idempotent: true, acks: ALL_IN_SYNC_REPLICAS });
    const base = new Map<number, number>();
    for (const r of written.offsets ?? []) base.set(r.partition, Number(r.offset));
    return base;
  }

  async partitionCount(topic: string): Promise<number | undefined> {
    const { producer, admin } = await this.clients.get();
    return platformaticPartitionCount(producer, admin, topic);
  }

  async close(): Promise<void> {
    const made = this.clients.take();
    if (made === undefined) return;
    const clients = await made.catch(() => undefined);
    if (clients === undefined) return;
    await Promise.all([clients.producer.close(), clients.admin.close()]);
  }
}
