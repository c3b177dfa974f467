// The topics a cluster needs before its nodes start, made against the real Kafka from a node's
// config (`createClusterTopics`, `shardherd topics create`): the bus topics with one partition and
// the bus's record limit, a Kafka dataset's topic with one partition per shard; a second run finds
// them all; a dataset topic with fewer partitions than shards is refused naming both counts and
// left as it is. Beside it, what a client and a node say when Kafka answers but the prefix has no
// topics, or when nothing listens where the brokers are said to be.
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Kafka, logLevel, type Admin, type ConfigResourceTypes } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ShardherdClientError } from '../../src/client/client-errors.js';
import { connectKafkaClient } from '../../src/client/kafka-client.js';
import { ShardherdError } from '../../src/core/errors.js';
import { createClusterTopics } from '../../src/node/cluster-topics.js';
import { parseNodeConfig } from '../../src/node/node-config.js';
import { freePort } from '../support/free-port.js';
import { services, uniqueName } from './support.js';
import { createTopicsWithLeaders } from '../../src/cluster/kafka-client.js';

const MAIN = join(import.meta.dirname, '../../src/cli/main.ts');
/** kafkajs's `ConfigResourceTypes.TOPIC` (not importable as a value from its CommonJS module under ESM). */
const TOPIC_RESOURCE: ConfigResourceTypes = 2;

/** A node config for cluster `cluster` on the test Kafka, with a Kafka dataset `metrics` of `numShards` shards on `topic`. */
function nodeConfig(cluster: string, topic: string, numShards: number, brokers = services().kafkaBrokers): Record<string, unknown> {
  return {
    node: 'n1',
    cluster,
    kafka: { brokers },
    cassandra: { contactPoints: services().cassandraContactPoints, localDataCenter: services().cassandraLocalDataCenter, keyspace: 'shardherd_test' },
    datasets: [
      { ref: 'metrics', numShards, minNumNodes: 1, source: { type: 'kafka', topic } },
      { ref: 'demo', numShards: 2, minNumNodes: 1, source: { type: 'synthetic' } },
    ],
  };
}

const cli = (args: string[]): Promise<{ code: number; stdout: string; stderr: string }> =>
  new Promise((resolve) => {
    execFile(process.execPath, ['--import', 'tsx', MAIN, ...args], { timeout: 60_000 }, (error, stdout, stderr) => {
      resolve({ code: error ? (typeof error.code === 'number' ? error.code : -1) : 0, stdout, stderr });
    });
  });

