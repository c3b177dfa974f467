// One shardherd node: its actor system, its membership, its bus subscriptions and its ports, with
// the lifecycle of a process (start, graceful stop, crash, pause and resume, restart as a new
// incarnation). The same class runs a node in embedded mode, in the simulator and in a real process.
import { checkShard, type ShardCheck } from '../core/shard-check.js';
import type { Logger } from 'pino';
import { IncompleteMessageError, type Bus, type BusSubscription } from '../cluster/bus.js';
import type { Clock } from '../cluster/clock.js';
import type { Membership, MembershipView } from '../cluster/membership.js';
import { isMember } from '../cluster/membership.js';
import type { DatasetRef, Epoch, Incarnation, NodeId, ReplyTo, ShardNum, SubscriberId } from '../core/ids.js';
import type { Reply, RunningShard, RunningSummary } from '../core/shard-manager/protocol.js';
import type { ShardManagerState } from '../core/shard-manager/step.js';
import { loadRatios } from '../core/shard-manager/load-view.js';
import type { IngestionSource, RecordSink, SourceRecord } from '../ingest/ingestion-source.js';
import type { DatasetConfig } from '../core/dataset-config.js';
import { RELEASED_RENEWAL, type Lease, type MetaStore } from '../store/meta-store.js';
import { LastAnswer, type AnswerAge } from './last-answer.js';
import { SingletonRole } from './singleton-role.js';
import { countedBus, countedMetaStore } from './counted-ports.js';
import { Gate, gatedBus, gatedClock, gatedMetaStore, gatedSink, gatedSource } from './gate.js';
import type { NodeEnv } from './node-env.js';
import { RequestLane } from './request-lane.js';
import { EventsSkip, GuardianOutlook, NOTHING_RUNNING, spawnNodeGuardian, type GuardianCache, type GuardianMsg } from './node-guardian.js';
import { type Deliver, NodeHub, RequestTimeoutError } from './node-hub.js';
import { ActorRuntime, type ActorRef, type BusyActor } from './runtime.js';
import type { RuntimeSettings } from './settings.js';
import { CheckpointLoader } from './checkpoint-loader.js';
import { LeaseLapsedError, NotMemberError } from './sink-call.js';
import type { FencingToken } from '../core/fencing-token.js';
import { Problems } from './problems.js';
import { NO_TELEMETRY, type NodeTelemetry } from './telemetry.js';
import { SingletonContact } from './singleton-contact.js';
import { LeaseWaits } from './lease-waits.js';
import { RunGaps } from './run-gaps.js';
import { hostPrefix, nodeGroup, topicsFor, type Request } from '../protocol/wire.js';
import type { ShardMapFollower } from '../core/map-follower.js';
import { NodeServing } from '../serving/node-serving.js';
import { NodeDetector, type Verdict } from '../cluster/failure-detector/node-detector.js';
import { leaseWaitMs } from '../cluster/failure-detector/settings.js';
import type { DetectorTransport } from '../cluster/failure-detector/transport.js';
import type { DroppedFrames } from '../cluster/failure-detector/dropped.js';
import type { TransportOwner } from '../cluster/failure-detector/memory-transport.js';
import type { DatasetServerOptions, ShardRequestHandler } from '../serving/dataset-server.js';
import { pollTurnsFor } from './poll-turns.js';
import { LoadMeter, type LoadWeightHook } from './load-meter.js';
import { checkNodePlacement } from './node-placement.js';
import { slicePauseFor } from '../cluster/event-loop-slice.js';

/** What every node of a cluster shares (in embedded mode, one object for all nodes). */
export interface ClusterServices {
  readonly clock: Clock;
  readonly bus: Bus;
  /** A new membership handle for one node incarnation. */
  readonly connectMembership: () => Membership & Partial<{ crash(): void; pause(): void; resume(): void; close(): void }>;
  readonly metaStore: MetaStore;
  readonly source: IngestionSource;
  readonly sink: RecordSink;
  readonly settings: RuntimeSettings;
  readonly log: Logger;
  /** A unique prefix for actor system names in this process (several clusters may share one). */
  readonly systemPrefix: string;
  /** The failure detector's transport and clock, for `failureDetector.mode: 'heartbeat'` (docs/ARCHITECTURE.md §11). */
  readonly detector?: DetectorServices;
  /** A node's own load figure per copy (CPU, series...), for datasets placed by load with `measure: "weight"`. */
  readonly loadWeight?: LoadWeightHook;
}

