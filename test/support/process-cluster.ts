// Real `shardherd node` processes on one machine, for the chaos tests and the failover benchmarks:
// writes each node's config file, spawns `shardherd node --config`, learns its status URL from its
// log, reads `/status`, sends signals, and reads back what the JSON-lines sinks ingested.
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, type WriteStream } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import type { NodeStatus } from '../../src/http/node-status.js';
import type { DatasetView } from '../../src/http/cluster-view.js';
import { readTokenFile } from '../../src/http/access-token.js';
import type { KafkaClientLibrary } from '../../src/cluster/kafka-options.js';

const REPO = resolve(import.meta.dirname, '../..');
const MAIN = join(REPO, 'src/cli/main.ts');
const BUILT_MAIN = join(REPO, 'dist/cli/main.js');
/** A handler module for a node config's `serve` section: answers `{ node, shard, payload }`. */
export const ECHO_HANDLER = join(REPO, 'test/support/shard-echo-handler.mjs');

export interface ProcessClusterOptions {
  /** Where configs, logs and sink files go. */
  readonly dir: string;
  readonly cluster: string;
  readonly kafkaBrokers: readonly string[];
  readonly cassandraContactPoints: readonly string[];
  readonly cassandraLocalDataCenter: string;
  readonly keyspace: string;
  readonly sessionTimeoutMs: number;
  readonly heartbeatIntervalMs?: number;
  /** The nodes' ingestion client library (config key `kafka.client`; default the config's). */
  readonly kafkaClient?: KafkaClientLibrary;
  /** Replication factor of the topics the nodes create (config key `kafka.topicReplicationFactor`). */
  readonly topicReplicationFactor?: number;
  /** Runtime settings of every node (config key `runtime`). */
  readonly runtime?: Record<string, unknown>;
  /** Dataset configs every node sets up at start (idempotent). */
  readonly datasets?: readonly unknown[];
  /** The `serve` section of every node's config: datasets served with handler modules (absolute paths). */
  readonly serve?: readonly unknown[];
  /** At least info: the harness learns each node's status URL from its `node.status` log line. */
  readonly logLevel?: 'info' | 'debug' | 'trace';
  /** Each node's rack (default: a rack of its own, `rack-<name>`). */
  readonly rackOf?: (name: string) => string;
  /** Run the built package (`dist/`, after `npm run build`) instead of the sources through tsx: lighter processes. */
  readonly built?: boolean;
  /** Node.js flags of every node process (e.g. `--max-old-space-size=96`). */
  readonly nodeFlags?: readonly string[];
  /**
   * The `failureDetector` section of each node's config (default none: `session-only`); a function
   * of the node's name when nodes differ (each its own endpoint port, say).
   */
  readonly failureDetector?: Record<string, unknown> | ((name: string) => Record<string, unknown>);
  /** Each node's `sink` config instead of a JSON-lines file (then `ingested()` reads nothing). */
  readonly sinkOf?: (name: string) => unknown;
  /** A node's MetaStore contact points instead of `cassandraContactPoints` (a proxy in front of Cassandra, say). */
  readonly cassandraOf?: (name: string) => readonly string[] | undefined;
}

export interface NodeProcess {
  readonly name: string;
  readonly child: ChildProcess;
  readonly url: string;
  /** Resolves with the exit code (or signal) once the process ended. */
  readonly exited: Promise<number | NodeJS.Signals | null>;
  alive: boolean;
}

export interface SinkLine {
  readonly dataset: string;
  readonly shard: number;
  readonly offset: number;
  readonly key: string;
  readonly value: unknown;
}

export class ProcessCluster {
  private readonly procs = new Map<string, NodeProcess>();
  /** Processes spawned and not ready yet (nor exited). */
  private readonly starting = new Set<ChildProcess>();
  private readonly logs: WriteStream[] = [];

  constructor(readonly options: ProcessClusterOptions) {
    // A test run that dies without its afterAll must not leave node processes behind.
    process.once('exit', () => {
      for (const p of this.live()) p.child.kill('SIGKILL');
    });
  }

  configPath(name: string): string {
    return join(this.options.dir, `${name}.json`);
  }

  /** The node's log, every incarnation's (stdout and stderr), appended. */
  logPath(name: string): string {
    return join(this.options.dir, `${name}.log`);
  }

