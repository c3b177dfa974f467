// What the bus asks of a Kafka admin client, whichever library it is: the bus's topics, their
// limits and offsets, and a group's committed offset. Each method's failures are the library's
// own; the bus wraps them (./errors.ts).

/** A topic's partitions as the metadata has them: each one's leader (-1: none yet). */
export type PartitionLeaders = readonly number[];

export interface BusAdmin {
  listTopics(): Promise<string[]>;
  /** Creates the topics with one partition each; does not wait for their leaders. */
  createTopics(topics: readonly string[], replicationFactor: number, configs: Readonly<Record<string, string>>): Promise<void>;
  /**
   * The topic's partition count (0 when it does not exist), retrying the failures that pass on
   * their own (a broker away, a leader being elected).
   */
  partitionCount(topic: string): Promise<number>;
  /** Each topic's partition leaders; a topic the broker has not heard of yet (just created) is left out. */
  leaders(topics: readonly string[]): Promise<ReadonlyMap<string, PartitionLeaders>>;
  /** Whether the topics' leaders answer an offsets request (metadata may name a leader before it serves the partition). */
  leadersAnswer(topics: readonly string[]): Promise<boolean>;
  /** The named configs of each topic, as the broker says them (a config it did not say: absent). */
  topicConfigs(topics: readonly string[], names: readonly string[]): Promise<ReadonlyMap<string, ReadonlyMap<string, string>>>;
  /** Partition 0's first and next offsets. */
  watermarks(topic: string): Promise<{ readonly low: number; readonly high: number }>;
  /** The group's committed offset of partition 0, if it committed one (retried while the coordinator loads). */
  committedOffset(group: string, topic: string): Promise<number | undefined>;
  close(): Promise<void>;
}