/** What a node's failure detector runs on. */
export interface DetectorServices {
  /**
   * A new transport for one node incarnation: its deliveries wait while `owner` is paused (in
   * process); the frames it drops are counted in `dropped`.
   */
  readonly transport: (owner: TransportOwner, dropped: DroppedFrames) => DetectorTransport;
  /** Monotonic in a real process (leases are durations); the cluster's clock in embedded mode. */
  readonly clock: Clock;
  /** A random index in `0 .. n-1` for choosing helpers; default `Math.random`. Seeded in the simulator. */
  readonly pick?: (n: number) => number;
  /** A node's own clock instead of `clock` (the simulator's drifting clocks). */
  readonly clockOf?: (node: NodeId) => Clock;
  /** Hears every verdict of every singleton's monitor (the simulator checks them). */
  readonly observe?: (verdict: Verdict) => void;
}

/** How long an operator's read waits for a fresh answer before it takes the last one. */
const LOCAL_ANSWER_WAIT_MS = 20;

/** Copies /status lists unless asked for all of them (a node of 65 536 copies answered megabytes). */
export const RUNNING_LISTED = 1000;
/** A handler running this long is shown on /status and logged as stalled (no handler of a node waits this long on purpose). */
export const STALLED_MS = 10_000;

export type NodeState = 'stopped' | 'running' | 'stopping' | 'paused' | 'crashed';

/** Why a new incarnation could not start yet (the bus or the store is away), and the next attempt. */
export interface RestartTrouble {
  readonly attempt: number;
  readonly error: string;
  readonly retryInMs: number;
}

export class ShardherdNode {
  private incarnationCount = 0;
  private current: Incarnation | undefined;
  private gate = new Gate();
  private runtime: ActorRuntime | undefined;
  private guardian: ActorRef<GuardianMsg> | undefined;
  /** The guardian's state, read beside its mailbox. */
  private outlook: GuardianOutlook | undefined;
  /** Requests to the singleton and their replies, beside the guardian's mailbox. */
  private lane: RequestLane | undefined;
  private membership: ReturnType<ClusterServices['connectMembership']> | undefined;
  /** The current incarnation's failure detector, in `heartbeat` mode. */
  private detector: NodeDetector | undefined;
  /** The current incarnation's shards waiting for a lease to write. */
  private leaseWaits: LeaseWaits | undefined;
  private readonly singletonContact = new SingletonContact();
  private runGaps: RunGaps | undefined;
  /** Whether the singleton this incarnation hosts still acts: /status reads it, never a blocked actor's last answer. */
  private singletonRole: SingletonRole | undefined;
  /** The incarnation's view of the MetaStore (closed with it), for handing the singleton's lease over. */
  private leaseStore: Pick<MetaStore, 'renewLease'> | undefined;
  /** How to answer each question the guardian has not answered yet, should it never (see `askGuardian`). */
  private readonly unanswered = new Set<() => void>();
  /** Stalls logged and still going on (actor, message, start). */
  private readonly loggedStalls = new Set<string>();
  private subscriptions: BusSubscription[] = [];
  /** Stops hearing the membership of the current incarnation. */
  private stopListening: () => void = () => {};
  private hub = new NodeHub();
  private requestCount = 0;
  private subscriberCount = 0;
  private lifecycle: NodeState = 'stopped';
  /** False as soon as the membership view lacks this incarnation: ingestion must not accept more records. */
  private member = false;
  /** The singleton drained this incarnation: it holds no shard copy and may stop. */
  private drained = false;
  private lastView: MembershipView | undefined;
  /** A restart after a fence that has not succeeded yet: why, and when it tries again. */
  private restartTrouble: RestartTrouble | undefined;
  /** Set by `stop()` while a restart is retrying: it gives up instead of starting again. */
  private restartAbandoned = false;
  private restarting: Promise<void> | undefined;
  /** The datasets this node serves routed requests of (`serve`), across incarnations. */
  private readonly serving: NodeServing;
  /** This node's Prometheus metrics, when it was given a registry (real processes and embedded clusters are). */
  readonly metrics: NodeTelemetry | undefined;
  /** Failures no retry fixes, over every incarnation of this node (shown on /status). */
  readonly problems: Problems;
  /** Where this node's ingested records go. */
  private readonly sink: RecordSink;
  /** What /status and /metrics read, answered from local state (see `LastAnswer`). */
  private readonly local: {
    readonly running: LastAnswer<RunningShard[]>;
    readonly runningSummary: LastAnswer<RunningSummary>;
    readonly lease: LastAnswer<Lease | undefined>;
  };

