// The one-writer check on real processes, shared by test/integration/one-writer.test.ts (a short
// fixed schedule) and bench/one-writer.bench.ts (a long random one): `shardherd node` processes in
// `heartbeat` mode on real Kafka and Cassandra, an RF 1 dataset fed by a producer of numbered
// records, every node's sink calls recorded (`{"type":"recorded"}`), a TCP proxy in front of each
// node's detector endpoint (the node advertises the proxy) and one in front of each node's
// Cassandra; faults on those, on the sink and on the processes; at the end the history checker
// (./history-checker.ts) over what the nodes recorded and what the producer had acknowledged. The
// schedules of faults are in ./one-writer-schedules.ts.
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Kafka, logLevel, type Producer } from 'kafkajs';
import { CHAOS_RUNTIME, createTopics } from './chaos-run.js';
import { departures, evictionsOfLive, type Departures } from './failover-run.js';
import { checkHistory, formatReport, readHistories, type HistoryReport } from './history-checker.js';
import { NumberedProducer } from './numbered-producer.js';
import { ProcessCluster, waitConverged, type ProcessClusterOptions } from './process-cluster.js';
import { TcpProxy } from './tcp-proxy.js';
import { freePort } from './free-port.js';

export const DATASET = 'metrics';
export const NUM_SHARDS = 8;
/** Short, so that the slow-call hook's call fails the shard within the schedule. */
export const SINK_TIMEOUT_MS = 3_000;
/**
 * The slow call: past `SINK_TIMEOUT_MS`, so the shard fails, and within the second `SINK_TIMEOUT_MS`
 * its node waits for a timed-out call to end before it reports the failure (and the shard moves).
 */
export const SLOW_CALL_MS = 4_500;
/** The added latency of a slow detector link, each way. */
export const SLOW_LINK_MS = 300;

export interface OneWriterOptions {
  readonly base: Pick<ProcessClusterOptions, 'dir' | 'cluster' | 'kafkaBrokers' | 'cassandraContactPoints' | 'cassandraLocalDataCenter' | 'keyspace'>;
  /** Every node that may run; the first `initial` start at once, the others join later. */
  readonly nodes: readonly string[];
  readonly initial: number;
  /** Run the built package (lighter processes; needs `npm run build`). */
  readonly built?: boolean;
  /**
   * What the recorder wraps: `jsonl` (default) fences only its own process's writes, so a write of
   * two nodes at once lands and shows as such; `cassandra` fences across processes, so it refuses
   * the late one (the checker counts accepted writes only).
   */
  readonly sink?: 'jsonl' | 'cassandra';
  readonly log?: (line: string) => void;
}

/** A fault as it happened, for the report: wall-clock ms, as the history's times. */
export interface FaultEvent {
  readonly at: number;
  readonly what: string;
}

export interface OneWriterResult {
  readonly report: HistoryReport;
  /**
   * The detector's evictions (`detector.evicted` in the nodes' logs): all of them, and the false
   * ones: of an incarnation still running that no fault of the schedule explains (it was not
   * stopped by a SIGSTOP within the `EXPLAINED_AFTER_MS` before, nor killed or stopped since its
   * last start: a dead incarnation's eviction is right).
   */
  readonly evictions: { readonly total: number; readonly false: readonly Departures['evicted'][number][] };
  /** Why the cluster did not converge at the end, if it did not. */
  readonly notConverged?: string;
  readonly timeline: readonly FaultEvent[];
  /** The report, the convergence and the faults, as text for an assertion message or a benchmark's notes. */
  readonly text: string;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A SIGSTOP that ended this long before an eviction, or later, explains it (its silence, and the singleton's time to judge it). */
const EXPLAINED_AFTER_MS = 5_000;
const iso = (ms: number) => new Date(ms).toISOString().slice(11, 23);

/** The sending node of a detector frame (`"from":{"node":...}`): the proxy's tag of a connection. */
const senderOf = (firstBytes: string): string | undefined => /"from":\{[^}]*"node":"([^"]+)"/.exec(firstBytes)?.[1];

export class OneWriterRun {
  readonly timeline: FaultEvent[] = [];
  /** Stops of node processes (SIGSTOP to SIGCONT), on the histories' clock: for the checker. */
  private readonly pauses: { readonly node: string; readonly from: number; to: number }[] = [];
  /** SIGKILLs and graceful stops, on the same clock: the incarnation that ran then is gone. */
  private readonly ends: { readonly node: string; readonly at: number }[] = [];
  private readonly background = new Set<Promise<unknown>>();
  /** Nodes under a slow link or a pause now: a second one of the same kind would end the first early. */
  private readonly slowed = new Set<string>();
  private readonly paused = new Set<string>();

