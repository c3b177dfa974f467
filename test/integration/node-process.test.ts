// `shardherd node` as an operator runs it, on the real Kafka and Cassandra: datasets set up over
// the status endpoint (a topic that does not match is refused with the reason), and SIGTERM hands
// the singleton over at once instead of after a session timeout.
import { rm } from 'node:fs/promises';
import { Kafka, logLevel } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectKafkaClient } from '../../src/client/kafka-client.js';
import type { DatasetRef } from '../../src/core/ids.js';
import { ECHO_HANDLER, ProcessCluster, waitConverged } from '../support/process-cluster.js';
import { processClusterBase, services } from './support.js';
import { createTopicsWithLeaders } from '../../src/cluster/kafka-client.js';

const SESSION_TIMEOUT_MS = 8_000;

describe('shardherd node processes', () => {
  let dir: string;
  let cluster: ProcessCluster;
  let prefix: string;
  let admin: ReturnType<Kafka['admin']>;

  beforeAll(async () => {
    const base = await processClusterBase('nodes');
    const s = base.services;
    ({ dir, name: prefix } = base);
    admin = new Kafka({ clientId: 'node-process-test', brokers: s.kafkaBrokers, logLevel: logLevel.ERROR }).admin();
    await admin.connect();
    await createTopicsWithLeaders(admin, [
      { topic: `${prefix}.good`, numPartitions: 8, replicationFactor: 1 },
      { topic: `${prefix}.six`, numPartitions: 6, replicationFactor: 1 },
    ]);
    cluster = new ProcessCluster({
      ...base.options,
      sessionTimeoutMs: SESSION_TIMEOUT_MS,
      runtime: { publishIntervalMs: 1_000, pollIntervalMs: 50 },
      // Served before the dataset exists: the server answers once it does.
      serve: [{ dataset: 'good', handler: ECHO_HANDLER }],
    });
    await cluster.start('node-1');
    await cluster.start('node-2');
  }, 120_000);

  afterAll(async () => {
    await cluster?.stopAll();
    await admin?.disconnect();
    if (dir) await rm(dir, { recursive: true, force: true });
  }, 60_000);

  const setUp = async (config: unknown) => {
    const res = await fetch(`${cluster.get('node-2').url}/api/v1/datasets`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${cluster.token('node-2')}` },
      body: JSON.stringify(config),
    });
    return { status: res.status, reply: (await res.json()) as { error?: string; reason?: string; dataset?: string; created?: boolean } };
  };

  it('refuses a dataset whose topic does not have numShards partitions, or does not exist, and says why', async () => {
    const six = await setUp({ ref: 'six', numShards: 8, minNumNodes: 1, source: { type: 'kafka', topic: `${prefix}.six` } });
    expect(six.status).toBe(422);
    expect(six.reply).toEqual({
      error: 'BadData',
      reason: `dataset six: Kafka topic "${prefix}.six" has 6 partitions but numShards is 8 (partition p is shard p)`,
    });
    const missing = await setUp({ ref: 'missing', numShards: 8, minNumNodes: 1, source: { type: 'kafka', topic: `${prefix}.none` } });
    expect(missing.status).toBe(422);
    expect(missing.reply.reason).toMatch(/does not exist/);
    const bad = await setUp({ ref: 'bad', numShards: 8, minNumNodes: 1, source: { type: 'kafka', topik: 'x' } });
    expect(bad).toMatchObject({ status: 400, reply: { error: 'BadSchema' } });
  });

  it('accepts a matching dataset and runs every shard', async () => {
    const good = await setUp({ ref: 'good', numShards: 8, minNumNodes: 1, source: { type: 'kafka', topic: `${prefix}.good` } });
    expect(good).toEqual({ status: 201, reply: { dataset: 'good', created: true } });
    const c = await waitConverged(cluster, 'good', 8, 60_000);
    expect(c.singleton!.name).toBe('node-1');
    expect(c.singleton!.status.singleton!.maps.map((m) => m.dataset)).toEqual(['good']);
  });

  it('serves routed requests with the handler module of its config: every shard answered by the node the map names', async () => {
    const client = await connectKafkaClient({ brokers: services().kafkaBrokers, topicPrefix: prefix, name: 'node-process-test', connectTimeoutMs: 20_000 });
    try {
      const good = 'good' as DatasetRef;
      for (let shard = 0; shard < 8; shard++) {
        const answer = await client.request<{ node: string; shard: number; payload: unknown }>(good, { shard }, { n: shard });
        expect(answer).toEqual({ node: client.map(good)!.servingNodes(shard)[0], shard, payload: { n: shard } });
      }
      await expect(client.request(good, { shard: 8 }, {})).rejects.toMatchObject({ code: 'SHARD_OUT_OF_RANGE' });
    } finally {
      await client.close();
    }
  });

  it('SIGTERM leaves gracefully: exit code 0 and the singleton moves well before the session timeout', async () => {
    const t0 = Date.now();
    cluster.signal('node-1', 'SIGTERM');
    expect(await cluster.get('node-1').exited).toBe(0);
    const c = await waitConverged(cluster, 'good', 8, 60_000);
    const took = Date.now() - t0;
    expect(c.singleton!.name).toBe('node-2');
    expect(took).toBeLessThan(SESSION_TIMEOUT_MS);
  });
});
