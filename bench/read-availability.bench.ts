/**
 * `npm run bench -- read-availability`: do reads fail while a copy lives? Five nodes in five racks
 * serve a `balanced` dataset of 16 shards (`node.serve`), a router sends routed requests at
 * SHARDHERD_READS_RATE (default 2000; SHARDHERD_READS_EMBEDDED_RATE, default 500, for the embedded
 * cluster, whose nodes share the benchmark's process) per second over random keys, and per replication factor
 * (1, 2, 3), in one run: the node serving the most shards dies (embedded: `crash()`; real `shardherd
 * node` processes on real Kafka and Cassandra: SIGKILL), then, once its shards are Active
 * elsewhere, the node then serving the most is drained (`RemoveNode`, the operator's drain). The
 * dataset has no replacement delay (`replacementDelayMs: 0`): the dead node's copies are re-created
 * at once, so that the drain starts from a whole map without waiting a minute for it (its shards are
 * served by their other copies either way).
 *
 * The router is the client of the public API: in the benchmark's process for the embedded cluster
 * (`ShardherdClient.connectEmbedded`), a process of its own for the real one (`connectKafkaClient`,
 * test/support/router-process.ts). Per fault: requests sent during its window, failed, past their
 * deadline, latency p50/p99 in the window against a fault-free window of the same run (the 4 s
 * before the crash), the time until the dead node's shards were served elsewhere (or the drain
 * done), and at RF 1 how long the dead node's shards failed, with which error, and whether any
 * other shard failed.
 *
 * Windows: a crash's from the kill until 1 s after every dead shard is served by another copy in
 * the map; a drain's from the request until 500 ms after the drained node serves nothing and every
 * shard has all its copies serving.
 *
 * SHARDHERD_READS_DETECTOR=heartbeat runs the real nodes with the failure detector (default
 * `session-only`); SHARDHERD_READS_RFS and SHARDHERD_READS_MODES (`embedded,real`) pick the parts;
 * SHARDHERD_READS_BUSY=N runs N processes spinning a core each beside it;
 * SHARDHERD_READS_KAFKA_CLIENT sets the real nodes' `kafka.client`. The notes give, per case,
 * the failures by code, how many answers came more than 100 ms past the deadline, and the router
 * process's peak memory and requests in flight (bounded by the client's `maxInFlight`).
 *
 * SHARDHERD_READS_FAULTS picks the faults, in order (default `crash,drain`, as above); `all` runs an
 * operator's whole day: `crash,sigstop-3s,sigstop-15s,rolling-start,rolling-reverse,drain`. With a
 * rolling restart among them the dataset keeps a lost node's copies (`replacementDelayMs` 60 s), so
 * a crashed node is started again once its shards are served elsewhere. `sigstop-Ns`: the busiest
 * node is frozen (SIGSTOP; embedded: `pause()`) for N s. `rolling-start` / `rolling-reverse`: every
 * node is stopped gracefully (SIGTERM; embedded: `stop()`) and started again, one at a time, in the
 * order they started (the singleton's host first) or the reverse, each once every copy serves
 * again; the column "copies created" counts the (shard, node) copies the map showed during the
 * restarts that it did not show before them (0 is the promise).
 */
import { execFileSync } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Kafka, logLevel } from 'kafkajs';
import { pino } from 'pino';
import { ShardherdClient } from '../src/client/shardherd-client.js';
import { KAFKA_CLIENT_LIBRARIES, type KafkaClientLibrary } from '../src/cluster/kafka-options.js';
import { ShardherdClientError } from '../src/client/client-errors.js';
import type { DatasetRef } from '../src/core/ids.js';
import { EmbeddedCluster } from '../src/embedded/embedded-cluster.js';
import { createTopics } from '../test/support/chaos-run.js';
import { ECHO_HANDLER, ProcessCluster } from '../test/support/process-cluster.js';
import { figures, sentBetween, startRouter, type Outcome } from '../test/support/router-run.js';
import { busyCores } from './disturbances.js';
import { register, type Table } from './harness.js';
import { withRealServices, type BenchServices } from './real-services.js';
import { sleep, waitFor } from './runtime-support.js';