  constructor(
    /** @internal The ports this node runs on; not part of the public API. */
    readonly services: ClusterServices,
    readonly node: NodeId,
    /** Where the node stands for placement: its rack (isolation group) and weight; from the membership's own settings when absent. */
    readonly placement: { readonly rack?: string; readonly weight?: number } = {},
    options: {
      readonly metrics?: NodeTelemetry;
      /** This node's own sink instead of the services' shared one (each node of one process keeps its own copies' records). */
      readonly sink?: RecordSink;
    } = {},
  ) {
    checkNodePlacement(node, placement);
    this.metrics = options.metrics;
    this.sink = options.sink ?? services.sink;
    this.serving = new NodeServing({
      bus: services.bus,
      topic: topicsFor(services.settings.topicPrefix).endpoints,
      node,
      log: services.log,
      servingNode: {
        check: (dataset, shard, routerVersion) => checkShard(this.followedMap(dataset)?.mapper, this.node, shard, routerVersion),
        serving: () => this.lifecycle === 'running' && this.member && (this.detector?.answersReads() ?? true),
      },
    });
    this.problems = new Problems(() => services.clock.now());
    const quick = <T>(ask: () => Promise<T>) => new LastAnswer(ask, services.clock, LOCAL_ANSWER_WAIT_MS);
    this.local = {
      running: quick(() => this.running()),
      runningSummary: quick(() =>
        this.askGuardian<RunningSummary>((reply) => ({ type: 'GetRunningSummary', listUpTo: RUNNING_LISTED, reply }), NOTHING_RUNNING),
      ),
      // A store read: once the lease is known, the known one at once (read again in the background).
      lease: new LastAnswer(() => services.metaStore.readLease(), services.clock, LOCAL_ANSWER_WAIT_MS, 0),
    };
    this.metrics?.observe({
      node,
      busTopics: Object.values(topicsFor(services.settings.topicPrefix)),
      maps: async () => {
        const cache = await this.cache();
        return cache
          ? [...cache.maps.values()].flatMap((f) => (f.mapper ? [{ dataset: f.dataset, epoch: f.epoch, version: f.version, mapper: f.mapper }] : []))
          : [];
      },
      isSingleton: async () => (await this.localSingletonState()) !== undefined,
      knownEpoch: async () => (await this.cache())?.maxEpoch,
      membershipSize: () => (this.member ? (this.lastView?.members.length ?? 0) : 0),
      leaseWaitingShards: () => this.leaseWaits?.count ?? 0,
      loadRatios: async () => {
        const state = await this.localSingletonState();
        return state ? loadRatios(state, this.services.clock.now()) : [];
      },
    });
  }

  /**
   * In `heartbeat` mode, whether this incarnation holds a lease now and how many of its shards hold
   * a batch until it does (a lapse pauses writes and fails nothing: docs/ARCHITECTURE.md §11.4).
   */
  get writeLease(): { readonly held: boolean; readonly waitingShards: number; readonly longestWaitMs: number } | undefined {
    const { detector, leaseWaits } = this;
    if (!detector || !leaseWaits || this.lifecycle !== 'running') return undefined;
    return { held: detector.holds(), waitingShards: leaseWaits.count, longestWaitMs: leaseWaits.longestMs(this.services.clock.now()) };
  }

  /**
   * How long since this node last heard from a singleton (any record of it: its digest comes every
   * `publishIntervalMs`); undefined when it never did (none elected yet, or it just started).
   */
  singletonSilentMs(): number | undefined {
    return this.singletonContact.silentMs(this.services.clock.now());
  }

  /** The membership view this incarnation last heard (undefined before it joined). */
  /** The clock this node runs on: monotonic in a real process, the cluster's in embedded mode (simulated in the simulator). */
  get clock(): Clock {
    return this.services.clock;
  }

  get view(): MembershipView | undefined {
    return this.lastView;
  }

  get state(): NodeState {
    return this.lifecycle;
  }

  /** Set while a restart after a fence keeps failing (it retries with backoff): what `/status` shows. */
  get restartProblem(): RestartTrouble | undefined {
    return this.restartTrouble;
  }

  get incarnation(): Incarnation | undefined {
    return this.current;
  }

  /** @internal The actor runtime of the current incarnation (for counters and tests). */
  get actors(): ActorRuntime | undefined {
    return this.runtime;
  }

  /**
   * This incarnation's actors whose handler has run for `STALLED_MS` or more (what /status shows):
   * the messages behind one wait with it, the node's own answers included. Each is logged once.
   */
  stalledActors(): BusyActor[] {
    const stalled = this.runtime?.busy(STALLED_MS) ?? [];
    const now = this.services.clock.now();
    const keyed = new Map(stalled.map((st) => [`${st.actor} ${st.message} ${now - st.forMs}`, st]));
    // Only stalls still going on are remembered: the set stays as small as they are few.
    for (const key of this.loggedStalls) if (!keyed.has(key)) this.loggedStalls.delete(key);
    for (const [key, st] of keyed) {
      if (this.loggedStalls.has(key)) continue;
      this.loggedStalls.add(key);
      this.services.log.warn(
        { event: 'actor.stalled', ...st },
        `actor ${st.actor} has been handling ${st.message} for ${st.forMs} ms: the messages behind it wait`,
      );
    }
    return stalled;
  }

  get isMember(): boolean {
    return this.member;
  }

