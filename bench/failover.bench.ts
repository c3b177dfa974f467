/**
 * `npm run bench -- failover [options]`: failover of real `shardherd node` processes on real Kafka
 * and Cassandra with each failure detection mode (docs/ARCHITECTURE.md §11), in one run.
 *
 * Five nodes (built package), a 32-shard RF 1 dataset (FiloDB's strategy, at most 8 shards a node:
 * four owners of 8 and one spare) and a 16-shard RF 2 dataset (`balanced`, no replacement delay),
 * each fed by a producer of numbered records throughout. Per mode (`session-only` with the Kafka
 * session timeout, `heartbeat` at the detector's default settings, both behind the same session):
 * - owner: SIGKILL of a node that owns RF 1 shards and is not the singleton's → every shard it held
 *   has its copies Active on other nodes;
 * - singleton: SIGKILL of the singleton's node → a new singleton answers a request (and its epoch
 *   is higher), and → the shards the node held are Active elsewhere;
 * - silent: SIGSTOP of an owner, held until its shards are Active elsewhere, then SIGCONT → it is
 *   back as a new incarnation;
 * after each sample the victim is restarted (a new incarnation) and the cluster settles. At the end
 * of a mode, every record the producers had acknowledged must be in a sink.
 * - soak (`heartbeat`; `--soak-mode both` adds `session-only`): random SIGSTOP/SIGCONT pauses of up
 *   to 1 s on random nodes, a process spinning on every core, 5 % of the detector's heartbeats
 *   dropped by a proxy in front of each node's detector endpoint (the nodes advertise the proxy:
 *   `failureDetector.advertisedPort`), one Kafka restart and one Cassandra restart (SIGKILL, then
 *   started on their data); nothing is killed, so every eviction is a false one.
 *
 * Options: `--only owner,singleton,silent,soak`, `--mode heartbeat|session-only|both`, `--kills N`
 * (samples of each kill kind; default 20 owner, 10 singleton, 10 silent), `--soak-minutes M`
 * (default 10), `--soak-mode heartbeat|session-only|both`, `--session-ms T` (default 10000, the
 * node config's default), `--no-rf2`, `--singleton-lease-ms T` (heartbeat mode's singleton lease:
 * what a crashed singleton's successor waits for), `--client kafkajs|platformatic` (the nodes'
 * ingestion client; default the node config's).
 *
 * Times are wall ms on the monotonic clock from the signal's sending. Shards are observed on the
 * map a client follows on the cluster's events topic (`connectKafkaClient`), checked every 10 ms:
 * what a router or subscriber sees, without polling the nodes.
 */
import { execFileSync } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import { join } from 'node:path';
import { Kafka, logLevel, type Producer } from 'kafkajs';
import { CHAOS_RUNTIME, createTopics } from '../test/support/chaos-run.js';
import { departures, evictionsOfLive, MapWatch, singletonAnswers, singletonOf, until, type WatchedDataset } from '../test/support/failover-run.js';
import { missingRecords, NumberedProducer } from '../test/support/numbered-producer.js';
import { ProcessCluster } from '../test/support/process-cluster.js';
import { TcpProxy } from '../test/support/tcp-proxy.js';
import { busyCores, randomPauses } from './disturbances.js';
import { markdownTable, ms, quantile, register, type Table } from './harness.js';
import { withRealServices, type BenchServices } from './real-services.js';
import { sleep } from './runtime-support.js';
import { freePort } from '../test/support/free-port.js';
import { KAFKA_CLIENT_LIBRARIES, type KafkaClientLibrary } from '../src/cluster/kafka-options.js';

type Mode = 'session-only' | 'heartbeat';
type Part = 'owner' | 'singleton' | 'silent' | 'soak';

interface Options {
  readonly parts: ReadonlySet<Part>;
  readonly modes: readonly Mode[];
  readonly soakModes: readonly Mode[];
  readonly kills: { readonly owner: number; readonly singleton: number; readonly silent: number };
  readonly soakMinutes: number;
  readonly sessionMs: number;
  readonly rf2: boolean;
  /** Two processes spinning a core each beside the kill samples (`--busy`). */
  readonly busy: boolean;
  /** `--singleton-lease-ms T`: heartbeat mode's singleton lease (default: the setting's, 5000 ms). */
  readonly singletonLeaseMs: number | undefined;
  /** `--client kafkajs|platformatic`: the nodes' ingestion client (default: the node config's). */
  readonly client: KafkaClientLibrary | undefined;
}

