/**
 * `npm run bench -- deploy-load-moves`: placement by measured load on real processes. Four
 * `shardherd node` processes (built package) in four racks on real Kafka and Cassandra serve a
 * load-aware dataset of 32 shards at RF 2 (`loadBalance`: records/s, band ±5 %, trigger ±10 %,
 * `sustainMs` 20 s; nodes report every 2 s), read from a topic whose partitions a producer fills at
 * Zipf(1.1) rates over a random order of the partitions (SHARDHERD_LOAD_RATE records/s in all,
 * default 3000), numbered. A router process sends routed requests (SHARDHERD_LOAD_READS_RATE,
 * default 300/s) the whole time.
 *
 * The copy-count placement is measured first, with moves for load paused (`PUT
 * .../load-balancing`), then moves are resumed and the run waits until the singleton says the
 * dataset is balanced and every copy serves, then measures again. Everything is measured from
 * outside the nodes: each node's records/s from the lines its JSON-lines sink took in a window;
 * each serving copy's lag from the topic's end offsets against the highest offset its node's sink
 * wrote for the shard (sampled each second); the routed requests' outcomes from the router; at the
 * end, every acknowledged record in some sink (0 lost). SHARDHERD_LOAD_BUSY=N adds N processes
 * spinning a core each; SHARDHERD_LOAD_KEEP=1 keeps the nodes' configs, logs and sinks.
 */
import { execFileSync } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import { join } from 'node:path';
import { Kafka, logLevel, Partitioners, type Admin } from 'kafkajs';
import { SeededRandom } from '../src/sim/random.js';
import { zipfRates } from '../src/sim/load-world.js';
import type { PlacementExplanation } from '../src/core/shard-manager/protocol.js';
import { createTopics } from '../test/support/chaos-run.js';
import { ECHO_HANDLER, ProcessCluster } from '../test/support/process-cluster.js';
import { figures, sentBetween, startRouter } from '../test/support/router-run.js';
import { busyCores } from './disturbances.js';
import { quantile, register, type Table } from './harness.js';
import { RatedProducer } from './rated-producer.js';
import { withRealServices } from './real-services.js';
import { sleep, waitFor } from './runtime-support.js';
import { SinkTail, type SinkCounts } from './sink-tail.js';

const NODES = ['node-1', 'node-2', 'node-3', 'node-4'];
const SHARDS = 32;
const RF = 2;
const DATASET = 'loads';
const ZIPF_EXPONENT = 1.1;
const SEED = 37;
const RATE = Number(process.env.SHARDHERD_LOAD_RATE ?? 3_000);
const READS_RATE = Number(process.env.SHARDHERD_LOAD_READS_RATE ?? 300);
const BUSY = Number(process.env.SHARDHERD_LOAD_BUSY ?? 0);
/** SHARDHERD_LOAD_KEEP=1: keep the nodes' configs, logs and sinks (and say where). */
const KEEP = process.env.SHARDHERD_LOAD_KEEP === '1';
const SUSTAIN_MS = 20_000;
/** After start: consumers at the topic's end and every shard with a fresh load figure. */
const WARM_MS = 15_000;
const WINDOW_MS = 30_000;
const SETTLE_TIMEOUT_MS = 300_000;
const DEADLINE_MS = 2_000;
const log = (line: string) => process.stderr.write(`[deploy-load-moves] ${line}\n`);

/** Per shard, the nodes holding a copy and whether it serves (Active), as a node's API shows the map. */
type Owners = { node: string; status: string }[][];

interface Window {
  /** Records/s each node's sink took. */
  readonly rates: ReadonlyMap<string, number>;
  /** Each serving copy's lag (records behind the topic's end), every sample. */
  readonly lags: number[];
}