  /**
   * In `heartbeat` mode, the lease this incarnation holds (it may have run out): the epoch that
   * granted it and until when, on the node's detector clock. Undefined otherwise.
   */
  get lease(): { readonly epoch: number; readonly until: number } | undefined {
    const l = this.detector?.lease.current;
    return l && { epoch: l.epoch, until: l.until };
  }

  /** True once the singleton said this incarnation was drained (`RemoveNode`/`ReplaceNode`) and may stop. */
  get isDrained(): boolean {
    return this.drained;
  }

  /** Starts a new incarnation: actors, bus subscriptions, then joins the membership. */
  async start(): Promise<void> {
    if (this.lifecycle === 'running' || this.lifecycle === 'paused') throw new Error(`${this.node} is already running`);
    const s = this.services;
    this.incarnationCount += 1;
    const incarnation = `${s.clock.now().toString(36)}-${this.incarnationCount}` as Incarnation;
    this.current = incarnation;
    this.gate = new Gate();
    this.hub = new NodeHub();
    for (const answer of Object.values(this.local)) answer.reset();
    this.member = false;
    this.drained = false;
    this.lastView = undefined;
    // A process's own logger may carry `node` already (`shardherd node` does): never twice on a line.
    const log = s.log.child(s.log.bindings().node === this.node ? { incarnation } : { node: this.node, incarnation });
    this.runtime = new ActorRuntime(`${s.systemPrefix}-${this.node}-${incarnation}`, log, () => s.clock.now());
    const gate = this.gate;
    const telemetry = this.metrics ?? NO_TELEMETRY;
    const leaseWaits = new LeaseWaits(telemetry);
    this.leaseWaits = leaseWaits;
    const clock = gatedClock(s.clock, gate);
    const runGaps = new RunGaps(clock);
    const slicePause = slicePauseFor(s.clock);
    this.runGaps = runGaps;
    runGaps.start();
    /** Out of the cluster while running (the group dropped it, the singleton evicted it): a new incarnation starts. */
    const fenced = (event: string, reason: string) => {
      if (this.lifecycle !== 'running' || this.current !== incarnation) return; // leaving on purpose
      log.warn({ event, reason }, 'this node is no longer a member: it restarts as a new incarnation');
      this.restarting = this.restart().finally(() => (this.restarting = undefined));
    };
    const detector = this.startDetector(incarnation, gate, log, (reason) => fenced('node.fenced', reason));
    this.detector = detector;
    const detectorAddress = await detector?.start();
    const metaStore = countedMetaStore(gatedMetaStore(s.metaStore, gate), telemetry);
    const singletonRole = new SingletonRole();
    this.singletonRole = singletonRole;
    this.leaseStore = metaStore;
    const env: NodeEnv = {
      node: this.node,
      incarnation,
      runtime: this.runtime,
      clock,
      bus: countedBus(gatedBus(s.bus, gate), telemetry),
      topics: topicsFor(s.settings.topicPrefix),
      metaStore,
      lease: metaStore,
      source: gatedSource(s.source, gate),
      sink: gatedSink(
        {
          accept: (ds, shard, records, token) => this.accept(detector, ds, shard, records, token),
          ...(this.sink.storage ? { storage: this.sink.storage } : {}),
        },
        gate,
      ),
      settings: s.settings,
      log,
      telemetry,
      loadMeter: new LoadMeter(clock.now(), s.loadWeight),
      problems: this.problems,
      checkpoints: new CheckpointLoader(metaStore),
      leaseWaits,
      runGaps,
      singletonContact: this.singletonContact,
      pollTurns: pollTurnsFor(s.clock),
      ...(slicePause ? { slicePause } : {}),
      ...(detector ? { detector } : {}),
      singletonRole,
    };
    const outlook = new GuardianOutlook();
    this.outlook = outlook;
    const eventsSkip = new EventsSkip(env, outlook);
    const guardian = spawnNodeGuardian(
      env,
      this.hub,
      {
        onFenced: (reason) => fenced('node.fenced', reason),
        onReleased: () => {
          if (this.current !== incarnation || this.drained) return;
          this.drained = true;
          log.info({ event: 'node.released' }, 'this node was drained: it holds no shard copy and may stop');
        },
      },
      { outlook, skip: eventsSkip },
    );
    this.guardian = guardian;
    const lane = new RequestLane(env, this.hub, () => outlook.newestEpoch());
    this.lane = lane;
    const runtime = this.runtime;
    const onError = (e: unknown, record: { topic: string; offset: number }) => {
      telemetry.busError('handle');
      // A chunked message given up (the bus said so, at warn) is repaired like any lost record:
      // a node asks for what it lacks at the next gap or digest.
      if (e instanceof IncompleteMessageError) log.debug({ err: e, topic: record.topic, offset: record.offset }, 'chunked bus message given up');
      else log.error({ err: e, topic: record.topic, offset: record.offset }, 'bus record not handled');
    };
    const group = nodeGroup(s.settings.topicPrefix, this.node, incarnation);
    this.subscriptions = [
      await env.bus.subscribe(
        env.topics.events,
        group,
        (record) => {
          eventsSkip.handedOn();
          runtime.send(guardian, { type: 'Events', record });
        },
        { onError, skip: eventsSkip.skips },
      ),
      await env.bus.subscribe(
        env.topics.replies,
        group,
        (record) => {
          if (!lane.takeReply(record)) runtime.send(guardian, { type: 'Replies', record });
        },
        { onError },
      ),
    ];
    const membership = s.connectMembership();
    this.membership = membership;
    const stopListening = membership.onChange((view) => this.onView(view));
    this.stopListening = () => {
      stopListening();
      membership.close?.();
    };
    this.lifecycle = 'running';
    const view = await membership.join({
      node: this.node,
      incarnation,
      ...this.placement,
      ...(detectorAddress === undefined ? {} : { detector: detectorAddress }),
    });
    this.onView(view);
    runtime.send(guardian, { type: 'Start' });
    const rack = this.placement.rack ?? view.members.find((m) => m.node === this.node)?.rack;
    await this.serving.started({ incarnation, group, rack });
    log.info({ event: 'node.started' }, 'node started');
  }