const NODES = ['node-1', 'node-2', 'node-3', 'node-4', 'node-5'];
const RF1: WatchedDataset = { ref: 'rf1', numShards: 32, replicationFactor: 1 };
const RF2: WatchedDataset = { ref: 'rf2', numShards: 16, replicationFactor: 2 };
/** The producers' pause between batches (one record a partition each): about 150 records/s for the 32-partition topic. */
const PRODUCER_PAUSE_MS = 200;
/** How long a sample may take before it counts as failed. */
const SAMPLE_TIMEOUT_MS = 60_000;
/** The maps must not change for this long before the next sample (a `balanced` dataset may still be moving copies). */
const QUIET_MS = 1_500;
const DROP_RATE = 0.05;
const MAX_PAUSE_MS = 1_000;

function parseOptions(argv: readonly string[]): Options {
  const value = (name: string): string | undefined => {
    const i = argv.indexOf(name);
    return i === -1 ? undefined : argv[i + 1];
  };
  const number = (name: string, fallback: number): number => {
    const v = value(name);
    if (v === undefined) return fallback;
    const n = Number(v);
    if (!(n > 0)) throw new Error(`${name} must be a positive number, got ${v}`);
    return n;
  };
  const modes = (name: string, fallback: string): Mode[] => {
    const v = value(name) ?? fallback;
    if (v === 'both') return ['session-only', 'heartbeat'];
    if (v === 'heartbeat' || v === 'session-only') return [v];
    throw new Error(`${name} must be heartbeat, session-only or both, got ${v}`);
  };
  const parts = (value('--only') ?? 'owner,singleton,silent,soak').split(',');
  for (const p of parts) if (!['owner', 'singleton', 'silent', 'soak'].includes(p)) throw new Error(`--only takes owner, singleton, silent, soak; got ${p}`);
  const kills = value('--kills') === undefined ? undefined : Math.round(number('--kills', 1));
  return {
    parts: new Set(parts as Part[]),
    modes: modes('--mode', 'both'),
    soakModes: modes('--soak-mode', 'heartbeat'),
    kills: { owner: kills ?? 20, singleton: kills ?? 10, silent: kills ?? 10 },
    soakMinutes: number('--soak-minutes', 10),
    sessionMs: Math.round(number('--session-ms', 10_000)),
    rf2: !argv.includes('--no-rf2'),
    busy: argv.includes('--busy'),
    singletonLeaseMs: value('--singleton-lease-ms') === undefined ? undefined : Math.round(number('--singleton-lease-ms', 5_000)),
    client: clientOption(value('--client')),
  };
}

function clientOption(given: string | undefined): KafkaClientLibrary | undefined {
  if (given === undefined) return undefined;
  const known = KAFKA_CLIENT_LIBRARIES.find((c) => c === given);
  if (known === undefined) throw new Error(`--client takes ${KAFKA_CLIENT_LIBRARIES.join(' or ')}; got ${given}`);
  return known;
}

const log = (line: string) => process.stderr.write(`[failover] ${line}\n`);

/** The longest window in which a live node's detector endpoint resets and refuses connections in the soak. */
const MAX_RESET_MS = 500;

/**
 * Now and then (every 3–10 s) a random live node's detector endpoint resets every connection and
 * refuses new ones for up to `MAX_RESET_MS` (a middlebox, a restarted listener): no proof that the
 * process is gone, and no eviction may follow. Its proxy is the one in front of that endpoint.
 */
