// What the ShardedProducer needs from a Kafka client library, whichever it is: kafkajs
// (./kafkajs-writer.ts) or @platformatic/kafka (./platformatic-writer.ts). The producer decides
// where each record goes; a writer only writes records to the partitions they name.

/** A record with its partition chosen. */
export interface PartitionRecord {
  readonly partition: number;
  readonly key: string | null;
  readonly value: Buffer;
}

export interface PartitionWriter {
  /**
   * Writes the records with `acks: -1` through Kafka's idempotent producer, each partition's
   * records as one batch in the order given, and resolves to each written partition's base offset.
   */
  write(topic: string, records: readonly PartitionRecord[]): Promise<ReadonlyMap<number, number>>;
  /** The topic's partition count, or undefined when the topic does not exist. */
  partitionCount(topic: string): Promise<number | undefined>;
  /** After the last write: disconnects. */
  close(): Promise<void>;
}
