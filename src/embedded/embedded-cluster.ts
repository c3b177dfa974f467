// N shardherd nodes in one process over in-memory adapters (docs/ARCHITECTURE.md §8): the same nodes, actors
// and core as a real deployment, with a memory bus and membership, a memory or file MetaStore and a
// synthetic source. It serves the demo, the simulator and users who want one machine.
import { pino, type Logger } from 'pino';
import { RealClock, type Clock } from '../cluster/clock.js';
import { MemoryBus, type MemoryBusOptions } from '../cluster/memory-bus.js';
import { MemoryMembershipService } from '../cluster/memory-membership.js';
import { nodeId, type NodeId } from '../core/ids.js';
import type { Reply } from '../core/shard-manager/protocol.js';
import { CountingSink } from '../ingest/counting-sink.js';
import type { RecordSink } from '../ingest/ingestion-source.js';
import { SyntheticSource, type SyntheticSourceOptions } from '../ingest/synthetic-source.js';
import { MemoryMetaStore } from '../store/memory-meta-store.js';
import type { MetaStore } from '../store/meta-store.js';
import { ShardherdNode, type ClusterServices } from '../actors/node-process.js';
import { runtimeSettings, type RuntimeOptions } from '../actors/settings.js';
import type { Request } from '../actors/wire.js';
import { NodeMetrics } from '../metrics/node-metrics.js';

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
  /** Where records go; default a `CountingSink` (see `sink`). */
  readonly sink?: RecordSink;
  /** Unique per cluster in one process; default `embedded`. */
  readonly name?: string;
  /** Gives every node a Prometheus registry (`node.metrics`); default true. The simulator turns it off. */
  readonly metrics?: boolean;
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
  readonly metaStore: MetaStore;
  readonly source: SyntheticSource;
  readonly sink: RecordSink;
  readonly log: Logger;
  readonly services: ClusterServices;
  private readonly nodeMap = new Map<NodeId, ShardherdNode>();
  private readonly withMetrics: boolean;

  constructor(options: EmbeddedClusterOptions = {}) {
    this.clock = options.clock ?? new RealClock();
    this.withMetrics = options.metrics ?? true;
    this.log = options.log ?? pino({ level: 'silent' });
    this.bus = new MemoryBus(this.clock, options.bus);
    this.membership = new MemoryMembershipService(this.clock, {
      sessionTimeoutMs: options.sessionTimeoutMs ?? 3_000,
      heartbeatIntervalMs: options.heartbeatIntervalMs ?? 500,
      onListenerError: (e) => this.log.error({ err: e }, 'membership listener failed'),
    });
    this.metaStore = options.metaStore ?? new MemoryMetaStore();
    this.source = new SyntheticSource(this.clock, options.source);
    this.sink = options.sink ?? new CountingSink();
    this.services = {
      clock: this.clock,
      bus: this.bus,
      connectMembership: () => this.membership.connect(),
      metaStore: this.metaStore,
      source: this.source,
      sink: this.sink,
      settings: runtimeSettings(options.settings),
      log: this.log,
      systemPrefix: options.name ?? 'embedded',
    };
    for (const spec of options.nodes ?? ['node-1', 'node-2', 'node-3', 'node-4', 'node-5']) {
      if (typeof spec === 'string') this.add(spec);
      else this.add(spec.name, spec);
    }
  }

  /** Adds a node (not started), optionally in a rack and with a weight. */
  add(name: string, placement: { readonly rack?: string; readonly weight?: number } = {}): ShardherdNode {
    const id = nodeId(name);
    if (this.nodeMap.has(id)) throw new Error(`node ${name} already exists`);
    const rackAndWeight = { ...(placement.rack === undefined ? {} : { rack: placement.rack }), ...(placement.weight === undefined ? {} : { weight: placement.weight }) };
    const node = new ShardherdNode(this.services, id, rackAndWeight, this.withMetrics ? { metrics: new NodeMetrics() } : {});
    this.nodeMap.set(id, node);
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

  /** Starts every node that is not running, one after the other (join order = list order). */
  async start(): Promise<void> {
    for (const n of this.nodes) if (n.state === 'stopped') await n.start();
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

  /** Sets a dataset up from an untrusted config (validated by the singleton). */
  setupDataset(config: unknown, timeoutMs?: number): Promise<Reply> {
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
    for (const n of [...this.nodes].sort((a, b) => rank(b) - rank(a))) if (n.state === 'running') await n.stop();
    for (const n of this.nodes) if (n.state === 'paused') n.crash();
  }
}
