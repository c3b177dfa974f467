/**
 * Maps at scale on real Kafka and Cassandra at their stock limits (a broker's 1 MiB
 * `max.message.bytes`): three `shardherd node` processes in three racks with node ids of realistic
 * length, one `balanced` dataset of a synthetic source (one record per shard every ~17 minutes: the
 * coordination is measured, not ingestion), a fresh cluster per size. Per size:
 * - setup: the HTTP status of `POST /api/v1/datasets` and its time;
 * - every copy Active: from the setup's answer until every node's map shows numShards × RF copies
 *   Active (`/status`);
 * - the largest record each bus topic holds, and how many;
 * - nothing changing: events bytes per second over 30 s, idle CPU (cores) and memory of each node;
 * - SIGKILL of a node that does not host the singleton: time until the survivors' maps show the
 *   dead node's copies gone and every remaining copy Active, and the events bytes meanwhile;
 * - the node restarted (a new incarnation): time until every copy is Active again and events bytes
 *   per copy it was given (each one a placement decided and carried).
 *
 * `SHARDHERD_SCALE_CASES=16384x3,65536x3` runs only those sizes.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { everyCopyActive, ProcessCluster } from '../test/support/process-cluster.js';
import { readTopics, within } from '../test/support/bus-traffic.js';
import { ms, quantile, register, type Table } from './harness.js';
import { sleep, waitFor } from './runtime-support.js';
import { withRealServices, type BenchServices } from './real-services.js';

const DEFAULT_CASES = ['256x1', '256x3', '1024x3', '4096x1', '4096x3', '8192x3', '16384x1', '16384x3', '65536x1', '65536x3'];
const NODES = [1, 2, 3].map((i) => `ingest-${i}.prod-eu-west-1.example.internal`);
const DATASET = 'metrics';
const IDLE_MS = 30_000;
const SESSION_MS = 6_000;
const KiB = 1024;

/** CPU seconds (user + system) and resident MiB of a process, from /proc. */
async function processUsage(pid: number): Promise<{ cpuS: number; rssMiB: number }> {
  const stat = (await readFile(`/proc/${pid}/stat`, 'utf8')).split(') ')[1]!.split(' ');
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const rssKb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
  return { cpuS: (Number(stat[11]) + Number(stat[12])) / 100, rssMiB: rssKb / 1024 };
}

const allActive = (cluster: ProcessCluster, copies: number) => everyCopyActive(cluster, DATASET, copies);

/** Copies Active that `names` run, summed (what the processes do, not what a map says). */
async function runningActive(cluster: ProcessCluster, names: readonly string[]): Promise<number> {
  const statuses = await Promise.all(names.map((n) => cluster.status(n, 10_000)));
  return statuses.reduce((sum, st) => sum + (st?.runningCounts[DATASET]?.Active ?? 0), 0);
}

interface CaseResult {
  readonly label: string;
  readonly setupStatus: number;
  readonly setupMs: number;
  readonly allActiveMs: number;
  readonly statusReadMs: number;
  readonly overviewReadMs: number;
  readonly largest: Record<string, number>;
  readonly records: Record<string, number>;
  readonly idleEventsBytesPerS: number;
  readonly idleCpu: number[];
  readonly rssMiB: number[];
  readonly killMs: number;
  readonly killEventsBytes: number;
  readonly restartMs: number;
  readonly bytesPerPlacement: number;
}

