// A dataset of 16 384 shards × 3 copies on the real Kafka (its stock 1 MiB record limit) and
// Cassandra (the tests' 2.5 MiB mutation cap): three `shardherd node` processes in three racks with
// node ids of realistic length set it up, run every copy, and no bus record nor MetaStore write
// comes near a limit. Before maps travelled as changes and were stored in parts, this size never
// started: every whole-map record was refused by the broker, every map write by Cassandra.
import { rm } from 'node:fs/promises';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CassandraMetaStore } from '../../src/store/cassandra-meta-store.js';
import { readTopics } from '../support/bus-traffic.js';
import { everyCopyActive, ProcessCluster } from '../support/process-cluster.js';
import { processClusterBase, services } from './support.js';

const NODES = [1, 2, 3].map((i) => `ingest-${i}.prod-eu-west-1.example.internal`);
const SHARDS = 16_384;
const RF = 3;
const DATASET = 'metrics';

describe('a map of 16 384 shards × 3 copies', () => {
  let dir: string;
  let cluster: ProcessCluster;
  let prefix: string;

  beforeAll(async () => {
    const base = await processClusterBase('large');
    ({ dir, name: prefix } = base);
    cluster = new ProcessCluster({
      ...base.options,
      sessionTimeoutMs: 8_000,
      runtime: { publishIntervalMs: 2_000, pollIntervalMs: 100 },
    });
    for (const n of NODES) await cluster.start(n, 120_000);
  }, 240_000);

  afterAll(async () => {
    await cluster?.stopAll();
    if (dir) await rm(dir, { recursive: true, force: true });
  }, 60_000);

  it('is set up, every copy becomes Active, and no record on the bus is over 256 KiB', async () => {
    const s = services();
    const res = await fetch(`${cluster.get(NODES[0]!).url}/api/v1/datasets`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${cluster.token(NODES[0]!)}` },
      body: JSON.stringify({
        ref: DATASET,
        numShards: SHARDS,
        minNumNodes: 1,
        replicationFactor: RF,
        strategy: 'balanced',
        source: { type: 'synthetic', recordsPerSecond: 0.001 },
      }),
    });
    // The answer's body says why, should the setup be refused (e.g. a member missing for RF 3).
    expect(res.status, await res.text()).toBe(201);
    const deadline = Date.now() + 180_000;
    while (!(await everyCopyActive(cluster, DATASET, SHARDS * RF))) {
      if (Date.now() > deadline)
        throw new Error(`not every copy Active within 180 s: ${JSON.stringify(await Promise.all(NODES.map((n) => cluster.status(n).then((st) => st?.maps))))}`);
      await new Promise((r) => setTimeout(r, 500));
    }
    // Each node's /status counts its copies from its last answer when a fresh one takes more than a
    // few milliseconds (a node of 16 384 copies is busy): asked until the count catches up.
    for (const n of NODES) {
      await expect.poll(async () => (await cluster.status(n, 10_000))?.runningCounts[DATASET]?.Active, { timeout: 30_000, interval: 500 }).toBe(SHARDS);
    }

    const traffic = await readTopics(
      s.kafkaBrokers,
      ['inbox', 'events', 'replies'].map((t) => `${prefix}.${t}`),
    );
    const largest = Math.max(...[...traffic.values()].flat().map((r) => r.bytes));
    expect(largest).toBeLessThanOrEqual(256 * 1024);
  }, 300_000);

  it('is stored in the MetaStore whole, every copy Active, and an operator reads it from any node', async () => {
    const s = services();
    const store = await CassandraMetaStore.connect({
      contactPoints: s.cassandraContactPoints,
      localDataCenter: s.cassandraLocalDataCenter,
      keyspace: 'shardherd_test',
      cluster: prefix,
      log: pino({ level: 'silent' }),
    });
    try {
      const map = (await store.shardMaps()).find((m) => m.dataset === DATASET)!;
      expect(map.numShards).toBe(SHARDS);
      expect(map.shards.flatMap((r) => r.assignments).filter((a) => a.status.type === 'Active')).toHaveLength(SHARDS * RF);
    } finally {
      await store.close();
    }
    // FiloDB's status route, from a node that does not host the singleton: its own copy of the map.
    const res = await fetch(`${cluster.get(NODES[1]!).url}/api/v1/cluster/${DATASET}/status`);
    const body = (await res.json()) as { data: { owners: unknown[] }[] };
    expect(res.status).toBe(200);
    expect(body.data).toHaveLength(SHARDS);
    expect(body.data.every((d) => d.owners.length === RF)).toBe(true);
  }, 120_000);
});
