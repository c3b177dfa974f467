// The simulated world: the cluster's nodes in racks over in-memory adapters (MetaStore, bus, sink,
// synthetic sources), a simulated clock, and, with `detector`, the detector's network on drifting
// clocks and the real world's faults. The world's adapters carry the instruments that watch them as
// they run (I11, I13 and I16 are judged at the call, and every sink call is recorded for I15).
import { pino } from 'pino';
import { SimulatedClock } from '../cluster/clock.js';
import type { BusFault, MemoryChunk } from '../cluster/memory-bus.js';
import type { DatasetRef } from '../core/ids.js';
import type { ShardMapSnapshot } from '../core/shard-map-snapshot.js';
import type { NodeOperations } from '../core/shard-manager/protocol.js';
import type { ShardherdNode } from '../actors/node-process.js';
import { ShardEventSubscriber } from '../client/shard-event-subscriber.js';
import { EmbeddedCluster } from '../embedded/embedded-cluster.js';
import { CountingSink } from '../ingest/counting-sink.js';
import { MemoryMetaStore } from '../store/memory-meta-store.js';
import { SimDriver, SimulationStuck } from './driver.js';
import { SeededRandom } from './random.js';
import { DetectorWorld } from './detector-world.js';
import { LateWrites, TokenOrderCheck } from './late-writes.js';
import { failureDetectorSettings, singletonLeaseWaitMs, singletonRenewalMs } from '../cluster/failure-detector/settings.js';
import { RealWorld } from './real-world.js';
import { topicsFor } from '../protocol/wire.js';
import { ReportChecker, type ReportEvent } from './report-checker.js';
import { SinkFaults } from './sink-faults.js';
import { LinkResets } from './link-resets.js';
import { SinkCallLog } from './sink-calls.js';
import type { SimulationOptions } from './report.js';
import { RunRecord } from './run-record.js';

/** FiloDB's datasets (single owner, never rebalanced) and a replicated balanced one. */
export const FILODB_DATASETS = [
  { ref: 'alpha', numShards: 8, minNumNodes: 2 },
  { ref: 'beta', numShards: 4, minNumNodes: 2 },
] as const;
/**
 * A lost node's copies of `gamma` are kept for it 3 s (a few steps, so that nodes come back within it
 * and others do not); the settle window is the default's.
 */
const REPLACEMENT_DELAY_MS = 3_000;
const SETTLE_MS = 1_000;
/**
 * Kept copies are gone (re-created elsewhere) within the delay plus this: the settle window, a
 * step (departures are seen once a step), a singleton paused 2.5 s, MetaStore writes retried.
 */
export const KEPT_BOUND_MS = SETTLE_MS + 1_000 + 2_500 + 1_500;
const REPORT_RESEND_MS = 500;
export const BALANCED_DATASETS = [
  { ref: 'gamma', numShards: 8, minNumNodes: 1, replicationFactor: 2, strategy: 'balanced', maxConcurrentMoves: 2, replacementDelayMs: REPLACEMENT_DELAY_MS },
] as const;
export const DATASETS = [...FILODB_DATASETS, ...BALANCED_DATASETS] as const;
const RACKS = ['rackA', 'rackB', 'rackC'] as const;
export const RATE = 20; // records per second per shard
/** How long a removed copy may go on ingesting until it hears of it: two publish intervals and the longest bus delay. */
export const REMOVAL_GRACE_MS = 2_800;
export const SESSION_MS = 1_000;
/** With the failure detector: the membership is the backstop, with Kafka's least session timeout. */
const DETECTOR_SESSION_MS = 6_000;
export const COOLDOWN_MS = 5_000;

/** What the MetaStore held just before the simulation killed the singleton. */
export interface PreCrash {
  readonly maps: Map<DatasetRef, ShardMapSnapshot>;
  readonly node: string;
  readonly epoch: number;
  /** node → incarnation of the members then. */
  readonly members: ReadonlyMap<string, string>;
  /** The subscriptions the old singleton had: `subscriber dataset`. */
  readonly subscriptions: ReadonlySet<string>;
  /** Nodes being drained then: their shards may move. */
  readonly draining: ReadonlySet<string>;
}