async function runCase(s: BenchServices, numShards: number, rf: number): Promise<CaseResult> {
  const dir = await mkdtemp(join(tmpdir(), 'shardherd-scale-'));
  const name = `scale_${Date.now().toString(36)}_${numShards}x${rf}`;
  const cluster = new ProcessCluster({
    dir,
    cluster: name,
    ...s, // the real Kafka and Cassandra
    keyspace: 'shardherd_bench',
    sessionTimeoutMs: SESSION_MS,
    runtime: { publishIntervalMs: 5_000, pollIntervalMs: 100 },
  });
  const topics = ['inbox', 'events', 'replies'].map((t) => `${name}.${t}`);
  const label = `${numShards} × ${rf}`;
  try {
    for (const n of NODES) await cluster.start(n, 120_000);
    await waitFor('three members', async () => (await Promise.all(NODES.map((n) => cluster.status(n)))).every((st) => st?.member), 60_000, 100);
    const url = cluster.get(NODES[0]!).url;
    const t0 = Date.now();
    const res = await fetch(`${url}/api/v1/datasets`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${cluster.token(NODES[0]!)}` },
      // Moves back to a restarted node (RF 1) in rounds of 1024, not the default 16; the killed
      // node's copies re-created at once (no replacement delay): that is what the SIGKILL times.
      body: JSON.stringify({
        ref: DATASET,
        numShards,
        minNumNodes: 1,
        replicationFactor: rf,
        strategy: 'balanced',
        maxConcurrentMoves: 1024,
        replacementDelayMs: 0,
        source: { type: 'synthetic', recordsPerSecond: 0.001 },
      }),
      signal: AbortSignal.timeout(120_000),
    });
    const setupMs = Date.now() - t0;
    if (res.status !== 201) throw new Error(`${label}: setup answered ${res.status}: ${await res.text()}`);
    const copies = numShards * rf;
    await waitFor(`${label}: every copy Active`, () => allActive(cluster, copies), 600_000, 100);
    const allActiveMs = Date.now() - t0 - setupMs;

    // Operator reads of the whole dataset, from a node that does not host the singleton: FiloDB's
    // status route and the overview (medians of 5, after one untimed read).
    const reader = NODES[1]!;
    const readMs = async (path: string): Promise<number> => {
      const times: number[] = [];
      for (let i = 0; i <= 5; i++) {
        const t = performance.now();
        const r = await fetch(`${cluster.get(reader).url}${path}`, { signal: AbortSignal.timeout(60_000) });
        await r.arrayBuffer();
        if (!r.ok) throw new Error(`${path} answered ${r.status}`);
        if (i > 0) times.push(performance.now() - t);
      }
      return quantile(times, 0.5);
    };
    const statusReadMs = await readMs(`/api/v1/cluster/${DATASET}/status`);
    const overviewReadMs = await readMs('/api/v1/overview');

    // Nothing changing.
    await sleep(5_000);
    const pids = NODES.map((n) => cluster.get(n).child.pid!);
    const before = await Promise.all(pids.map(processUsage));
    const idleFrom = Date.now();
    await sleep(IDLE_MS);
    const idleTo = Date.now();
    const after = await Promise.all(pids.map(processUsage));

    // SIGKILL of a node without the singleton.
    const statuses = await Promise.all(NODES.map((n) => cluster.status(n, 10_000)));
    const victim = NODES.find((_, i) => statuses[i]?.singleton === undefined)!;
    const killAt = Date.now();
    await cluster.kill(victim);
    const left = rf === 1 ? copies : numShards * (rf - 1);
    const survivors = NODES.filter((n) => n !== victim);
    await waitFor(
      `${label}: the survivors' maps without ${victim}, and its shards running on them`,
      async () => (await allActive(cluster, left)) && (await runningActive(cluster, survivors)) === left,
      600_000,
      100,
    );
    const killMs = Date.now() - killAt;
    const killDone = Date.now();

    // The node back as a new incarnation: its copies are placed again (RF 3) or moved back to it in
    // planned moves (RF 1), until it runs its share.
    const restartAt = Date.now();
    await cluster.start(victim, 120_000);
    const share = Math.floor(copies / NODES.length);
    await waitFor(
      `${label}: every copy Active after the restart, ${share} on ${victim}`,
      async () => (await allActive(cluster, copies)) && (await runningActive(cluster, [victim])) >= share,
      900_000,
      100,
    );
    const restartMs = Date.now() - restartAt;
    const restartDone = Date.now();
    const placedOnVictim = Object.values((await cluster.status(victim, 10_000))?.runningCounts[DATASET] ?? {}).reduce((a, b) => a + b, 0);

    await sleep(1_000);
    const traffic = await readTopics(s.kafkaBrokers, topics);
    const events = traffic.get(`${name}.events`)!;
    const idle = within(events, idleFrom, idleTo);
    const killBytes = within(events, killAt, killDone).bytes;
    const restartBytes = within(events, restartAt, restartDone).bytes;
    return {
      label,
      setupStatus: res.status,
      setupMs,
      allActiveMs,
      statusReadMs,
      overviewReadMs,
      largest: Object.fromEntries([...traffic].map(([t, rs]) => [t.slice(name.length + 1), Math.max(0, ...rs.map((r) => r.bytes))])),
      records: Object.fromEntries([...traffic].map(([t, rs]) => [t.slice(name.length + 1), rs.length])),
      idleEventsBytesPerS: idle.bytes / ((idleTo - idleFrom) / 1000),
      idleCpu: before.map((b, i) => (after[i]!.cpuS - b.cpuS) / ((idleTo - idleFrom) / 1000)),
      rssMiB: after.map((a) => a.rssMiB),
      killMs,
      killEventsBytes: killBytes,
      restartMs,
      bytesPerPlacement: placedOnVictim > 0 ? restartBytes / placedOnVictim : 0,
    };
  } finally {
    await cluster.stopAll();
    await rm(dir, { recursive: true, force: true });
  }
}