  sinkPath(name: string): string {
    return join(this.options.dir, `${name}.jsonl`);
  }

  private async writeConfig(name: string): Promise<void> {
    const o = this.options;
    const config = {
      node: name,
      cluster: o.cluster,
      rack: o.rackOf?.(name) ?? `rack-${name}`,
      kafka: {
        brokers: o.kafkaBrokers,
        sessionTimeoutMs: o.sessionTimeoutMs,
        ...(o.heartbeatIntervalMs ? { heartbeatIntervalMs: o.heartbeatIntervalMs } : {}),
        ...(o.kafkaClient ? { client: o.kafkaClient } : {}),
        ...(o.topicReplicationFactor ? { topicReplicationFactor: o.topicReplicationFactor } : {}),
      },
      cassandra: {
        contactPoints: o.cassandraOf?.(name) ?? o.cassandraContactPoints,
        localDataCenter: o.cassandraLocalDataCenter,
        keyspace: o.keyspace,
        connectTimeoutMs: 30_000,
      },
      runtime: o.runtime ?? {},
      ...(o.failureDetector ? { failureDetector: typeof o.failureDetector === 'function' ? o.failureDetector(name) : o.failureDetector } : {}),
      datasets: o.datasets ?? [],
      ...(o.serve ? { serve: o.serve } : {}),
      sink: o.sinkOf?.(name) ?? { type: 'jsonl', path: this.sinkPath(name) },
      status: { host: '127.0.0.1', port: 0 },
      logLevel: o.logLevel ?? 'info',
    };
    await writeFile(this.configPath(name), JSON.stringify(config, null, 2));
  }

  /** Spawns a node (a new incarnation if the name ran before) and waits until its status endpoint is up. */
  async start(name: string, readyTimeoutMs = 60_000): Promise<NodeProcess> {
    const previous = this.procs.get(name);
    if (previous?.alive) throw new Error(`${name} is already running`);
    await mkdir(this.options.dir, { recursive: true });
    await this.writeConfig(name);
    const entry = this.options.built ? [BUILT_MAIN] : ['--import', 'tsx', MAIN];
    const child = spawn(process.execPath, [...(this.options.nodeFlags ?? []), ...entry, 'node', '--config', this.configPath(name)], {
      cwd: REPO,
      stdio: ['ignore', 'pipe', 'pipe'],
      // Generated API tokens go to the test's folder, not the user's home.
      env: { ...process.env, FORCE_COLOR: '0', SHARDHERD_TOKEN_DIR: this.options.dir, SHARDHERD_TOKEN: '' },
    });
    const log = createWriteStream(this.logPath(name), { flags: 'a' });
    this.logs.push(log);
    child.stderr?.pipe(log, { end: false });
    // The last lines a node wrote before it failed to start: the reason, in the test's own failure.
    const lastLines: string[] = [];
    const keep = (line: string) => {
      lastLines.push(line.length > 600 ? `${line.slice(0, 600)}…` : line);
      if (lastLines.length > 8) lastLines.shift();
    };
    if (child.stderr) createInterface({ input: child.stderr }).on('line', keep);
    const exited = new Promise<number | NodeJS.Signals | null>((done) => child.once('exit', (code, signal) => done(signal ?? code)));
    // Known from its spawn, not from its readiness: a node still starting when another failed (or
    // one that never got ready) must not outlive the test (`stopAll`).
    this.starting.add(child);
    void exited.then(() => this.starting.delete(child));
    const url = await new Promise<string>((ok, fail) => {
      const timer = setTimeout(() => {
        child.kill('SIGKILL');
        fail(new Error(`${name} did not report its status URL within ${readyTimeoutMs} ms (see ${name}.log); its last lines:\n${lastLines.join('\n')}`));
      }, readyTimeoutMs);
      void exited.then((how) => {
        clearTimeout(timer);
        fail(new Error(`${name} exited (${String(how)}) before it was ready (see ${name}.log); its last lines:\n${lastLines.join('\n')}`));
      });
      createInterface({ input: child.stdout! }).on('line', (line) => {
        log.write(`${line}\n`);
        keep(line);
        if (!line.includes('"node.status"')) return;
        const parsed = JSON.parse(line) as { url?: string };
        if (parsed.url) {
          clearTimeout(timer);
          ok(parsed.url);
        }
      });
    });
    const proc: NodeProcess = { name, child, url, exited, alive: true };
    void exited.then(() => (proc.alive = false));
    this.starting.delete(child);
    this.procs.set(name, proc);
    return proc;
  }

