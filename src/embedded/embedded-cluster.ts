// N shardherd nodes in one process over in-memory adapters (docs/ARCHITECTURE.md §8): the same nodes, actors
// and core as a real deployment, with a memory bus and membership, a memory or file MetaStore and a
// synthetic source. It serves the demo, the simulator and users who want one machine.
import { createRequire } from 'node:module';
import type { LoadWeightHook } from '../actors/load-meter.js';
import type { Logger } from 'pino';
import { RealClock, type Clock } from '../cluster/clock.js';
import { MemoryBus, type MemoryBusOptions } from '../cluster/memory-bus.js';
import { MemoryMembershipService } from '../cluster/memory-membership.js';
import { MemoryDetectorNetwork, type MemoryDetectorNetworkOptions } from '../cluster/failure-detector/memory-transport.js';
import type { DatasetConfigInput } from '../core/dataset-config.js';
import { ShardherdError } from '../core/errors.js';
import { nodeId, type DatasetRef, type NodeId } from '../core/ids.js';
import type { Reply } from '../core/shard-manager/protocol.js';
import { CountingSink } from '../ingest/counting-sink.js';
import type { RecordSink } from '../ingest/ingestion-source.js';
import { SyntheticSource, type SyntheticSourceOptions } from '../ingest/synthetic-source.js';
import { MemoryMetaStore } from '../store/memory-meta-store.js';
import type { MetaStore } from '../store/meta-store.js';
import { ShardherdNode, type ClusterServices, type DetectorServices } from '../actors/node-process.js';
import { checkNodePlacement } from '../actors/node-placement.js';
import { runtimeSettings, type RuntimeOptions } from '../actors/settings.js';
import type { Request } from '../protocol/wire.js';
import { NodeMetrics } from '../metrics/node-metrics.js';
import { describeUnconverged, unconvergedShards } from './convergence.js';
import { registerLocalNode } from './local-nodes.js';

export type { Request };

/**
 * A silent pino logger for a cluster given none. pino is loaded here, when the first such cluster is
 * made, not when `shardherd` is imported: it takes tens of milliseconds to load.
 */
function silentLogger(): Logger {
  const { pino } = createRequire(import.meta.url)('pino') as typeof import('pino');
  return pino({ level: 'silent' });
}

/** How often the waits of `start` and `whenConverged` look again. */
const POLL_MS = 25;
const DEFAULT_START_TIMEOUT_MS = 30_000;
const DEFAULT_CONVERGE_TIMEOUT_MS = 30_000;

/** A wait of the embedded cluster (`start`, `whenConverged`) ran out of time; the message says what is still missing. */
export class ClusterWaitTimeoutError extends ShardherdError {
  constructor(
    readonly waitedFor: string,
    readonly timeoutMs: number,
    readonly missing: readonly string[],
  ) {
    super('WAIT_TIMEOUT', `${waitedFor}: not reached within ${timeoutMs} ms: ${missing.join('; ') || 'nothing (it was reached just now)'}`, {}, true);
  }
}

export interface EmbeddedClusterOptions {
  /** Node names, or names with a rack and weight; default `node-1` … `node-5`, no racks. */
  readonly nodes?: readonly (string | EmbeddedNodeSpec)[];
  readonly clock?: Clock;
  /** Failure detection: a node silent for this long is removed. Default 3000 ms. */
  readonly sessionTimeoutMs?: number;
  /** Default 500 ms. */
  readonly heartbeatIntervalMs?: number;
  readonly metaStore?: MetaStore;
  readonly settings?: RuntimeOptions;
  readonly log?: Logger;
  readonly bus?: MemoryBusOptions;
  readonly source?: SyntheticSourceOptions;
  /**
   * Where records go: one sink for every node, or a function that makes each node its own sink
   * (called once per node, when it is added; see `sinkOf`). Default one `CountingSink` for all.
   */
  readonly sink?: RecordSink | ((node: NodeId) => RecordSink);
  /** Unique per cluster in one process; default `embedded`. */
  readonly name?: string;
  /** Gives every node a Prometheus registry (`node.metrics`); default true. The simulator turns it off. */
  readonly metrics?: boolean;
  /**
   * The in-process network of the failure detector, used when `settings.failureDetector.mode` is
   * `heartbeat` (docs/ARCHITECTURE.md §11): its latency and the simulator's link faults, and the
   * random choice of helpers (seeded in the simulator).
   */
  readonly detector?: MemoryDetectorNetworkOptions & Pick<DetectorServices, 'pick' | 'clockOf' | 'observe'>;
  /**
   * Each node's own load figure per copy (CPU, series count...), for datasets placed by load with
   * `loadBalance.measure: "weight"` (docs/PLACEMENT.md, "Load reports").
   */
  readonly loadWeight?: LoadWeightHook;
}