const kib = (b: number) => `${(b / KiB).toFixed(1)} KiB`;

register({
  name: 'scale',
  run: async (): Promise<Table> =>
    withRealServices(async (s) => {
      const cases = (process.env.SHARDHERD_SCALE_CASES?.split(',') ?? DEFAULT_CASES).map((c) => c.trim().split('x').map(Number) as [number, number]);
      const rows: (string | number)[][] = [];
      for (const [numShards, rf] of cases) {
        try {
          const r = await runCase(s, numShards, rf);
          process.stderr.write(`[scale] ${JSON.stringify(r)}\n`);
          rows.push([
            r.label,
            `${r.setupStatus} in ${ms(r.setupMs)}`,
            ms(r.allActiveMs),
            `${ms(r.statusReadMs)} / ${ms(r.overviewReadMs)}`,
            `${kib(r.largest.events!)} / ${kib(r.largest.inbox!)} / ${kib(r.largest.replies!)}`,
            `${r.idleEventsBytesPerS.toFixed(0)} B/s`,
            r.idleCpu.map((c) => c.toFixed(3)).join(' '),
            r.rssMiB.map((m) => m.toFixed(0)).join(' '),
            `${ms(r.killMs)}, ${kib(r.killEventsBytes)}`,
            `${ms(r.restartMs)}, ${r.bytesPerPlacement.toFixed(0)} B/copy`,
          ]);
        } catch (e) {
          rows.push([`${numShards} × ${rf}`, `failed: ${e instanceof Error ? e.message : String(e)}`, '', '', '', '', '', '', '', '']);
        }
      }
      return {
        title: 'Maps at scale: 3 node processes in 3 racks, one balanced dataset, real Kafka (stock 1 MiB message limit) and Cassandra',
        columns: [
          'shards × RF',
          'setup',
          'every copy Active',
          'status route / overview',
          'largest record: events / inbox / replies',
          'events, nothing changing',
          'idle CPU per node (cores)',
          'RSS per node (MiB)',
          'SIGKILL of a node → maps without it, events bytes',
          'restart → all Active, events bytes per copy placed',
        ],
        rows,
        notes: [
          `Node ids like \`${NODES[0]}\`; session timeout ${SESSION_MS} ms; digest every 5 s; nothing-changing window ${IDLE_MS / 1000} s after 5 s of quiet.`,
          'Status route / overview: `GET /api/v1/cluster/<dataset>/status` and `GET /api/v1/overview` on a node that does not host the singleton, median of 5 wall ms (the whole answer read).',
          'Record sizes are the values as the broker holds them (after chunking, before compression); bytes are those values summed over the interval.',
          "SIGKILL: the killed node does not host the singleton; the time runs until every surviving node's map has no copy on it and every remaining copy is Active (RF 1: every shard Active elsewhere).",
        ],
      };
    }),
});
