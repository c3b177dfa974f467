/**
 * A wave of joins at scale, on real Kafka and Cassandra: three `shardherd node` processes of the
 * built package in three racks, one balanced dataset of `SHARDHERD_WAVE_SHARDS` (default 65 536)
 * shards × RF 3 from a synthetic source, then three more nodes, one per rack, started at once. Each
 * new node must end with a sixth of the copies, taken from the node of its rack: that is every copy
 * the wave needs to start. Measured from outside the nodes:
 * - the setup: every copy Active; the wave: every node holding its share, every copy Active;
 * - copies started on each node (summed from its `shards.started` log lines) against that need;
 * - `IngestionStarted` reports per copy, read back from the inbox topic (a copy says it caught up
 *   once per assignment; more is a resend or a storm);
 * - the longest event-loop stall of each node, from its own `shardherd_process_nodejs_eventloop_lag_max_seconds`
 *   (Node's event-loop delay monitor) scraped every 2 s, and the self-fences in its log;
 * - singleton epochs seen on the events topic, and the bus bytes of the wave.
 * `SHARDHERD_WAVE_MOVES` sets the dataset's `maxConcurrentMoves` (default 1024);
 * `SHARDHERD_WAVE_BUSY=2` runs two busy loops beside it all.
 */
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execFileSync } from 'node:child_process';
import { everyCopyActive, ProcessCluster } from '../test/support/process-cluster.js';
import { readTopics, within, type TopicRecord } from '../test/support/bus-traffic.js';
import { busyCores } from './disturbances.js';
import { ms, register, type Table } from './harness.js';
import { sleep, waitFor } from './runtime-support.js';
import { withRealServices } from './real-services.js';

const SHARDS = Number(process.env.SHARDHERD_WAVE_SHARDS ?? 65_536);
const RF = 3;
const MOVES = Number(process.env.SHARDHERD_WAVE_MOVES ?? 1024);
const BUSY = Number(process.env.SHARDHERD_WAVE_BUSY ?? 0);
const DATASET = 'metrics';
const RACKS = ['a', 'b', 'c'];
const name = (i: number) => `ingest-${i}.prod-eu-west-1.example.internal`;
const FIRST = [1, 2, 3].map(name);
const JOINERS = [4, 5, 6].map(name);
const rackOf = (n: string) => RACKS[(Number(/ingest-(\d+)/.exec(n)![1]) - 1) % 3]!;
const SCRAPE_EVERY_MS = 2_000;

/** The longest event-loop stall each node's own monitor saw, per phase, scraped until `stop`. */
function stallProbe(cluster: ProcessCluster, names: () => readonly string[]) {
  const longest = new Map<string, number>();
  let running = true;
  const loop = (async () => {
    while (running) {
      await sleep(SCRAPE_EVERY_MS);
      await Promise.all(
        names().map(async (n) => {
          try {
            const text = await (await fetch(`${cluster.get(n).url}/metrics`, { signal: AbortSignal.timeout(30_000) })).text();
            const max = /^shardherd_process_nodejs_eventloop_lag_max_seconds (\S+)/m.exec(text)?.[1];
            if (max !== undefined) longest.set(n, Math.max(longest.get(n) ?? 0, Number(max) * 1000));
          } catch {
            // a node too busy to answer within 30 s shows in its stalls at the next scrape
          }
        }),
      );
    }
  })();
  return {
    /** The longest stalls since the last call, and a fresh start. */
    take(): Map<string, number> {
      const out = new Map(longest);
      longest.clear();
      return out;
    },
    async stop() {
      running = false;
      await loop;
    },
  };
}

/** A gap of a node's event loop from the probe (bench/probes/loop-gaps.mjs): when it ended, its length and the CPU the process used in it (ms). */
interface LoopGap {
  readonly at: number;
  readonly ms: number;
  readonly cpuMs: number;
}

/** The probe's gaps of each node process, by node name (from the config path in the process's arguments). */
async function loopGaps(dir: string): Promise<Map<string, LoopGap[]>> {
  const out = new Map<string, LoopGap[]>();
  for (const file of (await readdir(dir)).filter((f) => /^gaps-\d+\.log$/.test(f))) {
    const [head, ...lines] = (await readFile(join(dir, file), 'utf8')).split('\n');
    const node = [...FIRST, ...JOINERS].find((n) => head?.includes(`${n}.json`));
    if (node === undefined) continue;
    const gaps = out.get(node) ?? [];
    for (const line of lines) {
      const [at, gap, cpu] = line.split(' ').map(Number);
      if (at !== undefined && gap !== undefined && cpu !== undefined && Number.isFinite(cpu)) gaps.push({ at, ms: gap, cpuMs: cpu });
    }
    out.set(node, gaps);
  }
  return out;
}