  private onView(view: MembershipView): void {
    if (!this.runtime || !this.guardian || !this.current) return;
    // The view `join` resolved with can come after a newer one the listener already delivered
    // (another node joined meanwhile): taking it would drop that node from this one's view, and a
    // singleton recovering with that view fences a member and moves its shards (sim seed 10430).
    if (this.lastView && view.generation < this.lastView.generation) return;
    // Synchronously, before any actor runs: a node out of the group accepts no more records.
    this.member = isMember(view, this.node, this.current);
    this.lastView = view;
    this.detector?.follow(view);
    this.runtime.send(this.guardian, { type: 'View', view });
  }

  /**
   * Graceful: hands the singleton's role over if it runs here (heartbeat mode; `handOver: false`
   * when the whole cluster stops), leaves the membership (the others react at once), then stops
   * its actors.
   */
  async stop(options: { readonly handOver?: boolean } = {}): Promise<void> {
    if (this.restarting && this.lifecycle !== 'running') {
      this.restartAbandoned = true;
      await this.restarting;
    }
    if (this.lifecycle !== 'running') return;
    this.lifecycle = 'stopping';
    this.member = false;
    await this.serving.stopped(true);
    if (options.handOver !== false) await this.handOverSingleton();
    // Nothing is written any more: the lease goes back, so the singleton need not wait it out.
    this.detector?.goodbye();
    await this.membership?.leave();
    await this.teardown();
    this.lifecycle = 'stopped';
  }

  /**
   * Heartbeat mode: a graceful stop of the singleton's host hands the role over, rather than leave
   * the next in line to wait a whole singleton lease (every node's writes pausing meanwhile, their
   * leases being the singleton's grants). The singleton stops acting at once (no grant, no
   * decision), waits until every node lease it granted has surely run out, then marks its lease
   * released; the next in line looks every heartbeat and takes it then (docs/ARCHITECTURE.md §11.9).
   * A store that does not answer within a singleton lease costs only the usual wait.
   */
  private async handOverSingleton(): Promise<void> {
    const detector = this.detector;
    const store = this.leaseStore;
    if (!detector || !store) return;
    // The last member has nobody to hand over to.
    if (!this.membership?.view().members.some((m) => m.node !== this.node)) return;
    const epoch = this.singletonRole?.stepDown('its node stops: the role is handed over to the next in line');
    if (epoch === undefined) return;
    const { log } = this.services;
    const settings = this.services.settings.failureDetector;
    const after = (ms: number) => new Promise<'timeout'>((resolve) => detector.clock.schedule(ms, () => resolve('timeout')));
    await after(leaseWaitMs(settings));
    try {
      const released = await Promise.race([store.renewLease(epoch as Epoch, RELEASED_RENEWAL), after(settings.singletonLeaseMs)]);
      if (released === true)
        log.info(
          { event: 'singleton.handed-over', node: this.node, epoch },
          'singleton lease released once every node lease it granted had run out: the next in line takes it now',
        );
      else
        log.warn(
          { event: 'singleton.handed-over', node: this.node, epoch, released },
          'the singleton lease could not be released (taken over already, or the store did not answer): the next in line waits it out',
        );
    } catch (e) {
      log.warn({ event: 'singleton.handed-over', node: this.node, epoch, err: e }, 'the singleton lease could not be released: the next in line waits it out');
    }
  }

