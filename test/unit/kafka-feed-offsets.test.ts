// The Kafka source reads a topic's offsets once for every shard that asks at the same moment (a
// scrape or the status page asks for hundreds at once), and never hands a caller offsets read
// before it asked (a starting copy needs the end offset as it is then).
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import type { DatasetConfig } from '../../src/core/dataset-config.js';
import type { IngestionKafkaClient } from '../../src/ingest/kafka-source/feed-client.js';
import { DatasetFeed } from '../../src/ingest/kafka-source/feed.js';
import type { RunConsumer } from '../../src/ingest/kafka-source/run-consumer.js';
import type { KafkaSourceSettings } from '../../src/ingest/kafka-source/settings.js';

/** A feed whose client answers each offsets request with high watermarks 10 × the request's number. */
function feedWithAdmin(): { feed: DatasetFeed; requests: () => number } {
  let requests = 0;
  const client = {
    topicOffsets: async () => {
      requests++;
      const n = requests;
      await new Promise((r) => setImmediate(r)); // answered a turn of the event loop later, as over a socket
      return new Map([0, 1, 2, 3].map((partition) => [partition, { low: partition, high: 10 * n + partition }]));
    },
  } as unknown as IngestionKafkaClient;
  const feed = new DatasetFeed({ ref: 'metrics' } as DatasetConfig, 'metrics-topic', {
    client,
    runConsumer: () => ({}) as RunConsumer,
    settings: {} as KafkaSourceSettings,
    log: pino({ level: 'silent' }),
    assertOpen: () => {},
  });
  return { feed, requests: () => requests };
}

describe('DatasetFeed.watermarks', () => {
  it('answers every shard that asks at once with one request', async () => {
    const { feed, requests } = feedWithAdmin();
    const answers = await Promise.all(Array.from({ length: 400 }, (_, i) => feed.watermarks(i % 4)));
    expect(requests()).toBe(1);
    expect(answers.slice(0, 4)).toEqual([
      { low: 0, high: 10 },
      { low: 1, high: 11 },
      { low: 2, high: 12 },
      { low: 3, high: 13 },
    ]);
  });

  it('sends a new request for a call made once the last one was sent, never an answer read before the call', async () => {
    const { feed, requests } = feedWithAdmin();
    const first = feed.watermarks(0);
    await new Promise((r) => setImmediate(r)); // the first request is on its way
    const second = feed.watermarks(0);
    expect(await first).toEqual({ low: 0, high: 10 });
    expect(await second).toEqual({ low: 0, high: 20 });
    expect(requests()).toBe(2);
  });

  it('still says which partition the topic lacks', async () => {
    const { feed } = feedWithAdmin();
    await expect(feed.watermarks(9)).rejects.toThrow(/has no partition 9/);
  });
});
