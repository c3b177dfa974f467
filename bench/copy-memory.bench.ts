/**
 * Memory per shard copy on a node: one embedded node (memory bus, membership and MetaStore, real
 * clock) given `SHARDHERD_COPY_MEMORY_COPIES` copies (default 40 960: 10 datasets × 4096 shards,
 * RF 1) of an idle synthetic source (one record every 1000 s per shard). Heap after a full
 * collection, and RSS, before the datasets and once every copy is Active and the node is quiet;
 * per copy: the difference over the copies. Run with and without the node's metrics (the metrics
 * share is the difference); the maps' share (the singleton's map and the node's followed copy of
 * it) is measured apart on the same datasets. The rest is the copies' actors and ingestion state.
 *
 * It runs the built package (`npm run build` first), as a node does: under tsx every function of
 * the sources gets a name property, 256 bytes of heap each, about 5.6 KB per copy that no
 * deployed node pays.
 */
import { pino } from 'pino';
import type { DatasetRef, NodeId } from '../src/core/ids.js';
import { collectGarbage, register, type Table } from './harness.js';
import { sleep, waitFor } from './runtime-support.js';

/** A module of the built package, typed as its source. */
const built = async <T>(path: string): Promise<T> => (await import(new URL(`../dist/${path}`, import.meta.url).href)) as T;
const { ShardMapper } = await built<typeof import('../src/core/shard-mapper.js')>('core/shard-mapper.js');
const { EmbeddedCluster } = await built<typeof import('../src/embedded/embedded-cluster.js')>('embedded/embedded-cluster.js');
const { MemoryMetaStore } = await built<typeof import('../src/store/memory-meta-store.js')>('store/memory-meta-store.js');

const COPIES = Number(process.env.SHARDHERD_COPY_MEMORY_COPIES ?? 40_960);
const SHARDS = 4096;
const DATASETS = Math.max(1, Math.round(COPIES / SHARDS));

const heap = (): number => {
  collectGarbage();
  return process.memoryUsage().heapUsed;
};

/**
 * What the embedded cluster's in-memory bus retains (every topic's newest records, reports and map
 * messages of these copies among them): a service's memory, not the node's. Measured as the heap
 * that a second copy of the same values takes.
 */
function busRetainedPerCopy(cluster: InstanceType<typeof EmbeddedCluster>): number {
  const values = new Set<unknown>();
  for (const suffix of ['inbox', 'events', 'replies', 'endpoints']) for (const r of cluster.bus.topic(`${cluster.topicPrefix}.${suffix}`)) values.add(r.value);
  const before = heap();
  const again = [...values].map((v) => structuredClone(v));
  const perCopy = (heap() - before) / (DATASETS * SHARDS);
  if (again.length !== values.size) throw new Error('unreachable');
  return perCopy;
}

async function node(metrics: boolean): Promise<{ heapPerCopy: number; rssPerCopy: number; setupS: number; busPerCopy: number }> {
  const cluster = new EmbeddedCluster({
    name: `copy-memory-${metrics}`,
    nodes: ['node-1'],
    metrics,
    log: pino({ level: 'warn' }),
    sessionTimeoutMs: 10_000,
    heartbeatIntervalMs: 1_000,
    bus: { retainRecords: 20_000 },
  });
  await cluster.startNodes();
  await sleep(2_000);
  const heapBefore = heap();
  const rssBefore = process.memoryUsage().rss;
  const t0 = performance.now();
  for (let d = 0; d < DATASETS; d++) {
    const reply = await cluster.setupDataset(
      { ref: `d${d}`, numShards: SHARDS, minNumNodes: 1, source: { type: 'synthetic', recordsPerSecond: 0.001 } },
      60_000,
    );
    if (reply.type !== 'DatasetVerified') throw new Error(`dataset d${d}: ${reply.type}`);
  }
  const n = cluster.node('node-1');
  await waitFor(
    'every copy Active',
    async () => {
      const maps = (await n.cache())?.maps;
      if (!maps) return false;
      let active = 0;
      for (const f of maps.values()) active += f.mapper?.activeShards().length ?? 0;
      return active >= DATASETS * SHARDS;
    },
    600_000,
    500,
  );
  const setupS = (performance.now() - t0) / 1000;
  // Scraped as Prometheus would (twice: the first asks every copy's end offset, the second reads
  // them), so the heap holds what a scraped node holds, not what setting up left behind.
  for (let scrape = 0; scrape < 2; scrape++) {
    await n.metrics?.scrape();
    await sleep(1_000);
  }
  await sleep(3_000);
  const heapPerCopy = (heap() - heapBefore) / (DATASETS * SHARDS);
  const rssPerCopy = (process.memoryUsage().rss - rssBefore) / (DATASETS * SHARDS);
  const busPerCopy = busRetainedPerCopy(cluster);
  await cluster.stop();
  return { heapPerCopy, rssPerCopy, setupS, busPerCopy };
}