async function deployLoadMoves(): Promise<Table> {
  for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => process.exit(130));
  // The node processes run the built package: build it, so they run these sources.
  execFileSync('npm', ['run', '-s', 'build'], { stdio: 'inherit' });
  const loadBefore = os.loadavg();
  const busy = Array.from({ length: BUSY }, () => busyCores(1));
  try {
    return await withRealServices(async (s) => {
      const dir = await mkdtemp(join(os.tmpdir(), 'shardherd-load-moves-'));
      const name = `loads_${Date.now().toString(36)}`;
      const topic = `${name}.loads`;
      const kafka = new Kafka({ clientId: 'load-moves-bench', brokers: s.kafkaBrokers, logLevel: logLevel.NOTHING });
      await createTopics(kafka, [topic], SHARDS);
      const cluster = new ProcessCluster({
        dir,
        cluster: name,
        ...s,
        keyspace: 'shardherd_bench',
        sessionTimeoutMs: 3_000,
        heartbeatIntervalMs: 500,
        runtime: { publishIntervalMs: 1_000, reportResendMs: 500, recoveryReplyTimeoutMs: 2_000, pollIntervalMs: 50, loadReportIntervalMs: 2_000 },
        rackOf: (n) => `rack-${n}`,
        datasets: [
          {
            ref: DATASET,
            numShards: SHARDS,
            minNumNodes: NODES.length,
            replicationFactor: RF,
            strategy: 'balanced',
            source: { type: 'kafka', topic },
            loadBalance: { measure: 'records', sustainMs: SUSTAIN_MS, staleMs: 20_000, shardCooldownMs: 120_000 },
          },
        ],
        serve: [{ dataset: DATASET, handler: ECHO_HANDLER }],
        built: true,
      });
      const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner, idempotent: false });
      const admin = kafka.admin();
      try {
        return await measure(cluster, producer, admin, topic, name, s.kafkaBrokers, loadBefore);
      } finally {
        await producer.disconnect().catch(() => undefined);
        await admin.disconnect().catch(() => undefined);
        await cluster.stopAll();
        if (KEEP) log(`node configs, logs and sinks kept in ${dir}`);
        else await rm(dir, { recursive: true, force: true });
      }
    });
  } finally {
    for (const b of busy) await b.stop();
  }
}