const SHARDS = 16;
const NODES = ['node-1', 'node-2', 'node-3', 'node-4', 'node-5'];
const DATASET = 'reads';
const RATE = Number(process.env.SHARDHERD_READS_RATE ?? 2_000);
/**
 * The embedded cluster's rate: its five nodes, their servers and the router share this one process
 * (a memory bus cannot be reached from another), which 2000 requests/s saturate on 2 cores.
 */
const EMBEDDED_RATE = Number(process.env.SHARDHERD_READS_EMBEDDED_RATE ?? 500);
const DEADLINE_MS = 2_000;
const ATTEMPT_TIMEOUT_MS = 500;
const BASELINE_MS = 4_000;
const RFS = (process.env.SHARDHERD_READS_RFS ?? '1,2,3').split(',').map(Number);
const MODES = (process.env.SHARDHERD_READS_MODES ?? 'embedded,real').split(',');
/**
 * SHARDHERD_READS_DETECTOR=heartbeat: the real nodes detect failures with the failure detector
 * (docs/ARCHITECTURE.md §11) instead of their Kafka session alone (`session-only`, the default).
 */
const DETECTOR = process.env.SHARDHERD_READS_DETECTOR ?? 'session-only';
/** SHARDHERD_READS_BUSY=N: N processes spinning a core each beside the run (default 0). */
const BUSY = Number(process.env.SHARDHERD_READS_BUSY ?? 0);
if (!Number.isInteger(BUSY) || BUSY < 0)
  throw new Error(`SHARDHERD_READS_BUSY must be a whole number >= 0, got ${JSON.stringify(process.env.SHARDHERD_READS_BUSY)}`);
if (DETECTOR !== 'session-only' && DETECTOR !== 'heartbeat')
  throw new Error(`SHARDHERD_READS_DETECTOR must be session-only or heartbeat, got ${JSON.stringify(DETECTOR)}`);
/** SHARDHERD_READS_KAFKA_CLIENT=kafkajs|platformatic: the real nodes' `kafka.client` (default the config's). */
const KAFKA_CLIENT = process.env.SHARDHERD_READS_KAFKA_CLIENT;
if (KAFKA_CLIENT !== undefined && !(KAFKA_CLIENT_LIBRARIES as readonly string[]).includes(KAFKA_CLIENT))
  throw new Error(`SHARDHERD_READS_KAFKA_CLIENT must be one of ${KAFKA_CLIENT_LIBRARIES.join(', ')}, got ${JSON.stringify(KAFKA_CLIENT)}`);
/** SHARDHERD_READS_HEDGE=1: the router hedges (a second copy asked after the recent p95). */
const HEDGE = process.env.SHARDHERD_READS_HEDGE === '1';
const FAULT_NAMES = ['crash', 'sigstop-3s', 'sigstop-15s', 'rolling-start', 'rolling-reverse', 'drain'] as const;
type FaultName = (typeof FAULT_NAMES)[number];
const FAULTS: readonly FaultName[] = (() => {
  const raw = process.env.SHARDHERD_READS_FAULTS ?? 'crash,drain';
  const names = raw === 'all' ? [...FAULT_NAMES] : raw.split(',');
  for (const n of names)
    if (!(FAULT_NAMES as readonly string[]).includes(n))
      throw new Error(`SHARDHERD_READS_FAULTS: unknown fault ${JSON.stringify(n)} (known: ${FAULT_NAMES.join(', ')}, or all)`);
  return names as FaultName[];
})();
/** A rolling restart must find a node's copies kept for it; without one the drain need not wait a minute. */
const REPLACEMENT_DELAY_MS = FAULTS.some((f) => f.startsWith('rolling')) ? 60_000 : 0;