/**
 * Of the gaps within [from, to), the most CPU the process used within one (capped at the gap's
 * length; helper threads of the collector count too): the longest its loop was held by its own
 * work, whatever the time the machine did not run it on top.
 */
function mostCpuInAGap(gaps: readonly LoopGap[] | undefined, from: number, to: number): number | undefined {
  if (gaps === undefined) return undefined;
  let most = 0;
  for (const g of gaps) if (g.at >= from && g.at < to) most = Math.max(most, Math.min(g.cpuMs, g.ms));
  return most;
}

/** From a node's log: copies it started and restated (each copy is in exactly one line of each kind), and its self-fences. */
async function logCounts(cluster: ProcessCluster, n: string): Promise<{ started: number; restated: number; fences: number }> {
  const text = await readFile(cluster.logPath(n), 'utf8');
  let started = 0;
  let restated = 0;
  let fences = 0;
  for (const line of text.split('\n')) {
    if (line.includes('"shards.started"')) started += (JSON.parse(line) as { copies: number }).copies;
    if (line.includes('"shards.restated"')) restated += (JSON.parse(line) as { copies: number }).copies;
    if (line.includes('"membership.fenced"')) fences++;
  }
  return { started, restated, fences };
}

/**
 * Whole maps (`map-snapshot` messages) on the events topic between `from` and `to`: every node
 * reads each one, so each costs every node a parse of the whole map. A chunked one is counted by
 * its first chunk, which opens the message's JSON.
 */
function wholeMaps(events: readonly TopicRecord[], from: number, to: number): number {
  let count = 0;
  for (const r of events) {
    if (r.timestamp < from || r.timestamp >= to || !r.value) continue;
    if (r.value.subarray(0, 64).toString('utf8').includes('"kind":"map-snapshot"')) count++;
  }
  return count;
}

/**
 * `IngestionStarted` events per copy (`node@incarnation shard`) in the inbox records from `from`,
 * and for each one said again, how long after the first (ms) and whether in the same report (seq).
 */
function startedReports(inbox: readonly TopicRecord[], from: number): { perCopy: Map<string, number>; againAfterMs: number[]; sameSeq: number } {
  const first = new Map<string, { at: number; seq: number }>();
  const perCopy = new Map<string, number>();
  const againAfterMs: number[] = [];
  let sameSeq = 0;
  for (const r of inbox) {
    if (r.timestamp < from || r.chunk || !r.value) continue;
    const m = JSON.parse(r.value.toString('utf8')) as {
      kind?: string;
      node?: string;
      incarnation?: string;
      seq?: number;
      events?: { type: string; shard: number }[];
    };
    if (m.kind !== 'report') continue;
    for (const e of m.events ?? []) {
      if (e.type !== 'IngestionStarted') continue;
      const key = `${m.node}@${m.incarnation} ${e.shard}`;
      perCopy.set(key, (perCopy.get(key) ?? 0) + 1);
      const was = first.get(key);
      if (was === undefined) first.set(key, { at: r.timestamp, seq: m.seq! });
      else {
        againAfterMs.push(r.timestamp - was.at);
        if (was.seq === m.seq) sameSeq++;
      }
    }
  }
  return { perCopy, againAfterMs, sameSeq };
}

/** The longest time within [from, to) with no record on a topic (the singleton's replies: its acknowledgements), and when it began. */
function longestGap(records: readonly TopicRecord[], from: number, to: number): { ms: number; at: number } {
  let last = from;
  let gap = { ms: 0, at: from };
  for (const r of records) {
    if (r.timestamp < from || r.timestamp >= to) continue;
    if (r.timestamp - last > gap.ms) gap = { ms: r.timestamp - last, at: last };
    last = r.timestamp;
  }
  return gap;
}

/** Epochs of the singleton records on the events topic. */
function epochs(events: readonly TopicRecord[]): number[] {
  const seen = new Set<number>();
  for (const r of events) if (!r.chunk && r.value) seen.add((JSON.parse(r.value.toString('utf8')) as { epoch: number }).epoch);
  return [...seen].sort((a, b) => a - b);
}