function randomEndpointResets(proxies: ReadonlyMap<string, TcpProxy>): { figures: { resets: number; longestMs: number }; stop(): Promise<void> } {
  const figures = { resets: 0, longestMs: 0 };
  let running = proxies.size > 0;
  const loop = (async () => {
    while (running) {
      await sleep(3_000 + Math.random() * 7_000);
      if (!running) break;
      const proxy = pick([...proxies.values()]);
      const windowMs = 20 + Math.round(Math.random() * (MAX_RESET_MS - 20));
      proxy.cut();
      await sleep(windowMs);
      proxy.restore();
      figures.resets += 1;
      figures.longestMs = Math.max(figures.longestMs, windowMs);
    }
  })();
  return {
    figures,
    stop: async () => {
      running = false;
      await loop;
    },
  };
}
const pick = <T>(xs: readonly T[]): T => xs[Math.floor(Math.random() * xs.length)]!;

// ------------------------------------------------------------------ a cluster under load

interface Run {
  readonly mode: Mode;
  readonly cluster: ProcessCluster;
  readonly watch: MapWatch;
  readonly datasets: readonly WatchedDataset[];
  readonly producers: readonly { readonly dataset: string; readonly numbered: NumberedProducer }[];
  /** Node processes that exited without being killed by the benchmark (then started again). */
  unexpectedExits: number;
  /** Stops the producers and checks that every acknowledged record reached a sink; stops everything. */
  finish(): Promise<string[]>;
}

async function startRun(s: BenchServices, o: Options, mode: Mode, label: string, failureDetector?: (name: string) => Record<string, unknown>): Promise<Run> {
  const dir = await mkdtemp(join(os.tmpdir(), 'shardherd-failover-'));
  const name = `fo_${label}_${Date.now().toString(36)}`;
  const datasets = o.rf2 ? [RF1, RF2] : [RF1];
  const kafka = new Kafka({ clientId: 'failover-bench', brokers: s.kafkaBrokers, logLevel: logLevel.NOTHING });
  for (const d of datasets) await createTopics(kafka, [`${name}.${d.ref}`], d.numShards);
  const cluster = new ProcessCluster({
    dir,
    cluster: name,
    ...s, // the real Kafka and Cassandra
    keyspace: 'shardherd_bench',
    sessionTimeoutMs: o.sessionMs,
    ...(o.client ? { kafkaClient: o.client } : {}),
    // Publishing, resends and retries as the chaos tests have them; no reassignment cooldown, which
    // would keep a shard that moved a moment ago from moving again in the next sample.
    runtime: CHAOS_RUNTIME,
    ...(failureDetector
      ? { failureDetector }
      : mode === 'heartbeat'
        ? { failureDetector: { mode: 'heartbeat', ...(o.singletonLeaseMs ? { singletonLeaseMs: o.singletonLeaseMs } : {}) } }
        : {}),
    datasets: [
      { ref: RF1.ref, numShards: RF1.numShards, minNumNodes: 4, source: { type: 'kafka', topic: `${name}.${RF1.ref}` } },
      ...(o.rf2
        ? [
            {
              ref: RF2.ref,
              numShards: RF2.numShards,
              minNumNodes: 2,
              replicationFactor: 2,
              strategy: 'balanced',
              replacementDelayMs: 0,
              source: { type: 'kafka', topic: `${name}.${RF2.ref}` },
            },
          ]
        : []),
    ],
    built: true,
  });
  const producer: Producer = kafka.producer({ allowAutoTopicCreation: false });
  let watch: MapWatch | undefined;
  try {
    // One after the other: node-1 is the oldest member, the first singleton.
    for (const n of NODES) await cluster.start(n, 120_000);
    watch = await MapWatch.connect(s.kafkaBrokers, name, datasets);
    await producer.connect();
  } catch (e) {
    await watch?.close();
    await cluster.stopAll();
    throw e;
  }
  const producers = datasets.map((d) => ({ dataset: d.ref, numbered: new NumberedProducer(producer, `${name}.${d.ref}`, d.numShards, PRODUCER_PAUSE_MS) }));
  for (const p of producers) p.numbered.start();
  const run: Run = {
    mode,
    cluster,
    watch,
    datasets,
    producers,
    unexpectedExits: 0,
    finish: async () => {
      const lines: string[] = [];
      try {
        for (const p of producers) await p.numbered.stop();
        for (const p of producers) {
          const missing = await missingRecords(p.numbered.acked, async () => (await cluster.ingested()).filter((l) => l.dataset === p.dataset), 120_000);
          lines.push(
            `${mode}${label.startsWith('soak') ? ' soak' : ''} ${p.dataset}: ${p.numbered.acked.size} records acknowledged, ${missing.length} never reached a sink${missing.length > 0 ? ` (first: ${missing.slice(0, 5).join(', ')})` : ''}; ${p.numbered.failedSends} sends retried.`,
          );
        }
      } finally {
        await producer.disconnect().catch(() => undefined);
        await watch.close();
        await cluster.stopAll();
        await rm(dir, { recursive: true, force: true });
      }
      return lines;
    },
  };
  await settle(run);
  return run;
}

