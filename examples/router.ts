// A query router: a ShardherdClient (not a cluster member) asks the nodes that serve a shard. One
// request goes to the shard of a series' keys; a fan-out goes to every shard a shard key spreads
// over and gathers each shard's answer or error. Failover, redirections and deadlines are the
// client's: a crashed copy costs no request while another copy serves.
import { EmbeddedCluster, ShardherdClient, ShardherdClientError, datasetRef, type Labels } from 'shardherd';
import type { RealCluster } from './main.js';

/** What the router asks, and what a node's handler answers. */
interface Query {
  readonly metric: string;
}
interface Answer {
  readonly node: string;
  readonly shard: number;
  readonly metric: string;
}

const metrics = datasetRef('metrics');
const shardKey: Labels = { _ws_: 'demo', _ns_: 'api', _metric_: 'http_requests' };
const series: Labels = { host: 'h1', path: '/login' };

export async function router(real: RealCluster | undefined): Promise<void> {
  if (real) {
    // The Kafka entry point loads kafkajs: only a router of a real cluster needs it.
    const { connectKafkaClient } = await import('shardherd/kafka');
    const client = await connectKafkaClient({ brokers: real.brokers, topicPrefix: real.prefix, name: 'example-router', deadlineMs: 3_000 });
    try {
      await ask(client, 'from the real cluster');
    } finally {
      await client.close();
    }
    return;
  }

  // An embedded cluster to ask: three nodes in three racks, 8 shards with two copies each, a spread
  // of 2 (a shard key's series over 4 shards); every node answers for the shards it serves.
  const cluster = new EmbeddedCluster({ nodes: [{ name: 'n1', rack: 'a' }, { name: 'n2', rack: 'b' }, { name: 'n3', rack: 'c' }] });
  for (const node of cluster.nodes) {
    await node.serve<Query, Answer>(metrics, ({ shard, payload }) => {
      if (payload.metric === '') throw new Error('a query needs a metric');
      return { node: node.node, shard, metric: payload.metric };
    });
  }
  await cluster.start();
  await cluster.setupDataset({ ref: 'metrics', numShards: 8, minNumNodes: 3, spread: 2, replicationFactor: 2, strategy: 'balanced', source: { type: 'synthetic' } });
  await cluster.whenConverged('metrics', { timeoutMs: 30_000 });

  const client = await ShardherdClient.connectEmbedded(cluster, { deadlineMs: 3_000 });
  try {
    await ask(client, 'with every node up');
    cluster.node('n1').crash();
    await fanOut(client, 'after n1 crashed', { metric: 'http_requests' });
    await fanOut(client, 'with a query the handler refuses', { metric: '' });
  } finally {
    await client.close();
    await cluster.stop();
  }
}

async function ask(client: ShardherdClient, when: string): Promise<void> {
  // One request: the shard a gateway wrote this series to (the dataset's spread applies).
  try {
    const one = await client.request<Answer>(metrics, { shardKey, partitionKey: series }, { metric: 'http_requests' });
    console.log(`request by key: shard ${one.shard} answered by ${one.node}`);
  } catch (e) {
    // Typed: `code` says what went wrong, `retriable` whether the same request may succeed later.
    if (!(e instanceof ShardherdClientError)) throw e;
    console.log(`request by key failed: ${e.code}${e.retriable ? ' (retriable)' : ''}: ${e.message}`);
  }
  await fanOut(client, when, { metric: 'http_requests' });
}

async function fanOut(client: ShardherdClient, when: string, query: Query): Promise<void> {
  // Every shard of the shard key, in parallel; one shard's failure does not fail the others.
  const all = await client.fanOut<Answer>(metrics, { shardKey }, query);
  const answered = all.values.map((a) => a.shard).join(',');
  const errors = all.errors.map((e) => `${e.shard}: ${e.code}`).join(', ');
  console.log(`fan-out ${when}: answers from shards [${answered}], errors [${errors}]`);
  for (const e of all.errors) console.log(`  shard ${e.shard}: ${e.message}`);
}
