// The `shardherd` admin CLI against a real node process on the real Kafka and Cassandra, run as a
// user runs it: tables by default, --json for scripts, the token found in the node's token file,
// exit codes 0 (done), 1 (refused or unreachable) and 2 (bad usage).
import { execFile } from 'node:child_process';
import { rm, writeFile } from 'node:fs/promises';
import { createServer, type AddressInfo } from 'node:net';
import { join } from 'node:path';
import { Kafka, logLevel } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ProcessCluster, waitConverged } from '../support/process-cluster.js';
import { processClusterBase } from './support.js';
import { createTopicsWithLeaders } from '../../src/cluster/kafka-client.js';

// The built command (./build-once.ts builds it for the run), as users run it.
const MAIN = join(import.meta.dirname, '../../dist/cli/main.js');

describe('shardherd admin commands', () => {
  let dir: string;
  let cluster: ProcessCluster;
  let prefix: string;
  let url: string;
  let admin: ReturnType<Kafka['admin']>;

  /** Runs the CLI; `tokenDir` is where it looks for a local node's token file (the nodes write theirs to `dir`). */
  const cli = (args: string[], tokenDir = dir): Promise<{ code: number; stdout: string; stderr: string }> =>
    new Promise((resolve) => {
      const env = { ...process.env, SHARDHERD_TOKEN_DIR: tokenDir, SHARDHERD_TOKEN: '', FORCE_COLOR: '0' };
      execFile(process.execPath, [MAIN, ...args], { env, timeout: 60_000 }, (error, stdout, stderr) => {
        resolve({ code: error ? (typeof error.code === 'number' ? error.code : -1) : 0, stdout, stderr });
      });
    });

  beforeAll(async () => {
    const base = await processClusterBase('cli');
    const s = base.services;
    ({ dir, name: prefix } = base);
    admin = new Kafka({ clientId: 'admin-cli-test', brokers: s.kafkaBrokers, logLevel: logLevel.ERROR }).admin();
    await admin.connect();
    await createTopicsWithLeaders(admin, [{ topic: `${prefix}.metrics`, numPartitions: 4, replicationFactor: 1 }]);
    cluster = new ProcessCluster({
      ...base.options,
      sessionTimeoutMs: 8_000,
      runtime: { publishIntervalMs: 1_000, pollIntervalMs: 50 },
      datasets: [{ ref: 'metrics', numShards: 4, minNumNodes: 1, source: { type: 'kafka', topic: `${prefix}.metrics` } }],
    });
    await cluster.start('node-1');
    url = cluster.get('node-1').url;
    await waitConverged(cluster, 'metrics', 4, 60_000);
  }, 180_000);

  afterAll(async () => {
    await cluster?.stopAll();
    await admin?.disconnect();
    if (dir) await rm(dir, { recursive: true, force: true });
  }, 60_000);

  it('status prints the singleton, the members and each dataset as aligned tables', async () => {
    const r = await cli(['status', '--url', url]);
    expect(r).toMatchObject({ code: 0, stderr: '' });
    expect(r.stdout).toMatch(/^singleton: node-1 \(epoch \d+\)$/m);
    expect(r.stdout).toMatch(/^NODE\s+RACK\s+WEIGHT\s+COPIES\s+SINGLETON/m);
    expect(r.stdout).toMatch(/^node-1\s+rack-node-1\s+1\s+4\s+yes/m);
    expect(r.stdout).toMatch(/^metrics\s+4\s+1\s+filodb-default\s+\d+\s+\d+\s+Active 4$/m);
  });

  it("--json prints the node's JSON for scripts", async () => {
    const members = await cli(['members', '--url', url, '--json']);
    expect(members.code).toBe(0);
    expect(JSON.parse(members.stdout).members).toEqual([expect.objectContaining({ node: 'node-1', singleton: true, copies: 4 })]);
    const datasets = await cli(['datasets', '--url', url, '--json']);
    expect(JSON.parse(datasets.stdout).datasets.map((d: { name: string }) => d.name)).toEqual(['metrics']);
  });

  it("stops and starts a shard with the token from the node's token file", async () => {
    const stop = await cli(['shards', 'stop', 'metrics', '--shards', '2', '--url', url]);
    expect(stop).toMatchObject({ code: 0, stdout: 'stopped shards 2 of metrics\n' });
    const status = JSON.parse((await cli(['status', '--url', url, '--json'])).stdout);
    const shard2 = status.datasets[0].shards[2];
    expect(shard2).toMatchObject({ status: 'Stopped', owners: [] });
    expect(shard2.reason).toMatch(/stopshards/);
    expect((await cli(['status', '--url', url])).stdout).toMatch(/^2\s+Stopped\s+0\/1\s+stopped by an operator/m);
    const start = await cli(['shards', 'start', 'metrics', '--node', 'node-1', '--shards', '2', '--url', url]);
    expect(start).toMatchObject({ code: 0, stdout: 'started shards 2 of metrics on node-1\n' });
    await waitConverged(cluster, 'metrics', 4, 30_000);
  });

  it('is refused without a token (2), with a wrong one (1), and for an invalid request (1), changing nothing', async () => {
    const noToken = await cli(['shards', 'stop', 'metrics', '--shards', '1', '--url', url], join(dir, 'empty'));
    expect(noToken.code).toBe(2);
    expect(noToken.stderr).toMatch(/needs a token/);
    const wrong = await cli(['shards', 'stop', 'metrics', '--shards', '1', '--url', url, '--token', 'wrong-token-0123456789']);
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toMatch(/refused \(403 Forbidden\)/);
    const invalid = await cli(['shards', 'stop', 'metrics', '--shards', '1,1', '--url', url]);
    expect(invalid.code).toBe(1);
    expect(invalid.stderr).toMatch(/refused \(400 BadSchema\): Invalid shards found \[1, 1\]/);
    const status = JSON.parse((await cli(['status', '--url', url, '--json'])).stdout);
    expect(status.datasets[0].counts).toEqual({ Active: 4 });
  });

  it('sets up a dataset from a file, creating its topic, and removes it', async () => {
    const file = join(dir, 'logs.json');
    await writeFile(file, JSON.stringify({ ref: 'logs', numShards: 2, minNumNodes: 1, source: { type: 'kafka', topic: `${prefix}.logs` } }));
    const setup = await cli(['dataset', 'setup', file, '--create-topic', '--url', url]);
    expect(setup).toMatchObject({ code: 0, stdout: 'dataset logs set up\n' });
    expect((await admin.fetchTopicMetadata({ topics: [`${prefix}.logs`] })).topics[0]!.partitions).toHaveLength(2);
    expect((await cli(['dataset', 'setup', file, '--url', url])).stdout).toBe('dataset logs already exists with this config: nothing changed\n');
    expect(await cli(['dataset', 'remove', 'logs', '--url', url])).toMatchObject({ code: 0, stdout: 'dataset logs removed\n' });
    const again = await cli(['dataset', 'remove', 'logs', '--url', url]);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/404 DatasetUnknown/);
  });

  it('exits 2 on bad usage and 1 when no node answers', async () => {
    expect((await cli(['shards', 'stop', 'metrics', '--shards', 'two', '--url', url])).code).toBe(2);
    expect((await cli(['dataset', 'setup', join(dir, 'nope.json'), '--url', url])).code).toBe(2);
    expect((await cli(['status', '--url', 'not a url'])).code).toBe(2);
    const closed = await new Promise<number>((resolve) => {
      const server = createServer().listen(0, '127.0.0.1', () => {
        const { port } = server.address() as AddressInfo;
        server.close(() => resolve(port));
      });
    });
    const down = await cli(['status', '--url', `http://127.0.0.1:${closed}`]);
    expect(down.code).toBe(1);
    expect(down.stderr).toMatch(/no answer from the node \(ECONNREFUSED\)/);
  });
});
