// The one check that a dataset's Kafka topic can carry the dataset, shared by the ingestion source
// (before a shard is read) and the ShardedProducer (before a record is written): partition p is
// shard p, so the topic must exist and have exactly numShards partitions. A topic with fewer
// partitions would leave shards silently empty; one with more would hold records no shard reads.
import type { Admin } from 'kafkajs';
import { createTopicsWithLeaders, topicMayAnswerLater } from '../cluster/kafka-client.js';
import { retryRetriable } from '../cluster/kafka-retry.js';
import type { DatasetConfig } from '../core/dataset-config.js';
import { ShardherdError } from '../core/errors.js';

/**
 * The topic of a dataset whose source is Kafka. Throws a `SOURCE_MISMATCH` `ShardherdError` for any
 * other source type, naming `who` refuses it (e.g. "the Kafka ingestion source").
 */
export function kafkaTopicOf(dataset: DatasetConfig, who: string): string {
  const source = dataset.source;
  if (source.type !== 'kafka') {
    throw new ShardherdError(
      'SOURCE_MISMATCH',
      `dataset ${dataset.ref}: ${who} needs a dataset whose source type is kafka, but its source type is ${source.type}`,
      { dataset: dataset.ref },
    );
  }
  return source.topic;
}

/**
 * Resolves when the dataset's topic exists and has exactly `numShards` partitions; otherwise throws
 * a `SOURCE_MISMATCH` `ShardherdError` saying what is wrong and what to do. Errors reaching Kafka
 * (a broker down) are kafkajs's own, with their `retriable` flag.
 *
 * Gotchas: a topic is never created here (the admin client never asks the broker to auto-create
 * one), so a typo in `source.topic` is reported instead of silently creating a 1-partition topic;
 * only an explicit `createKafkaTopic` creates one.
 */
export async function checkKafkaTopic(admin: Admin, dataset: DatasetConfig, who = 'shardherd'): Promise<void> {
  const topic = kafkaTopicOf(dataset, who);
  checkTopicPartitions(dataset, topic, await partitionCount(admin, topic));
}

/**
 * `checkKafkaTopic` on a partition count read by any client (undefined: the topic does not exist):
 * throws the `SOURCE_MISMATCH` error that says what is wrong and what to do.
 */
export function checkTopicPartitions(dataset: DatasetConfig, topic: string, partitions: number | undefined): void {
  if (partitions === undefined) {
    throw new ShardherdError(
      'SOURCE_MISMATCH',
      `dataset ${dataset.ref}: Kafka topic "${topic}" does not exist; create it with ${dataset.numShards} partitions ` +
        '(partition p is shard p): `shardherd topics create --config <node config>` for a dataset of a node config, ' +
        'or set the dataset up with `shardherd dataset setup --create-topic`',
      { dataset: dataset.ref },
    );
  }
  if (partitions !== dataset.numShards) {
    throw new ShardherdError(
      'SOURCE_MISMATCH',
      `dataset ${dataset.ref}: Kafka topic "${topic}" has ${partitions} partitions but numShards is ${dataset.numShards} (partition p is shard p)`,
      { dataset: dataset.ref },
    );
  }
}

/** The topic's partition count read through kafkajs's admin, or undefined when the topic does not exist. */
export async function partitionCount(admin: Admin, topic: string): Promise<number | undefined> {
  try {
    const metadata = await retryRetriable(() => admin.fetchTopicMetadata({ topics: [topic] }), topicMayAnswerLater);
    return metadata.topics.find((t) => t.name === topic)?.partitions.length;
  } catch (e) {
    if ((e as { type?: unknown }).type === 'UNKNOWN_TOPIC_OR_PARTITION') return undefined;
    throw e;
  }
}

/**
 * Creates the dataset's topic with exactly `numShards` partitions, or finds it already right
 * ('exists'); a topic with another partition count is refused as `checkKafkaTopic` refuses it.
 */
export async function createKafkaTopic(admin: Admin, dataset: DatasetConfig, replicationFactor: number, who = 'shardherd'): Promise<'created' | 'exists'> {
  const topic = kafkaTopicOf(dataset, who);
  if ((await partitionCount(admin, topic)) === undefined) {
    // false: another node created it meanwhile. Either way the check below has the last word.
    const created = await createTopicsWithLeaders(admin, [{ topic, numPartitions: dataset.numShards, replicationFactor }]);
    if (created) return 'created';
  }
  await checkKafkaTopic(admin, dataset, who);
  return 'exists';
}