/**
 * Every node running as a member, one singleton, every shard's copies Active on live nodes, each
 * node holding copies of each replicated dataset, and no map change for `QUIET_MS`. A node process that exited on its own is started again (and counted).
 */
async function settle(run: Run, timeoutMs = 180_000): Promise<void> {
  const { cluster, watch } = run;
  let stable = '';
  let since = 0;
  await until(
    'the cluster to settle',
    async () => {
      for (const n of NODES) {
        if (!cluster.live().some((p) => p.name === n)) {
          run.unexpectedExits += 1;
          log(`${n} had exited: starting it again`);
          await cluster.start(n, 120_000);
        }
      }
      const statuses = await Promise.all(NODES.map((n) => cluster.status(n, 2_000)));
      const ok =
        statuses.every((st) => st?.member === true && st.state === 'running') &&
        statuses.filter((st) => st?.singleton !== undefined).length === 1 &&
        watch.whole(new Set(NODES)) &&
        // A restarted node gets its share of a `balanced` dataset by planned moves after the settle
        // window: until it has some, the next victim's share would be larger than the others'.
        run.datasets.every((d) => d.replicationFactor === 1 || NODES.every((n) => (watch.shardsOn(n).get(d.ref) ?? []).length > 0));
      const key = ok ? watch.versions() : '';
      if (!ok || key !== stable) {
        stable = key;
        since = performance.now();
        return false;
      }
      return performance.now() - since >= QUIET_MS;
    },
    timeoutMs,
    100,
  );
}

/** The victim's shards of one dataset, as the map a `replaced` check takes. */
const only = (shards: ReadonlyMap<string, number[]>, dataset: string): Map<string, number[]> => new Map([[dataset, shards.get(dataset) ?? []]]);

// ------------------------------------------------------------------ samples

interface Measure {
  readonly mode: Mode;
  readonly what: string;
  readonly observed: string;
  readonly values: number[];
  failures: string[];
}

class Measures {
  readonly all: Measure[] = [];
  get(mode: Mode, what: string, observed: string): Measure {
    let m = this.all.find((x) => x.mode === mode && x.what === what);
    if (!m) this.all.push((m = { mode, what, observed, values: [], failures: [] }));
    return m;
  }

  /** Records a sample, and says it on stderr: a run cut short still shows what it measured. */
  add(mode: Mode, what: string, observed: string, value: number): void {
    this.get(mode, what, observed).values.push(value);
    log(`${mode} | ${what} | ${ms(value)} ms`);
  }
}

const MAP_ON_BUS = 'map on the events topic';

/**
 * Times how long after `t0` the victim's shards of each dataset are Active elsewhere (all at once,
 * so none waits for another), into the measure `what(dataset)`; a dataset whose shards are not
 * served elsewhere in time is a failure of its own measure, not of the others.
 */
async function servedElsewhere(
  run: Run,
  m: Measures,
  what: (dataset: string) => string,
  shards: ReadonlyMap<string, number[]>,
  victim: string,
  t0: number,
): Promise<void> {
  const datasets = run.datasets.filter((d) => (shards.get(d.ref) ?? []).length > 0);
  const results = await Promise.allSettled(
    datasets.map((d) => until(`${victim}'s ${d.ref} shards Active elsewhere`, () => run.watch.replaced(only(shards, d.ref), victim), SAMPLE_TIMEOUT_MS)),
  );
  results.forEach((r, i) => {
    const measure = m.get(run.mode, what(datasets[i]!.ref), MAP_ON_BUS);
    if (r.status === 'fulfilled') m.add(run.mode, measure.what, MAP_ON_BUS, r.value - t0);
    else {
      measure.failures.push(r.reason instanceof Error ? r.reason.message : String(r.reason));
      log(`${run.mode} | ${measure.what} | failed: ${measure.failures.at(-1)!}`);
    }
  });
}