/** What a run needs of its cluster, embedded or real. */
interface Harness {
  /** Each shard's serving nodes, as the cluster's map says now. */
  serving(): Promise<string[][]>;
  /** Each shard's copies in any status (catching up, Down, Leaving too). */
  copies(): Promise<string[][]>;
  /** The nodes in the order they started. */
  readonly nodes: readonly string[];
  crash(node: string): Promise<void>;
  /** Starts a crashed or stopped node again (a new incarnation); resolves once it runs. */
  start(node: string): Promise<void>;
  /** Stops a node gracefully (SIGTERM), and waits until it exited. */
  stopNode(node: string): Promise<void>;
  /** Freezes a node (SIGSTOP) for `ms`, then lets it go on (SIGCONT). */
  freeze(node: string, ms: number): Promise<void>;
  drain(node: string): Promise<void>;
  /** Starts the router; resolves once it has had a first answer. `peak`: the router's, if it is a process. */
  startLoad(): Promise<{ stop(): Promise<Outcome[]>; readonly peak?: { readonly rss: number; readonly inFlight: number } }>;
  stop(): Promise<void>;
}

interface FaultFigures {
  readonly fault: string;
  /** Rolling restarts: copies the map showed during them that it did not before. */
  readonly copiesCreated?: number;
  readonly victim: string;
  readonly shardsOfVictim: number;
  readonly windowMs: number;
  /** Kill (or drain request) → every dead shard served elsewhere (or the drain done). */
  readonly settledMs: number;
  readonly outcomes: Outcome[];
  readonly deadShards: ReadonlySet<number>;
  readonly at: number;
}

