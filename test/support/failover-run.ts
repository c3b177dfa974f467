// What the failover benchmark (bench/failover.bench.ts) and the failure detector's chaos test
// (test/integration/detector-failover.test.ts) share about a cluster of `shardherd node` processes:
// a follower of the maps on the bus (a `ShardherdClient`, as a router or a subscriber sees them),
// the shards a node holds, when those are served by others again, which node hosts the singleton
// and when a new singleton answers a request, and the evictions and fences the nodes logged.
import { readFile } from 'node:fs/promises';
import { connectKafkaClient } from '../../src/client/kafka-client.js';
import type { ShardherdClient } from '../../src/client/shardherd-client.js';
import type { DatasetRef } from '../../src/core/ids.js';
import type { ProcessCluster } from './process-cluster.js';

/** A dataset as the watchers check it: how many shards and copies a shard. */
export interface WatchedDataset {
  readonly ref: string;
  readonly numShards: number;
  readonly replicationFactor: number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Polls `done` every `pollMs` until it holds; resolves with `performance.now()` of the poll that saw it, rejects after `timeoutMs`. */
export async function until(what: string, done: () => boolean | Promise<boolean>, timeoutMs: number, pollMs = 10): Promise<number> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    if (await done()) return performance.now();
    if (performance.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await sleep(pollMs);
  }
}

/**
 * The cluster's maps as a client follows them on the events topic: no polling of the nodes, so
 * a map change is seen as soon as the singleton published it (checked every few ms in this process).
 */
export class MapWatch {
  private constructor(
    private readonly client: ShardherdClient,
    readonly datasets: readonly WatchedDataset[],
  ) {}

  static async connect(brokers: readonly string[], topicPrefix: string, datasets: readonly WatchedDataset[]): Promise<MapWatch> {
    const client = await connectKafkaClient({ brokers: [...brokers], topicPrefix, name: 'failover-watch', connectTimeoutMs: 60_000 });
    // Asking for a dataset's config makes the client follow its map.
    for (const d of datasets) await client.datasetConfig(d.ref as DatasetRef, { deadlineMs: 60_000 });
    return new MapWatch(client, datasets);
  }

  /** The shards of which `node` holds a copy now, per dataset. */
  shardsOn(node: string): Map<string, number[]> {
    return new Map(this.datasets.map((d) => [d.ref, this.client.map(d.ref as DatasetRef)?.shardsForNode(node as never) ?? []]));
  }

  /**
   * True when each of `shards` (per dataset) has its full number of Active copies, none on `gone`:
   * at RF 1, the shard is Active on another node; at RF 2, the lost copy was made again elsewhere.
   */
  replaced(shards: ReadonlyMap<string, readonly number[]>, gone: string): boolean {
    return this.datasets.every((d) => {
      const map = this.client.map(d.ref as DatasetRef);
      if (!map) return false;
      return (shards.get(d.ref) ?? []).every((s) => {
        const copies = map.recordForShard(s).assignments;
        return !copies.some((a) => a.node === gone) && copies.filter((a) => a.status.type === 'Active').length === d.replicationFactor;
      });
    });
  }

  /** True when every shard of every dataset has its full number of copies, all Active, on the nodes named. */
  whole(live: ReadonlySet<string>): boolean {
    return this.datasets.every((d) => {
      const map = this.client.map(d.ref as DatasetRef);
      if (!map) return false;
      for (let s = 0; s < d.numShards; s++) {
        const copies = map.recordForShard(s).assignments;
        if (copies.length !== d.replicationFactor || !copies.every((a) => a.status.type === 'Active' && live.has(a.node))) return false;
      }
      return true;
    });
  }

  /** The maps' versions, to tell a settled cluster from one still moving copies. */
  versions(): string {
    return this.datasets.map((d) => this.client.map(d.ref as DatasetRef)?.version ?? -1).join(',');
  }

  close(): Promise<void> {
    return this.client.close();
  }
}