/** An embedded node with its rack (isolation group for replicas) and weight. */
export interface EmbeddedNodeSpec {
  readonly name: string;
  readonly rack?: string;
  readonly weight?: number;
}

export class EmbeddedCluster {
  readonly clock: Clock;
  readonly bus: MemoryBus;
  readonly membership: MemoryMembershipService;
  /** The failure detector's in-process network (idle unless `failureDetector.mode` is `heartbeat`). */
  readonly detectorNetwork: MemoryDetectorNetwork;
  readonly metaStore: MetaStore;
  readonly source: SyntheticSource;
  /** The sink every node shares; undefined when each node has its own (`sinkOf`). */
  readonly sink: RecordSink | undefined;
  readonly log: Logger;
  /** The prefix of the cluster's bus topics (`settings.topicPrefix`, default `shardherd`): what a `ShardherdClient` follows. */
  readonly topicPrefix: string;
  /** @internal The ports every node is built on (each node with its own sink when there is a sink factory). */
  readonly services: ClusterServices;
  private readonly nodeMap = new Map<NodeId, ShardherdNode>();
  private readonly sinks = new Map<NodeId, RecordSink>();
  private readonly sinkFor: (node: NodeId) => RecordSink;
  private readonly withMetrics: boolean;

  constructor(options: EmbeddedClusterOptions = {}) {
    this.clock = options.clock ?? new RealClock();
    this.withMetrics = options.metrics ?? true;
    this.log = options.log ?? silentLogger();
    this.bus = new MemoryBus(this.clock, options.bus);
    this.membership = new MemoryMembershipService(this.clock, {
      sessionTimeoutMs: options.sessionTimeoutMs ?? 3_000,
      heartbeatIntervalMs: options.heartbeatIntervalMs ?? 500,
      onListenerError: (e) => this.log.error({ err: e }, 'membership listener failed'),
    });
    this.metaStore = options.metaStore ?? new MemoryMetaStore();
    const settings = runtimeSettings(options.settings);
    this.detectorNetwork = new MemoryDetectorNetwork(this.clock, { ...options.detector, cluster: settings.topicPrefix });
    const { pick, clockOf, observe } = options.detector ?? {};
    this.source = new SyntheticSource(this.clock, options.source);
    const sink = options.sink ?? new CountingSink();
    this.sink = typeof sink === 'function' ? undefined : sink;
    this.sinkFor = typeof sink === 'function' ? sink : () => sink;
    this.services = {
      clock: this.clock,
      bus: this.bus,
      connectMembership: () => this.membership.connect(),
      metaStore: this.metaStore,
      source: this.source,
      // Replaced per node in `add`: this one only answers a node built on these services by hand.
      sink: this.sink ?? { accept: () => Promise.reject(new Error('each embedded node has its own sink: see EmbeddedCluster.sinkOf')) },
      settings,
      log: this.log,
      systemPrefix: options.name ?? 'embedded',
      ...(options.loadWeight ? { loadWeight: options.loadWeight } : {}),
      // The cluster's clock: the one the embedded nodes, the membership and the simulator share.
      detector: {
        transport: (owner, dropped) => this.detectorNetwork.transport(owner, dropped),
        clock: this.clock,
        ...(pick ? { pick } : {}),
        ...(clockOf ? { clockOf } : {}),
        ...(observe ? { observe } : {}),
      },
    };
    this.topicPrefix = this.services.settings.topicPrefix;
    for (const spec of options.nodes ?? ['node-1', 'node-2', 'node-3', 'node-4', 'node-5']) {
      if (typeof spec === 'string') this.add(spec);
      else this.add(spec.name, spec);
    }
  }

