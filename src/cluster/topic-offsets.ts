// kafkajs's `admin.fetchTopicOffsets` asks the leaders of the partitions its metadata lists for the
// topic. When that metadata does not have the topic's partitions at that moment (seen on a real
// broker when a node that just started opened many shards at once), it asks nobody and then fails
// with a TypeError ("Cannot destructure property 'partitions' of 'high.pop(...)'"), which kafkajs
// does not retry. The failed shard moved to another node and its copy was left starting; the next
// attempt finds the metadata whole.
import type { Admin } from 'kafkajs';

const ATTEMPTS = 5;
const BACKOFF_MS = 50;

export type TopicOffsets = Awaited<ReturnType<Admin['fetchTopicOffsets']>>;

/** `admin.fetchTopicOffsets(topic)`, tried again (up to 5 times, 50 ms apart and growing) on kafkajs's empty-metadata TypeError. */
export async function fetchTopicOffsets(admin: Admin, topic: string): Promise<TopicOffsets> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await admin.fetchTopicOffsets(topic);
    } catch (e) {
      if (!(e instanceof TypeError) || attempt >= ATTEMPTS) throw e;
      await new Promise((resolve) => setTimeout(resolve, BACKOFF_MS * attempt));
    }
  }
}