export interface TrackedSubscriber {
  readonly sub: ShardEventSubscriber;
  readonly node: ShardherdNode;
  readonly incarnation: string;
  last: { epoch: number; version: number };
}

export class SimWorld {
  readonly seed: number;
  readonly clock = new SimulatedClock(0);
  readonly metaStore = new MemoryMetaStore();
  readonly sink = new CountingSink();
  /** dataset/shard → poisoned offset */
  readonly poison = new Map<string, number>();
  readonly record: RunRecord;
  /** With `detector`: the detector's network, clocks and invariants I10–I12. */
  readonly detector: DetectorWorld | undefined;
  /** The real world's faults (chosen per seed, with their own random sources). */
  readonly real: RealWorld;
  readonly sinkFaults: SinkFaults | undefined;
  readonly resets: LinkResets;
  /** Every sink call (I15). */
  readonly sinkCalls: SinkCallLog;
  readonly late: LateWrites;
  // I16: what each node reports, and what the singleton acknowledges, as the bus carries it.
  readonly reports: ReportChecker;
  /** node → rack (replacements join their predecessor's). */
  readonly rackOf: Map<string, string>;
  readonly cluster: EmbeddedCluster;
  readonly driver: SimDriver;
  readonly subscribers: TrackedSubscriber[] = [];
  /** Whether the bus (and the detector's network) loses, duplicates and delays messages now. */
  lossy = false;
  chunkedMessages = 0;

