/**
 * End-to-end latency on the real Kafka: a producer writes timestamped records at a steady rate to
 * a 16-partition topic while one shardherd node ingests all 16 shards; the sink measures, per
 * record, the time from just before the produce call to its delivery to the sink. The first
 * seconds (start-up, recovery of an empty topic) are left out; p50, p99 and the maximum are reported.
 */
import { Kafka, logLevel } from 'kafkajs';
import { pino } from 'pino';
import type { SourceRecord } from '../src/ingest/ingestion-source.js';
import { parseNodeConfig } from '../src/node/node-config.js';
import { startNode } from '../src/node/run-node.js';
import { ms, quantile, register, type Table } from './harness.js';
import { withRealServices } from './real-services.js';

const PARTITIONS = 16;
const RATE = 4_000; // records per second, produced in batches every 10 ms
const WARMUP_MS = 5_000;
const MEASURE_MS = 20_000;

register({
  name: 'deploy-latency',
  run: async (): Promise<Table> =>
    withRealServices(async (s) => {
      const kafka = new Kafka({ clientId: 'bench-latency', brokers: s.kafkaBrokers, logLevel: logLevel.ERROR });
      const topic = `lat_${Date.now().toString(36)}.metrics`;
      const admin = kafka.admin();
      await admin.connect();
      await admin.createTopics({ topics: [{ topic, numPartitions: PARTITIONS, replicationFactor: 1 }], waitForLeaders: true });
      await admin.disconnect();
      const latencies: number[] = [];
      let measuring = false;
      const config = parseNodeConfig({
        node: 'bench-node',
        cluster: `lat_${Date.now().toString(36)}`,
        kafka: { brokers: s.kafkaBrokers, sessionTimeoutMs: 6_000 },
        cassandra: { contactPoints: s.cassandraContactPoints, localDataCenter: s.cassandraLocalDataCenter, keyspace: 'shardherd_bench' },
        datasets: [{ ref: 'metrics', numShards: PARTITIONS, minNumNodes: 1, source: { type: 'kafka', topic } }],
      });
      const node = await startNode(config, {
        sink: {
          accept: (_d, _s, records: readonly SourceRecord[]) => {
            const now = Date.now();
            if (measuring) for (const r of records) latencies.push(now - (r.value as { sentAt: number }).sentAt);
            return Promise.resolve();
          },
        },
        log: pino({ level: 'silent' }),
      });
      const producer = kafka.producer({ allowAutoTopicCreation: false });
      await producer.connect();
      const perTick = RATE / 100;
      let n = 0;
      const started = Date.now();
      try {
        while (Date.now() - started < WARMUP_MS + MEASURE_MS) {
          measuring = Date.now() - started >= WARMUP_MS;
          const tick = Date.now();
          await producer.send({
            topic,
            acks: 1,
            messages: Array.from({ length: perTick }, () => ({ partition: n++ % PARTITIONS, value: JSON.stringify({ n, sentAt: Date.now() }) })),
          });
          await new Promise((r) => setTimeout(r, Math.max(0, 10 - (Date.now() - tick))));
        }
        await new Promise((r) => setTimeout(r, 1_000));
      } finally {
        await producer.disconnect();
        await node.stop();
      }
      return {
        title: `End-to-end latency, produce → sink, one node ingesting ${PARTITIONS} shards at ${RATE.toLocaleString('en')} records/s`,
        columns: ['records measured', 'p50', 'p99', 'max'],
        rows: [[latencies.length, ms(quantile(latencies, 0.5)), ms(quantile(latencies, 0.99)), ms(Math.max(...latencies))]],
        notes: [`After ${WARMUP_MS / 1000} s of warm-up, over ${MEASURE_MS / 1000} s; acks=1; the clock is the producer's and the sink's (one process).`],
      };
    }),
});
