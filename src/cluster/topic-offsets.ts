// kafkajs's `admin.fetchTopicOffsets` asks the leaders of the partitions its metadata lists for the
// topic. Two ways it fails that pass on their own, which kafkajs does not retry:
// - when that metadata does not have the topic's partitions at that moment (seen on a real broker
//   when a node that just started opened many shards at once), it asks nobody and then fails with a
//   TypeError ("Cannot destructure property 'partitions' of 'high.pop(...)'"); the failed shard
//   moved to another node and its copy was left starting, though the next attempt finds the
//   metadata whole;
// - a leader that moved or is being elected answers with a retriable error (not the leader, leader
//   not available), which kafkajs's admin passes on at once.
import type { Admin } from 'kafkajs';
import { KAFKA_RETRY, isRetriableKafkaError, retryRetriable, type RetryPolicy } from './kafka-retry.js';

export type TopicOffsets = Awaited<ReturnType<Admin['fetchTopicOffsets']>>;

/** `admin.fetchTopicOffsets(topic)`, tried again (`retryRetriable`) on kafkajs's empty-metadata TypeError and on retriable errors. */
export function fetchTopicOffsets(admin: Admin, topic: string, policy: RetryPolicy = KAFKA_RETRY): Promise<TopicOffsets> {
  return retryRetriable(
    () => admin.fetchTopicOffsets(topic),
    (e) => e instanceof TypeError || isRetriableKafkaError(e),
    policy,
  );
}
