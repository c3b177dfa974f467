// What the Kafka ingestion source needs from a Kafka client library, whichever it is: kafkajs
// (./kafkajs-client.ts) or @platformatic/kafka (./platformatic-client.ts). A dataset's feed
// (./feed.ts) keeps the buffers and decides where each partition starts, pauses and resumes; the
// client's consumer fetches what it is told and hands over batches.
import type { Logger } from 'pino';
import type { DatasetConfig } from '../../core/dataset-config.js';
import type { KafkaFeedStats } from './feed.js';
import type { KafkaSourceSettings } from './settings.js';

/** A record as fetched: its offset, and its key and value as slices of the fetched bytes. */
export interface FetchedMessage {
  readonly offset: string | number;
  readonly key?: Buffer | null;
  readonly value: Buffer | null;
}

/**
 * The records of one fetched batch, by index: a client hands over what it decoded without making
 * an object per record for the feed (the feed copies their bytes into its buffer at once).
 */
export interface FetchedRecords {
  readonly length: number;
  offset(i: number): number;
  key(i: number): Buffer | null | undefined;
  value(i: number): Buffer | null;
}

/** Records that are message objects already (kafkajs's). */
export function fetchedMessages(messages: readonly FetchedMessage[]): FetchedRecords {
  return {
    length: messages.length,
    offset: (i) => Number(messages[i]!.offset),
    key: (i) => messages[i]!.key,
    value: (i) => messages[i]!.value,
  };
}

/** The records of one partition one fetch returned, as the consumer hands them to the feed. */
export interface FetchedBatch {
  readonly partition: number;
  /** The offset the fetch asked for: the records may start above it (aborted, control or compacted-away records). */
  readonly fetchedOffset: number;
  readonly records: FetchedRecords;
  /** The offset after the batch: past its last record and any control records after it. */
  readonly nextOffset: number;
  /** True when a seek of the partition came after the fetch: its records are not where the partition goes on. */
  isStale(): boolean;
  /** The feed took the records before `offset`: the partition goes on from there. */
  took(offset: number): void;
  /** Stops fetching the partition until it is resumed (its buffer is full). */
  pause(): void;
}

/** What a join (or, without a group, a change of the open partitions) does with each partition: start it at an offset, or keep it paused. */
export interface JoinPlan {
  readonly start: readonly { readonly partition: number; readonly offset: number }[];
  readonly pause: readonly number[];
}

/** What a dataset's feed gives its consumer. */
export interface FeedConsumerParams {
  readonly settings: KafkaSourceSettings;
  /** The dataset's name, in the group ids. */
  readonly dataset: string;
  readonly topic: string;
  readonly log: Logger;
  /** The partitions to consume now: those of the open shards. */
  readonly wanted: () => number[];
  /** When the consumer takes up partitions (a join, a rejoin, a change of the open shards): where each starts. */
  readonly onJoin: (assigned: readonly number[]) => JoinPlan;
  /** A batch the consumer fetched. */
  readonly onBatch: (batch: FetchedBatch) => void;
  /** The consumer stopped for good (or its start failed in a way trying again cannot fix). */
  readonly onFail: (error: unknown) => void;
}

/** What the consumer is doing: its part of `KafkaFeedStats`. */
export type FeedConsumerStats = Pick<KafkaFeedStats, 'groupId' | 'assigned' | 'generations' | 'lastRecreateMs'>;

/** A dataset's consumer: fetches the open partitions, each from where the feed says. */
export interface FeedConsumer {
  /** The open partitions changed: take them up `delayMs` after the first change (later changes ride along). */
  schedule(delayMs: number): void;
  /** Continues `partition` from `offset`. */
  seek(partition: number, offset: number): void;
  pause(partition: number): void;
  resume(partition: number): void;
  /** Records consumed offsets in the dataset's consumer group, for Kafka's lag tools. Never throws. */
  commit(offsets: readonly { readonly partition: number; readonly offset: number }[]): Promise<void>;
  stats(): FeedConsumerStats;
  shutdown(): Promise<void>;
}

/** A partition's low and high watermarks. */
export interface Watermarks {
  readonly low: number;
  readonly high: number;
}

/** The Kafka client library behind an ingestion source: one per source, shared by its datasets' feeds. */
export interface IngestionKafkaClient {
  /** Resolves once the library is loaded and can work with the broker (see `KafkaIngestionSource.ready`). */
  ready(): Promise<void>;
  feedConsumer(params: FeedConsumerParams): FeedConsumer;
  /** Resolves when the dataset's topic exists with exactly `numShards` partitions; see `checkKafkaTopic`. */
  checkTopic(dataset: DatasetConfig, who: string): Promise<void>;
  /** Creates the dataset's topic unless it exists with `numShards` partitions; see `createKafkaTopic`. */
  createTopic(dataset: DatasetConfig, replicationFactor: number, who: string): Promise<'created' | 'exists'>;
  /** Every partition's watermarks, read now. */
  topicOffsets(topic: string): Promise<ReadonlyMap<number, Watermarks>>;
  /** After every feed's shutdown: waits for the consumers being stopped, then disconnects. */
  close(): Promise<void>;
}