describe("creating a cluster's topics", () => {
  let admin: Admin;
  let dir: string;

  const partitions = async (topic: string): Promise<number> =>
    (await admin.fetchTopicMetadata({ topics: [topic] })).topics.find((t) => t.name === topic)?.partitions.length ?? 0;

  const writeConfig = async (name: string, config: Record<string, unknown>): Promise<string> => {
    const path = join(dir, `${name}.json`);
    await writeFile(path, JSON.stringify(config));
    return path;
  };

  beforeAll(async () => {
    admin = new Kafka({ clientId: 'topics-create-test', brokers: services().kafkaBrokers, logLevel: logLevel.NOTHING }).admin();
    await admin.connect();
    dir = await mkdtemp(join(tmpdir(), 'shardherd-topics-'));
  });

  afterAll(async () => {
    await admin?.disconnect();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('makes the bus topics and the dataset topic with numShards partitions, then finds them all on a second run', async () => {
    const cluster = uniqueName('topics').replace(/-/g, '_');
    const topic = `${cluster}.metrics`;
    const config = parseNodeConfig(nodeConfig(cluster, topic, 4));

    const first = await createClusterTopics(config);
    const bus = ['inbox', 'events', 'replies', 'endpoints'].map((t) => `${cluster}.${t}`);
    expect(first).toEqual([
      ...bus.map((t) => ({ topic: t, partitions: 1, outcome: 'created' })),
      { topic, partitions: 4, outcome: 'created', dataset: 'metrics' },
    ]);
    for (const t of bus) expect(await partitions(t)).toBe(1);
    expect(await partitions(topic)).toBe(4);
    // The bus's record limit is set on each bus topic, not left to the broker's default.
    const described = await admin.describeConfigs({
      includeSynonyms: false,
      resources: bus.map((name) => ({ type: TOPIC_RESOURCE, name, configNames: ['max.message.bytes'] })),
    });
    for (const r of described.resources)
      expect(r.configEntries.find((e) => e.configName === 'max.message.bytes')).toMatchObject({ configValue: '1048588', isDefault: false });

    const second = await createClusterTopics(config);
    expect(second.map((t) => t.outcome)).toEqual(['exists', 'exists', 'exists', 'exists', 'exists']);
    expect(await partitions(topic)).toBe(4);
  });

  it("checks the bus topics against the config's kafka.maxRecordBytes", async () => {
    const cluster = uniqueName('topics').replace(/-/g, '_');
    const config = parseNodeConfig({
      ...nodeConfig(cluster, `${cluster}.metrics`, 4),
      kafka: { brokers: services().kafkaBrokers, maxRecordBytes: 2 * 1024 * 1024 },
    });
    // The test broker's segments are 1 MiB (log.segment.bytes): 2 MiB batches would be refused for good.
    const error = await createClusterTopics(config).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'BROKER_LIMIT_TOO_SMALL', topic: `${cluster}.inbox` });
    expect((error as Error).message).toContain('(kafka.maxRecordBytes in a node config)');
  });

  it('refuses a dataset topic with fewer partitions than shards, naming it and both counts, and leaves it as it is', async () => {
    const cluster = uniqueName('topics').replace(/-/g, '_');
    const topic = `${cluster}.metrics`;
    await createTopicsWithLeaders(admin, [{ topic, numPartitions: 2, replicationFactor: 1 }]);
    const config = parseNodeConfig(nodeConfig(cluster, topic, 4));

    const error = await createClusterTopics(config, { datasets: ['metrics'] }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ShardherdError);
    expect((error as Error).message).toBe(`dataset metrics: Kafka topic "${topic}" has 2 partitions but numShards is 4 (partition p is shard p)`);
    expect(await partitions(topic)).toBe(2);
  });

  it('shardherd topics create prints each topic and exits 0; a topic with too few partitions exits 1 and is not changed', async () => {
    const cluster = uniqueName('topics').replace(/-/g, '_');
    const good = await writeConfig('good', nodeConfig(cluster, `${cluster}.metrics`, 4));
    const created = await cli(['topics', 'create', '--config', good]);
    expect(created).toMatchObject({ code: 0, stderr: '' });
    expect(created.stdout).toMatch(/^TOPIC\s+PARTITIONS\s+DATASET\s+RESULT$/m);
    expect(created.stdout).toMatch(new RegExp(`^${cluster}\\.inbox\\s+1\\s+-\\s+created$`, 'm'));
    expect(created.stdout).toMatch(new RegExp(`^${cluster}\\.metrics\\s+4\\s+metrics\\s+created$`, 'm'));
    expect((await cli(['topics', 'create', '--config', good, '--dataset', 'metrics'])).stdout).toMatch(
      new RegExp(`^${cluster}\\.metrics\\s+4\\s+metrics\\s+exists$`, 'm'),
    );

    const short = `${cluster}.short`;
    await createTopicsWithLeaders(admin, [{ topic: short, numPartitions: 2, replicationFactor: 1 }]);
    const refused = await cli(['topics', 'create', '--config', await writeConfig('short', nodeConfig(cluster, short, 8))]);
    expect(refused.code).toBe(1);
    expect(refused.stdout).toBe('');
    expect(refused.stderr).toBe(
      `shardherd topics create: dataset metrics: Kafka topic "${short}" has 2 partitions but numShards is 8 (partition p is shard p)\n`,
    );
    expect(await partitions(short)).toBe(2);
  });
});

describe('what a client and a node say about the brokers', () => {
  it('a client on brokers that answer but have no topics under its prefix says so, naming the prefix', async () => {
    const prefix = uniqueName('nothing-here');
    const error = await connectKafkaClient({ brokers: services().kafkaBrokers, topicPrefix: prefix, connectTimeoutMs: 5_000 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ShardherdClientError);
    expect((error as ShardherdClientError).code).toBe('CONNECT_FAILED');
    expect((error as Error).message).toMatch(
      new RegExp(`^Kafka at .+ answered, but no shardherd cluster uses the topic prefix ${prefix} there: its topic ${prefix}\\.\\w+ does not exist`),
    );
    expect((error as Error).message).not.toMatch(/could be reached/);
  });

  it('a node whose brokers cannot be reached exits 1 naming them and kafka.brokers', async () => {
    const broker = `127.0.0.1:${await freePort()}`;
    const dir = await mkdtemp(join(tmpdir(), 'shardherd-unreachable-'));
    try {
      const path = join(dir, 'node.json');
      await writeFile(path, JSON.stringify(nodeConfig(uniqueName('unreachable').replace(/-/g, '_'), 'unused', 4, [broker])));
      const r = await cli(['node', '--config', path, '--log-level', 'error']);
      expect(r.code).toBe(1);
      const failure = r.stdout
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as { msg: string; err?: { message: string } })
        .find((l) => l.msg === 'node could not start');
      expect(failure?.err?.message).toMatch(
        new RegExp(`^no Kafka broker could be reached at ${broker.replace(/\./g, '\\.')} \\(kafka\\.brokers of ${path.replace(/[.\\/]/g, '\\$&')}\\)`),
      );
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