/** The live node hosting the singleton and its epoch, from the nodes' `/status`; undefined if none or several. */
export async function singletonOf(cluster: ProcessCluster): Promise<{ name: string; epoch: number } | undefined> {
  const found: { name: string; epoch: number }[] = [];
  for (const p of cluster.live()) {
    const s = await cluster.status(p.name, 2_000);
    if (s?.singleton && s.member) found.push({ name: p.name, epoch: s.singleton.epoch });
  }
  return found.length === 1 ? found[0] : undefined;
}

/**
 * Resolves with `performance.now()` when a request that only the singleton answers
 * (`GET /api/v1/node-operations`, which the node `via` forwards to it on the bus) is first answered
 * with 200. A new request is sent every `everyMs` without waiting for the ones in flight (a route
 * waits up to 5 s for the singleton and answers 503 meanwhile), so the answer's time is that of the
 * first singleton able to answer, within `everyMs`. Call it after the old singleton is gone: what
 * answers then is a new one.
 */
export async function singletonAnswers(cluster: ProcessCluster, via: string, timeoutMs: number, everyMs = 50): Promise<number> {
  const url = `${cluster.get(via).url}/api/v1/node-operations`;
  const deadline = performance.now() + timeoutMs;
  let answeredAt: number | undefined;
  const inFlight = new Set<Promise<void>>();
  while (answeredAt === undefined && performance.now() < deadline) {
    const attempt = fetch(url, { signal: AbortSignal.timeout(6_000) })
      .then(async (res) => {
        await res.arrayBuffer();
        if (res.status === 200) answeredAt ??= performance.now();
      })
      .catch(() => undefined);
    inFlight.add(attempt);
    void attempt.finally(() => inFlight.delete(attempt));
    await sleep(everyMs);
  }
  // Let the stragglers end, so no request outlives the measurement.
  await Promise.all([...inFlight]);
  if (answeredAt === undefined) throw new Error(`no singleton answered a request through ${via} within ${timeoutMs} ms`);
  return answeredAt;
}

/** What the nodes' logs say happened to members: the detector's evictions and the nodes' fences, in log order. */
export interface Departures {
  /** `detector.evicted`, by the singleton that evicted: which member (name) and incarnation, when (ms since the epoch, this machine's clock). */
  readonly evicted: { readonly member: string; readonly incarnation: string; readonly time: number; readonly silentMs?: number; readonly refused?: boolean }[];
  /** `node.fenced`: a node's incarnation learned it was no longer a member and restarted as a new one. */
  readonly fenced: { readonly node: string; readonly incarnation: string; readonly time: number; readonly reason?: string }[];
}

/**
 * The evictions of incarnations that were still running: not those of an incarnation that had
 * already fenced itself (its Kafka session lost, say), whose endpoint then closed and was refused.
 */
export function evictionsOfLive(d: Departures): Departures['evicted'] {
  return d.evicted.filter((e) => !d.fenced.some((f) => f.node === e.member && f.incarnation === e.incarnation && f.time <= e.time));
}

/** Reads every node's log (all of its incarnations) for evictions and fences. */
export async function departures(cluster: ProcessCluster, names: readonly string[]): Promise<Departures> {
  const out: Departures = { evicted: [], fenced: [] };
  for (const name of names) {
    const text = await readFile(cluster.logPath(name), 'utf8').catch(() => '');
    for (const line of text.split('\n')) {
      if (!line.includes('"detector.evicted"') && !line.includes('"node.fenced"')) continue;
      let e: { event?: string; time?: number; member?: string; incarnation?: string; silentMs?: number; refused?: boolean; reason?: string };
      try {
        e = JSON.parse(line) as typeof e;
      } catch {
        continue;
      }
      const time = e.time ?? 0;
      if (e.event === 'detector.evicted' && e.member)
        out.evicted.push({
          member: e.member,
          incarnation: e.incarnation ?? '?',
          time,
          ...(e.silentMs === undefined ? {} : { silentMs: e.silentMs }),
          ...(e.refused === undefined ? {} : { refused: e.refused }),
        });
      if (e.event === 'node.fenced')
        out.fenced.push({ node: name, incarnation: e.incarnation ?? '?', time, ...(e.reason === undefined ? {} : { reason: String(e.reason) }) });
    }
  }
  return out;
}