async function runCase(
  h: Harness,
  rf: number,
): Promise<{ baseline: Outcome[]; faults: FaultFigures[]; all: Outcome[]; peak?: { readonly rss: number; readonly inFlight: number } }> {
  const busiest = async (exclude: readonly string[]) => {
    const count = new Map<string, number>();
    for (const nodes of await h.serving()) for (const n of nodes) if (!exclude.includes(n)) count.set(n, (count.get(n) ?? 0) + 1);
    return [...count].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))[0]![0];
  };
  const shardsOf = async (node: string) => new Set((await h.serving()).flatMap((nodes, s) => (nodes.includes(node) ? [s] : [])));
  const everyCopyServing = async (without: string) => (await h.serving()).every((nodes) => nodes.length === rf && !nodes.includes(without));

  const load = await h.startLoad();
  await sleep(1_000);
  const baselineFrom = Date.now();
  // The fault-free window watches the map as often as the fault windows do (every 50 ms), so both
  // carry the same observation load on the nodes.
  while (Date.now() - baselineFrom < BASELINE_MS) {
    await h.serving();
    await sleep(50);
  }
  const faults: FaultFigures[] = [];

  const crashed = new Set<string>();
  const pairs = async () => new Set((await h.copies()).flatMap((nodes, s) => nodes.map((n) => `${s}/${n}`)));
  for (const fault of FAULTS) {
    if (fault === 'crash') {
      const victim = await busiest([]);
      const deadShards = await shardsOf(victim);
      const crashAt = Date.now();
      await h.crash(victim);
      crashed.add(victim);
      await waitFor(
        `RF ${rf}: ${victim}'s shards served elsewhere`,
        async () => (await h.serving()).every((nodes, s) => !deadShards.has(s) || nodes.some((n) => n !== victim)),
        120_000,
        50,
      );
      const servedElsewhere = Date.now();
      await sleep(1_000);
      faults.push({
        fault: 'crash',
        victim,
        shardsOfVictim: deadShards.size,
        windowMs: Date.now() - crashAt,
        settledMs: servedElsewhere - crashAt,
        outcomes: [],
        deadShards,
        at: crashAt,
      });
      if (REPLACEMENT_DELAY_MS > 0) {
        // Its copies are kept for it: it comes back, as a restarted process does.
        await h.start(victim);
        crashed.delete(victim);
        await waitFor(
          `RF ${rf}: every copy serving again after ${victim}'s return`,
          async () => (await h.serving()).every((nodes) => nodes.length === rf),
          120_000,
          100,
        );
      } else {
        // Every copy back before the next fault, so it starts from a whole map.
        await waitFor(`RF ${rf}: every copy serving again after the crash`, () => everyCopyServing(victim), 120_000, 100);
      }
      await sleep(1_000);
    } else if (fault === 'sigstop-3s' || fault === 'sigstop-15s') {
      const ms = fault === 'sigstop-3s' ? 3_000 : 15_000;
      const victim = await busiest([...crashed]);
      const itsShards = await shardsOf(victim);
      const at = Date.now();
      await h.freeze(victim, ms);
      await waitFor(
        `RF ${rf}: every copy serving again after ${victim}'s freeze`,
        async () => (await h.serving()).every((nodes) => nodes.length === rf),
        120_000,
        100,
      );
      const settled = Date.now();
      await sleep(1_000);
      faults.push({
        fault: `SIGSTOP ${ms / 1000} s`,
        victim,
        shardsOfVictim: itsShards.size,
        windowMs: Date.now() - at,
        settledMs: settled - at,
        outcomes: [],
        deadShards: itsShards,
        at,
      });
    } else if (fault === 'rolling-start' || fault === 'rolling-reverse') {
      const order = h.nodes.filter((n) => !crashed.has(n));
      if (fault === 'rolling-reverse') order.reverse();
      const before = await pairs();
      const seen = new Set<string>();
      const watch = async () => {
        for (const pair of await pairs()) seen.add(pair);
      };
      const at = Date.now();
      for (const node of order) {
        const itsShards = await shardsOf(node);
        await h.stopNode(node);
        // Until the map shows its copies down: the cluster has seen it go (and so waits for it).
        await waitFor(
          `RF ${rf}: ${node}'s copies seen down`,
          async () => {
            await watch();
            return (await h.serving()).every((nodes, s) => !itsShards.has(s) || !nodes.includes(node));
          },
          60_000,
          50,
        );
        await h.start(node);
        await waitFor(
          `RF ${rf}: every copy serving again after ${node}'s restart`,
          async () => {
            await watch();
            return (await h.serving()).every((nodes) => nodes.length === rf);
          },
          120_000,
          100,
        );
      }
      const settled = Date.now();
      await sleep(1_000);
      const created = [...seen].filter((pair) => !before.has(pair)).length;
      faults.push({
        fault: `rolling restart (${fault === 'rolling-start' ? 'start order' : 'reverse order'})`,
        victim: order.join(','),
        shardsOfVictim: SHARDS * rf,
        windowMs: Date.now() - at,
        settledMs: settled - at,
        outcomes: [],
        deadShards: new Set(),
        at,
        copiesCreated: created,
      });
    } else {
      const drained = await busiest([...crashed]);
      const drainedShards = await shardsOf(drained);
      const drainAt = Date.now();
      await h.drain(drained);
      await waitFor(`RF ${rf}: ${drained} drained`, () => everyCopyServing(drained), 180_000, 50);
      const drainDone = Date.now();
      await sleep(500);
      faults.push({
        fault: 'drain',
        victim: drained,
        shardsOfVictim: drainedShards.size,
        windowMs: Date.now() - drainAt,
        settledMs: drainDone - drainAt,
        outcomes: [],
        deadShards: drainedShards,
        at: drainAt,
      });
    }
  }

  const all = await load.stop();
  for (const f of faults) f.outcomes.push(...sentBetween(all, f.at, f.at + f.windowMs));
  return { baseline: sentBetween(all, baselineFrom, baselineFrom + BASELINE_MS), faults, all, ...(load.peak ? { peak: load.peak } : {}) };
}

// ------------------------------------------------------------------ embedded