/** Events each node sent the singleton again, by cause, summed over `names` (their own counter). */
async function resentEvents(cluster: ProcessCluster, names: readonly string[]): Promise<{ lost: number; silence: number }> {
  const sum = { lost: 0, silence: 0 };
  for (const n of names) {
    const text = await (await fetch(`${cluster.get(n).url}/metrics`, { signal: AbortSignal.timeout(30_000) })).text();
    for (const cause of ['lost', 'silence'] as const)
      sum[cause] += Number(new RegExp(`^shardherd_report_events_resent_total\\{cause="${cause}"\\} (\\S+)`, 'm').exec(text)?.[1] ?? 0);
  }
  return sum;
}

/** Copies Active that each of `names` runs (what the processes do, not what a map says). */
async function running(cluster: ProcessCluster, names: readonly string[]): Promise<number[]> {
  const statuses = await Promise.all(names.map((n) => cluster.status(n, 30_000)));
  return statuses.map((st) => (st ? (st.runningCounts[DATASET]?.Active ?? 0) : -1));
}

register({
  name: 'join-wave',
  run: async (): Promise<Table> =>
    withRealServices(async (s) => {
      execFileSync('npm', ['run', '-s', 'build'], { stdio: 'inherit' });
      const dir = await mkdtemp(join(tmpdir(), 'shardherd-wave-'));
      process.env.SHARDHERD_GAP_DIR = dir; // read by the probe in each node process
      const cluster = new ProcessCluster({
        dir,
        cluster: `wave_${Date.now().toString(36)}`,
        ...s,
        nodeFlags: ['--import', new URL('./probes/loop-gaps.mjs', import.meta.url).href],
        keyspace: 'shardherd_bench',
        sessionTimeoutMs: 10_000,
        runtime: { publishIntervalMs: 5_000, pollIntervalMs: 100 },
        rackOf,
        built: true,
      });
      const topics = ['inbox', 'events', 'replies'].map((t) => `${cluster.options.cluster}.${t}`);
      const busy = BUSY > 0 ? busyCores(BUSY) : undefined;
      const up: string[] = [];
      const probe = stallProbe(cluster, () => up);
      const copies = SHARDS * RF;
      const share = copies / 6;
      try {
        for (const n of FIRST) {
          await cluster.start(n, 120_000);
          up.push(n);
        }
        await waitFor('three members', async () => (await Promise.all(FIRST.map((n) => cluster.status(n)))).every((st) => st?.member), 60_000, 100);
        probe.take();
        const t0 = Date.now();
        const res = await fetch(`${cluster.get(FIRST[0]!).url}/api/v1/datasets`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${cluster.token(FIRST[0]!)}` },
          body: JSON.stringify({
            ref: DATASET,
            numShards: SHARDS,
            minNumNodes: 1,
            replicationFactor: RF,
            strategy: 'balanced',
            maxConcurrentMoves: MOVES,
            source: { type: 'synthetic', recordsPerSecond: 0.001 },
          }),
          signal: AbortSignal.timeout(120_000),
        });
        if (res.status !== 201) throw new Error(`setup answered ${res.status}: ${await res.text()}`);
        await waitFor('every copy Active', () => everyCopyActive(cluster, DATASET, copies), 900_000, 500);
        const setupMs = Date.now() - t0;
        await sleep(5_000);
        const setupStalls = probe.take();

        const waveAt = Date.now();
        // When each joiner's API answered: its loading (modules, schemas) before it is no stall of the wave.
        const readyAt = new Map<string, number>();
        await Promise.all(
          JOINERS.map(async (n) => {
            await cluster.start(n, 120_000);
            readyAt.set(n, Date.now());
          }),
        );
        up.push(...JOINERS);
        const all = [...FIRST, ...JOINERS];
        let last: number[] = [];
        await waitFor(
          `every node running its share (${share})`,
          async () => {
            last = await running(cluster, all);
            return last.every((k) => k === share) && (await everyCopyActive(cluster, DATASET, copies));
          },
          3_600_000,
          1_000,
        );
        const waveMs = Date.now() - waveAt;
        const waveDone = Date.now();
        // The lots held back by each node's log window are written at its end (10 s).
        await sleep(12_000);
        const waveStalls = probe.take();
        await probe.stop();
        const resent = await resentEvents(cluster, all);

        const traffic = await readTopics(s.kafkaBrokers, topics, topics);
        const inbox = traffic.get(topics[0]!)!;
        const events = traffic.get(topics[1]!)!;
        const silences = [longestGap(traffic.get(topics[2]!)!, t0, waveAt), longestGap(traffic.get(topics[2]!)!, waveAt, waveDone)];
        const reports = startedReports(inbox, t0);
        const counts = [...reports.perCopy.values()];
        const again = reports.againAfterMs.sort((a, b) => a - b);
        const logs = await Promise.all(all.map((n) => logCounts(cluster, n)));
        const startedOnJoiners = logs.slice(3).reduce((sum, l) => sum + l.started, 0);
        const gaps = await loopGaps(dir);
        const mostCpu = (nodes: readonly string[], from: number, to: number) => {
          const most = new Map<string, number>();
          for (const n of nodes) {
            const cpu = mostCpuInAGap(gaps.get(n), Math.max(from, readyAt.get(n) ?? from), to);
            if (cpu !== undefined) most.set(n, cpu);
          }
          return most;
        };
        const cpuInStalls = [mostCpu(FIRST, t0, waveAt), mostCpu(all, waveAt, waveDone)];
        const perNode = (stalls: Map<string, number>) => all.map((n) => (stalls.has(n) ? stalls.get(n)!.toFixed(0) : '–')).join(' ');
        const row = (phase: string, stalls: Map<string, number>, extra: string[], cpu: Map<string, number>) => [phase, ...extra, perNode(stalls), perNode(cpu)];
        return {
          title: `A join wave at ${SHARDS} × ${RF}: three nodes joining three${BUSY > 0 ? `, ${BUSY} busy loops beside it` : ''} (real Kafka and Cassandra, maxConcurrentMoves ${MOVES})`,
          columns: [
            'phase',
            'time',
            'copies started (needed)',
            'IngestionStarted per copy: mean / max',
            'fences',
            'events / inbox bytes',
            'longest event-loop stall per node (ms)',
            'most CPU of the process in one stall (ms)',
          ],
          rows: [
            row(
              'setup → every copy Active',
              setupStalls,
              [
                ms(setupMs),
                `${logs.slice(0, 3).reduce((sum, l) => sum + l.started, 0)} (${copies})`,
                '',
                '',
                `${(within(events, t0, waveAt).bytes / 1e6).toFixed(1)} / ${(within(inbox, t0, waveAt).bytes / 1e6).toFixed(1)} MB`,
              ],
              cpuInStalls[0]!,
            ),
            row(
              'three nodes join → balanced',
              waveStalls,
              [
                ms(waveMs),
                `${startedOnJoiners} (${3 * share})`,
                `${(counts.reduce((a, b) => a + b, 0) / counts.length).toFixed(3)} / ${counts.reduce((a, b) => Math.max(a, b), 0)}`,
                String(logs.reduce((sum, l) => sum + l.fences, 0)),
                `${(within(events, waveAt, waveDone).bytes / 1e6).toFixed(1)} / ${(within(inbox, waveAt, waveDone).bytes / 1e6).toFixed(1)} MB`,
              ],
              cpuInStalls[1]!,
            ),
          ],
          notes: [
            `Nodes ${all.map((n) => `${n.split('.')[0]} (${rackOf(n)})`).join(', ')}; the singleton epochs seen on the events topic: ${epochs(events).join(', ')}.`,
            `IngestionStarted reports counted on the inbox per node incarnation and shard, over ${counts.length} copies from the setup on; said again: ${again.length} (${reports.sameSeq} in the same report seq, i.e. resent), after ${again.length > 0 ? `${ms(again[again.length >> 1]!)} median, ${ms(again.at(-1)!)} at most` : '–'}; copies restated under a new assignment per the nodes' logs: ${logs.reduce((sum, l) => sum + l.restated, 0)}; events resent per the nodes' counters: ${resent.lost} lost, ${resent.silence} after a silence.`,
            `Whole maps published on the events topic (each read by every node): ${wholeMaps(events, t0, waveAt)} in the setup, ${wholeMaps(events, waveAt, waveDone)} in the wave.`,
            `Most CPU in one stall: over the gaps of a 10 ms timer in the node (a probe preloaded by this benchmark, bench/probes/loop-gaps.mjs), the most CPU time the process used within one, at most the gap's length: how long its own work (or its collector) held the loop, the rest of a stall being time the machine did not run it; a joining node's from when its API answered (its loading before is not the wave's).`,
            `Stalls: each node's own event-loop delay monitor, the most of each 2 s scrape over the phase (– : not up). The longest time with no record on the replies topic (the singleton's acknowledgements): ${silences.map((g, i) => `${i === 0 ? 'setup' : 'wave'} ${ms(g.ms)} from ${ms(g.at - (i === 0 ? t0 : waveAt))} into it`).join(', ')}.`,
          ],
        };
      } finally {
        await probe.stop();
        await busy?.stop();
        await cluster.stopAll();
        await rm(dir, { recursive: true, force: true });
      }
    }),
});