  /** Adds a node (not started), optionally in a rack and with a weight. */
  add(name: string, placement: { readonly rack?: string; readonly weight?: number } = {}): ShardherdNode {
    const id = nodeId(name);
    if (this.nodeMap.has(id)) throw new Error(`node ${name} already exists`);
    checkNodePlacement(name, placement);
    const rackAndWeight = {
      ...(placement.rack === undefined ? {} : { rack: placement.rack }),
      ...(placement.weight === undefined ? {} : { weight: placement.weight }),
    };
    const sink = this.sinkFor(id);
    this.sinks.set(id, sink);
    // The process's own figures (event-loop delay, heap) once, on the first node's metrics: every node runs in this process.
    const metrics = this.withMetrics ? new NodeMetrics({ defaultMetrics: this.nodeMap.size === 0 }) : undefined;
    const node = new ShardherdNode(this.services, id, rackAndWeight, { sink, ...(metrics ? { metrics } : {}) });
    this.nodeMap.set(id, node);
    registerLocalNode(node);
    return node;
  }

  get nodes(): ShardherdNode[] {
    return [...this.nodeMap.values()];
  }

  node(name: string): ShardherdNode {
    const n = this.nodeMap.get(name as NodeId);
    if (!n) throw new Error(`no node ${name}`);
    return n;
  }

  /** The sink a node's records go to (the shared sink, or the one the sink factory made for it). */
  sinkOf(name: string): RecordSink {
    const sink = this.sinks.get(name as NodeId);
    if (!sink) throw new Error(`no node ${name}`);
    return sink;
  }

  /**
   * Starts every node that is not running, one after the other (join order = list order), and
   * resolves once a singleton has recovered, so `singletonNode()` is defined and requests are
   * answered. Rejects with a `ClusterWaitTimeoutError` when no singleton recovers within
   * `timeoutMs` (default 30 s).
   *
   * Gotchas: the wait runs on the cluster's clock; with a `SimulatedClock` call `startNodes()` and
   * advance the clock instead, or the wait never ends.
   */
  async start(options: { readonly timeoutMs?: number } = {}): Promise<void> {
    await this.startNodes();
    const timeoutMs = options.timeoutMs ?? DEFAULT_START_TIMEOUT_MS;
    await this.waitFor('a recovered singleton', timeoutMs, async () => {
      const singleton = await this.singletonNode();
      if (!singleton) return ['no running node holds the singleton lease'];
      const state = await singleton.singletonState();
      return state?.phase === 'active' ? [] : [`the singleton on ${singleton.node} is still recovering`];
    });
  }

  /** Starts every node that is not running, one after the other, without waiting for the singleton. */
  async startNodes(): Promise<void> {
    for (const n of this.nodes) if (n.state === 'stopped') await n.start();
  }