async function embeddedHarness(rf: number): Promise<Harness> {
  const ds = DATASET as DatasetRef;
  const cluster = new EmbeddedCluster({
    name: `reads_${rf}_${Date.now().toString(36)}`,
    nodes: NODES.map((name) => ({ name, rack: `rack-${name}` })),
    log: pino({ level: 'silent' }),
    sessionTimeoutMs: 3_000,
    heartbeatIntervalMs: 500,
    settings: { publishIntervalMs: 1_000, reportResendMs: 500, recoveryReplyTimeoutMs: 2_000, pollIntervalMs: 100, reassignmentCooldownMs: 0 },
  });
  for (const node of cluster.nodes) await node.serve(ds, ({ shard }) => ({ node: node.node, shard }));
  await cluster.start();
  const reply = await cluster.setupDataset(
    {
      ref: ds,
      numShards: SHARDS,
      minNumNodes: NODES.length,
      replicationFactor: rf,
      strategy: 'balanced',
      replacementDelayMs: REPLACEMENT_DELAY_MS,
      source: { type: 'synthetic', recordsPerSecond: 10 },
    },
    10_000,
  );
  if (reply.type !== 'DatasetVerified') throw new Error(`setting up ${ds}: ${reply.type}`);
  const client = await ShardherdClient.connectEmbedded(cluster, { name: 'bench', deadlineMs: DEADLINE_MS, attemptTimeoutMs: ATTEMPT_TIMEOUT_MS, hedge: HEDGE });
  const serving = async () => {
    const map = client.map(ds);
    return Array.from({ length: SHARDS }, (_, s) => (map?.servingNodes(s) ?? []).map(String));
  };
  await waitFor(`RF ${rf}: every copy serving`, async () => (await serving()).every((n) => n.length === rf), 60_000, 50);
  return {
    serving,
    copies: async () => {
      const map = client.map(ds);
      return Array.from({ length: SHARDS }, (_, s) => (map?.nodesForShard(s) ?? []).map(String));
    },
    nodes: NODES,
    crash: async (node) => cluster.node(node).crash(),
    start: (node) => cluster.node(node).start(),
    stopNode: (node) => cluster.node(node).stop(),
    freeze: async (node, ms) => {
      cluster.node(node).pause();
      await sleep(ms);
      cluster.node(node).resume();
    },
    drain: async (node) => {
      const r = await cluster.request((replyTo) => ({ type: 'RemoveNode', node, replyTo }) as never, 20_000);
      if (r.type !== 'NodeOperationAccepted') throw new Error(`drain of ${node}: ${r.type}`);
    },
    startLoad: async () => localLoad(client, ds),
    stop: async () => {
      await client.close();
      await cluster.stop();
    },
  };
}

/** The same load and outcomes as the router process, in this process (the embedded cluster lives here). */
function localLoad(client: ShardherdClient, ds: DatasetRef): { stop(): Promise<Outcome[]> } {
  const outcomes: Outcome[] = [];
  let inFlight = 0;
  let sent = 0;
  const start = performance.now();
  const send = () => {
    const k = Math.floor(Math.random() * 10_000);
    const t = Date.now();
    const t0 = performance.now();
    inFlight++;
    client
      .request<{ node: string; shard: number }>(ds, { shardKey: { _ws_: 'bench', _ns_: `ns-${k % 64}` }, partitionKey: { series: `s-${k}` } }, { k })
      .then(
        (a) => outcomes.push({ type: 'r', t, ms: performance.now() - t0, shard: a.shard, ok: true, node: a.node }),
        (e: unknown) => {
          const error = e instanceof ShardherdClientError ? e : undefined;
          outcomes.push({
            type: 'r',
            t,
            ms: performance.now() - t0,
            shard: error?.shard ?? null,
            ok: false,
            code: error?.code ?? 'UNTYPED',
            message: String(e),
          });
        },
      )
      .finally(() => inFlight--);
  };
  const timer = setInterval(() => {
    const owed = Math.floor(((performance.now() - start) / 1000) * EMBEDDED_RATE) - sent;
    for (let i = 0; i < owed; i++, sent++) send();
  }, 5);
  return {
    async stop() {
      clearInterval(timer);
      while (inFlight > 0) await sleep(10);
      return outcomes;
    },
  };
}

