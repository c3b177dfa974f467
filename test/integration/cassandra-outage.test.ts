// A node keeps going through a Cassandra outage: the singleton's MetaStore writes fail, are logged
// as `retry` with backoff, and succeed once Cassandra is back — no crash, nothing lost. The outage
// is a TCP proxy in front of the real Cassandra, cut for a few seconds.
import { Kafka, logLevel } from 'kafkajs';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Reply } from '../../src/core/shard-manager/protocol.js';
import { parseNodeConfig } from '../../src/node/node-config.js';
import { startNode, type StartedNode } from '../../src/node/run-node.js';
import { TcpProxy } from '../support/tcp-proxy.js';
import { services, uniqueName } from './support.js';
import { createTopicsWithLeaders } from '../../src/cluster/kafka-client.js';

describe('a Cassandra outage', () => {
  let proxy: TcpProxy;
  let node: StartedNode;
  let topic: string;
  const lines: { event?: string; what?: string; msg: string; level: number }[] = [];

  beforeAll(async () => {
    const s = services();
    proxy = await TcpProxy.start(s.cassandraContactPoints[0]!);
    const cluster = uniqueName('outage').replace(/-/g, '_');
    topic = `${cluster}.m`;
    const admin = new Kafka({ clientId: 'outage-test', brokers: s.kafkaBrokers, logLevel: logLevel.ERROR }).admin();
    await admin.connect();
    await createTopicsWithLeaders(admin, [{ topic, numPartitions: 4, replicationFactor: 1 }]);
    await admin.disconnect();
    const config = parseNodeConfig({
      node: 'n1',
      cluster,
      kafka: { brokers: s.kafkaBrokers, sessionTimeoutMs: 6_000 },
      cassandra: { contactPoints: [proxy.address], localDataCenter: s.cassandraLocalDataCenter, keyspace: 'shardherd_test' },
      runtime: { publishIntervalMs: 500, retryInitialMs: 100, retryMaxMs: 1_000 },
    });
    const log = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line) as (typeof lines)[number]) });
    node = await startNode(config, { sink: { accept: () => Promise.resolve() }, log });
    // The only node: it hosts the singleton once recovery is done.
    const deadline = Date.now() + 30_000;
    while (!(await node.node.singletonState())) {
      if (Date.now() > deadline) throw new Error('the node never became an active singleton');
      await new Promise((r) => setTimeout(r, 100));
    }
  }, 60_000);

  afterAll(async () => {
    await node?.stop();
    await proxy?.close();
  });

  it('delays a dataset setup until Cassandra is back, logging each retry, without a crash', async () => {
    proxy.cut();
    const setup: Promise<Reply> = node.node.request(
      (replyTo) =>
        ({
          type: 'SetupDataset',
          config: { ref: 'm', numShards: 4, minNumNodes: 1, spread: 1, replicationFactor: 1, source: { type: 'kafka', topic, startFrom: 'earliest' } },
          replyTo,
        }) as never,
      60_000,
    );
    await expect.poll(() => lines.filter((l) => l.event === 'retry').length, { timeout: 15_000, interval: 100 }).toBeGreaterThanOrEqual(2);
    expect(node.node.state).toBe('running');
    proxy.restore();
    expect(await setup).toEqual({ type: 'DatasetVerified', dataset: 'm' });
    // The singleton persists a dataset before it answers: that write is what waited for Cassandra.
    expect(new Set(lines.filter((l) => l.event === 'retry').map((l) => l.what))).toContain('writing a dataset');
    await expect.poll(async () => (await node.node.running()).filter((r) => r.status.type === 'Active').length, { timeout: 30_000, interval: 200 }).toBe(4);
    expect(lines.filter((l) => l.level >= 60)).toEqual([]); // nothing fatal
  }, 90_000);
});