async function ownerAndSingleton(run: Run): Promise<{ owner: string[]; singleton: { name: string; epoch: number } }> {
  const singleton = await singletonOf(run.cluster);
  if (!singleton) throw new Error('no single singleton');
  const owners = NODES.filter((n) => n !== singleton.name && (run.watch.shardsOn(n).get(RF1.ref) ?? []).length > 0);
  return { owner: owners, singleton };
}

async function ownerKill(run: Run, m: Measures): Promise<void> {
  await settle(run);
  const { owner } = await ownerAndSingleton(run);
  const victim = pick(owner);
  const shards = run.watch.shardsOn(victim);
  const t0 = performance.now();
  await run.cluster.kill(victim);
  await servedElsewhere(run, m, (ds) => `SIGKILL owner → its ${ds} shards Active elsewhere`, shards, victim, t0);
  await run.cluster.start(victim, 120_000);
}

async function singletonKill(run: Run, m: Measures): Promise<void> {
  await settle(run);
  const { singleton } = await ownerAndSingleton(run);
  const victim = singleton.name;
  const via = pick(NODES.filter((n) => n !== victim));
  const shards = run.watch.shardsOn(victim);
  const t0 = performance.now();
  await run.cluster.kill(victim);
  // Both at once: each is timed as it happens.
  const [answered] = await Promise.all([
    singletonAnswers(run.cluster, via, SAMPLE_TIMEOUT_MS),
    servedElsewhere(run, m, (ds) => `SIGKILL singleton → its node's ${ds} shards Active elsewhere`, shards, victim, t0),
  ]);
  // What answered is a new singleton: a higher epoch, on another node.
  await until('the new singleton at a higher epoch', async () => ((await singletonOf(run.cluster))?.epoch ?? 0) > singleton.epoch, 30_000, 200);
  m.add(run.mode, 'SIGKILL singleton → a new singleton answers', 'GET /api/v1/node-operations through a surviving node, every 50 ms', answered - t0);
  await run.cluster.start(victim, 120_000);
}

async function silentStop(run: Run, m: Measures): Promise<void> {
  await settle(run);
  const { owner } = await ownerAndSingleton(run);
  const victim = pick(owner);
  const before = (await run.cluster.status(victim))?.incarnation;
  const shards = run.watch.shardsOn(victim);
  const t0 = performance.now();
  run.cluster.signal(victim, 'SIGSTOP');
  try {
    await servedElsewhere(run, m, (ds) => `SIGSTOP owner → its ${ds} shards Active elsewhere`, shards, victim, t0);
  } finally {
    run.cluster.signal(victim, 'SIGCONT');
  }
  const resumed = performance.now();
  // Its incarnation was dropped (evicted or past its session): it must come back as a new one.
  const back = await until(
    `${victim} back as a new incarnation after SIGCONT`,
    async () => {
      const st = await run.cluster.status(victim, 1_000);
      return st !== undefined && st.member && st.state === 'running' && st.incarnation !== before;
    },
    SAMPLE_TIMEOUT_MS,
    100,
  );
  m.add(run.mode, 'SIGCONT → the stopped node is a member again, as a new incarnation', '/status of the node, every 100 ms', back - resumed);
}