  constructor(options: SimulationOptions) {
    const seed = options.seed;
    this.seed = seed;
    const clock = this.clock;
    this.record = new RunRecord(seed, () => clock.now(), options.log?.child({ sim: seed }));
    const { violate, note } = this.record;
    this.reports = new ReportChecker(REPORT_RESEND_MS, (message) => violate('I16', message));
    const observedFault = this.busFaults(options.faults ?? true);
    // Without a singleton nobody evicts: after its crash, until its successor took over (a session
    // without the detector; with it, once its lease ran out, up to a renewal after its last) and recovered.
    const detectorSettings = failureDetectorSettings({ mode: 'heartbeat' });
    const singletonGoneMs = Math.max(DETECTOR_SESSION_MS, singletonLeaseWaitMs(detectorSettings) + singletonRenewalMs(detectorSettings)) + 2_000;
    const world = options.detector ? new DetectorWorld(clock, seed, detectorSettings, singletonGoneMs, DETECTOR_SESSION_MS) : undefined;
    this.detector = world;
    const sessionMs = world ? DETECTOR_SESSION_MS : SESSION_MS;
    /** Which node a detector address belongs to (every incarnation's, once seen in a view). */
    const addressBook = new Map<string, string>();
    const nodeOfAddress = (address: string): string | undefined => {
      if (!addressBook.has(address)) for (const m of cluster.membership.view().members) if (m.detector) addressBook.set(m.detector, m.node);
      return addressBook.get(address);
    };
    const sink = this.sink;
    const droppingSink = options.sinkDrops
      ? {
          accept: (...[ds, shard, records, token]: Parameters<CountingSink['accept']>) =>
            sink.accept(
              ds,
              shard,
              records.filter((r) => !options.sinkDrops!(ds.ref, shard, r.offset)),
              token,
            ),
        }
      : sink;
    // Every write the sink applies is checked for I13; an unfenced sink (testing the checker) never sees the token.
    const sharedSink = new TokenOrderCheck((message) => violate('I13', message)).wrap(droppingSink, options.unfencedSink ? () => undefined : (token) => token);
    // Late writes: some sink calls land later, and one under way when its node pauses lands after the
    // pause. Their own random source, so the fault schedule of a seed is the same as without them.
    const late: LateWrites = new LateWrites(
      clock,
      new SeededRandom(seed ^ 0x1a7e),
      (node: string): string => cluster.node(node).state,
      () => this.lossy,
    );
    this.late = late;
    // The real world's faults (chosen per seed, with their own random sources) and every sink call, recorded.
    const real = new RealWorld(seed, world !== undefined && (options.worldFaults ?? true));
    this.real = real;
    const sinkFaults: SinkFaults | undefined = real.choices.sinkFaults
      ? new SinkFaults(
          clock,
          real.sinkRng,
          real.choices.sinkTimeoutMs,
          (node: string): string => cluster.node(node).state,
          () => this.lossy,
          (what: string): void => note(what),
        )
      : undefined;
    this.sinkFaults = sinkFaults;
    const resets = new LinkResets(clock);
    this.resets = resets;
    const sinkCalls = new SinkCallLog(() => clock.now());
    this.sinkCalls = sinkCalls;
    const names = Array.from({ length: options.nodes ?? 4 }, (_, i) => `n${i + 1}`);
    this.rackOf = new Map<string, string>(names.map((name, i) => [name, RACKS[i % RACKS.length]!]));
    const cluster: EmbeddedCluster = new EmbeddedCluster({
      metrics: false,
      name: `sim-${seed}`,
      clock,
      nodes: names.map((name) => ({ name, rack: this.rackOf.get(name)! })),
      metaStore: this.metaStore,
      // With the detector every write is watched (I11): who wrote, as which incarnation, when.
      sink: world
        ? (node) => ({
            accept: (ds, shard, records, token) => {
              // I11 at the call: what the node starts while it holds its lease; when it lands is the fence's business.
              const writer = cluster.node(node);
              for (const v of world.wrote(`${node}@${writer.incarnation}`, writer.lease?.epoch, `${ds.ref}/${shard}`)) violate(v.invariant, v.message);
              // Recorded from the outside (I15), with the sink's own faults inside the record.
              const lands = late.wrap(node, sharedSink);
              const incarnation: string = writer.incarnation ?? '-';
              return sinkCalls.wrap(node, () => incarnation, sinkFaults ? sinkFaults.wrap(node, lands) : lands).accept(ds, shard, records, token);
            },
          })
        : (node) => late.wrap(node, sharedSink),
      log: options.log ?? pino({ level: 'silent' }),
      sessionTimeoutMs: sessionMs,
      ...(world
        ? {
            detector: {
              ...(real.choices.resets ? resets.networkOptions(nodeOfAddress, world.networkOptions(nodeOfAddress)) : world.networkOptions(nodeOfAddress)),
              pick: (n: number) => world.pick(n),
              clockOf: (node: string) => world.clockOf(node),
              observe: (v) => {
                for (const x of world.verdict(
                  v,
                  cluster.membership.view().members.map((m) => m.node),
                ))
                  violate(x.invariant, x.message);
              },
            },
          }
        : {}),
      heartbeatIntervalMs: 250,
      // Records of at most 1 KiB (the bus's least), so that maps, recovery answers and large reports
      // travel in chunks, each of which the faults may drop, duplicate or delay.
      bus: { faults: observedFault, maxRecordBytes: 1024, maxMessageBytes: 1024 * 1024 },
      // Asked of every record read (tens of thousands a seed): no key is built while nothing is poisoned.
      source: {
        failAt: (ds, shard, offset) =>
          this.poison.size > 0 && this.poison.get(`${ds}/${shard}`) === offset ? `poison record ${ds}/${shard}@${offset}` : undefined,
      },
      settings: {
        publishIntervalMs: 1_000,
        recoveryReplyTimeoutMs: 500,
        pollIntervalMs: 250,
        reportResendMs: REPORT_RESEND_MS,
        reassignmentCooldownMs: COOLDOWN_MS,
        settleWindowMs: SETTLE_MS,
        retryInitialMs: 50,
        retryMaxMs: 400,
        ...(world ? { failureDetector: world.settings } : {}),
        ...(real.any ? { sinkTimeoutMs: real.choices.sinkTimeoutMs } : {}),
      },
    });
    this.cluster = cluster;
    this.driver = new SimDriver(cluster);
  }