  get(name: string): NodeProcess {
    const p = this.procs.get(name);
    if (!p) throw new Error(`no node ${name}`);
    return p;
  }

  /** The processes still running (a SIGSTOPped one counts: it is alive, only frozen). */
  live(): NodeProcess[] {
    return [...this.procs.values()].filter((p) => p.alive);
  }

  signal(name: string, signal: NodeJS.Signals): void {
    this.get(name).child.kill(signal);
  }

  /** SIGKILL, and waits until the OS reaped the process. */
  async kill(name: string): Promise<void> {
    const p = this.get(name);
    p.child.kill('SIGKILL');
    await p.exited;
  }

  /** The bearer token a node generated for its mutating routes (read from its token file). */
  token(name: string): string {
    const token = readTokenFile(Number(new URL(this.get(name).url).port), { SHARDHERD_TOKEN_DIR: this.options.dir });
    if (!token) throw new Error(`${name} wrote no token file in ${this.options.dir}`);
    return token;
  }

  /** `/status` of a node, or undefined if it does not answer within `timeoutMs` (dead, frozen or busy). */
  async status(name: string, timeoutMs = 2_000): Promise<NodeStatus | undefined> {
    const p = this.procs.get(name);
    if (!p?.alive) return undefined;
    try {
      const res = await fetch(`${p.url}/status`, { signal: AbortSignal.timeout(timeoutMs) });
      return res.ok ? ((await res.json()) as NodeStatus) : undefined;
    } catch {
      return undefined;
    }
  }

  /** A dataset as a node's API shows it (the node's own copy of the map, as new as the singleton's). */
  async datasetView(name: string, dataset: string, timeoutMs = 2_000): Promise<DatasetView | undefined> {
    const p = this.procs.get(name);
    if (!p?.alive) return undefined;
    try {
      const res = await fetch(`${p.url}/api/v1/datasets/${dataset}`, { signal: AbortSignal.timeout(timeoutMs) });
      return res.ok ? ((await res.json()) as DatasetView) : undefined;
    } catch {
      return undefined;
    }
  }

  /** Every ingested record of every node, from their JSON-lines sinks. */
  async ingested(): Promise<SinkLine[]> {
    const lines: SinkLine[] = [];
    for (const name of this.procs.keys()) {
      const text = await readFile(this.sinkPath(name), 'utf8').catch(() => '');
      for (const line of text.split('\n')) if (line !== '') lines.push(JSON.parse(line) as SinkLine);
    }
    return lines;
  }

  /** SIGTERM to every live process (SIGCONT first, in case one is frozen), SIGKILL after `graceMs`. */
  async stopAll(graceMs = 15_000): Promise<void> {
    // Nodes still starting are not ready to stop gracefully: they are killed.
    for (const child of this.starting) child.kill('SIGKILL');
    await Promise.all(
      this.live().map(async (p) => {
        p.child.kill('SIGCONT');
        p.child.kill('SIGTERM');
        const timer = setTimeout(() => p.child.kill('SIGKILL'), graceMs);
        await p.exited;
        clearTimeout(timer);
      }),
    );
    for (const log of this.logs) log.end();
  }
}

/** What `converged` found: the singleton's status and, if not converged, why not. */
export interface Convergence {
  readonly ok: boolean;
  readonly why: string;
  readonly singleton?: { readonly name: string; readonly status: NodeStatus };
  readonly statuses: ReadonlyMap<string, NodeStatus>;
}

/**
 * True when exactly one live member hosts the singleton, its map of `dataset` has every shard
 * Active on a live member, and every shard runs Active on exactly one live node — the one the map
 * names — and nowhere else.
 */