  /** Like SIGKILL: no goodbye; the others notice after the session timeout. */
  crash(): void {
    if (this.lifecycle !== 'running' && this.lifecycle !== 'paused') return;
    this.member = false;
    this.gate.kill();
    this.detector?.kill();
    this.membership?.crash?.();
    void this.serving.stopped(false);
    void this.teardown();
    this.lifecycle = 'crashed';
  }

  /** Like SIGSTOP: the node does nothing (no heartbeats, no I/O) until `resume`. */
  pause(): void {
    if (this.lifecycle !== 'running') return;
    this.gate.pause();
    this.membership?.pause?.();
    this.lifecycle = 'paused';
  }

  /** Like SIGCONT: the membership view comes first, so a node that was dropped fences itself before anything else runs. */
  resume(): void {
    if (this.lifecycle !== 'paused') return;
    this.lifecycle = 'running';
    this.membership?.resume?.();
    this.gate.resume();
  }

  /**
   * Stops this incarnation (without leaving politely if it is already out) and starts a new one.
   * A start that fails (the broker or the database is away: a fence often comes with an outage)
   * is undone and tried again with backoff, logged each time and shown by `restartProblem`, until
   * it succeeds or `stop()` is called: a node never exits over an outage it can outlast.
   */
  async restart(): Promise<void> {
    if (this.lifecycle === 'running') {
      this.lifecycle = 'stopping';
      this.member = false;
      await this.membership?.leave().catch(() => undefined);
      await this.teardown();
    }
    this.lifecycle = 'stopped';
    this.restartAbandoned = false;
    const { log } = this.services;
    const attempts = await this.startWithBackoff(
      (e, attempt, retryInMs) => {
        this.restartTrouble = { attempt, error: e instanceof Error ? e.message : String(e), retryInMs };
        log[isRetriable(e) ? 'warn' : 'error'](
          { event: 'node.restart-failed', node: this.node, attempt, retryInMs, err: e },
          'starting a new incarnation failed; retrying',
        );
        return true;
      },
      () => this.restartAbandoned,
    );
    if (attempts !== undefined && this.restartTrouble)
      log.info({ event: 'node.restarted', node: this.node, attempts }, 'a new incarnation started after the outage');
    this.restartTrouble = undefined;
  }

  /**
   * The first start of a process: tried again with backoff while it fails on an error that says
   * retrying can help (a broker still settling the leader of a topic just created, say), for up to
   * `patienceMs`, each failure logged (`node.start-failed`). Any other error, or one past the
   * patience, is thrown: services that are not there at all are the operator's to fix.
   */
  async startPatiently(patienceMs: number): Promise<void> {
    const { clock, log } = this.services;
    const deadline = clock.now() + patienceMs;
    await this.startWithBackoff((e, attempt, retryInMs) => {
      if (!isRetriable(e) || clock.now() + retryInMs > deadline) return false;
      log.warn({ event: 'node.start-failed', node: this.node, attempt, retryInMs, err: e }, 'starting the node failed; retrying');
      return true;
    });
  }

  /**
   * Starts, undoing each failed attempt and trying again after a backoff (`retryInitialMs`,
   * doubling up to `retryMaxMs`). `failed` hears of each failure, with the delay before the next
   * attempt, and returns false to give up (the error is thrown); `abandoned` ends the attempts
   * quietly. Resolves with the attempts it took, or undefined if abandoned.
   */
  private async startWithBackoff(failed: (e: unknown, attempt: number, retryInMs: number) => boolean, abandoned = () => false): Promise<number | undefined> {
    const { settings, clock } = this.services;
    let delay = settings.retryInitialMs;
    for (let attempt = 1; !abandoned(); attempt++) {
      try {
        await this.start();
        return attempt;
      } catch (e) {
        await this.undoStart();
        if (!failed(e, attempt, delay)) throw e;
        await new Promise<void>((resolve) => clock.schedule(delay, resolve));
        delay = Math.min(delay * 2, settings.retryMaxMs);
      }
    }
    return undefined;
  }

  /** What a failed start leaves behind (subscriptions, actors, a half-joined membership) goes. */
  private async undoStart(): Promise<void> {
    await this.teardown().catch(() => undefined);
    this.lifecycle = 'stopped';
  }

  private async teardown(): Promise<void> {
    await this.serving.stopped(false);
    this.runGaps?.stop();
    this.runGaps = undefined;
    const detector = this.detector;
    this.detector = undefined;
    this.singletonRole = undefined;
    this.leaseStore = undefined;
    await detector?.close();
    this.stopListening();
    this.stopListening = () => {};
    const subs = this.subscriptions;
    this.subscriptions = [];
    // No question reaches the guardian from here on: nact stops the actors in a coming turn, and a
    // question sent before then was taken and dropped, unanswered for good (the node's running
    // list stayed empty until its next restart).
    this.guardian = undefined;
    this.runtime?.shutdown();
    // Questions the guardian will never answer now (its mailbox went with the runtime) get the
    // answer of a node that runs nothing, rather than none at all.
    for (const answerEmpty of [...this.unanswered]) answerEmpty();
    this.unanswered.clear();
    await Promise.all(subs.map((s) => s.close().catch(() => undefined)));
  }

