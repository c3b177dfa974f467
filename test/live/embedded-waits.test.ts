// What an application awaits on an embedded cluster: `start()` (a singleton is there), `whenConverged`
// (every copy serving, or a typed error saying what is missing) and a sink per node.
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { ClusterWaitTimeoutError, EmbeddedCluster } from '../../src/embedded/embedded-cluster.js';
import { nodeId, type NodeId } from '../../src/core/ids.js';
import { CountingSink } from '../../src/ingest/counting-sink.js';

let cluster: EmbeddedCluster | undefined;
afterEach(async () => {
  await cluster?.stop();
  cluster = undefined;
});

const synthetic = { type: 'synthetic', recordsPerSecond: 200 } as const;

function threeNodes(sink?: (node: NodeId) => CountingSink): EmbeddedCluster {
  return new EmbeddedCluster({
    name: `waits-${Math.floor(performance.now() * 1000)}`,
    nodes: ['n1', 'n2', 'n3'],
    log: pino({ level: 'silent' }),
    sessionTimeoutMs: 1_000,
    heartbeatIntervalMs: 200,
    ...(sink ? { sink } : {}),
  });
}

describe('EmbeddedCluster waits', () => {
  it('start() resolves with a recovered singleton: singletonNode() is defined and answers at once', async () => {
    cluster = threeNodes();
    await cluster.start();
    const singleton = await cluster.singletonNode();
    expect(singleton?.node).toBe('n1');
    expect((await singleton?.singletonState())?.phase).toBe('active');
  });

  it('whenConverged resolves once every shard has all its copies Active and Available on live members', async () => {
    cluster = threeNodes();
    await cluster.start();
    expect(
      (await cluster.setupDataset({ ref: 'metrics', numShards: 8, minNumNodes: 3, replicationFactor: 2, strategy: 'balanced', source: synthetic })).type,
    ).toBe('DatasetVerified');
    await cluster.whenConverged('metrics', { timeoutMs: 10_000 });
    const map = (await (await cluster.singletonNode())!.singletonState())!.datasets.get('metrics' as never)!.mapper;
    for (let s = 0; s < 8; s++) {
      const copies = map.recordForShard(s).assignments;
      expect(copies.map((c) => [c.status.type, c.placement])).toEqual([
        ['Active', 'Available'],
        ['Active', 'Available'],
      ]);
    }
  });

  it('whenConverged rejects with a ClusterWaitTimeoutError naming the shards still missing a copy', async () => {
    cluster = threeNodes();
    await cluster.start();
    // Three copies on three nodes: one node down leaves every shard a copy short.
    await cluster.setupDataset({ ref: 'metrics', numShards: 4, minNumNodes: 3, replicationFactor: 3, strategy: 'balanced', source: synthetic });
    await cluster.whenConverged('metrics', { timeoutMs: 10_000 });
    cluster.node('n3').crash();
    const error = await cluster.whenConverged('metrics', { timeoutMs: 500 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ClusterWaitTimeoutError);
    expect((error as ClusterWaitTimeoutError).code).toBe('WAIT_TIMEOUT');
    expect((error as ClusterWaitTimeoutError).message).toMatch(/metrics shards 0-3: .*n3/);
  });

  it('whenConverged waits for a dataset that is not set up yet, and says so at its timeout', async () => {
    cluster = threeNodes();
    await cluster.start();
    await expect(cluster.whenConverged('later', { timeoutMs: 200 })).rejects.toThrow(/dataset later is not set up/);
  });

  it('a sink factory gives every node its own sink: each gets only the records of the shards it ingests', async () => {
    const sinks = new Map<NodeId, CountingSink>();
    cluster = threeNodes((node) => {
      const sink = new CountingSink();
      sinks.set(node, sink);
      return sink;
    });
    expect(cluster.sink).toBeUndefined();
    await cluster.start();
    await cluster.setupDataset({ ref: 'metrics', numShards: 8, minNumNodes: 3, source: synthetic });
    await cluster.whenConverged('metrics', { timeoutMs: 10_000 });
    const map = (await (await cluster.singletonNode())!.singletonState())!.datasets.get('metrics' as never)!.mapper;
    await expect.poll(() => ['n1', 'n2', 'n3'].every((n) => sinks.get(nodeId(n))!.total('metrics').accepted > 0), { timeout: 5_000 }).toBe(true);
    for (const name of ['n1', 'n2', 'n3']) {
      const own = new Set(map.shardsForNode(nodeId(name)));
      expect(cluster.sinkOf(name)).toBe(sinks.get(nodeId(name)));
      for (let s = 0; s < 8; s++) if (!own.has(s as never)) expect(sinks.get(nodeId(name))!.tally('metrics', s).accepted, `${name} shard ${s}`).toBe(0);
    }
  });
});

describe('EmbeddedCluster node placement settings', () => {
  it.each([0, -1, Number.NaN, Number.POSITIVE_INFINITY, 2_000_000])('refuses weight %s with INVALID_PLACEMENT, naming the node', (weight) => {
    const cluster = new EmbeddedCluster({ nodes: [], log: pino({ level: 'silent' }) });
    expect(() => cluster.add('node-w', { rack: 'r1', weight })).toThrow(
      expect.objectContaining({ code: 'INVALID_PLACEMENT', message: expect.stringContaining('node-w') }),
    );
    expect(cluster.nodes).toHaveLength(0);
  });

  it('refuses an empty rack, and takes a node with a positive weight', () => {
    const cluster = new EmbeddedCluster({ nodes: [], log: pino({ level: 'silent' }) });
    expect(() => cluster.add('node-r', { rack: '' })).toThrow(expect.objectContaining({ code: 'INVALID_PLACEMENT' }));
    expect(cluster.add('node-ok', { rack: 'r1', weight: 2.5 }).node).toBe('node-ok');
  });
});