/** Runs `n` samples; a failed one is recorded with its reason, the cluster is repaired (every node running again) and the next one goes on. */
async function samples(run: Run, m: Measures, what: string, n: number, one: (run: Run, m: Measures) => Promise<void>): Promise<void> {
  let failedInARow = 0;
  for (let i = 0; i < n; i++) {
    try {
      await one(run, m);
      failedInARow = 0;
      log(`${run.mode} ${what} ${i + 1}/${n}`);
    } catch (e) {
      const why = e instanceof Error ? e.message : String(e);
      m.get(run.mode, `${what}: failed samples`, '-').failures.push(why);
      log(`${run.mode} ${what} ${i + 1}/${n} failed: ${why}`);
      for (const p of run.cluster.live()) p.child.kill('SIGCONT');
      for (const name of NODES) if (!run.cluster.live().some((p) => p.name === name)) await run.cluster.start(name, 120_000).catch(() => undefined);
      if (++failedInARow === 3) {
        log(`${run.mode} ${what}: three failures in a row, giving up this part`);
        return;
      }
    }
  }
}

// ------------------------------------------------------------------ the soak

interface SoakResult {
  readonly mode: Mode;
  readonly minutes: number;
  readonly pauses: number;
  readonly longestPauseMs: number;
  /** Windows in which a live node's detector endpoint reset its connections and refused new ones. */
  readonly resets: number;
  readonly longestResetMs: number;
  /** Evictions of incarnations that were still running: false ones. */
  readonly evicted: number;
  readonly evictedDetail: string;
  /** Evictions of incarnations that had fenced themselves before (their endpoint closed): late, not false. */
  readonly evictedAfterFence: number;
  readonly fenced: number;
  readonly fencedDetail: string;
  readonly heartbeatsDropped: number;
  readonly framesForwarded: number;
  readonly restarts: string;
  readonly settledAfterMs: number | undefined;
  readonly unexpectedExits: number;
  readonly records: string[];
}

async function soak(s: BenchServices, o: Options, mode: Mode): Promise<SoakResult> {
  const proxies = new Map<string, TcpProxy>();
  const ports = new Map<string, number>();
  if (mode === 'heartbeat') {
    for (const n of NODES) {
      const port = await freePort();
      ports.set(n, port);
      // Only heartbeats (node → singleton) are dropped; every other frame passes.
      proxies.set(
        n,
        await TcpProxy.start(`127.0.0.1:${port}`, {
          dropFrame: (frame, toServer) => toServer && frame.includes('"type":"heartbeat"') && Math.random() < DROP_RATE,
        }),
      );
    }
  }
  const detector = mode === 'heartbeat' ? (n: string) => ({ mode: 'heartbeat', port: ports.get(n)!, advertisedPort: proxies.get(n)!.port }) : undefined;
  const run = await startRun(s, o, mode, `soak_${mode === 'heartbeat' ? 'hb' : 'so'}`, detector);
  const totalMs = o.soakMinutes * 60_000;
  const start = performance.now();
  const at = (fraction: number) => sleep(Math.max(0, start + totalMs * fraction - performance.now()));
  const busy = busyCores();
  const pauses = randomPauses(run.cluster, NODES, MAX_PAUSE_MS, [1_000, 4_000]);
  const resets = randomEndpointResets(proxies);
  const restarts: string[] = [];
  let settledAfterMs: number | undefined;
  try {
    for (const [fraction, service] of [
      [1 / 3, 'kafka'],
      [2 / 3, 'cassandra'],
    ] as const) {
      await at(fraction);
      if (!s.restart) {
        restarts.push(`${service}: not restarted (named by the environment, not started by the benchmark)`);
        continue;
      }
      const t0 = performance.now();
      log(`soak ${mode}: restarting ${service}`);
      // A restart that fails (not ready in time on a saturated machine) is a result, not the end of the run.
      await s.restart(service).then(
        () => restarts.push(`${service} down ${ms(performance.now() - t0)} ms`),
        (e: unknown) => restarts.push(`${service} restart failed after ${ms(performance.now() - t0)} ms: ${e instanceof Error ? e.message : String(e)}`),
      );
    }
    await at(1);
  } finally {
    await pauses.stop();
    await resets.stop();
    await busy.stop();
  }
  try {
    const t0 = performance.now();
    await settle(run, 300_000);
    settledAfterMs = performance.now() - t0;
  } catch (e) {
    log(`soak ${mode}: ${e instanceof Error ? e.message : String(e)}`);
  }
  const d = await departures(run.cluster, NODES);
  const live = evictionsOfLive(d);
  const heartbeatsDropped = [...proxies.values()].reduce((a, p) => a + p.frames.dropped, 0);
  const framesForwarded = [...proxies.values()].reduce((a, p) => a + p.frames.forwarded, 0);
  const records = await run.finish();
  for (const p of proxies.values()) await p.close();
  const count = (xs: readonly string[]) => [...new Set(xs)].map((x) => `${x} × ${xs.filter((y) => y === x).length}`).join(', ') || '-';
  return {
    mode,
    minutes: (performance.now() - start) / 60_000,
    pauses: pauses.figures.pauses,
    longestPauseMs: pauses.figures.longestMs,
    resets: resets.figures.resets,
    longestResetMs: resets.figures.longestMs,
    evicted: live.length,
    evictedDetail: count(live.map((e) => `${e.member}${e.refused ? ' (refused)' : ` (silent ${e.silentMs === undefined ? '?' : Math.round(e.silentMs)} ms)`}`)),
    evictedAfterFence: d.evicted.length - live.length,
    fenced: d.fenced.length,
    fencedDetail: count(d.fenced.map((f) => `${f.node}: ${f.reason ?? '?'}`)),
    heartbeatsDropped,
    framesForwarded,
    restarts: restarts.join('; '),
    settledAfterMs,
    unexpectedExits: run.unexpectedExits,
    records,
  };
}

