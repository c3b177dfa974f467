// A deterministic whole-cluster simulation: the real nodes, actors and core over in-memory adapters,
// a simulated clock, a seeded random fault schedule (crashes, restarts, singleton crashes, also in
// the middle of a reassignment or a handoff, pauses, lost/duplicated/delayed bus records, MetaStore
// write failures, poison records, subscribers that come and go, drains, undrains, replacements, and
// drained nodes that stop), nodes in racks, a replicated `balanced` dataset beside FiloDB's, and
// docs/ARCHITECTURE.md §9's invariants I1–I9 checked after every step. With `detector`, the cluster
// runs the failure detector (§11) on a network that loses, delays and cuts (one direction at a time)
// its messages, on drifting clocks, with I10–I12 (`detector-world.ts`); and, chosen per seed, the
// faults real processes meet (`real-world.ts`: sink failures and hangs, refusals and resets from
// live processes, stalled event loops, slow joins), with every sink call recorded and I15 checked
// on them (`sink-calls.ts`). A violation names the seed and the step, so
// `npm run sim -- --seed N [--detector]` replays it.
import { pino, type Logger } from 'pino';
import { SimulatedClock } from '../cluster/clock.js';
import type { BusFault, MemoryChunk } from '../cluster/memory-bus.js';
import { DefaultShardAssignmentStrategy } from '../core/assignment-strategy.js';
import type { DatasetRef } from '../core/ids.js';
import { compareStamps, type ShardMapSnapshot } from '../core/shard-map-snapshot.js';
import { ShardMapper } from '../core/shard-mapper.js';
import type { NodeOperations } from '../core/shard-manager/protocol.js';
import { declaredCopies, isolationViolations, keptCopyViolations, mayIngest, unservedByPlannedMoves } from './placement-checks.js';
import { balanceViolation } from './balance-check.js';
import type { ShardherdNode } from '../actors/node-process.js';
import { ShardEventSubscriber } from '../client/shard-event-subscriber.js';
import { EmbeddedCluster } from '../embedded/embedded-cluster.js';
import { CountingSink } from '../ingest/counting-sink.js';
import { MemoryMetaStore } from '../store/memory-meta-store.js';
import { SimDriver, SimulationStuck } from './driver.js';
import { SeededRandom } from './random.js';
import { DetectorWorld, type DetectorInvariant } from './detector-world.js';
import { LateWrites, TokenOrderCheck } from './late-writes.js';
import { failureDetectorSettings, leaseWaitMs, singletonLeaseWaitMs, singletonRenewalMs } from '../cluster/failure-detector/settings.js';
import { RealWorld } from './real-world.js';
import { topicsFor } from '../protocol/wire.js';
import { ReportChecker, type ReportEvent } from './report-checker.js';
import { SinkFaults } from './sink-faults.js';
import { LinkResets } from './link-resets.js';
import { oneWriterViolations, SinkCallLog, type SinkCall } from './sink-calls.js';
import { HandoffWindows } from './handoffs.js';

export type Invariant = 'I1' | 'I2' | 'I3' | 'I4' | 'I5' | 'I6' | 'I7' | 'I8' | 'I9' | 'I13' | 'I14' | 'I15' | 'I16' | DetectorInvariant;

export interface Violation {
  readonly seed: number;
  readonly step: number;
  readonly time: number;
  readonly invariant: Invariant;
  readonly message: string;
}

export interface SimulationOptions {
  readonly seed: number;
  /** Default 4. */
  readonly nodes?: number;
  /** Steps with faults, then `quietSteps` without, then the final checks. Default 25. */
  readonly steps?: number;
  readonly quietSteps?: number;
  /** Simulated time per step, ms. Default 1000. */
  readonly stepMs?: number;
  /** Off: a run with no faults at all (a baseline). Default on. */
  readonly faults?: boolean;
  /**
   * A broken sink for testing the checker itself: records for which it returns false are
   * silently dropped, which the simulation must report as lost (I5).
   */
  readonly sinkDrops?: (dataset: string, shard: number, offset: number) => boolean;
  /**
   * A sink that ignores fencing tokens, for testing the checker itself: the late writes it lets
   * through must show up as I13 violations.
   */
  readonly unfencedSink?: boolean;
  /**
   * Runs the failure detector (`failureDetector.mode: 'heartbeat'`, docs/ARCHITECTURE.md §11) with
   * a Kafka-like 6 s membership session behind it, its own faults (message loss and delay, one-way
   * cuts, isolated nodes, 1 s pauses), drifting clocks and the invariants I10–I12. Default off: the
   * run is then exactly the session-only one.
   */
  readonly detector?: boolean;
  /**
   * With `detector`: the faults real processes meet, each chosen per seed from a random source of
   * its own (`real-world.ts`). Default on; off, a seed runs as it did before they existed (the
   * regression seeds found before them replay so).
   */
  readonly worldFaults?: boolean;
  /** Return every sink call of the run in the report (for looking into an I15 violation). Default off. */
  readonly keepSinkCalls?: boolean;
  readonly log?: Logger;
}

export interface SimulationReport {
  readonly seed: number;
  readonly steps: number;
  readonly simulatedMs: number;
  /** What happened, step by step (the fault schedule as it ran). */
  readonly history: readonly string[];
  readonly violations: readonly Violation[];
  /** With `keepSinkCalls`: every sink call, in the order they began. */
  readonly sinkCalls?: readonly SinkCall[];
  readonly stats: {
    readonly failovers: number;
    readonly crashes: number;
    readonly restarts: number;
    readonly pauses: number;
    readonly poisoned: number;
    readonly nodeOperations: number;
    readonly recordsIngested: number;
    /** Records ingested twice in single-copy datasets (a replicated one ingests each record once per copy). */
    readonly duplicates: number;
    readonly finalEpoch: number;
    /** Messages the bus carried in several chunks (each chunk subject to the faults). */
    readonly chunkedMessages: number;
    /** With `detector`: members the detector evicted, departures it held until the lease ran out, links it saw cut. */
    readonly evictions: number;
    readonly departures: number;
    readonly cuts: number;
    /** Sink calls under way when their node paused, landed after it resumed; and those the sink's fence refused. */
    readonly lateWrites: number;
    readonly lateWritesRefused: number;
    /** With the real world's faults: event-loop stalls, refusal/reset windows, slow joins, sink calls failed and slow, sink calls made. */
    readonly stalls: number;
    readonly resets: number;
    readonly slowJoins: number;
    readonly sinkFailures: number;
    readonly slowSinkCalls: number;
    readonly sinkCalls: number;
  };
}

