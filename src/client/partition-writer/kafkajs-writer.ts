// The ShardedProducer's writer on kafkajs: an idempotent producer with one request in flight (which
// kafkajs's idempotence needs) and an admin client for the topic's metadata.
import { Partitioners, type Admin, type Producer } from 'kafkajs';
import { createKafka, IDEMPOTENT_PRODUCER, type KafkaConnection } from '../../cluster/kafka-client.js';
import { SharedAttempt } from '../../cluster/shared-attempt.js';
import { partitionCount } from '../../ingest/kafka-topic-check.js';
import type { PartitionRecord, PartitionWriter } from './writer.js';

export class KafkajsPartitionWriter implements PartitionWriter {
  private readonly producer: Producer;
  private readonly admin: Admin;
  private readonly connection = new SharedAttempt(() => Promise.all([this.producer.connect(), this.admin.connect()]).then(() => undefined));

  constructor(connection: KafkaConnection) {
    const kafka = createKafka(connection);
    // Topics are never auto-created: a typo in a topic name must fail, not create a 1-partition topic.
    // The partitioner is never used (every record names its partition); naming one keeps kafkajs from warning about its default.
    this.producer = kafka.producer({ allowAutoTopicCreation: false, createPartitioner: Partitioners.DefaultPartitioner, ...IDEMPOTENT_PRODUCER });
    this.admin = kafka.admin();
  }

  async write(topic: string, records: readonly PartitionRecord[]): Promise<ReadonlyMap<number, number>> {
    await this.connection.get();
    const written = await this.producer.send({ topic, acks: -1, messages: [...records] });
    const base = new Map<number, number>();
    for (const r of written) {
      if (r.baseOffset === undefined) throw new Error(`Kafka did not return the offset of the records written to ${topic} partition ${r.partition}`);
      base.set(r.partition, Number(r.baseOffset));
    }
    return base;
  }

  async partitionCount(topic: string): Promise<number | undefined> {
    await this.connection.get();
    return partitionCount(this.admin, topic);
  }

  async close(): Promise<void> {
    const connecting = this.connection.take();
    if (connecting === undefined) return;
    await connecting.catch(() => {});
    await Promise.all([this.producer.disconnect(), this.admin.disconnect()]);
  }
}