async function measure(
  cluster: ProcessCluster,
  producer: ReturnType<Kafka['producer']>,
  admin: Admin,
  topic: string,
  name: string,
  brokers: readonly string[],
  loadBefore: number[],
): Promise<Table> {
  const owners = async (): Promise<Owners> => {
    const via = cluster.live()[0]!.name;
    const view = await cluster.datasetView(via, DATASET, 5_000);
    return Array.from({ length: SHARDS }, (_, sh) => (view?.shards[sh]?.owners ?? []).map((o) => ({ node: o.node, status: o.status })));
  };
  const allServing = (o: Owners) => o.every((copies) => copies.length === RF && copies.every((c) => c.status === 'Active'));
  const explain = async (): Promise<PlacementExplanation> => {
    const res = await fetch(`${cluster.live()[0]!.url}/api/v1/datasets/${DATASET}/placement`, { signal: AbortSignal.timeout(10_000) });
    if (!res.ok) throw new Error(`explain: HTTP ${res.status} ${await res.text()}`);
    return (await res.json()) as PlacementExplanation;
  };
  const setPaused = async (paused: boolean) => {
    const via = cluster.live()[0]!.name;
    const res = await fetch(`${cluster.get(via).url}/api/v1/datasets/${DATASET}/load-balancing`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${cluster.token(via)}`, 'content-type': 'application/json' },
      body: JSON.stringify({ paused }),
    });
    if (res.status !== 200) throw new Error(`load-balancing paused=${paused}: HTTP ${res.status} ${await res.text()}`);
  };

  for (const n of NODES) await cluster.start(n, 120_000);
  // Every node joined and took its share by count (the records do not flow yet), every copy serving.
  const share = Math.floor((SHARDS * RF) / NODES.length);
  const placedByCount = (o: Owners) => allServing(o) && NODES.every((n) => copiesOn(o, n) >= share - 1);
  await waitFor('every node holding its share of copies, every copy serving', async () => placedByCount(await owners()), 180_000, 250);
  await setPaused(true);
  log(`every copy serves (${copiesPerNode(await owners())}); moves for load paused`);

  const rates = zipfRates(SHARDS, ZIPF_EXPONENT, new SeededRandom(SEED)).map((r) => r * RATE);
  await producer.connect();
  await admin.connect();
  const rated = new RatedProducer(producer, topic, rates);
  rated.start();
  const router = await startRouter({ brokers, topicPrefix: name, dataset: DATASET, rate: READS_RATE, deadlineMs: DEADLINE_MS, attemptTimeoutMs: 500 });
  const tail = new SinkTail((n) => cluster.sinkPath(n), NODES, SHARDS);
  /** Samples each serving copy's lag once a second while it runs. */
  const lagSamples: { at: number; lags: number[] }[] = [];
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      const t = Date.now();
      // The map first (its answer may take a while on a busy machine), then the topic's ends, then
      // the sinks: a sink read after the ends never makes a copy look further behind than it was.
      const o = await owners();
      const ends = await endOffsets(admin, topic);
      lagSamples.push({ at: t, lags: servingLags(ends, await tail.read(), o) });
      await sleep(Math.max(0, 1_000 - (Date.now() - t)));
    }
  })();
  const window = async (): Promise<Window & { from: number; to: number }> => {
    const from = Date.now();
    const first = await tail.read();
    await sleep(WINDOW_MS);
    const last = await tail.read();
    const to = Date.now();
    const seconds = (to - from) / 1000;
    const r = new Map(NODES.map((n) => [n, (last.lines.get(n)! - first.lines.get(n)!) / seconds]));
    return { rates: r, lags: lagSamples.filter((l) => l.at >= from && l.at < to).flatMap((l) => l.lags), from, to };
  };

  try {
    await sleep(WARM_MS);
    const placedBefore = await owners();
    const before = await window();
    const explainedBefore = await explain();
    log(`copy-count placement: ${summary(before.rates)}; singleton: ${explainedBefore.verdict} (${explainedBefore.message})`);

    await setPaused(false);
    const resumedAt = Date.now();
    let firstMoveAt: number | undefined;
    let settledAt: number | undefined;
    let lastVerdict = '';
    const deadline = resumedAt + SETTLE_TIMEOUT_MS;
    // Settled: the singleton sees every node within its trigger band, every copy serves, and the map held still for 10 s.
    let stillSince = Date.now();
    let lastMap = JSON.stringify(placedBefore.map((c) => c.map((o) => o.node).sort()));
    while (Date.now() < deadline) {
      await sleep(1_000);
      const o = await owners();
      const map = JSON.stringify(o.map((c) => c.map((x) => x.node).sort()));
      if (map !== lastMap) {
        firstMoveAt ??= Date.now();
        stillSince = Date.now();
        lastMap = map;
      }
      const e = await explain();
      if (e.verdict !== lastVerdict) log(`+${((Date.now() - resumedAt) / 1000).toFixed(1)} s: ${e.verdict}: ${e.message}`);
      lastVerdict = e.verdict;
      if ((e.verdict === 'balanced' || e.verdict === 'within-trigger') && allServing(o) && firstMoveAt !== undefined && Date.now() - stillSince >= 10_000) {
        settledAt = stillSince;
        break;
      }
    }
    if (settledAt === undefined) log(`not settled within ${SETTLE_TIMEOUT_MS / 1000} s (last verdict ${lastVerdict})`);
    const placedAfter = await owners();
    const after = await window();
    const explainedAfter = await explain();
    log(`load-aware placement: ${summary(after.rates)}; singleton: ${explainedAfter.verdict}`);

    await rated.stop();
    sampling = false;
    await sampler;
    // Nothing acknowledged lost: every number in some sink, read again until it shows or 120 s pass.
    await waitFor(
      'every acknowledged record in a sink',
      async () => (await tail.read(), [...rated.acked].every((n) => tail.seen.has(n))),
      120_000,
      1_000,
    ).catch(() => undefined);
    const lost = [...rated.acked].filter((n) => !tail.seen.has(n)).length;
    const outcomes = await router.stop();

    const movesWindowEnd = settledAt ?? Date.now();
    const during = figures(sentBetween(outcomes, resumedAt, movesWindowEnd), DEADLINE_MS);
    const all = figures(outcomes, DEADLINE_MS);
    const duringLags = lagSamples.filter((l) => l.at >= (firstMoveAt ?? resumedAt) && l.at < movesWindowEnd).flatMap((l) => l.lags);
    const moved = copiesMoved(placedBefore, placedAfter);
    const row = (label: string, w: Window, explained: PlacementExplanation, placed: Owners) => {
      const values = [...w.rates.values()];
      const mean = values.reduce((a, b) => a + b, 0) / values.length;
      const hottest = Math.max(...values);
      return [
        label,
        Math.round(hottest),
        Math.round(Math.min(...values)),
        (hottest / mean).toFixed(3),
        NODES.map((n) => `${n} ${Math.round(w.rates.get(n)!)} (${copiesOn(placed, n)})`).join(', '),
        lagFigures(w.lags),
        explained.verdict,
      ];
    };
    return {
      title: `Placement by measured load on real processes: ${NODES.length} nodes, ${SHARDS} shards × RF ${RF}, Zipf(${ZIPF_EXPONENT}) over ${RATE} records/s`,
      columns: [
        'placement',
        'hottest node (records/s)',
        'coolest node',
        'hottest / mean',
        'each node: records/s (copies)',
        'serving copies\u2019 lag, p50 / p99 / max (records)',
        "singleton's verdict",
      ],
      rows: [
        row('copy counts (moves for load paused)', before, explainedBefore, placedBefore),
        row('load-aware (after its moves)', after, explainedAfter, placedAfter),
      ],
      notes: [
        `Load average before the run: ${loadBefore.map((l) => l.toFixed(2)).join(', ')}; ${BUSY} busy-loop processes beside it. Windows of ${WINDOW_MS / 1000} s, each node's records/s from its sink's lines.`,
        `Moves: first map change ${firstMoveAt === undefined ? 'never' : `${((firstMoveAt - resumedAt) / 1000).toFixed(1)} s`} after moves were resumed (sustainMs ${SUSTAIN_MS / 1000} s, reports every 2 s); ${
          settledAt === undefined ? 'not settled' : `settled ${((settledAt - resumedAt) / 1000).toFixed(1)} s after`
        }; ${moved} copies moved.`,
        `Serving copies' lag while the moves ran (records behind the topic's end, sampled each second): ${lagFigures(duringLags)}.`,
        `Routed requests at ${READS_RATE}/s while the moves ran (from resuming to settled): ${during.requests} sent, **${during.failed} failed**, ${during.pastDeadline} past the ${DEADLINE_MS} ms deadline, p50/p99 ${fmt(during.p50)} / ${fmt(during.p99)} ms${codes(during.codes)}; whole run: ${all.requests} sent, ${all.failed} failed${codes(all.codes)}.`,
        `Records: ${rated.acked.size} acknowledged by Kafka (${rated.failedSends} sends retried), **${lost} lost** (not in any sink).`,
        `Shard rates (records/s, hottest first): ${rates
          .map((r, shard) => ({ r, shard }))
          .sort((a, b) => b.r - a.r)
          .slice(0, 6)
          .map((x) => `${x.shard}: ${x.r.toFixed(0)}`)
          .join(', ')}, …`,
      ],
    };
  } finally {
    sampling = false;
    await sampler;
    await rated.stop();
    router.kill();
  }
}

/** Each partition's end offset (the next record's). */
async function endOffsets(admin: Admin, topic: string): Promise<Map<number, number>> {
  return new Map((await admin.fetchTopicOffsets(topic)).map((p) => [p.partition, Number(p.high)]));
}

/** Each serving copy's lag: the partition's end offset against the highest offset its node's sink wrote for the shard. */
function servingLags(ends: ReadonlyMap<number, number>, sinks: SinkCounts, owners: Owners): number[] {
  return owners.flatMap((copies, shard) =>
    copies.filter((c) => c.status === 'Active' && sinks.highest.has(c.node)).map((c) => Math.max(0, ends.get(shard)! - 1 - sinks.highest.get(c.node)![shard]!)),
  );
}

/** Copies `node` holds in the map. */
const copiesOn = (o: Owners, node: string) => o.filter((c) => c.some((x) => x.node === node)).length;
const copiesPerNode = (o: Owners) => NODES.map((n) => `${n} ${copiesOn(o, n)}`).join(', ');

/** Copies the second map holds that the first did not. */
function copiesMoved(before: Owners, after: Owners): number {
  return after.reduce((n, copies, shard) => n + copies.filter((c) => !before[shard]!.some((b) => b.node === c.node)).length, 0);
}

function lagFigures(lags: readonly number[]): string {
  if (lags.length === 0) return '-';
  const sorted = [...lags].sort((a, b) => a - b);
  return `${quantile(sorted, 0.5)} / ${quantile(sorted, 0.99)} / ${sorted.at(-1)}`;
}

const summary = (rates: ReadonlyMap<string, number>) => [...rates].map(([n, r]) => `${n} ${r.toFixed(0)}/s`).join(', ');
const fmt = (v: number | undefined) => (v === undefined ? '-' : v.toFixed(1));
const codes = (c: Readonly<Record<string, number>>) =>
  Object.keys(c).length === 0
    ? ''
    : ` (${Object.entries(c)
        .map(([k, v]) => `${k} ${v}`)
        .join(', ')})`;

register({ name: 'deploy-load-moves', onDemand: true, run: deployLoadMoves });