  private constructor(
    readonly options: OneWriterOptions,
    readonly cluster: ProcessCluster,
    readonly producer: Producer,
    readonly numbered: NumberedProducer,
    /** In front of each node's detector endpoint; the node advertises it. */
    readonly detectorProxies: ReadonlyMap<string, TcpProxy>,
    /** In front of Cassandra, one per node (its MetaStore, and its sink's client when that is `cassandra`). */
    readonly cassandraProxies: ReadonlyMap<string, TcpProxy>,
  ) {}

  static async start(o: OneWriterOptions): Promise<OneWriterRun> {
    const log = o.log ?? (() => undefined);
    const topic = `${o.base.cluster}.${DATASET}`;
    const kafka = new Kafka({ clientId: 'one-writer', brokers: [...o.base.kafkaBrokers], logLevel: logLevel.NOTHING });
    await createTopics(kafka, [topic], NUM_SHARDS);
    const detectorProxies = new Map<string, TcpProxy>();
    const cassandraProxies = new Map<string, TcpProxy>();
    const ports = new Map<string, number>();
    for (const n of o.nodes) {
      const port = await freePort();
      ports.set(n, port);
      detectorProxies.set(n, await TcpProxy.start(`127.0.0.1:${port}`, { tagOf: senderOf }));
      cassandraProxies.set(n, await TcpProxy.start(o.base.cassandraContactPoints[0]!));
    }
    const dir = o.base.dir;
    const cluster = new ProcessCluster({
      ...o.base,
      // The node config's default session: every departure the detector does not make waits this long.
      sessionTimeoutMs: 10_000,
      runtime: { ...CHAOS_RUNTIME, sinkTimeoutMs: SINK_TIMEOUT_MS },
      // The detector's default timings; each node on a port of its own, behind its proxy.
      failureDetector: (n) => ({ mode: 'heartbeat', port: ports.get(n)!, advertisedPort: detectorProxies.get(n)!.port }),
      datasets: [{ ref: DATASET, numShards: NUM_SHARDS, minNumNodes: 2, source: { type: 'kafka', topic } }],
      cassandraOf: (n) => [cassandraProxies.get(n)!.address],
      sinkOf: (n) => ({
        type: 'recorded',
        history: historyPath(dir, n),
        sink:
          o.sink === 'cassandra' ? { type: 'cassandra', contactPoints: [cassandraProxies.get(n)!.address] } : { type: 'jsonl', path: join(dir, `${n}.jsonl`) },
        slowCall: { triggerPath: slowCallPath(dir, n), delayMs: SLOW_CALL_MS },
      }),
      ...(o.built ? { built: true } : {}),
    });
    const producer = kafka.producer({ allowAutoTopicCreation: false });
    await producer.connect();
    const numbered = new NumberedProducer(producer, topic, NUM_SHARDS);
    const run = new OneWriterRun(o, cluster, producer, numbered, detectorProxies, cassandraProxies);
    log(`starting ${o.nodes.slice(0, o.initial).join(', ')}`);
    try {
      await Promise.all(o.nodes.slice(0, o.initial).map((n) => cluster.start(n, 120_000)));
      await waitConverged(cluster, DATASET, NUM_SHARDS, 120_000);
    } catch (e) {
      // Nothing of a run that did not start may outlive it.
      await run.stop();
      throw e;
    }
    numbered.start();
    log('converged; producing');
    return run;
  }

  private note(what: string): void {
    this.timeline.push({ at: Date.now(), what });
    this.options.log?.(what);
  }

  /** Runs `fault` without waiting for it; `finish` waits for every one still running. */
  inBackground(fault: Promise<unknown>): void {
    const p = fault.catch((e: unknown) => this.note(`a fault failed: ${e instanceof Error ? e.message : String(e)}`));
    this.background.add(p);
    void p.finally(() => this.background.delete(p));
  }

  /** Waits for the faults running in the background (restarts planned included). */
  async settleFaults(): Promise<void> {
    while (this.background.size > 0) await Promise.all([...this.background]);
  }

