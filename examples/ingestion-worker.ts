// An ingestion worker: a node with a sink of its own, which keeps what its shards ingest (here a
// count and the last record per shard, and every record as a line of a JSON-lines file), and which
// serves routed requests from it: a router asks a shard, the node that ingests it answers.
import { appendFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EmbeddedCluster, ShardEventSubscriber, ShardherdClient, TokenFence, datasetRef, type DatasetConfig, type FencingToken, type RecordSink, type ShardNum, type ShardherdNode, type SourceRecord } from 'shardherd';
import type { RealCluster } from './main.js';

/** What a shard's node answers about it. */
interface ShardSummary {
  readonly node: string;
  readonly shard: number;
  readonly records: number;
  readonly lastOffset: number | null;
}

/**
 * The worker's sink: `accept` is called with each batch a shard of this node ingested; the batch
 * counts as ingested (its offset is checkpointed) once `accept` resolves.
 *
 * Each batch carries the fencing token of the node's assignment: the store refuses (throws
 * `StaleTokenError`, which `TokenFence.admit` does) a batch whose token is older than one it has
 * applied for the shard, so a node paused in the middle of a call cannot land it after the shard's
 * next owner wrote. The check and the write happen in one step, with no await between them.
 *
 * Gotchas: delivery is at least once (a shard that moves replays from its checkpoint): a real sink
 * makes `accept` idempotent by (dataset, shard, offset).
 */
class ShardStore implements RecordSink {
  private readonly shards = new Map<number, { records: number; last: SourceRecord | undefined }>();
  private readonly fence = new TokenFence();
  written = 0;

  constructor(
    private readonly node: string,
    private readonly file: string,
  ) {}

  async accept(dataset: DatasetConfig, shard: ShardNum, records: readonly SourceRecord[], token?: FencingToken): Promise<void> {
    this.fence.admit(dataset.ref, shard, token);
    if (records.length === 0) return;
    const lines = records.map((r) => JSON.stringify({ node: this.node, dataset: dataset.ref, shard, offset: r.offset, key: r.key, value: r.value }));
    appendFileSync(this.file, `${lines.join('\n')}\n`);
    this.written += records.length;
    const s = this.shards.get(shard) ?? { records: 0, last: undefined };
    this.shards.set(shard, { records: s.records + records.length, last: records.at(-1) });
  }

  summary(shard: number): ShardSummary {
    const s = this.shards.get(shard);
    return { node: this.node, shard, records: s?.records ?? 0, lastOffset: s?.last?.offset ?? null };
  }
}

const metrics = datasetRef('metrics');

export async function ingestionWorker(real: RealCluster | undefined): Promise<void> {
  const file = join(tmpdir(), `shardherd-example-records-${process.pid}.jsonl`);
  writeFileSync(file, '');
  if (real) return realWorker(real, file);

  // Three nodes in one process, each with a store of its own and serving the dataset from it.
  const stores = new Map<string, ShardStore>();
  const cluster = new EmbeddedCluster({
    nodes: ['n1', 'n2', 'n3'],
    sink: (node) => {
      const store = new ShardStore(node, file);
      stores.set(node, store);
      return store;
    },
  });
  for (const node of cluster.nodes) await serveFrom(node, () => stores.get(node.node));
  await cluster.start();
  await cluster.setupDataset({ ref: 'metrics', numShards: 8, minNumNodes: 3, source: { type: 'synthetic', recordsPerSecond: 200 } });
  await cluster.whenConverged('metrics', { timeoutMs: 30_000 });
  await new Promise((resolve) => setTimeout(resolve, 1_000)); // let the shards ingest for a second

  // Ask every shard what its node ingested: each answer comes from the node that owns the shard.
  const client = await ShardherdClient.connectEmbedded(cluster, { deadlineMs: 3_000 });
  try {
    for (let shard = 0; shard < 8; shard++) {
      const s = await client.request<ShardSummary>(metrics, { shard }, {});
      console.log(`shard ${s.shard} on ${s.node}: ${s.records} records, last offset ${s.lastOffset}`);
    }
  } finally {
    await client.close();
    await cluster.stop();
  }
  const written = [...stores.values()].reduce((sum, s) => sum + s.written, 0);
  console.log(`sinks wrote ${written} records to ${file}`);
}

/** Serves the dataset's requests on `node` from its store: a shard's count and last offset. */
async function serveFrom(node: ShardherdNode, store: () => ShardStore | undefined): Promise<void> {
  await node.serve<unknown, ShardSummary>(metrics, ({ shard }) => {
    const s = store();
    if (!s) throw new Error(`${node.node} has no store yet`);
    return s.summary(shard);
  });
}

/** A worker node of a real cluster (Kafka and Cassandra), as `shardherd node` runs one but with its own sink. */
async function realWorker(real: RealCluster, file: string): Promise<void> {
  // The node entry point loads kafkajs, cassandra-driver and fastify; pino is shardherd's logger.
  const { parseNodeConfig, startNode } = await import('shardherd/node');
  const { pino } = await import('pino');
  const name = `worker-${process.pid}`;
  const store = new ShardStore(name, file);
  const config = parseNodeConfig({
    node: name,
    cluster: real.prefix,
    rack: 'rack-w',
    kafka: { brokers: real.brokers, sessionTimeoutMs: 6_000 },
    cassandra: { contactPoints: real.cassandra, localDataCenter: 'datacenter1', keyspace: real.keyspace },
    logLevel: 'warn',
  });
  const started = await startNode(config, { sink: store, log: pino({ level: 'warn' }) });
  const url = await started.node.serve<unknown, ShardSummary>(metrics, ({ shard }) => store.summary(shard));
  console.log(`${name} joined cluster ${real.prefix}; serves ${metrics} at ${url}; records go to ${file}`);
  // Which shards this node ingests changes with the cluster: follow its map.
  // (`metrics` of `npm run cluster` is placed by FiloDB's strategy, which gives a newcomer shards
  // only when a node that owns some leaves.)
  let mine: string | undefined;
  const subscriber = new ShardEventSubscriber(started.node, metrics, (map) => {
    const now = map.shardsForNode(started.node.node).join(',');
    if (now !== mine) console.log(`${name} ingests shards [${(mine = now)}]`);
  });
  await new Promise<void>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
  subscriber.close();
  await started.stop();
  console.log(`stopped; ${store.written} records written to ${file}`);
}