export async function converged(cluster: ProcessCluster, dataset: string, numShards: number): Promise<Convergence> {
  const statuses = new Map<string, NodeStatus>();
  for (const p of cluster.live()) {
    const s = await cluster.status(p.name);
    if (s) statuses.set(p.name, s);
  }
  const members = [...statuses.entries()].filter(([, s]) => s.member && s.state === 'running');
  // Who is not counted, and why: a failure names them, so a run that does not converge says what each node showed.
  const uncounted = cluster.live().flatMap((p) => {
    const st = statuses.get(p.name);
    if (!st) return [`${p.name}: no /status answer`];
    return st.member && st.state === 'running'
      ? []
      : [`${p.name}: ${st.state}${st.member ? '' : ', not a member'}, running ${st.running.map((r) => r.shard).join(',') || 'nothing'}`];
  });
  const fail = (why: string): Convergence => ({ ok: false, why: uncounted.length > 0 ? `${why}; not counted: ${uncounted.join('; ')}` : why, statuses });
  const singletons = members.filter(([, s]) => s.singleton !== undefined);
  if (singletons.length !== 1) return fail(`${singletons.length} singletons among ${members.map(([n]) => n).join(', ')}`);
  const [name, status] = singletons[0]!;
  const map = await cluster.datasetView(name, dataset);
  if (!map) return fail(`the singleton's node ${name} shows no map of ${dataset}`);
  const live = new Set(members.map(([, s]) => s.node));
  for (let shard = 0; shard < numShards; shard++) {
    const owners = members.filter(([, s]) => s.running.some((r) => r.dataset === dataset && r.shard === shard));
    if (owners.length !== 1) {
      // What each member said it runs, and its counts (the list is capped; the counts are not).
      const said = members
        .map(
          ([n, st]) =>
            `${n} runs ${runningOf(st, dataset)} ${JSON.stringify(st.runningCounts[dataset] ?? {})} answer ${JSON.stringify(st.runningAnswer)}${st.stalled ? ` stalled ${JSON.stringify(st.stalled)}` : ''}`,
        )
        .join('; ');
      return fail(`shard ${shard} runs on ${owners.length} nodes (${owners.map(([n]) => n).join(', ')}); ${said}`);
    }
    const [owner, ownerStatus] = owners[0]!;
    const running = ownerStatus.running.find((r) => r.dataset === dataset && r.shard === shard)!;
    if (running.status.type !== 'Active') return fail(`shard ${shard} is ${running.status.type} on ${owner}`);
    const assigned = map.shards[shard]?.owners ?? [];
    if (assigned.length !== 1 || assigned[0]!.node !== owner || assigned[0]!.status !== 'Active' || !live.has(assigned[0]!.node)) {
      return fail(`shard ${shard}: the map says ${JSON.stringify(assigned)}, it runs on ${owner}`);
    }
  }
  return { ok: true, why: '', singleton: { name, status }, statuses };
}

const runningOf = (st: NodeStatus, dataset: string): string =>
  st.running
    .filter((r) => r.dataset === dataset)
    .map((r) => r.shard)
    .join(',') || 'nothing';

/** Copies per status of `dataset` in `name`'s map, from its `/status`; undefined before it has one. */
export async function copiesOn(cluster: ProcessCluster, name: string, dataset: string): Promise<Record<string, number> | undefined> {
  const st = await cluster.status(name, 10_000);
  return st?.maps.find((m) => m.dataset === dataset)?.copies;
}

/** True once every live node's map of `dataset` shows exactly `copies` copies, all Active. */
export async function everyCopyActive(cluster: ProcessCluster, dataset: string, copies: number): Promise<boolean> {
  for (const p of cluster.live()) {
    const c = await copiesOn(cluster, p.name, dataset);
    const total = c ? Object.values(c).reduce((a, b) => a + b, 0) : 0;
    if (!c || total !== copies || c.Active !== copies) return false;
  }
  return true;
}

/** Polls `converged` until it holds or `timeoutMs` passes; throws with the last reason. */
export async function waitConverged(cluster: ProcessCluster, dataset: string, numShards: number, timeoutMs = 60_000): Promise<Convergence> {
  const deadline = Date.now() + timeoutMs;
  let last: Convergence | undefined;
  while (Date.now() < deadline) {
    last = await converged(cluster, dataset, numShards);
    if (last.ok) return last;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`not converged within ${timeoutMs} ms: ${last?.why ?? 'no status'}`);
}