/** FiloDB's datasets (single owner, never rebalanced) and a replicated balanced one. */
const FILODB_DATASETS = [
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
const KEPT_BOUND_MS = SETTLE_MS + 1_000 + 2_500 + 1_500;
const REPORT_RESEND_MS = 500;
const BALANCED_DATASETS = [
  { ref: 'gamma', numShards: 8, minNumNodes: 1, replicationFactor: 2, strategy: 'balanced', maxConcurrentMoves: 2, replacementDelayMs: REPLACEMENT_DELAY_MS },
] as const;
const DATASETS = [...FILODB_DATASETS, ...BALANCED_DATASETS] as const;
const RACKS = ['rackA', 'rackB', 'rackC'] as const;
const RATE = 20; // records per second per shard
/** How long a removed copy may go on ingesting until it hears of it: two publish intervals and the longest bus delay. */
const REMOVAL_GRACE_MS = 2_800;
const SESSION_MS = 1_000;
/** With the failure detector: the membership is the backstop, with Kafka's least session timeout. */
const DETECTOR_SESSION_MS = 6_000;
const COOLDOWN_MS = 5_000;
/** A cooldown counts as running this much past its end, for I2 (drift and the singleton's check latency). */
const COOLDOWN_END_MARGIN_MS = 500;
/** At most this many quiet steps more while the cluster still recovers (a few cooldowns, or a takeover, worth). */
const MAX_EXTRA_QUIET_STEPS = 20;

/** What the MetaStore held just before the simulation killed the singleton. */
interface PreCrash {
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

interface TrackedSubscriber {
  readonly sub: ShardEventSubscriber;
  readonly node: ShardherdNode;
  readonly incarnation: string;
  last: { epoch: number; version: number };
}

export async function runSimulation(options: SimulationOptions): Promise<SimulationReport> {
  const seed = options.seed;
  const rng = new SeededRandom(seed);
  const faultsOn = options.faults ?? true;
  const steps = options.steps ?? 25;
  const quietSteps = options.quietSteps ?? 8;
  const stepMs = options.stepMs ?? 1_000;
  const clock = new SimulatedClock(0);
  const metaStore = new MemoryMetaStore();
  const sink = new CountingSink();
  const poison = new Map<string, number>(); // dataset/shard → poisoned offset
  const busRng = new SeededRandom(seed ^ 0x5eed);
  /** Graceful restarts of the singleton's host (with the real world's faults). */
  const handoverRng = new SeededRandom(seed ^ 0x6ace);
  const busFault = (_topic: string, _value: unknown, chunk?: MemoryChunk): BusFault => {
    if (chunk?.index === 0) chunkedMessages += 1;
    if (!faultsOn || !lossy) return { kind: 'deliver' };
    const r = busRng.int(0, 999);
    if (r < 15) return { kind: 'drop' };
    if (r < 30) return { kind: 'duplicate' };
    if (r < 60) return { kind: 'delay', ms: busRng.int(10, 800) };
    return { kind: 'deliver' };
  };
  let lossy = false;
  let chunkedMessages = 0;
  // I16: what each node reports, and what the singleton acknowledges, as the bus carries it.
  const reports = new ReportChecker(REPORT_RESEND_MS, (message) => violate('I16', message));
  // The cluster's topics under the default prefix, which the simulated cluster keeps.
  const topics = topicsFor('shardherd');
  const observedFault = (topic: string, value: unknown, chunk?: MemoryChunk): BusFault => {
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
  // Without a singleton nobody evicts: after its crash, until its successor took over (a session
  // without the detector; with it, once its lease ran out, up to a renewal after its last) and recovered.
  const detectorSettings = failureDetectorSettings({ mode: 'heartbeat' });
  const singletonGoneMs = Math.max(DETECTOR_SESSION_MS, singletonLeaseWaitMs(detectorSettings) + singletonRenewalMs(detectorSettings)) + 2_000;
  const world = options.detector ? new DetectorWorld(clock, seed, detectorSettings, singletonGoneMs, DETECTOR_SESSION_MS) : undefined;
  const sessionMs = world ? DETECTOR_SESSION_MS : SESSION_MS;
  const setLossy = (on: boolean) => {
    lossy = on;
    if (world) world.lossy = on;
  };
  /** Which node a detector address belongs to (every incarnation's, once seen in a view). */
  const addressBook = new Map<string, string>();
  const nodeOfAddress = (address: string): string | undefined => {
    if (!addressBook.has(address)) for (const m of cluster.membership.view().members) if (m.detector) addressBook.set(m.detector, m.node);
    return addressBook.get(address);
  };
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
    () => lossy,
  );
  // The real world's faults (chosen per seed, with their own random sources) and every sink call, recorded.
  const real = new RealWorld(seed, world !== undefined && (options.worldFaults ?? true));
  const sinkFaults: SinkFaults | undefined = real.choices.sinkFaults
    ? new SinkFaults(
        clock,
        real.sinkRng,
        real.choices.sinkTimeoutMs,
        (node: string): string => cluster.node(node).state,
        () => lossy,
        (what: string): void => note(what),
      )
    : undefined;
  const resets = new LinkResets(clock);
  const sinkCalls = new SinkCallLog(() => clock.now());
  const names = Array.from({ length: options.nodes ?? 4 }, (_, i) => `n${i + 1}`);
  const rackOf = new Map<string, string>(names.map((name, i) => [name, RACKS[i % RACKS.length]!]));
  const cluster = new EmbeddedCluster({
    metrics: false,
    name: `sim-${seed}`,
    clock,
    nodes: names.map((name) => ({ name, rack: rackOf.get(name)! })),
    metaStore,
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
      failAt: (ds, shard, offset) => (poison.size > 0 && poison.get(`${ds}/${shard}`) === offset ? `poison record ${ds}/${shard}@${offset}` : undefined),
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
  const driver = new SimDriver(cluster);
  // Every copy the singleton declares, with until when it did (I1): seen on the way into the
  // MetaStore (maps are persisted before anyone hears of them), so a handoff that starts and ends
  // within one step counts too. A copy counts as declared until the first map without it: its
  // node's grace to hear of the removal starts then, not at the last map that still had it.
  const declared = new Map<string, number>();
  const declaredNow = new Map<DatasetRef, string[]>();
  // When each copy was placed (it has been in every map of its dataset since), for I7.
  const placedAt = new Map<string, number>();
  const putShardMap = metaStore.putShardMap.bind(metaStore);
  metaStore.putShardMap = async (snapshot) => {
    await putShardMap(snapshot);
    reports.map(clock.now(), snapshot.dataset, snapshot.epoch, snapshot.assignmentVersions ?? []);
    const map = ShardMapper.fromSnapshot(snapshot);
    const keys = declaredCopies(map).map((key) => `${snapshot.dataset}/${key}`);
    const before = declaredNow.get(snapshot.dataset) ?? [];
    for (const key of [...before, ...keys]) declared.set(key, clock.now());
    declaredNow.set(snapshot.dataset, keys);
    for (const key of keys) if (!placedAt.has(key)) placedAt.set(key, clock.now());
    checkPlannedMoves(snapshot.dataset, map);
    handoffs.noteMap(snapshot.dataset, map, clock.now());
    const kept = new Set(keys);
    for (const key of before) if (!kept.has(key)) placedAt.delete(key);
  };
  // When each node was first seen (at a persisted map) with an incarnation other than its earlier
  // one. A copy placed before that may belong to the earlier incarnation: the singleton can still
  // show it in a map written after the restart (it has not heard of it yet), and dropping it then
  // is the crash's doing, not a planned move's.
  const incarnations = new Map<string, { incarnation: string; since: number }>();
  const noteIncarnations = (members: ReadonlyMap<string, string>) => {
    for (const [node, incarnation] of members) {
      const seen = incarnations.get(node);
      if (seen?.incarnation !== incarnation) incarnations.set(node, { incarnation, since: seen ? clock.now() : -Infinity });
    }
  };
  // I7 on every persisted map, not once a step: a handoff that completes and whose new copy then
  // dies within one step is a forced loss, which only the maps in between can tell apart.
  const persisted = new Map<DatasetRef, { map: ShardMapper; members: Map<string, string> }>();
  const checkPlannedMoves = (ref: DatasetRef, now: ShardMapper) => {
    const members = new Map(cluster.membership.view().members.map((m) => [m.node as string, m.incarnation as string]));
    noteIncarnations(members);
    const last = persisted.get(ref);
    persisted.set(ref, { map: now, members });
    if (!last) return;
    const moving = (shard: number) => [last.map, now].some((m) => m.recordForShard(shard).assignments.some((a) => a.placement === 'Leaving'));
    const exempt = (shard: number) => !moving(shard) || poison.has(`${ref}/${shard}`) || sinkFaults?.faulted(ref, shard) === true;
    // (An incarnation the detector took out is gone, as a crashed one, whatever the group still says.)
    const same = (node: string, shard: number) =>
      members.get(node) !== undefined &&
      members.get(node) === last.members.get(node) &&
      incarnations.get(node)!.since < placedAt.get(`${ref}/${shard}/${node}`)! &&
      !world?.wasRemoved(`${node}@${members.get(node)}`);
    const lost = unservedByPlannedMoves(last.map, now, same, exempt);
    if (lost.length > 0) violate('I7', `${ref}: shards ${lost.join(',')} lost their last serving copy in a planned move`);
  };
  // With the detector's 6 s session a paused singleton (up to 2.5 s) keeps its role, and publishes
  // the change that removed a copy only when it runs again: the copy's node hears of it that much later.
  const removalGraceMs = REMOVAL_GRACE_MS + (world ? 2_500 : 0);
  // The RF-1 datasets' planned handoffs, for I15.
  const handoffs = new HandoffWindows(removalGraceMs);
  const declaredRecently = (dataset: string) => (shard: number, node: string) =>
    clock.now() - (declared.get(`${dataset}/${shard}/${node}`) ?? -Infinity) <= removalGraceMs;
  const history: string[] = [];
  const violations: Violation[] = [];
  const subscribers: TrackedSubscriber[] = [];
  const stats = { failovers: 0, crashes: 0, restarts: 0, pauses: 0, poisoned: 0, nodeOperations: 0 };
  let spares = 0;
  let step = 0;
  let lastEpoch = 0;
  let quietSince = 0;
  let lastMembers = '';
  /** The lease's epoch at the last step's end (a takeover since is not quiet). */
  let epochAtLastStep = 0;
  // When each node was last seen leaving the membership (I2 for copies kept for lost nodes).
  const departedAt = new Map<string, number>();
  /** Each singleton epoch → when the simulator first saw it act (at a step's checks). */
  const firstActingAt = new Map<number, number>();
  /**
   * When a lost node's replacement delay can have started: its departure, or later when the
   * singleton acting now was not yet acting then. An absence its predecessor never recorded (the
   * predecessor died first, and its successor too, seed 2061) begins at that singleton's recovery.
   */
  const delayStartOf = async (node: string): Promise<number | undefined> => {
    const departed = departedAt.get(node);
    if (departed === undefined) return undefined;
    const epoch = (await cluster.singletonNode())?.actingSingletonEpoch;
    return Math.max(departed, (epoch === undefined ? undefined : firstActingAt.get(epoch)) ?? clock.now());
  };
  let viewBefore: Set<string> | undefined;
  const violate = (invariant: Invariant, message: string) => violations.push({ seed, step, time: clock.now(), invariant, message });
  const simLog = options.log?.child({ sim: seed });
  // Each step goes into the log too (with its simulated time), so a replay's logs read in order with it.
  const note = (what: string) => {
    history.push(`step ${step} @${clock.now()}ms: ${what}`);
    simLog?.info({ step, at: clock.now() }, `sim: ${what}`);
  };

  // ---------------------------------------------------------------- helpers

  const live = () => cluster.nodes.filter((n) => n.state === 'running' && n.isMember);
  const keyOf = (n: ShardherdNode) => `${n.node}@${n.incarnation}`;
  /** The members running beside `n` (the votes on its eviction, should it die now). */
  const liveOthers = (n: ShardherdNode) => live().filter((o) => o !== n).length;
  /** The incarnation each node ran at the last check: one that changed has ended (a fenced restart, say). */
  const lastIncarnation = new Map<string, string>();
  const crashed = () => cluster.nodes.filter((n) => n.state === 'crashed');
  const paused = () => cluster.nodes.filter((n) => n.state === 'paused');
  const storedMaps = async () => new Map((await metaStore.shardMaps()).map((m) => [m.dataset, m] as const));
  const operations = (): Promise<NodeOperations> => metaStore.nodeOperations();
  const adminRequest = (build: Parameters<EmbeddedCluster['request']>[0]) =>
    ask(
      cluster.request(build, 5_000).catch((e: unknown) => ({ type: 'Failed', message: String(e) }) as const),
      'an admin request',
    );
  /** Waits for an answer from the cluster, letting simulated time pass if an actor is waiting on it (a delayed record). */
  const ask = async <T>(p: Promise<T>, what = 'a question'): Promise<T> => {
    let done = false;
    let value: T | undefined;
    void p.then((v) => {
      done = true;
      value = v;
    });
    await driver.settle();
    for (let waited = 0; !done; waited += 50) {
      // The cluster never answering is reported as it being stuck (I14), so the seed's report, not the run, ends.
      if (waited > 10_000) throw new SimulationStuck(`no answer to ${what} from the cluster within 10 s of simulated time (seed ${seed} step ${step})`);
      await driver.advance(50);
    }
    return value as T;
  };

  // ---------------------------------------------------------------- the run

  await cluster.startNodes();
  await driver.advance(500);
  for (const d of DATASETS) {
    const reply = cluster.setupDataset({ ...d, source: { type: 'synthetic', recordsPerSecond: RATE } }, 5_000);
    await driver.advance(100);
    const r = await reply;
    if (r.type !== 'DatasetVerified') throw new Error(`simulation setup failed: ${JSON.stringify(r)}`);
  }
  subscribers.push(track(live()[1] ?? live()[0]!, 'alpha'));
  await driver.advance(1_000);
  setLossy(true);
  viewBefore = new Set(cluster.membership.view().members.map((m) => m.node as string));

  function track(node: ShardherdNode, dataset: string): TrackedSubscriber {
    const sub = new ShardEventSubscriber(node, dataset as DatasetRef);
    return { sub, node, incarnation: node.incarnation!, last: { epoch: -1, version: -1 } };
  }

  try {
    // A shard that failed again on its retry waits out one more cooldown each time, and a singleton
    // that gave way at the end of the faults (its lease, a backoff, a recovery: 10 s or more) leaves
    // every lease lapsed until its successor acts: the quiet steps go on (a bounded number more)
    // until the cluster is at rest and no shard waits, so I5 judges a lost record, not a retry due
    // or a takeover under way.
    let lastStep = steps + quietSteps;
    for (step = 1; step <= lastStep; step++) {
      const faultStep = faultsOn && step <= steps;
      if (step === steps + 1) setLossy(false);
      // The detector's own faults leave less room for restarts in the schedule: before the quiet steps
      // every dead node comes back, so the cluster ends with room for every shard and I5 judges
      // ingestion, not a cluster too small to hold its shards (a drained node takes none).
      if (world && step === steps + 1) {
        for (const n of crashed()) {
          note(`restart ${n.node} (new incarnation) before the quiet steps`);
          await n.start();
          world.started(n.node);
          stats.restarts++;
        }
      }
      const noted = history.length;
      const preCrash = faultStep ? await injectFault() : undefined;
      if (faultStep && world && real.any) await worldFaults(world);
      if (history.length > noted) quietSince = step;
      await driver.advance(stepMs);
      // A member coming or going is not quiet either (a fenced node rejoining long after its fault).
      const membersNow = cluster.membership
        .view()
        .members.map((m) => `${m.node}@${m.incarnation}`)
        .join(' ');
      if (membersNow !== lastMembers) quietSince = step;
      lastMembers = membersNow;
      if (world) {
        // Nor is a singleton's takeover: with the detector a dead singleton's successor waits out its
        // lease (5 s when its process did not refuse a probe), and then recovers.
        const epochNow = (await metaStore.readLease())?.epoch ?? 0;
        // Nor a singleton that stopped by its own clock (its lease ran out during a stall) and whose
        // successor has not taken over yet: nobody places anything meanwhile.
        if (epochNow !== epochAtLastStep || (await cluster.singletonNode())?.actingSingletonEpoch !== epochNow) quietSince = step;
        epochAtLastStep = epochNow;
      }
      const viewNow = new Set(cluster.membership.view().members.map((m) => m.node as string));
      for (const node of viewBefore ?? []) if (!viewNow.has(node)) departedAt.set(node, clock.now());
      for (const node of viewNow) departedAt.delete(node);
      const acting = (await cluster.singletonNode())?.actingSingletonEpoch;
      if (acting !== undefined && !firstActingAt.has(acting)) firstActingAt.set(acting, clock.now());
      viewBefore = viewNow;
      simLog?.info({ step, at: clock.now() }, 'sim: checks');
      await checkEveryStep(preCrash);
      // With the detector's 6 s session, the group may still list a dead node (or an evicted
      // incarnation) steps after it is gone for the singleton: not at rest until it no longer does.
      const settled =
        !world ||
        cluster.membership.view().members.every((m) => {
          const n = cluster.node(m.node);
          return n.state === 'running' && n.incarnation === m.incarnation && !world.wasRemoved(`${m.node}@${m.incarnation}`);
        });
      const quiet = step - quietSince >= 3 && paused().length === 0 && settled;
      if (quiet) await checkAtRest();
      const recovering = !quiet || (await shardsWaitingForCooldown());
      if (step === lastStep && lastStep < steps + quietSteps + MAX_EXTRA_QUIET_STEPS && recovering) lastStep++;
    }
    await checkAtEnd();
  } catch (error) {
    // I14: a livelock stops the seed where it is, reported like any broken invariant (the checks
    // after it would judge a cluster stopped mid-step).
    if (!(error instanceof SimulationStuck)) throw error;
    violate('I14', error.message);
  }
  // I15, from the sink calls themselves: one writer at a time for every shard of a single-copy dataset.
  if (world) {
    const rules = {
      singleCopy: (dataset: string) => FILODB_DATASETS.some((d) => d.ref === dataset),
      stoppedDuring: (node: string, from: number, to: number) => world.stoppedDuring(node, from, to),
      sinkTimeoutMs: real.choices.sinkTimeoutMs,
      inHandoff: (dataset: string, shard: number, a: string, b: string, from: number, to: number) => handoffs.covers(dataset, shard, a, b, from, to),
    };
    for (const message of oneWriterViolations(sinkCalls.calls, rules)) violate('I15', message);
  }
  const epochNow = (await metaStore.readLease())?.epoch ?? 0;
  await cluster.stop();
  const totals = sink.total();
  return {
    seed,
    steps: step - 1,
    simulatedMs: clock.now(),
    history,
    violations,
    ...(options.keepSinkCalls ? { sinkCalls: sinkCalls.calls } : {}),
    // Replicas ingest every record once per copy: only single-copy datasets count as duplicates.
    stats: {
      ...stats,
      recordsIngested: totals.accepted,
      duplicates: FILODB_DATASETS.reduce((n, d) => n + sink.total(d.ref).duplicates, 0),
      finalEpoch: epochNow,
      chunkedMessages,
      evictions: world?.stats.evictions ?? 0,
      departures: world?.stats.departures ?? 0,
      cuts: world?.stats.cuts ?? 0,
      lateWrites: late.stats.landedAfterPause,
      lateWritesRefused: late.stats.refusedAfterPause,
      stalls: real.stats.stalls,
      resets: real.stats.resets,
      slowJoins: real.stats.slowJoins,
      sinkFailures: sinkFaults?.stats.failed ?? 0,
      slowSinkCalls: sinkFaults?.stats.slow ?? 0,
      sinkCalls: sinkCalls.calls.length,
    },
  };

  // ---------------------------------------------------------------- faults

  async function injectFault(): Promise<PreCrash | undefined> {
    const singleton = await cluster.singletonNode();
    const others = live().filter((n) => n !== singleton);
    // The detector's own faults, drawn only with it, so the session-only schedule stays as it was.
    if (world && live().length > 2 && rng.chance(0.3)) return detectorFault(singleton, world);
    const r = rng.int(0, 99);
    if (r < 10 && others.length > 1 && live().length > 2) {
      const victim = rng.pick(others);
      note(`crash ${victim.node}`);
      world?.crashed(victim.node, keyOf(victim), false, liveOthers(victim));
      victim.crash();
      stats.crashes++;
    } else if (r < 18 && singleton && live().length > 2) {
      return crashSingleton(singleton, '');
    } else if (r < 22 && singleton && others.length > 1 && live().length > 3) {
      // The singleton dies while it is moving a departed node's shards.
      const victim = rng.pick(others);
      note(`crash ${victim.node}, then the singleton ${singleton.node} in the middle of the reassignment`);
      world?.crashed(victim.node, keyOf(victim), false, liveOthers(victim));
      victim.crash();
      stats.crashes += 2;
      // Until the singleton acts on the departure: the session, or the lease with the detector.
      await driver.advance(world ? leaseWaitMs(world.settings) + world.settings.heartbeatIntervalMs : SESSION_MS);
      for (let i = rng.int(0, 30); i > 0; i--) await new Promise<void>((res) => setImmediate(res));
      world?.crashed(singleton.node, keyOf(singleton), true, liveOthers(singleton));
      singleton.crash();
    } else if (r < 40 && crashed().length > 0) {
      const node = rng.pick(crashed());
      note(`restart ${node.node} (new incarnation)`);
      await node.start();
      world?.started(node.node);
      stats.restarts++;
      slowJoin(node);
    } else if (r < 46 && live().length > 2) {
      const node = rng.pick(live());
      const ms = rng.pick([300, 2_500]);
      note(`pause ${node.node}${node === singleton ? ' (the singleton)' : ''} for ${ms} ms`);
      node.pause();
      world?.paused(node.node, ms);
      stats.pauses++;
      clock.schedule(ms, () => node.resume());
    } else if (r < 52) {
      const n = rng.int(1, 3);
      note(`the next ${n} MetaStore writes fail`);
      metaStore.failWrites(n);
    } else if (r < 56) {
      const d = rng.pick(FILODB_DATASETS);
      const shard = rng.int(0, d.numShards - 1);
      if (!poison.has(`${d.ref}/${shard}`)) {
        const offset = Math.floor((clock.now() * RATE) / 1000) + 5;
        poison.set(`${d.ref}/${shard}`, offset);
        stats.poisoned++;
        note(`poison record ${d.ref}/${shard}@${offset}`);
      }
    } else if (r < 64 && live().length > 0) {
      const node = rng.pick(live());
      const ds = rng.pick(DATASETS).ref;
      subscribers.push(track(node, ds));
      note(`subscriber on ${node.node} for ${ds}`);
    } else if (r < 68 && subscribers.length > 1) {
      const t = rng.pick(subscribers);
      t.sub.close();
      subscribers.splice(subscribers.indexOf(t), 1);
      note(`subscriber ${t.sub.id} leaves`);
    } else if (r < 78 && live().length > 2) {
      return nodeOperation(singleton, others);
    }
    return undefined;
  }

  /**
   * A fault of the detector's network or a pause it must survive: a one-way cut between two nodes,
   * a node cut off both ways from every other, the singleton cut off one way from half the others,
   * or a 1 s pause. The bus and the membership are not cut: the detector must judge on its own.
   */
  async function detectorFault(singleton: ShardherdNode | undefined, w: DetectorWorld): Promise<undefined> {
    const nodes = live();
    const kind = rng.int(0, 3);
    if (kind === 0) {
      const a = rng.pick(nodes);
      const b = rng.pick(nodes.filter((n) => n !== a));
      const ms = rng.pick([800, 2_000, 4_000]);
      note(`cut ${a.node} → ${b.node} for ${ms} ms (detector links, one way)`);
      w.cut(a.node, b.node, ms);
    } else if (kind === 1) {
      const x = rng.pick(nodes);
      const ms = rng.pick([1_500, 3_000]);
      note(`isolate ${x.node}${x === singleton ? ' (the singleton)' : ''} from every node for ${ms} ms (detector links)`);
      for (const o of cluster.nodes) {
        if (o === x) continue;
        w.cut(x.node, o.node, ms);
        w.cut(o.node, x.node, ms);
      }
    } else if (kind === 2 && singleton) {
      const targets = nodes.filter((n) => n !== singleton).filter(() => rng.chance(0.5));
      const ms = rng.pick([1_000, 2_500]);
      note(`cut the singleton ${singleton.node} → ${targets.map((t) => t.node).join(',') || 'nobody'} for ${ms} ms (detector links, one way)`);
      for (const t of targets) w.cut(singleton.node, t.node, ms);
    } else {
      const node = rng.pick(nodes);
      note(`pause ${node.node}${node === singleton ? ' (the singleton)' : ''} for 1000 ms (it must not be evicted)`);
      node.pause();
      w.paused(node.node, 1_000);
      stats.pauses++;
      clock.schedule(1_000, () => node.resume());
    }
    return undefined;
  }

  /**
   * This step's faults of the real world: an event loop stalled (the process runs nothing, its
   * timers fire late all at once afterwards: the product cannot tell it from a SIGSTOP, so it is a
   * pause), and a node's endpoint refusing and resetting connections though it runs.
   */
  async function worldFaults(w: DetectorWorld): Promise<void> {
    const singleton = await cluster.singletonNode();
    for (const f of real.step(
      live().map((n) => n.node),
      singleton?.node,
    )) {
      if (f.kind === 'stall') {
        const node = cluster.node(f.node);
        if (node.state !== 'running') continue;
        note(`stall ${f.node}${node === singleton ? ' (the singleton)' : ''} for ${f.ms} ms (its event loop is busy)`);
        node.pause();
        w.paused(f.node, f.ms);
        stats.pauses++;
        clock.schedule(f.ms, () => node.resume());
      } else {
        note(
          `${f.to}${f.to === singleton?.node ? ' (the singleton)' : ''} refuses and resets ${f.from.join(',')}${f.bothWays ? ' both ways' : ''} for ${f.ms} ms (detector endpoints, both processes run)`,
        );
        for (const from of f.from) {
          resets.add(from, f.to, f.ms);
          world?.refusing(from, f.to, f.ms);
          if (f.bothWays) {
            resets.add(f.to, from, f.ms);
            world?.refusing(f.to, from, f.ms);
          }
        }
        w.disturbed(f.ms);
      }
    }
    if (handoverRng.chance(0.08)) await gracefulRestartOfSingletonHost(w);
  }

  /**
   * An operator's rolling restart reaches the singleton's host: its graceful stop hands the role
   * over (it stops acting, waits out its grants, releases its lease; the next in line takes it at
   * once), and the node starts again as a new incarnation a moment later. Drawn from a stream of its
   * own, so the other faults of a seed draw as before.
   */
  async function gracefulRestartOfSingletonHost(w: DetectorWorld): Promise<void> {
    const singleton = await cluster.singletonNode();
    if (!singleton || singleton.state !== 'running' || live().length <= 2) return;
    note(`graceful restart of the singleton's host ${singleton.node}: it hands the role over`);
    const key = keyOf(singleton);
    w.handingOver();
    let stopped = false;
    const stopping = singleton.stop().finally(() => (stopped = true));
    for (let waited = 0; !stopped && waited < 10_000; waited += 50) await driver.advance(50);
    await stopping;
    w.stopped(key);
    stats.restarts++;
    await driver.advance(handoverRng.int(200, 3_000));
    await singleton.start();
    w.started(singleton.node);
  }

  /** A node that just joined stays silent a while (a slow start): no heartbeat, no ingestion. */
  function slowJoin(node: ShardherdNode): void {
    if (!world || node.state !== 'running') return;
    const ms = real.slowJoinMs();
    if (ms === 0) return;
    note(`${node.node} is slow after joining: it runs nothing for ${ms} ms`);
    node.pause();
    world.paused(node.node, ms);
    stats.pauses++;
    clock.schedule(ms, () => node.resume());
  }

  async function crashSingleton(singleton: ShardherdNode, when: string): Promise<PreCrash | undefined> {
    // Asking the singleton lets simulated time pass: everything else is read after, with no time
    // passing before the crash, so it is what the MetaStore and the membership held at the crash.
    const state = await ask(singleton.singletonState(), `the singleton state of ${singleton.node}`);
    if ((await cluster.singletonNode()) !== singleton) {
      // With the detector the role can pass while a step runs (its lease ran out during a pause):
      // this is a node's crash, not the singleton's, and no failover follows it.
      note(`crash ${singleton.node} (no longer the singleton)${when ? ` ${when}` : ''}`);
      world?.crashed(singleton.node, keyOf(singleton), false, liveOthers(singleton));
      singleton.crash();
      stats.crashes++;
      return undefined;
    }
    const subscriptions = new Set((state?.subscriptions.toList() ?? []).flatMap((x) => x.subscribers.map((id) => `${id} ${x.dataset}`)));
    const maps = await storedMaps();
    const epoch = (await metaStore.readLease())?.epoch ?? 0;
    const members = new Map(cluster.membership.view().members.map((m) => [m.node as string, m.incarnation as string]));
    const draining = new Set((await operations()).draining);
    note(`crash the singleton ${singleton.node}${when ? ` ${when}` : ''}`);
    world?.crashed(singleton.node, keyOf(singleton), true, liveOthers(singleton));
    singleton.crash();
    stats.crashes++;
    return { maps, node: singleton.node, epoch, members, subscriptions, draining };
  }

  /** An operator's drain, undrain or replacement, or a drained node stopping; sometimes the singleton dies right after. */
  async function nodeOperation(singleton: ShardherdNode | undefined, others: ShardherdNode[]): Promise<PreCrash | undefined> {
    const draining = new Set<string>((await operations()).draining);
    const candidates = others.filter((n) => !draining.has(n.node));
    const kind = rng.int(0, 3);
    stats.nodeOperations++;
    // A node operation changes who helps judge a silent node: a drained node stops helping once it
    // holds nothing, and a spare helps only once it has probed the suspect long enough itself, so
    // an eviction may rightly take longer than an undisturbed cluster's bound (I12; seeds 43235,
    // 43495 and 63396: a crash, then a node operation within the bound).
    world?.disturbed(0);
    if (kind === 0 && candidates.length > 0) {
      const node = rng.pick(candidates);
      const reply = await adminRequest((replyTo) => ({ type: 'RemoveNode', node: node.node, replyTo }));
      note(`drain ${node.node}: ${reply.type}`);
    } else if (kind === 1 && draining.size > 0) {
      const node = rng.pick([...draining].sort());
      const reply = await adminRequest((replyTo) => ({ type: 'AddNode', node, replyTo }));
      note(`undrain ${node}: ${reply.type}`);
    } else if (kind === 2 && candidates.length > 0) {
      const old = rng.pick(candidates);
      const name = `m${++spares}`;
      const rack = rackOf.get(old.node)!;
      rackOf.set(name, rack);
      const reply = await adminRequest((replyTo) => ({ type: 'ReplaceNode', old: old.node, new: name, replyTo }));
      note(`replace ${old.node} by ${name} (${rack}): ${reply.type}`);
      const added = cluster.add(name, { rack });
      await added.start();
      world?.joined(name);
      slowJoin(added);
    } else {
      const released = live().filter((n) => n.isDrained && n !== singleton);
      if (released.length === 0) return undefined;
      const node = rng.pick(released);
      note(`drained ${node.node} stops`);
      world?.stopped(keyOf(node));
      await node.stop();
      return undefined;
    }
    if (singleton && singleton.state === 'running' && live().length > 2 && rng.int(0, 2) === 0) {
      await driver.advance(rng.int(20, 300));
      if (singleton.state === 'running') return crashSingleton(singleton, 'in the middle of the handoffs');
    }
    return undefined;
  }

  // ---------------------------------------------------------------- invariants

  async function checkEveryStep(preCrash: PreCrash | undefined): Promise<void> {
    if (world) {
      for (const n of cluster.nodes) {
        const before = lastIncarnation.get(n.node);
        if (before !== undefined && before !== n.incarnation) {
          world.stopped(`${n.node}@${before}`);
          // A new incarnation (a fenced or evicted node restarts by itself): its join grace started
          // within the last step (counted from now, later than it did: I12 judges it no sooner).
          if (n.incarnation !== undefined) world.joined(n.node);
        }
        if (n.incarnation !== undefined) lastIncarnation.set(n.node, n.incarnation);
      }
      for (const v of world.overdueEvictions()) violate(v.invariant, v.message);
      const holder = await cluster.singletonNode();
      const askedAt = clock.now();
      const state = holder ? await ask(holder.singletonState(), `the singleton state of ${holder.node}`) : undefined;
      if (state) for (const v of world.readmitted(state.epoch, state.members, askedAt)) violate(v.invariant, v.message);
    }
    // Forget subscribers whose node died or restarted: they are gone with it.
    for (const t of [...subscribers]) {
      if (t.node.state !== 'running' || t.node.incarnation !== t.incarnation) subscribers.splice(subscribers.indexOf(t), 1);
    }

    // I1: a live member ingests a shard only where the singleton's map declares a copy (replicas,
    // and both copies of a handoff), or a Leaving copy it held a step ago (its removal is on the way).
    // A copy that writes under no token (its node acts on no map that gives it the copy yet, such
    // as a new singleton's host before its own map reached its coordinator) writes nothing.
    const maps = await storedMaps();
    const mapsNow = new Map([...maps].map(([ref, snap]) => [ref, ShardMapper.fromSnapshot(snap)]));
    for (const n of live()) {
      const writes = await writable(n);
      for (const r of await ask(n.running(), `the running shards of ${n.node}`)) {
        if (!writes(r.dataset) || r.writingUnder === undefined) continue;
        const key = `${r.dataset}/${r.shard}`;
        const map = mapsNow.get(r.dataset);
        if (map && !mayIngest(map, r.shard, n.node, declaredRecently(r.dataset))) {
          violate('I1', `${key} is ingested by ${n.node}, which holds no copy of it (holders: ${map.nodesForShard(r.shard).join(', ') || 'none'})`);
        }
      }
    }

    // I8: replicas of a shard in distinct racks (as far as the live racks allow), never two on one node.
    const ops = await operations();
    const placeable = cluster.membership
      .view()
      .members.map((m) => m.node as string)
      .filter((node) => !(ops.draining as readonly string[]).includes(node));
    const racksLive = new Set(placeable.map((node) => rackOf.get(node)!)).size;
    for (const d of BALANCED_DATASETS) {
      const map = mapsNow.get(d.ref as DatasetRef);
      if (!map) continue;
      for (const v of isolationViolations(map, (node) => rackOf.get(node) ?? node, racksLive)) violate('I8', `${d.ref}: ${v}`);
    }

    // I6: a subscriber's map never goes back; nothing older than the lease's epoch is persisted.
    for (const t of subscribers) {
      const stamp = { epoch: t.sub.epoch, version: t.sub.version };
      if (compareStamps(stamp, t.last) < 0) violate('I6', `${t.sub.id} went back from ${JSON.stringify(t.last)} to ${JSON.stringify(stamp)}`);
      t.last = stamp;
    }
    const lease = await metaStore.readLease();
    for (const m of (await storedMaps()).values()) {
      if (lease && m.epoch > lease.epoch) violate('I6', `a map of ${m.dataset} at epoch ${m.epoch} is newer than the lease's ${lease.epoch}`);
    }
    if (lease && lease.epoch > lastEpoch) {
      if (lastEpoch > 0) stats.failovers++;
      lastEpoch = lease.epoch;
    }

    // I4: a failover loses no dataset, assignment or cooldown.
    if (preCrash) await checkFailover(preCrash);
  }

  /**
   * Which datasets' records `n` can write now. Without the detector, all it runs. With it, a node
   * writes only under a lease that runs now on its own clock and was granted under the epoch of its
   * map of the dataset (§11.4): a node whose singleton died before telling it that its copy was
   * removed keeps the shard's actor until a new singleton's maps reach it (a session later), but
   * writes nothing meanwhile — that is not ingesting it.
   */
  async function writable(n: ShardherdNode): Promise<(dataset: string) => boolean> {
    if (!world) return () => true;
    const lease = n.lease;
    if (!lease || world.clockOf(n.node).now() >= lease.until) return () => false;
    const cache = await ask(n.cache(), `the map cache of ${n.node}`);
    return (dataset) => cache?.maps.get(dataset as DatasetRef)?.epoch === lease.epoch;
  }

  async function checkFailover(pre: PreCrash): Promise<void> {
    // Give the new singleton time to detect, take over and recover.
    const recovered = await driver.until(
      async () => ((await metaStore.readLease())?.epoch ?? 0) > pre.epoch && (await cluster.singletonNode()) !== undefined,
      10_000,
      250,
    );
    if (!recovered) violate('I4', `no new singleton took over within 10 s of the crash of ${pre.node}`);
    await driver.advance(1_000);
    const after = await storedMaps();
    const holder = await cluster.singletonNode();
    const state = holder ? await ask(holder.singletonState(), `the singleton state of ${holder.node}`) : undefined;
    // Every subscription the old singleton had, of a subscriber that is still alive, survives. (With
    // the detector the new singleton may rightly evict the subscriber's node, cut off meanwhile:
    // its incarnation, and the subscriber with it, is gone.)
    for (const t of subscribers) {
      if (t.node.node === pre.node || !state || !pre.subscriptions.has(`${t.sub.id} ${t.sub.dataset}`)) continue;
      if (world?.wasRemoved(`${t.node.node}@${pre.members.get(t.node.node)}`)) continue;
      if (!state.subscriptions.isSubscribed(t.sub.id, t.sub.dataset))
        violate('I4', `the subscription of ${t.sub.id} to ${t.sub.dataset} was lost in the failover`);
    }
    for (const [ref, before] of pre.maps) {
      const now = after.get(ref);
      if (!now) {
        violate('I4', `dataset ${ref} lost in the failover`);
        continue;
      }
      // A balanced dataset may rebalance after a failover (members changed meanwhile): its
      // placement is checked by I7–I9; FiloDB's datasets never move a shard off a live owner.
      if (!FILODB_DATASETS.some((d) => d.ref === ref)) continue;
      const b = ShardMapper.fromSnapshot(before);
      const a = ShardMapper.fromSnapshot(now);
      // Owners that are still the same live member (same incarnation) must keep their shards.
      // (An incarnation the detector took out is gone for the singleton, whatever the group says.)
      const alive = new Set(
        cluster.membership
          .view()
          .members.filter((m) => pre.members.get(m.node) === m.incarnation && !world?.wasRemoved(`${m.node}@${m.incarnation}`))
          .map((m) => m.node as string),
      );
      for (let s = 0; s < b.numShards; s++) {
        const owner = b.nodeForShard(s);
        const planned = pre.draining.has(owner ?? '') || b.recordForShard(s).assignments.length > 1;
        if (
          owner &&
          owner !== pre.node &&
          alive.has(owner) &&
          !planned &&
          !poison.has(`${ref}/${s}`) &&
          !sinkFaults?.faulted(ref, s) &&
          a.nodeForShard(s) !== owner
        ) {
          violate('I4', `${ref}/${s} was on ${owner}, which is still alive, and is now on ${a.nodeForShard(s) ?? 'nobody'}`);
        }
      }
    }
  }

  async function checkAtRest(): Promise<void> {
    const maps = await storedMaps();
    const view = cluster.membership.view();
    const members = new Set(view.members.map((m) => m.node as string));
    const strategy = new DefaultShardAssignmentStrategy();
    const draining = new Set<string>((await operations()).draining);
    const placeable = view.members.filter((m) => !draining.has(m.node)).map((m) => ({ node: m.node as string, rack: rackOf.get(m.node) ?? m.node }));
    const cooldowns = await metaStore.cooldowns();
    const delayStarts = new Map<string, number | undefined>();
    for (const node of departedAt.keys()) delayStarts.set(node, await delayStartOf(node));
    for (const d of DATASETS) {
      const snap = maps.get(d.ref as DatasetRef);
      if (!snap) {
        violate('I4', `no map of ${d.ref} in the MetaStore`);
        continue;
      }
      const m = ShardMapper.fromSnapshot(snap);
      // I2: owners are live members (or, for a balanced dataset, lost nodes whose copies are kept
      // for them within their replacement delay), and no live member has room for a free shard
      // (errored ones wait by design).
      let kept = false;
      if ('strategy' in d) {
        const k = keptCopyViolations(
          m,
          (node) => members.has(node),
          (node) => delayStarts.get(node),
          clock.now(),
          d.replacementDelayMs,
          KEPT_BOUND_MS,
        );
        for (const v of k.violations) violate('I2', `${d.ref}: ${v}`);
        kept = k.kept;
      } else {
        for (const owner of m.allNodes()) if (!members.has(owner)) violate('I2', `${d.ref}: ${owner} owns shards but is not a member`);
      }
      if ('strategy' in d && !kept) {
        // I2 and I9 for a balanced dataset: every shard has its copies, spread at its lower bound
        // (once no copy is kept for a lost node: until then the map waits for it, by design).
        // (The singleton's clock drifts from the sim's, and its check runs a moment after the end.)
        const cooling = new Set(
          cooldowns.filter((c) => c.dataset === d.ref && c.reassignedAt + COOLDOWN_MS + COOLDOWN_END_MARGIN_MS > clock.now()).map((c) => c.shard),
        );
        const problem = balanceViolation(m, placeable, d.replicationFactor, cooling);
        if (problem) violate(problem.invariant, `${d.ref}: ${problem.message}`);
      }
      const free = 'strategy' in d ? [] : m.unassignedShards().filter((s) => m.statusForShard(s).type !== 'Error');
      if (free.length > 0) {
        const errored = new Set(m.unassignedShards().filter((s) => m.statusForShard(s).type === 'Error'));
        for (const member of view.members) {
          const room = strategy.remainingCapacity(member.node, { numShards: d.numShards, minNumNodes: d.minNumNodes, held: errored }, m);
          if (room > 0) violate('I2', `${d.ref}: shards ${free.join(',')} are free while ${member.node} has room for ${room}`);
        }
      }
      // I3: every subscriber's map equals the singleton's — once the bus stopped losing and
      // delaying records too (while it does, a subscriber may be one publish interval behind).
      for (const t of lossy ? [] : subscribers) {
        if (t.sub.dataset !== d.ref) continue;
        if (!t.sub.map || !t.sub.map.equals(m) || t.sub.epoch !== snap.epoch) {
          violate(
            'I3',
            `${t.sub.id} has ${t.sub.map ? `epoch ${t.sub.epoch} v${t.sub.version}` : 'no map'}, the singleton epoch ${snap.epoch} v${snap.version}`,
          );
        }
      }
    }
  }

  /** Whether some shard has lost a copy to a failure and waits for its cooldown to end. */
  async function shardsWaitingForCooldown(): Promise<boolean> {
    const maps = await storedMaps();
    return (await metaStore.cooldowns()).some((c) => {
      // A poisoned shard that reached its poison record fails after every cooldown, for ever: nothing
      // to wait for (one that has not, a sink failure before it, still is: seed 9670).
      const poisonedAt = poison.get(`${c.dataset}/${c.shard}`);
      if (c.reassignedAt + COOLDOWN_MS <= clock.now() || (poisonedAt !== undefined && sink.tally(c.dataset, c.shard).covered >= poisonedAt)) return false;
      const snap = maps.get(c.dataset);
      if (!snap) return false;
      const m = ShardMapper.fromSnapshot(snap);
      const d = DATASETS.find((x) => x.ref === c.dataset)!;
      return m.recordForShard(c.shard).assignments.length < ('replicationFactor' in d ? d.replicationFactor : 1);
    });
  }

  async function checkAtEnd(): Promise<void> {
    await checkAtRest();
    // I5: every record produced (until a moment before the end) was ingested at least once.
    const horizon = clock.now() - 3_000;
    const produced = Math.floor((horizon * RATE) / 1000);
    for (const d of DATASETS) {
      for (let s = 0; s < d.numShards; s++) {
        const tally = sink.tally(d.ref, s);
        const poisoned = poison.get(`${d.ref}/${s}`);
        const expected = poisoned === undefined ? produced : Math.min(produced, poisoned);
        if (tally.covered < expected) violate('I5', `${d.ref}/${s}: record ${tally.covered} was produced but never ingested (${expected} produced)`);
      }
    }
  }
}