  /**
   * The bus's faults while it is lossy (drops, duplicates, delays, from a random source of its own),
   * with every report and acknowledgement it carries shown to the I16 checker on the way.
   */
  private busFaults(faultsOn: boolean): (topic: string, value: unknown, chunk?: MemoryChunk) => BusFault {
    const { clock, reports } = this;
    const busRng = new SeededRandom(this.seed ^ 0x5eed);
    const busFault = (_topic: string, _value: unknown, chunk?: MemoryChunk): BusFault => {
      if (chunk?.index === 0) this.chunkedMessages += 1;
      if (!faultsOn || !this.lossy) return { kind: 'deliver' };
      const r = busRng.int(0, 999);
      if (r < 15) return { kind: 'drop' };
      if (r < 30) return { kind: 'duplicate' };
      if (r < 60) return { kind: 'delay', ms: busRng.int(10, 800) };
      return { kind: 'deliver' };
    };
    // The cluster's topics under the default prefix, which the simulated cluster keeps.
    const topics = topicsFor('shardherd');
    return (topic: string, value: unknown, chunk?: MemoryChunk): BusFault => {
      const fault = busFault(topic, value, chunk);
      if (chunk !== undefined && chunk.index > 0) return fault;
      const m = value as { kind?: string; epoch?: number; node?: string; incarnation?: string; seq?: number; events?: ReportEvent[] };
      if (topic === topics.inbox && m.kind === 'report') reports.report(clock.now(), m.node!, m.incarnation!, m.seq!, m.events!);
      else if ((topic === topics.events || topic === topics.replies) && typeof m.epoch === 'number') {
        reports.singletonRecord(m.epoch);
        if (m.kind === 'ack' && fault.kind !== 'drop')
          reports.ack(clock.now() + (fault.kind === 'delay' ? fault.ms : 0), m.epoch, m.node!, m.incarnation!, m.seq!);
      }
      return fault;
    };
  }

  setLossy(on: boolean): void {
    this.lossy = on;
    if (this.detector) this.detector.lossy = on;
  }

  /** Starts the nodes, sets up the datasets and a first subscriber, and turns the bus lossy. */
  async start(): Promise<void> {
    const { cluster, driver } = this;
    await cluster.startNodes();
    await driver.advance(500);
    for (const d of DATASETS) {
      const reply = cluster.setupDataset({ ...d, source: { type: 'synthetic', recordsPerSecond: RATE } }, 5_000);
      await driver.advance(100);
      const r = await reply;
      if (r.type !== 'DatasetVerified') throw new Error(`simulation setup failed: ${JSON.stringify(r)}`);
    }
    this.subscribers.push(this.track(this.live()[1] ?? this.live()[0]!, 'alpha'));
    await driver.advance(1_000);
    this.setLossy(true);
  }

  live(): ShardherdNode[] {
    return this.cluster.nodes.filter((n) => n.state === 'running' && n.isMember);
  }

  crashed(): ShardherdNode[] {
    return this.cluster.nodes.filter((n) => n.state === 'crashed');
  }

  paused(): ShardherdNode[] {
    return this.cluster.nodes.filter((n) => n.state === 'paused');
  }

  keyOf(n: ShardherdNode): string {
    return `${n.node}@${n.incarnation}`;
  }

  /** The members running beside `n` (the votes on its eviction, should it die now). */
  liveOthers(n: ShardherdNode): number {
    return this.live().filter((o) => o !== n).length;
  }

  async storedMaps(): Promise<Map<DatasetRef, ShardMapSnapshot>> {
    return new Map((await this.metaStore.shardMaps()).map((m) => [m.dataset, m] as const));
  }

  operations(): Promise<NodeOperations> {
    return this.metaStore.nodeOperations();
  }

  /** node → incarnation of the current members. */
  memberIncarnations(): Map<string, string> {
    return new Map(this.cluster.membership.view().members.map((m) => [m.node as string, m.incarnation as string]));
  }

  track(node: ShardherdNode, dataset: string): TrackedSubscriber {
    const sub = new ShardEventSubscriber(node, dataset as DatasetRef);
    return { sub, node, incarnation: node.incarnation!, last: { epoch: -1, version: -1 } };
  }

  /** Waits for an answer from the cluster, letting simulated time pass if an actor is waiting on it (a delayed record). */
  async ask<T>(p: Promise<T>, what = 'a question'): Promise<T> {
    let done = false;
    let value: T | undefined;
    void p.then((v) => {
      done = true;
      value = v;
    });
    await this.driver.settle();
    for (let waited = 0; !done; waited += 50) {
      // The cluster never answering is reported as it being stuck (I14), so the seed's report, not the run, ends.
      if (waited > 10_000)
        throw new SimulationStuck(`no answer to ${what} from the cluster within 10 s of simulated time (seed ${this.seed} step ${this.record.step})`);
      await this.driver.advance(50);
    }
    return value as T;
  }
}