  /** Asks the guardian; `empty` if it is gone, or goes before it answers. */
  private askGuardian<T>(build: (reply: (answer: T) => void) => GuardianMsg, empty: T): Promise<T> {
    const { runtime, guardian } = this;
    if (!runtime || !guardian) return Promise.resolve(empty);
    return new Promise((resolve) => {
      const answerEmpty = () => resolve(empty);
      const reply = (answer: T) => {
        this.unanswered.delete(answerEmpty);
        resolve(answer);
      };
      if (!runtime.send(guardian, build(reply))) resolve(empty);
      else this.unanswered.add(answerEmpty);
    });
  }

  /** The incarnation's failure detector in `heartbeat` mode (docs/ARCHITECTURE.md §11); none in `session-only`. */
  private startDetector(incarnation: Incarnation, gate: Gate, log: Logger, evicted: (reason: string) => void): NodeDetector | undefined {
    const s = this.services;
    const settings = s.settings.failureDetector;
    if (settings.mode !== 'heartbeat') return undefined;
    if (!s.detector) throw new Error(`failureDetector.mode is "heartbeat" but ${this.node} has no detector transport`);
    return new NodeDetector({
      settings,
      self: { node: this.node, incarnation },
      cluster: s.settings.topicPrefix,
      transport: (dropped) => s.detector!.transport(gate, dropped),
      clock: gatedClock(s.detector.clockOf?.(this.node) ?? s.detector.clock, gate),
      log,
      pick: s.detector.pick ?? ((n) => Math.floor(Math.random() * n)),
      memberForMs: () => this.membership?.memberForMs?.(),
      counted: (cause) => (this.metrics ?? NO_TELEMETRY).detectorDropped(cause),
      ...(s.detector.observe ? { observe: s.detector.observe } : {}),
      onEvicted: (by) => evicted(`evicted by the singleton on ${by.node}`),
    });
  }

  /**
   * Hands records to the sink while this incarnation is a member and, in `heartbeat` mode, holds a
   * lease granted under the epoch of the token's map (docs/ARCHITECTURE.md §11.4). Checked here, the
   * last step before the sink, with nothing awaited in between: no write starts after the lease ran
   * out. Without one it throws `LeaseLapsedError` at once, never waiting inside the call that
   * `sinkTimeoutMs` times: the shard waits for the grant itself (`whenLeaseHeld`), so a lapse
   * pauses ingestion and fails nothing.
   */
  private async accept(
    detector: NodeDetector | undefined,
    ds: DatasetConfig,
    shard: ShardNum,
    records: readonly SourceRecord[],
    token: FencingToken | undefined,
  ): Promise<void> {
    const epoch = token?.epoch ?? this.followedMap(ds.ref)?.epoch;
    if (detector && (epoch === undefined || !detector.holds(epoch))) throw new LeaseLapsedError(this.node, epoch ?? 0);
    // A refusal the design expects (records fetched before the fence), not a failure of the shard.
    if (!this.member) throw new NotMemberError(this.node);
    return this.sink.accept(ds, shard, records, token);
  }

  // ---------------------------------------------------------------- client side

  /**
   * Serves `dataset`'s routed requests (`ShardherdClient.request`) with `handler`, over HTTP on a port
   * of its own (`options.port`, default 0: an ephemeral port on 127.0.0.1), with every incarnation of
   * this node from now on; resolves with the address once it is open (undefined while the node is
   * not running: it opens with the next start). The node answers MOVED / ASK / TRYAGAIN from its
   * own map, so the handler sees only shards this node serves, and tells clients where it serves
   * on the bus. Calling it again replaces the handler (and reopens the port).
   *
   * Gotchas: a crash closes the port without a word (clients fail over to another copy at once);
   * `stop()` withdraws the address first. A request may reach the handler more than once (see
   * `ShardRequestHandler`).
   */
  async serve<P = unknown, R = unknown>(
    dataset: DatasetRef,
    handler: ShardRequestHandler<P, R>,
    options: DatasetServerOptions = {},
  ): Promise<string | undefined> {
    await this.serving.serve(dataset, handler as ShardRequestHandler, options);
    return this.serving.urlOf(dataset);
  }

  /** Sends a request to the singleton and waits for its reply. */
  request(build: (replyTo: ReplyTo) => Request, timeoutMs = 10_000): Promise<Reply> {
    const { lane, current } = this;
    if (!lane || !current || this.lifecycle !== 'running') return Promise.reject(new Error(`${this.node} is not running`));
    const replyTo = `${hostPrefix(this.node, current)}req-${++this.requestCount}` as ReplyTo;
    return new Promise<Reply>((resolve, reject) => {
      const cancel = this.services.clock.schedule(timeoutMs, () => {
        this.hub.forget(replyTo);
        reject(new RequestTimeoutError(replyTo, timeoutMs));
      });
      this.hub.expect(replyTo, resolve, cancel);
      lane.send(build(replyTo));
    });
  }