  /**
   * Resolves when every shard of the dataset (or of every dataset, without one) has as many copies
   * as its replication factor, each Active and Available on a running member, as the singleton's
   * map says. Rejects with a `ClusterWaitTimeoutError` naming the shards still missing after
   * `timeoutMs` (default 30 s).
   *
   * Gotchas: a replication factor above the number of nodes never converges; a dataset not set up
   * yet counts as not converged (it may be on its way), and so does a cluster without datasets
   * when no dataset is named.
   */
  async whenConverged(dataset?: string, options: { readonly timeoutMs?: number } = {}): Promise<void> {
    const timeoutMs = options.timeoutMs ?? DEFAULT_CONVERGE_TIMEOUT_MS;
    const isLive = (id: NodeId) => {
      const n = this.nodeMap.get(id);
      return n !== undefined && n.state === 'running' && n.isMember;
    };
    await this.waitFor(dataset === undefined ? 'every dataset converged' : `dataset ${dataset} converged`, timeoutMs, async () => {
      const singleton = await this.singletonNode();
      const state = await singleton?.singletonState();
      if (!singleton || state?.phase !== 'active') return ['no recovered singleton'];
      const datasets = dataset === undefined ? [...state.datasets.values()] : [state.datasets.get(dataset as DatasetRef)];
      if (datasets.length === 0) return ['no dataset is set up'];
      return datasets.flatMap((d) =>
        d ? describeUnconverged(d.config.ref, unconvergedShards(d.config, d.mapper, isLive)) : [`dataset ${dataset} is not set up`],
      );
    });
  }

  /** Polls `missing` on the cluster's clock until it returns nothing, or throws at the deadline with its last answer. */
  private async waitFor(what: string, timeoutMs: number, missing: () => Promise<readonly string[]>): Promise<void> {
    // The nodes' timers do not keep the process alive (RealClock): a caller awaiting this wait at
    // the top of a script would otherwise see the process exit under it, unsettled.
    const keepAlive = setInterval(() => {}, 60_000);
    try {
      const deadline = this.clock.now() + timeoutMs;
      for (;;) {
        const left = await missing();
        if (left.length === 0) return;
        if (this.clock.now() >= deadline) throw new ClusterWaitTimeoutError(what, timeoutMs, left);
        await new Promise<void>((resolve) => this.clock.schedule(POLL_MS, resolve));
      }
    } finally {
      clearInterval(keepAlive);
    }
  }

  /** The node whose singleton holds the lease now, if it is running. */
  async singletonNode(): Promise<ShardherdNode | undefined> {
    const lease = await this.metaStore.readLease();
    if (!lease) return undefined;
    const n = this.nodeMap.get(lease.node);
    return n && n.incarnation === lease.incarnation && n.state === 'running' ? n : undefined;
  }

  /** Any running member, to send requests from. */
  anyRunning(): ShardherdNode | undefined {
    return this.nodes.find((n) => n.state === 'running' && n.isMember);
  }

  /** Sends a request from any running member and waits for the reply. */
  request(build: Parameters<ShardherdNode['request']>[0], timeoutMs?: number): Promise<Reply> {
    const n = this.anyRunning();
    if (!n) return Promise.reject(new Error('no running member to send the request from'));
    return n.request(build, timeoutMs);
  }

  /**
   * Sets a dataset up. The singleton validates the config and fills its defaults (as
   * `validateDatasetConfig` does): the reply is `DatasetVerified`, or `InvalidDatasetConfig` naming
   * the bad field, or `DatasetExists` with the differences when another config has that name.
   *
   * Gotchas: the reply comes before the shards are placed; `whenConverged(ref)` waits for that.
   */
  setupDataset(config: DatasetConfigInput, timeoutMs?: number): Promise<Reply> {
    // The config goes to the singleton as given: it validates every SetupDataset (also from the bus).
    return this.request((replyTo) => ({ type: 'SetupDataset', config, replyTo }) as unknown as Request, timeoutMs);
  }

  /**
   * Stops every node gracefully, the newest member first and the singleton's node (the oldest)
   * last, so the singleton does not move while the cluster shuts down.
   */
  async stop(): Promise<void> {
    const order = this.membership.view().members.map((m) => m.node as string);
    const rank = (n: ShardherdNode) => {
      const i = order.indexOf(n.node);
      return i < 0 ? Number.MAX_SAFE_INTEGER : i;
    };
    // Nobody stays to take the singleton's role: no handover.
    for (const n of [...this.nodes].sort((a, b) => rank(b) - rank(a))) if (n.state === 'running') await n.stop({ handOver: false });
    for (const n of this.nodes) if (n.state === 'paused') n.crash();
  }
}
