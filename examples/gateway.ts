// A gateway: writes each record to the shard its keys choose, the shard a query router will ask
// for them (`ingestionShard` of the shard key's hash, the series' hash and the dataset's spread).
// On a real cluster it is a `ShardedProducer`: partition p of the dataset's topic is shard p. An
// embedded cluster has no Kafka: there the gateway sends each record as a routed request to a node
// that serves its shard, which stores it.
import { EmbeddedCluster, ShardherdClient, datasetRef, validateDatasetConfig, type Labels } from 'shardherd';
import type { RealCluster } from './main.js';

/** The records: 12 series of 3 metrics on 4 hosts, each with its keys. */
const records = ['cpu', 'memory', 'disk'].flatMap((metric) =>
  ['h1', 'h2', 'h3', 'h4'].map((host) => ({
    shardKey: { _ws_: 'demo', _ns_: 'app', _metric_: metric } satisfies Labels,
    partitionKey: { host } satisfies Labels,
    value: { metric, host, v: Math.round(Math.random() * 100) },
  })),
);

export async function gateway(real: RealCluster | undefined): Promise<void> {
  if (real) return kafkaGateway(real);

  // The embedded cluster: every node keeps what it is sent for the shards it serves.
  const events = datasetRef('events');
  const cluster = new EmbeddedCluster({ nodes: ['n1', 'n2', 'n3'] });
  for (const node of cluster.nodes) {
    const stored = new Map<number, unknown[]>();
    await node.serve<unknown, { node: string; shard: number; stored: number }>(events, ({ shard, payload }) => {
      const list = stored.get(shard) ?? [];
      list.push(payload);
      stored.set(shard, list);
      return { node: node.node, shard, stored: list.length };
    });
  }
  await cluster.start();
  await cluster.setupDataset({ ref: 'events', numShards: 8, minNumNodes: 3, spread: 1, source: { type: 'synthetic' } });
  await cluster.whenConverged('events', { timeoutMs: 30_000 });

  const client = await ShardherdClient.connectEmbedded(cluster, { deadlineMs: 3_000 });
  try {
    const shards = new Set<number>();
    for (const r of records) {
      // The target is the record's keys: the client computes the shard as ShardedProducer.shardOf does.
      const at = await client.request<{ node: string; shard: number; stored: number }>(events, { shardKey: r.shardKey, partitionKey: r.partitionKey }, r.value);
      shards.add(at.shard);
      console.log(`host ${r.partitionKey.host} metric ${r.shardKey._metric_} -> shard ${at.shard} (stored by ${at.node}, ${at.stored} there)`);
    }
    console.log(`${records.length} records written to ${shards.size} shards`);
  } finally {
    await client.close();
    await cluster.stop();
  }
}

/** The real cluster's gateway: the dataset `metrics` of `npm run cluster` (8 shards, topic `<prefix>.metrics`). */
async function kafkaGateway(real: RealCluster): Promise<void> {
  // The Kafka entry point loads kafkajs: only a gateway of a real cluster needs it.
  const { ShardedProducer } = await import('shardherd/kafka');
  const { pino } = await import('pino'); // shardherd's logger, a dependency of the package
  const config = validateDatasetConfig({ ref: 'metrics', numShards: 8, minNumNodes: 3, source: { type: 'kafka', topic: `${real.prefix}.metrics` } });
  if (!config.ok) throw new Error(config.error.message);
  const producer = new ShardedProducer({ brokers: real.brokers, clientId: 'example-gateway', log: pino({ level: 'warn' }) });
  try {
    // One request per broker; `send` resolves once every in-sync replica has the records.
    const sent = await producer.send(config.value, records);
    sent.forEach((s, i) => {
      const r = records[i]!;
      console.log(`host ${r.partitionKey.host} metric ${r.shardKey._metric_} -> shard ${s.shard} (partition ${s.partition}, offset ${s.offset})`);
    });
    console.log(`${records.length} records written to ${new Set(sent.map((s) => s.shard)).size} shards`);
  } finally {
    await producer.close();
  }
}