// ------------------------------------------------------------------ report

async function failover(): Promise<Table> {
  const o = parseOptions(process.argv.slice(2));
  // Interrupted: exit through the exit hooks, which SIGKILL the node processes and the JVMs this run started.
  for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => process.exit(130));
  const loadBefore = os.loadavg();
  const m = new Measures();
  const notes: string[] = [];
  const soaks: SoakResult[] = [];
  // The node processes run the built package: build it, so they run these sources.
  execFileSync('npm', ['run', '-s', 'build'], { stdio: 'inherit' });
  await withRealServices(
    async (s) => {
      for (const mode of o.modes) {
        if (!['owner', 'singleton', 'silent'].some((p) => o.parts.has(p as Part))) break;
        const run = await startRun(s, o, mode, mode === 'heartbeat' ? 'hb' : 'so');
        const busy = o.busy ? [busyCores(1), busyCores(1)] : [];
        try {
          if (o.parts.has('owner')) await samples(run, m, 'SIGKILL owner', o.kills.owner, ownerKill);
          if (o.parts.has('singleton')) await samples(run, m, 'SIGKILL singleton', o.kills.singleton, singletonKill);
          if (o.parts.has('silent')) await samples(run, m, 'SIGSTOP owner', o.kills.silent, silentStop);
          await settle(run).catch((e: unknown) => notes.push(`${mode}: did not settle at the end: ${e instanceof Error ? e.message : String(e)}`));
        } finally {
          for (const b of busy) await b.stop();
          if (run.unexpectedExits > 0) notes.push(`${mode}: ${run.unexpectedExits} node processes exited on their own and were started again.`);
          notes.push(...(await run.finish()));
        }
      }
      if (o.parts.has('soak')) for (const mode of o.soakModes) soaks.push(await soak(s, o, mode));
    },
    { restartable: o.parts.has('soak') },
  );

  if (soaks.length > 0) {
    console.log(
      markdownTable({
        title: `Failover soak: ${NODES.length} nodes, pauses up to ${MAX_PAUSE_MS} ms, every core busy, ${DROP_RATE * 100} % of heartbeats dropped, resets of live nodes' detector endpoints up to ${MAX_RESET_MS} ms, a Kafka and a Cassandra restart`,
        columns: [
          'mode',
          'minutes',
          'pauses (longest ms)',
          'endpoint resets (longest ms)',
          'false evictions',
          'evictions of fenced incarnations',
          'fences (new incarnations)',
          'heartbeats dropped / frames forwarded',
          'restarts',
          'settled after ms',
          'records',
        ],
        rows: soaks.map((r) => [
          r.mode,
          r.minutes.toFixed(1),
          `${r.pauses} (${ms(r.longestPauseMs)})`,
          r.mode === 'heartbeat' ? `${r.resets} (${ms(r.longestResetMs)})` : '-',
          `${r.evicted}${r.evicted > 0 ? `: ${r.evictedDetail}` : ''}`,
          r.evictedAfterFence,
          `${r.fenced}${r.fenced > 0 ? `: ${r.fencedDetail}` : ''}`,
          r.mode === 'heartbeat' ? `${r.heartbeatsDropped} / ${r.framesForwarded}` : '-',
          r.restarts || '-',
          r.settledAfterMs === undefined ? 'not within 300 s' : ms(r.settledAfterMs),
          r.records.join(' '),
        ]),
        notes: [
          "Nothing is killed in the soak: a `detector.evicted` of an incarnation that was still running is a false eviction (goal 0). One of an incarnation that had fenced itself before (its `node.fenced` logged earlier: its Kafka session lost while the broker was away, say) is counted apart: that incarnation was gone, its endpoint closed. Fences count `node.fenced`: a node that learned it was no longer a member (the detector's eviction, or its Kafka session lost) and restarted as a new incarnation.",
          ...soaks.filter((r) => r.unexpectedExits > 0).map((r) => `${r.mode}: ${r.unexpectedExits} node processes exited on their own.`),
        ],
      }),
    );
    console.log('');
  }

  const loadAfter = os.loadavg();
  const load = (l: number[]) => l.map((x) => x.toFixed(2)).join(', ');
  return {
    title: `Failover of real node processes by detection mode: ${NODES.length} nodes, ${RF1.numShards} shards RF 1${o.rf2 ? ` and ${RF2.numShards} shards RF 2` : ''}, Kafka session ${o.sessionMs} ms, ingestion client ${o.client ?? 'the default'}, Kafka + Cassandra on this machine${o.busy ? ', two busy-loop processes beside the samples' : ''}`,
    columns: ['mode', 'measure', 'observed on', 'n', 'p50 ms', 'p99 ms', 'max ms', 'min ms', 'failed'],
    rows: m.all.map((x) => {
      const v = x.values;
      const f = (q: number) => (v.length === 0 ? '-' : ms(quantile(v, q)));
      return [
        x.mode,
        x.what,
        x.observed,
        v.length,
        f(0.5),
        f(0.99),
        v.length === 0 ? '-' : ms(Math.max(...v)),
        v.length === 0 ? '-' : ms(Math.min(...v)),
        x.failures.length === 0 ? 0 : `${x.failures.length}: ${x.failures[0]}`,
      ];
    }),
    notes: [
      `Machine: ${os.cpus().length} cores (${os.cpus()[0]?.model ?? '?'}); load average (1, 5, 15 min) ${load(loadBefore)} before, ${load(loadAfter)} after.`,
      "Wall ms from the signal's sending. p99 is the nearest rank: with fewer than 100 samples it is the largest.",
      `heartbeat: failureDetector at its defaults (heartbeat 100 ms, lease 500 ms, suspicion 1800 ms, singleton lease ${o.singletonLeaseMs ?? 5000} ms${o.singletonLeaseMs ? ', set by --singleton-lease-ms' : ''}); session-only: departures from the Kafka group alone, which also bounds the singleton's replacement there. Both with the same ${o.sessionMs} ms session.`,
      `RF 1: FiloDB's strategy, minNumNodes 4 (8 shards a node: four owners and a spare).${o.rf2 ? ' RF 2: `balanced`, no replacement delay; its figure is the time until each lost copy is Active again on another node (the shard was served by its other copy meanwhile), the settle window (`settleWindowMs`, 1000 ms by default) included: a lost copy whose shard is still served waits for it.' : ''} Runtime: ${JSON.stringify(CHAOS_RUNTIME)}.`,
      'Victims are chosen at random among the nodes that own RF 1 shards and do not host the singleton; each is started again (a new incarnation) and the cluster settles (every node a member, every copy Active, every node holding copies of a replicated dataset, no map change for 1.5 s) before the next sample.',
      ...(m.all.length === 0 ? ['No kill samples in this run (--only named none of owner, singleton, silent).'] : []),
      ...notes,
    ],
  };
}

register({ name: 'failover', onDemand: true, run: failover });
