/**
 * Soak: the embedded cluster on the wall clock under continuous churn (node crashes and restarts,
 * singleton crashes, datasets set up and removed) for SHARDHERD_SOAK_MINUTES (default 10). The
 * heap (after a full collection) and the open handles are sampled each minute and their growth
 * reported as a least-squares slope; at the end the churn stops, every crashed node restarts, and
 * the invariants must hold: every shard Active on live members with its copies in distinct racks,
 * every subscriber's map equal to the singleton's, and every record produced ingested at least once.
 * A broken invariant fails the run.
 */
import { pino } from 'pino';
import { ShardEventSubscriber } from '../src/client/shard-event-subscriber.js';
import type { DatasetRef } from '../src/core/ids.js';
import { ShardMapper } from '../src/core/shard-mapper.js';
import { EmbeddedCluster } from '../src/embedded/embedded-cluster.js';
import { CountingSink } from '../src/ingest/counting-sink.js';
import type { ShardherdNode } from '../src/actors/node-process.js';
import { SeededRandom } from '../src/sim/random.js';
import { collectGarbage, register, type Table } from './harness.js';
import { sleep, waitFor } from './runtime-support.js';

const MINUTES = Number(process.env.SHARDHERD_SOAK_MINUTES ?? 10);
const CHURN_EVERY_MS = 3_000;
const RATE = 50; // records per second per shard
const RACKS = ['rackA', 'rackB', 'rackC'];
const STEADY = [
  { ref: 'alpha', numShards: 16, minNumNodes: 3 },
  { ref: 'gamma', numShards: 16, minNumNodes: 1, replicationFactor: 2, strategy: 'balanced', maxConcurrentMoves: 4 },
] as const;

interface Churn {
  crashes: number;
  singletonCrashes: number;
  restarts: number;
  setups: number;
  removals: number;
}

/** Least-squares slope of y over x. */
function slope(xs: readonly number[], ys: readonly number[]): number {
  const n = xs.length;
  const mx = xs.reduce((a, b) => a + b, 0) / n;
  const my = ys.reduce((a, b) => a + b, 0) / n;
  let num = 0;
  let den = 0;
  for (let i = 0; i < n; i++) {
    num += (xs[i]! - mx) * (ys[i]! - my);
    den += (xs[i]! - mx) ** 2;
  }
  return den === 0 ? 0 : num / den;
}