/** The singleton's map and a node's followed copy of it: two mappers per dataset, every shard on one node. */
function mapsPerCopy(): number {
  const before = heap();
  const kept: InstanceType<typeof ShardMapper>[] = [];
  for (let d = 0; d < DATASETS; d++) {
    for (let copy = 0; copy < 2; copy++) {
      const m = new ShardMapper(SHARDS, `d${d}` as DatasetRef);
      m.registerNode(
        Array.from({ length: SHARDS }, (_, s) => s),
        'node-1' as NodeId,
      );
      kept.push(m);
    }
  }
  const perCopy = (heap() - before) / (DATASETS * SHARDS);
  if (kept.length === 0) throw new Error('unreachable');
  return perCopy;
}

/**
 * The in-memory MetaStore's copy of the maps (frozen copies of every record), which the embedded
 * cluster holds in the same process: a service's memory, not the node's (a node deployed with
 * Cassandra does not hold it).
 */
async function storedMapsPerCopy(): Promise<number> {
  const maps = Array.from({ length: DATASETS }, (_, d) => {
    const m = new ShardMapper(SHARDS, `d${d}` as DatasetRef);
    m.registerNode(
      Array.from({ length: SHARDS }, (_, s) => s),
      'node-1' as NodeId,
    );
    return m;
  });
  const before = heap();
  const store = new MemoryMetaStore();
  const lease = await store.takeLease('node-1' as NodeId, 'i1' as never, 0);
  if (!lease) throw new Error('no lease');
  for (const m of maps) await store.putShardMap(m.toSnapshot(lease.epoch));
  const perCopy = (heap() - before) / (DATASETS * SHARDS);
  if ((await store.shardMaps()).length !== DATASETS) throw new Error('unreachable');
  return perCopy;
}

register({
  name: 'copy-memory',
  run: async (): Promise<Table> => {
    const withMetrics = await node(true);
    const withoutMetrics = await node(false);
    const maps = mapsPerCopy();
    const stored = await storedMapsPerCopy();
    const kb = (bytes: number) => (bytes / 1024).toFixed(2);
    return {
      title: `Memory per shard copy, one node of ${DATASETS * SHARDS} idle copies (${DATASETS} datasets × ${SHARDS} shards, RF 1)`,
      columns: ['node', 'heap per copy (KB)', 'RSS per copy (KB)', 'set up, every copy Active (s)'],
      rows: [
        ['with metrics', kb(withMetrics.heapPerCopy), kb(withMetrics.rssPerCopy), withMetrics.setupS.toFixed(1)],
        ['without metrics', kb(withoutMetrics.heapPerCopy), kb(withoutMetrics.rssPerCopy), withoutMetrics.setupS.toFixed(1)],
      ],
      notes: [
        `metrics: ${kb(withMetrics.heapPerCopy - withoutMetrics.heapPerCopy)} KB of heap per copy (with and without, above)`,
        `maps (the singleton's and the node's followed copy): ${kb(maps)} KB per copy`,
        `services in the same process, not the node (a deployed node has Kafka and Cassandra instead): the in-memory MetaStore's copy of the maps ${kb(stored)} KB per copy, the in-memory bus's retained records ${kb(withoutMetrics.busPerCopy)} KB per copy`,
        `**the node's own heap per copy** (the above less those services): ${kb(withMetrics.heapPerCopy - stored - withMetrics.busPerCopy)} KB with metrics, ${kb(withoutMetrics.heapPerCopy - stored - withoutMetrics.busPerCopy)} KB without`,
        `the copies and their ingestion state: ${kb(withoutMetrics.heapPerCopy - maps - stored - withoutMetrics.busPerCopy)} KB per copy (the rest)`,
        "heap after a full collection; RSS is the process's, which the collector does not give back at once",
      ],
    };
  },
});