  /**
   * Registers a local subscriber and returns its id; `deliver` gets every message the singleton
   * sends it and, with a `dataset`, every change of that dataset's map this node applies and the
   * map's stamp at each digest. The caller sends the `Subscribe` request (see `ShardEventSubscriber`).
   */
  registerSubscriber(deliver: Deliver, name = `sub-${++this.subscriberCount}`, dataset?: DatasetRef): SubscriberId {
    if (!this.current) throw new Error(`${this.node} is not running`);
    const id = `${hostPrefix(this.node, this.current)}${name}` as SubscriberId;
    this.hub.register(id, deliver, dataset);
    return id;
  }

  unregisterSubscriber(id: SubscriberId): void {
    this.hub.unregister(id);
  }

  /** Sends a request without waiting for any reply (subscriptions, unsubscriptions). */
  tell(request: Request): void {
    if (this.lane && this.lifecycle === 'running') this.lane.send(request);
  }

  /** The shards this node's ingestion runs now, with their status. */
  running(): Promise<RunningShard[]> {
    return this.askGuardian<RunningShard[]>((reply) => ({ type: 'GetRunning', reply }), []);
  }

  /** The state of the singleton this node hosts, if it hosts the active one. */
  singletonState(): Promise<ShardManagerState | undefined> {
    return this.askGuardian<ShardManagerState | undefined>((reply) => ({ type: 'GetSingletonState', reply }), undefined);
  }

  /**
   * What this node answers a query router about a shard (`ok`, `ask`, `moved`, `tryagain`,
   * `unknown`), from the map its guardian follows; `routerVersion` is the router's map version.
   */
  async checkShard(dataset: DatasetRef, shard: number, routerVersion: number): Promise<ShardCheck> {
    const cache = await this.cache();
    return checkShard(cache?.maps.get(dataset)?.mapper, this.node, shard, routerVersion);
  }

  /**
   * For operators' reads (/status, /metrics): what `running`, `singletonState` and `cache` answer if
   * they answer within a few milliseconds, else their last answer; and the singleton lease as last
   * read. They never wait on the MetaStore or the bus (an actor busy with a slow write, a slow read).
   */
  localRunning(): Promise<RunningShard[]> {
    return this.local.running.get().then((r) => r ?? []);
  }

  /**
   * How old what `localRunning` (`all`) or `localRunningSummary` last answered is, and how long the
   * guardian has been asked for a fresher answer (see `LastAnswer.age`).
   */
  localRunningAge(all: boolean): AnswerAge {
    return (all ? this.local.running : this.local.runningSummary).age();
  }

  /** As `localRunning`, counted, with the first `RUNNING_LISTED` listed: what /status shows unless asked for all. */
  localRunningSummary(): Promise<RunningSummary> {
    return this.local.runningSummary.get().then((r) => r ?? NOTHING_RUNNING);
  }

  /** The epoch of the singleton acting on this node now, if one does (one that stopped by its own clock does not). */
  get actingSingletonEpoch(): number | undefined {
    return this.lifecycle === 'running' ? this.singletonRole?.actingEpoch : undefined;
  }

  async localSingletonState(): Promise<ShardManagerState | undefined> {
    // What the singleton acting here now last stored, shown without asking its actor: a stopped
    // one (its actor may be blocked on a hanging store call) shows nothing, and a busy one its
    // last stored state, as its reads answer.
    return this.lifecycle === 'running' ? this.singletonRole?.shownState() : undefined;
  }

  /** The singleton lease as last read from the MetaStore (read again in the background). */
  localLease(): Promise<Lease | undefined> {
    return this.local.lease.get();
  }

  /** The guardian's map of `dataset` as it is now, for the servers' checks: no actor round trip per request. */
  private followedMap(dataset: DatasetRef): ShardMapFollower | undefined {
    return this.outlook?.state()?.maps.followers.get(dataset);
  }

  /**
   * @internal The guardian's maps, configs and members as they are now (for the node's HTTP API,
   * metrics and query routers' checks), read beside its mailbox: never behind a map being applied.
   */
  cache(): Promise<GuardianCache | undefined> {
    const live = this.lifecycle === 'running' || this.lifecycle === 'paused';
    return Promise.resolve(live ? this.outlook?.cache() : undefined);
  }
}

/** Whether an error says that trying again can help (Kafka's and the stores' errors carry `retriable`). */
function isRetriable(e: unknown): boolean {
  return e instanceof Error && (e as { retriable?: boolean }).retriable === true;
}