// ------------------------------------------------------------------ real processes

async function realHarness(s: BenchServices, rf: number): Promise<Harness> {
  const dir = await mkdtemp(join(tmpdir(), 'shardherd-reads-'));
  const name = `reads_${Date.now().toString(36)}_rf${rf}`;
  const topic = `${name}.reads`;
  await createTopics(new Kafka({ clientId: 'reads-bench', brokers: s.kafkaBrokers, logLevel: logLevel.NOTHING }), [topic], SHARDS);
  const cluster = new ProcessCluster({
    dir,
    cluster: name,
    ...s, // the real Kafka and Cassandra
    keyspace: 'shardherd_bench',
    sessionTimeoutMs: 3_000,
    heartbeatIntervalMs: 500,
    ...(KAFKA_CLIENT === undefined ? {} : { kafkaClient: KAFKA_CLIENT as KafkaClientLibrary }),
    runtime: { publishIntervalMs: 1_000, reportResendMs: 500, recoveryReplyTimeoutMs: 2_000, pollIntervalMs: 50, reassignmentCooldownMs: 0 },
    datasets: [
      {
        ref: DATASET,
        numShards: SHARDS,
        minNumNodes: NODES.length,
        replicationFactor: rf,
        strategy: 'balanced',
        replacementDelayMs: REPLACEMENT_DELAY_MS,
        source: { type: 'kafka', topic },
      },
    ],
    serve: [{ dataset: DATASET, handler: ECHO_HANDLER }],
    built: true,
    failureDetector: { mode: DETECTOR },
  });
  const dead = new Set<string>();
  const observer = () => NODES.find((n) => !dead.has(n) && cluster.live().some((p) => p.name === n))!;
  const owners = async (active: boolean) => {
    const view = await cluster.datasetView(observer(), DATASET, 5_000);
    return Array.from({ length: SHARDS }, (_, sh) => (view?.shards[sh]?.owners ?? []).filter((o) => !active || o.status === 'Active').map((o) => o.node));
  };
  const serving = () => owners(true);
  try {
    for (const n of NODES) await cluster.start(n, 120_000);
    await waitFor(`RF ${rf}: every copy serving`, async () => (await serving()).every((n) => n.length === rf), 180_000, 200);
  } catch (e) {
    await cluster.stopAll();
    throw e;
  }
  return {
    serving,
    copies: () => owners(false),
    nodes: NODES,
    crash: async (node) => {
      dead.add(node);
      await cluster.kill(node);
    },
    start: async (node) => {
      await cluster.start(node, 120_000);
      dead.delete(node);
    },
    stopNode: async (node) => {
      dead.add(node);
      cluster.signal(node, 'SIGTERM');
      await cluster.get(node).exited;
    },
    freeze: async (node, ms) => {
      cluster.signal(node, 'SIGSTOP');
      await sleep(ms);
      cluster.signal(node, 'SIGCONT');
    },
    drain: async (node) => {
      const via = NODES.find((n) => n !== node && !dead.has(n))!;
      const res = await fetch(`${cluster.get(via).url}/api/v1/nodes/${node}/drain`, {
        method: 'POST',
        headers: { authorization: `Bearer ${cluster.token(via)}` },
      });
      if (res.status !== 202) throw new Error(`drain of ${node}: HTTP ${res.status} ${await res.text()}`);
    },
    startLoad: () =>
      startRouter({
        brokers: s.kafkaBrokers,
        topicPrefix: name,
        dataset: DATASET,
        rate: RATE,
        deadlineMs: DEADLINE_MS,
        attemptTimeoutMs: ATTEMPT_TIMEOUT_MS,
        hedge: HEDGE,
      }),
    stop: async () => {
      await cluster.stopAll();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

// ------------------------------------------------------------------ report

const ms = (v: number | undefined) => (v === undefined ? '-' : v.toFixed(1));
const added = (a: number | undefined, b: number | undefined) => (a === undefined || b === undefined ? '-' : `${a - b >= 0 ? '+' : ''}${(a - b).toFixed(1)}`);

function rows(mode: string, rf: number, r: Awaited<ReturnType<typeof runCase>>): (string | number)[][] {
  const base = figures(r.baseline, DEADLINE_MS);
  return r.faults.map((f) => {
    const w = figures(f.outcomes, DEADLINE_MS);
    const failures = r.all.filter((o): o is Extract<Outcome, { ok: false }> => !o.ok && o.t >= f.at && o.t < f.at + f.windowMs);
    const elsewhere = failures.filter((o) => o.shard === null || !f.deadShards.has(o.shard)).length;
    const codes =
      Object.entries(w.codes)
        .map(([c, n]) => `${c} ${n}`)
        .join(', ') || '-';
    const failedFor = failures.length === 0 ? '-' : `${Math.max(...failures.map((o) => o.t)) - f.at} ms`;
    const maxFailMs = failures.length === 0 ? '-' : ms(Math.max(...failures.map((o) => o.ms)));
    return [
      mode,
      rf,
      f.fault,
      `${f.victim} (${f.shardsOfVictim})`,
      w.requests,
      w.failed,
      w.pastDeadline,
      `${ms(base.p50)} / ${ms(base.p99)}`,
      `${ms(w.p50)} / ${ms(w.p99)}`,
      `${added(w.p50, base.p50)} / ${added(w.p99, base.p99)}`,
      `${f.settledMs} ms`,
      failedFor,
      codes,
      maxFailMs,
      elsewhere,
      f.copiesCreated ?? '-',
    ];
  });
}

/**
 * Per fault with failures, its most frequent failure messages (node names and numbers kept: they
 * say which copy failed how), so a failure can be told from another without the router's output.
 */
function failureMessages(mode: string, rf: number, r: Awaited<ReturnType<typeof runCase>>): string[] {
  return r.faults.flatMap((f) => {
    const counts = new Map<string, number>();
    for (const o of f.outcomes) if (!o.ok) counts.set(o.message.slice(0, 400), (counts.get(o.message.slice(0, 400)) ?? 0) + 1);
    const top = [...counts].sort((a, b) => b[1] - a[1]).slice(0, 3);
    // The slowest answers of the window, with the copy that gave them and when (ms after the fault): where a p99 comes from.
    const slowest = f.outcomes
      .filter((o) => o.ok)
      .sort((a, b) => b.ms - a.ms)
      .slice(0, 5);
    return [
      ...(top.length === 0 ? [] : [`${mode} RF ${rf} ${f.fault}: most frequent failures: ${top.map(([m, n]) => `${n} × "${m}"`).join('; ')}`]),
      ...(slowest.length === 0
        ? []
        : [
            `${mode} RF ${rf} ${f.fault}: slowest answers: ${slowest.map((o) => `${o.ms.toFixed(0)} ms (shard ${o.shard}, ${o.ok ? o.node : '-'}, sent ${o.t - f.at} ms in)`).join('; ')}`,
          ]),
    ];
  });
}

async function cases(one: (mode: string, rf: number, make: () => Promise<Harness>) => Promise<void>): Promise<void> {
  if (MODES.includes('embedded')) for (const rf of RFS) await one('embedded', rf, () => embeddedHarness(rf));
  if (MODES.includes('real'))
    await withRealServices(async (s) => {
      // The node processes run the built package: build it, so they run these sources.
      execFileSync('npm', ['run', '-s', 'build'], { stdio: 'inherit' });
      for (const rf of RFS) await one('real', rf, () => realHarness(s, rf));
    });
}

async function run(): Promise<Table> {
  const out: (string | number)[][] = [];
  const notes: string[] = [];
  const one = async (mode: string, rf: number, make: () => Promise<Harness>) => {
    let h: Harness;
    try {
      h = await make();
    } catch (e) {
      notes.push(`${mode} RF ${rf}: could not start: ${e instanceof Error ? e.message : String(e)}`);
      return;
    }
    try {
      const r = await runCase(h, rf);
      const made = rows(mode, rf, r);
      out.push(...made);
      // As each case ends: a later case that fails does not lose these.
      for (const row of made) process.stderr.write(`[read-availability] | ${row.join(' | ')} |\n`);
      for (const line of failureMessages(mode, rf, r)) {
        notes.push(line);
        process.stderr.write(`[read-availability] ${line}\n`);
      }
      const all = figures(r.all, DEADLINE_MS);
      const late = r.all.filter((o) => o.ms > DEADLINE_MS + 100).length;
      const codes =
        Object.entries(all.codes)
          .map(([c, n]) => `${c} ${n}`)
          .join(', ') || 'none';
      const peak = r.peak ? `; the router's peak: ${(r.peak.rss / 2 ** 20).toFixed(0)} MiB resident, ${r.peak.inFlight} requests in flight` : '';
      notes.push(
        `${mode} RF ${rf}: ${all.requests} requests in the run (${(all.requests / ((r.all.at(-1)!.t - r.all[0]!.t) / 1000)).toFixed(0)}/s sent), ${all.failed} failed (${codes}), ${all.pastDeadline} past the deadline, ${late} more than 100 ms past it, max ${ms(all.max)} ms${peak}.`,
      );
      process.stderr.write(`[read-availability] ${mode} RF ${rf} done\n`);
    } catch (e) {
      notes.push(`${mode} RF ${rf}: failed: ${e instanceof Error ? e.message : String(e)}`);
      process.stderr.write(`[read-availability] ${mode} RF ${rf} failed: ${String(e)}\n`);
    } finally {
      await h.stop();
    }
  };
  // SHARDHERD_READS_BUSY=N: N processes spinning one core each beside the whole run (a busy machine).
  const spinning = Array.from({ length: BUSY }, () => busyCores(1));
  try {
    await cases(one);
  } finally {
    for (const p of spinning) await p.stop();
  }
  return {
    title: `Read availability: 5 nodes in 5 racks, ${SHARDS} shards (balanced), a router at ${RATE} requests/s (embedded: ${EMBEDDED_RATE}) over random keys, deadline ${DEADLINE_MS} ms, attempt timeout ${ATTEMPT_TIMEOUT_MS} ms${HEDGE ? ', hedged' : ''}, real nodes in ${DETECTOR} detection; faults ${FAULTS.join(', ')}${BUSY > 0 ? `; ${BUSY} busy-loop process${BUSY > 1 ? 'es' : ''} beside it` : ''}`,
    columns: [
      'cluster',
      'RF',
      'fault',
      'node (shards)',
      'requests',
      'failed',
      'past deadline',
      'fault-free p50 / p99 ms',
      'window p50 / p99 ms',
      'added p50 / p99 ms',
      'served elsewhere / drained after',
      'dead shards failed until',
      'errors',
      'slowest failure ms',
      'failures on other shards',
      'copies created',
    ],
    rows: out,
    notes: [
      "Embedded: crash() of a node in the benchmark's process, the router in the same process. Real: `shardherd node` processes (built) on real Kafka and Cassandra, SIGKILL, the router a process of its own (connectKafkaClient).",
      'Window: a crash\'s from the kill until 1 s after every dead shard is served elsewhere in the map; a drain\'s from the request until 500 ms after it is done. "dead shards failed until": the send time of the last failed request, after the fault.',
      ...notes,
    ],
  };
}

register({ name: 'read-availability', run });
