// Smoke test: the real Kafka and Cassandra started by the global setup work from Node with the
// clients the production adapters use (kafkajs, cassandra-driver).
import { Client as CassandraClient } from 'cassandra-driver';
import { Kafka, Partitioners, logLevel, type Consumer, type Producer } from 'kafkajs';
import { describe, expect, it } from 'vitest';
import { kafkaVersion } from '../../scripts/services/config.js';
import { createTopicsWithLeaders } from '../../src/cluster/kafka-client.js';
import { FETCH_KEY, apiVersions } from './kafka-api-versions.js';
import { services, uniqueName } from './support.js';

describe('Kafka', () => {
  it('is the Kafka line the run chose: 4.x serves no Fetch below v4 (KIP-896), 3.9 serves v0', async () => {
    const { kafkaBrokers } = services();
    const chosen = kafkaVersion();
    for (const broker of kafkaBrokers) {
      const fetch = (await apiVersions(broker)).get(FETCH_KEY);
      expect(fetch, `${broker} serves Fetch`).toBeDefined();
      expect(fetch!.min, `the lowest Fetch version of ${broker}, which should run Kafka ${chosen}`).toBe(chosen.startsWith('3.') ? 0 : 4);
    }
  });

  it('creates a 4-partition topic with the admin API, produces to partition 2 and consumes it back', async () => {
    const { kafkaBrokers } = services();
    const kafka = new Kafka({ clientId: 'shardherd-smoke', brokers: kafkaBrokers, logLevel: logLevel.ERROR });
    const topic = uniqueName('smoke');
    const admin = kafka.admin();
    let producer: Producer | undefined;
    let consumer: Consumer | undefined;
    try {
      await admin.connect();
      // kafkajs's own wait for leaders fails when the broker's metadata lags its controller (seen on Kafka 4.x).
      const created = await createTopicsWithLeaders(admin, [{ topic, numPartitions: 4, replicationFactor: 1 }]);
      expect(created).toBe(true);
      const metadata = await admin.fetchTopicMetadata({ topics: [topic] });
      expect(metadata.topics[0]?.partitions.map((p) => p.partitionId).sort()).toEqual([0, 1, 2, 3]);

      producer = kafka.producer({ allowAutoTopicCreation: false, createPartitioner: Partitioners.DefaultPartitioner });
      await producer.connect();
      const values = ['r0', 'r1', 'r2'];
      const sent = await producer.send({
        topic,
        messages: values.map((value, i) => ({ key: `k${i}`, value, partition: 2 })),
      });
      expect(sent.map((r) => r.partition)).toEqual([2]);

      const offsets = await admin.fetchTopicOffsets(topic);
      expect(offsets.map((o) => [o.partition, o.high]).sort((a, b) => Number(a[0]) - Number(b[0]))).toEqual([
        [0, '0'],
        [1, '0'],
        [2, '3'],
        [3, '0'],
      ]);

      // A short fetch wait: disconnect() waits for the fetch in flight (5 s by default).
      consumer = kafka.consumer({ groupId: uniqueName('smoke-group'), allowAutoTopicCreation: false, maxWaitTimeInMs: 250 });
      await consumer.connect();
      await consumer.subscribe({ topics: [topic], fromBeginning: true });
      const received: Array<{ partition: number; offset: string; value: string }> = [];
      await consumer.run({
        eachMessage: async ({ partition, message }) => {
          received.push({ partition, offset: message.offset, value: message.value?.toString() ?? '' });
        },
      });
      await expect.poll(() => received.length, { timeout: 30_000, interval: 100 }).toBe(3);
      expect(received).toEqual([
        { partition: 2, offset: '0', value: 'r0' },
        { partition: 2, offset: '1', value: 'r1' },
        { partition: 2, offset: '2', value: 'r2' },
      ]);
    } finally {
      await consumer?.disconnect();
      await producer?.disconnect();
      await admin.disconnect();
    }
  });
});

describe('Cassandra', () => {
  it('creates a keyspace idempotently and applies an LWT INSERT IF NOT EXISTS exactly once', async () => {
    const { cassandraContactPoints, cassandraLocalDataCenter } = services();
    const client = new CassandraClient({ contactPoints: cassandraContactPoints, localDataCenter: cassandraLocalDataCenter });
    try {
      const version = await client.execute('SELECT release_version FROM system.local');
      expect(String(version.first()?.get('release_version'))).toMatch(/^5\.0\./);

      const createKeyspace = "CREATE KEYSPACE IF NOT EXISTS shardherd_it WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}";
      await client.execute(createKeyspace);
      await client.execute(createKeyspace); // idempotent
      await client.execute('CREATE TABLE IF NOT EXISTS shardherd_it.smoke_leases (name text PRIMARY KEY, owner text, epoch bigint)');

      const name = uniqueName('lease');
      const insert = 'INSERT INTO shardherd_it.smoke_leases (name, owner, epoch) VALUES (?, ?, ?) IF NOT EXISTS';
      const first = await client.execute(insert, [name, 'node-1', 1], { prepare: true });
      expect(first.wasApplied()).toBe(true);
      const second = await client.execute(insert, [name, 'node-2', 2], { prepare: true });
      expect(second.wasApplied()).toBe(false);
      // A refused LWT returns the current row: the first writer still owns it.
      expect(second.first()?.get('owner')).toBe('node-1');

      const row = await client.execute('SELECT owner, epoch FROM shardherd_it.smoke_leases WHERE name = ?', [name], { prepare: true });
      expect(row.first()?.get('owner')).toBe('node-1');
      expect(String(row.first()?.get('epoch'))).toBe('1');
    } finally {
      await client.shutdown();
    }
  });
});