  /** The live node hosting the singleton (undefined if none answers as one), the members that run shards (`writers`), those of them that do not host the singleton (`owners`). */
  async roles(): Promise<{ singleton: string | undefined; owners: string[]; writers: string[]; members: string[] }> {
    const statuses = await Promise.all(this.cluster.live().map(async (p) => [p.name, await this.cluster.status(p.name, 2_000)] as const));
    const members = statuses.filter(([, s]) => s?.member && s.state === 'running');
    const singletons = members.filter(([, s]) => s?.singleton !== undefined).map(([n]) => n);
    const singleton = singletons.length === 1 ? singletons[0] : undefined;
    const writers = members.filter(([, s]) => s!.running.some((r) => r.dataset === DATASET)).map(([n]) => n);
    return { singleton, owners: writers.filter((n) => n !== singleton), writers, members: members.map(([n]) => n) };
  }

  /**
   * `roles()` once `ok` holds of them, asked again every 500 ms for up to `timeoutMs` (a node busy
   * with a fault may answer `/status` late); throws naming `what` if it never does, so a schedule
   * never skips a fault silently.
   */
  async rolesWhen(
    ok: (r: Awaited<ReturnType<OneWriterRun['roles']>>) => boolean,
    what: string,
    timeoutMs = 20_000,
  ): Promise<Awaited<ReturnType<OneWriterRun['roles']>>> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const r = await this.roles();
      if (ok(r)) return r;
      if (Date.now() > deadline) throw new Error(`no ${what} answered within ${timeoutMs} ms (members: ${r.members.join(', ') || 'none'})`);
      await sleep(500);
    }
  }

  // ---------------------------------------------------------------- faults

  /** Adds `ms` each way to every detector connection of `node`: to its endpoint, and from it to the others'. */
  async slowDetectorLink(node: string, ms: number, forMs: number): Promise<void> {
    if (this.slowed.has(node)) return;
    this.slowed.add(node);
    this.note(`detector link of ${node}: +${ms} ms each way for ${forMs} ms`);
    const own = this.detectorProxies.get(node)!;
    own.delayMs = ms;
    for (const [n, p] of this.detectorProxies) if (n !== node) p.delayFor(node, ms);
    await sleep(forMs);
    own.delayMs = 0;
    for (const [n, p] of this.detectorProxies) if (n !== node) p.delayFor(node, 0);
    this.slowed.delete(node);
    this.note(`detector link of ${node}: latency removed`);
  }

  /** `node`'s next sink call waits `SLOW_CALL_MS` (past `sinkTimeoutMs`) before it writes. */
  async slowSinkCall(node: string): Promise<void> {
    this.note(`slow sink call on ${node}: the next call waits ${SLOW_CALL_MS} ms (sinkTimeoutMs ${SINK_TIMEOUT_MS})`);
    await writeFile(slowCallPath(this.options.base.dir, node), '');
  }

  /** Resets every open connection to `node`'s detector endpoint, `times` times, `everyMs` apart. */
  async resetDetector(node: string, times: number, everyMs: number): Promise<void> {
    this.note(`connection resets on ${node}'s detector endpoint: ${times} × every ${everyMs} ms`);
    for (let i = 0; i < times; i++) {
      if (i > 0) await sleep(everyMs);
      this.detectorProxies.get(node)!.reset();
    }
  }

  /** Nothing passes between `node` and Cassandra for `forMs`, then what waited is delivered. */
  async blackholeCassandra(node: string, forMs: number): Promise<void> {
    this.note(`${node}'s Cassandra path blackholed for ${forMs} ms`);
    const p = this.cassandraProxies.get(node)!;
    p.hold();
    await sleep(forMs);
    p.release();
    this.note(`${node}'s Cassandra path back`);
  }

  /** Starts `node` (a join, or a restart as a new incarnation). */
  async join(node: string): Promise<void> {
    this.note(`${node} starts`);
    await this.cluster.start(node, 120_000);
    this.note(`${node} is up`);
  }

  async pause(node: string, ms: number): Promise<void> {
    if (this.paused.has(node)) return;
    this.paused.add(node);
    this.note(`SIGSTOP ${node} for ${ms} ms`);
    const window = { node, from: performance.timeOrigin + performance.now(), to: Infinity };
    this.pauses.push(window);
    this.cluster.signal(node, 'SIGSTOP');
    await sleep(ms);
    this.paused.delete(node);
    window.to = performance.timeOrigin + performance.now();
    if (!this.cluster.get(node).alive) return;
    this.cluster.signal(node, 'SIGCONT');
    this.note(`SIGCONT ${node}`);
  }

  async kill(node: string): Promise<void> {
    this.note(`SIGKILL ${node}`);
    this.ends.push({ node, at: performance.timeOrigin + performance.now() });
    await this.cluster.kill(node);
  }

  /** SIGTERM: a graceful stop (it leaves the group, giving its shards up). */
  async stopGracefully(node: string): Promise<void> {
    this.note(`SIGTERM ${node}`);
    this.ends.push({ node, at: performance.timeOrigin + performance.now() });
    const p = this.cluster.get(node);
    p.child.kill('SIGTERM');
    await p.exited;
  }

  // ---------------------------------------------------------------- the end

  /**
   * Ends the faults (waits for those in the background, every process running again), waits for the
   * cluster to converge, stops the producer, waits up to `recordsMs` for every acknowledged record to
   * be in an accepted call, and checks the history.
   */
  async finish(convergeMs = 90_000, recordsMs = 60_000): Promise<OneWriterResult> {
    await this.settleFaults();
    for (const p of this.cluster.live()) p.child.kill('SIGCONT');
    for (const p of this.detectorProxies.values()) p.release();
    for (const p of this.cassandraProxies.values()) p.release();
    let notConverged: string | undefined;
    try {
      await waitConverged(this.cluster, DATASET, NUM_SHARDS, convergeMs);
    } catch (e) {
      notConverged = e instanceof Error ? e.message : String(e);
    }
    await this.numbered.stop();
    const acked = this.numbered.ackedAt.map((a) => ({ dataset: DATASET, shard: a.partition, offset: a.offset }));
    const paths = this.options.nodes.map((n) => historyPath(this.options.base.dir, n));
    const deadline = Date.now() + recordsMs;
    let report: HistoryReport;
    for (;;) {
      const { calls, malformedLines } = await readHistories(paths);
      report = checkHistory({ calls, rf1Datasets: new Set([DATASET]), acked, malformedLines, paused: this.pauses });
      if (report.lost.length === 0 || Date.now() > deadline) break;
      await sleep(500);
    }
    const evictions = await this.evictions();
    const text = [
      formatReport(report),
      `evictions: ${evictions.total}, false: ${evictions.false.length}${evictions.false.map((e) => `; ${e.member}@${e.incarnation} at ${iso(e.time)}`).join('')}`,
      `converged at the end: ${notConverged === undefined ? 'yes' : `no: ${notConverged}`}`,
      `producer: ${this.numbered.acked.size} records acknowledged (${this.numbered.ackedWithoutOffset} without an offset, not checked), ${this.numbered.failedSends} sends retried`,
      'faults (UTC):',
      ...this.timeline.map((e) => `  ${iso(e.at)} ${e.what}`),
    ].join('\n');
    return { report, evictions, ...(notConverged === undefined ? {} : { notConverged }), timeline: this.timeline, text };
  }

  /** The detector's evictions, and those no fault of the schedule explains (see `OneWriterResult.evictions`). */
  private async evictions(): Promise<OneWriterResult['evictions']> {
    const d = await departures(this.cluster, this.options.nodes);
    const explained = (e: Departures['evicted'][number]) =>
      this.pauses.some((p) => p.node === e.member && p.from <= e.time && p.to >= e.time - EXPLAINED_AFTER_MS) ||
      // Killed or stopped after this incarnation's start: the eviction is of a dead incarnation.
      this.ends.some((k) => k.node === e.member && k.at <= e.time && !this.startedBetween(e.member, k.at, e.time));
    return { total: d.evicted.length, false: evictionsOfLive(d).filter((e) => !explained(e)) };
  }

  private startedBetween(node: string, from: number, to: number): boolean {
    return this.timeline.some((t) => t.what === `${node} is up` && t.at > from && t.at < to);
  }

  /** Stops the producer, the nodes and the proxies. */
  async stop(): Promise<void> {
    await this.numbered.stop().catch(() => undefined);
    await this.producer.disconnect().catch(() => undefined);
    await this.cluster.stopAll();
    await this.closeProxies();
  }

  async closeProxies(): Promise<void> {
    for (const p of [...this.detectorProxies.values(), ...this.cassandraProxies.values()]) await p.close().catch(() => undefined);
  }
}

export const historyPath = (dir: string, node: string) => join(dir, `${node}.history.jsonl`);
const slowCallPath = (dir: string, node: string) => join(dir, `${node}.slow-call`);