async function soak(): Promise<Table> {
  const rng = new SeededRandom(2026);
  const sink = new CountingSink();
  const names = ['n1', 'n2', 'n3', 'n4', 'n5', 'n6'];
  const rackOf = new Map(names.map((n, i) => [n, RACKS[i % RACKS.length]!]));
  const cluster = new EmbeddedCluster({
    name: 'soak',
    nodes: names.map((name) => ({ name, rack: rackOf.get(name)! })),
    sink,
    log: pino({ level: 'silent' }),
    sessionTimeoutMs: 1_500,
    heartbeatIntervalMs: 300,
    settings: { publishIntervalMs: 1_000 },
  });
  const startedAt = Date.now(); // the synthetic source's start is at or before this
  await cluster.start();
  for (const d of STEADY) {
    const r = await cluster.setupDataset({ ...d, source: { type: 'synthetic', recordsPerSecond: RATE } }, 10_000);
    if (r.type !== 'DatasetVerified') throw new Error(`setup of ${d.ref} failed: ${JSON.stringify(r)}`);
  }

  const churn: Churn = { crashes: 0, singletonCrashes: 0, restarts: 0, setups: 0, removals: 0 };
  const temporary: string[] = [];
  let nextTemp = 0;
  const running = () => cluster.nodes.filter((n) => n.state === 'running');
  const down = () => cluster.nodes.filter((n) => n.state === 'crashed');
  const restart = async (n: ShardherdNode) => {
    await n.start();
    churn.restarts++;
  };

  async function churnOnce(): Promise<void> {
    const singleton = await cluster.singletonNode();
    const r = rng.int(0, 99);
    if (down().length > 0 && (r < 35 || down().length >= 2)) {
      await restart(rng.pick(down()));
    } else if (r < 55 && running().length > 4) {
      const victims = running().filter((n) => n !== singleton);
      rng.pick(victims).crash();
      churn.crashes++;
    } else if (r < 65 && singleton && running().length > 4) {
      singleton.crash();
      churn.singletonCrashes++;
    } else if (r < 82 && temporary.length < 3) {
      const ref = `tmp${nextTemp++}`;
      const reply = await cluster
        .setupDataset({ ref, numShards: 4, minNumNodes: 1, source: { type: 'synthetic', recordsPerSecond: RATE } }, 10_000)
        .catch(() => undefined);
      if (reply?.type === 'DatasetVerified') {
        temporary.push(ref);
        churn.setups++;
      }
    } else if (temporary.length > 0) {
      const ref = temporary.shift()!;
      const reply = await cluster.request((replyTo) => ({ type: 'RemoveDataset', dataset: ref as DatasetRef, replyTo }), 10_000).catch(() => undefined);
      if (reply?.type === 'Success') churn.removals++;
      else temporary.push(ref);
    }
  }

  const minutes: number[] = [];
  const heapMb: number[] = [];
  const handles: number[] = [];
  const sampleNow = (minute: number) => {
    collectGarbage();
    minutes.push(minute);
    heapMb.push(process.memoryUsage().heapUsed / 2 ** 20);
    handles.push(process.getActiveResourcesInfo().length);
  };

  const t0 = performance.now();
  sampleNow(0);
  for (let minute = 1; minute <= MINUTES; minute++) {
    while (performance.now() - t0 < minute * 60_000) {
      await churnOnce();
      await sleep(CHURN_EVERY_MS);
    }
    sampleNow(minute);
    process.stderr.write(`soak: minute ${minute} of ${MINUTES}, heap ${heapMb.at(-1)!.toFixed(1)} MiB, ${handles.at(-1)} handles, ${JSON.stringify(churn)}\n`);
  }

  // The churn stops; everything down comes back, and the cluster must converge.
  for (const n of down()) await restart(n);
  const endedAt = Date.now();
  const problems: string[] = [];
  const subscribers = STEADY.map((d) => new ShardEventSubscriber(running()[0]!, d.ref as DatasetRef));
  try {
    await waitFor('convergence', async () => (await violations(cluster, rackOf, subscribers)).length === 0, 60_000, 500);
  } catch {
    problems.push(...(await violations(cluster, rackOf, subscribers)));
  }
  const settledMs = Date.now() - endedAt;
  // Every record produced until churn ended was ingested at least once.
  const produced = Math.floor(((endedAt - startedAt) * RATE) / 1000);
  let duplicates = 0;
  for (const d of STEADY) {
    for (let s = 0; s < d.numShards; s++) {
      const t = sink.tally(d.ref, s);
      // A replicated dataset ingests each record once per copy: only single-copy ones count twice.
      if (!('replicationFactor' in d)) duplicates += t.duplicates;
      if (t.covered < produced) problems.push(`${d.ref}/${s}: record ${t.covered} was produced but never ingested (${produced} produced)`);
    }
  }
  for (const s of subscribers) s.close();
  await cluster.stop();
  if (problems.length > 0) throw new Error(`soak: invariants broken after ${MINUTES} min:\n${problems.slice(0, 20).join('\n')}`);

  return {
    title: `Soak: ${MINUTES} min of churn on a 6-node embedded cluster (wall clock), sampled each minute`,
    columns: ['figure', 'value'],
    rows: [
      [
        'churn',
        `${churn.crashes} crashes, ${churn.singletonCrashes} singleton crashes, ${churn.restarts} restarts, ${churn.setups} dataset setups, ${churn.removals} removals`,
      ],
      ['heap after GC, MiB (per minute)', heapMb.map((h) => h.toFixed(1)).join(' ')],
      ['heap slope, MiB/min (least squares)', slope(minutes, heapMb).toFixed(2)],
      [
        'heap slope over the second half, MiB/min',
        slope(minutes.slice(Math.floor(minutes.length / 2)), heapMb.slice(Math.floor(heapMb.length / 2))).toFixed(2),
      ],
      ['open handles (per minute)', handles.join(' ')],
      ['open handles slope, per min', slope(minutes, handles).toFixed(2)],
      [
        'records ingested (steady datasets), re-ingested after a crash (alpha)',
        `${STEADY.reduce((n, d) => n + Array.from({ length: d.numShards }, (_, s) => sink.tally(d.ref, s).accepted).reduce((a, b) => a + b, 0), 0)}, ${duplicates}`,
      ],
      ['converged after the churn stopped, ms', settledMs],
      ['invariants at the end', 'held: every shard Active on live members, replicas in distinct racks, subscribers equal to the singleton, nothing lost'],
    ],
  };
}

/** What still keeps the cluster from its converged state (empty: converged). */
async function violations(cluster: EmbeddedCluster, rackOf: ReadonlyMap<string, string>, subscribers: readonly ShardEventSubscriber[]): Promise<string[]> {
  const out: string[] = [];
  const live = new Set(cluster.membership.view().members.map((m) => m.node as string));
  const maps = new Map((await cluster.services.metaStore.shardMaps()).map((m) => [m.dataset as string, m]));
  for (const d of STEADY) {
    const snap = maps.get(d.ref);
    if (!snap) {
      out.push(`${d.ref}: no map`);
      continue;
    }
    const m = ShardMapper.fromSnapshot(snap);
    const copies = 'replicationFactor' in d ? d.replicationFactor : 1;
    for (let s = 0; s < d.numShards; s++) {
      const assignments = m.recordForShard(s).assignments;
      const serving = assignments.filter((a) => a.status.type === 'Active' && a.placement !== 'Leaving' && live.has(a.node));
      if (serving.length !== copies || assignments.length !== copies)
        out.push(`${d.ref}/${s}: ${assignments.map((a) => `${a.node}:${a.placement}/${a.status.type}`).join(' ') || 'no copy'}`);
      if (new Set(serving.map((a) => rackOf.get(a.node))).size !== serving.length) out.push(`${d.ref}/${s}: two copies in one rack`);
    }
    const sub = subscribers.find((x) => x.dataset === d.ref);
    if (!sub?.map?.equals(m)) out.push(`${d.ref}: a subscriber's map differs from the singleton's`);
  }
  return out;
}

register({ name: 'soak', onDemand: true, run: soak });
