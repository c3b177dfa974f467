// What a client knows of a cluster without being a member: every dataset's map, followed from the
// bus's events topic exactly as a node's guardian follows it (`FollowedMaps`: changes applied,
// whole maps asked for with `SyncMaps` on a gap, a new epoch or a digest ahead), and where each node
// serves each dataset (the endpoints topic). It never subscribes at the singleton: `SyncMaps`
// leaves nothing behind there, so a client that dies leaves nothing to clean up.
import type { Bus, BusRecord, BusSubscription } from '../cluster/bus.js';
import type { Cancel, Clock } from '../cluster/clock.js';
import type { DatasetConfig } from '../core/dataset-config.js';
import type { DatasetRef, NodeId, SubscriberId } from '../core/ids.js';
import type { ShardMapFollower } from '../core/map-follower.js';
import { FollowedMaps } from '../protocol/followed-maps.js';
import { parseEventsMessage } from '../protocol/wire-events.js';
import { encodeInboxMessage, topicsFor, WIRE_FORMAT, type Topics } from '../protocol/wire.js';
import { helloRecord, parseEndpointsRecord, type Endpoint } from '../protocol/routed-wire.js';
import { ShardherdClientError } from './client-errors.js';
import { NEWEST_MAP_FORMAT } from '../core/map-codec.js';

export interface ClusterFollowerParams {
  readonly bus: Bus;
  readonly clock: Clock;
  readonly topicPrefix: string;
  /** This client's id on the bus (its group and its `SyncMaps` subscriber id derive from it). */
  readonly id: string;
  /** How long a `SyncMaps` waits for its answer before it is asked again. */
  readonly syncRetryMs: number;
  /** Hears malformed records and handler errors (the client logs them). */
  readonly onProblem: (what: string, detail: unknown) => void;
}

type Waiter = { readonly resolve: () => void; readonly reject: (e: Error) => void };

export class ClusterFollower {
  readonly topics: Topics;
  readonly subscriber: SubscriberId;
  private readonly maps: FollowedMaps;
  private readonly endpoints = new Map<DatasetRef, Map<NodeId, Endpoint>>();
  private readonly waiters = new Map<DatasetRef, Waiter[]>();
  private readonly changeListeners = new Set<() => void>();
  private subscriptions: BusSubscription[] = [];
  private syncTimer: Cancel | undefined;
  private maxEpoch = -1;
  private heardSingleton = false;
  private readyWaiters: (() => void)[] = [];
  private lastHello = Number.NEGATIVE_INFINITY;
  private closed = false;

  constructor(private readonly p: ClusterFollowerParams) {
    this.topics = topicsFor(p.topicPrefix);
    this.subscriber = `client:${p.id}/maps` as SubscriberId;
    this.maps = new FollowedMaps({
      mapChanged: (dataset) => {
        this.settle(dataset);
        for (const l of this.changeListeners) l();
      },
      membersChanged: () => this.heard(),
      datasetGone: (dataset) => this.endpoints.delete(dataset),
      deliver: () => {},
      askSync: (wanted) => {
        this.syncTimer?.();
        this.syncTimer = p.clock.schedule(p.syncRetryMs, () => {
          this.syncTimer = undefined;
          if (!this.closed) this.maps.syncFailed();
        });
        const request = { type: 'SyncMaps' as const, subscriber: this.subscriber, ...wanted, mapFormat: NEWEST_MAP_FORMAT };
        p.bus
          .produce(this.topics.inbox, encodeInboxMessage({ format: WIRE_FORMAT, kind: 'request', request }))
          .catch((e: unknown) => p.onProblem('asking the singleton for maps failed; asked again later', e));
      },
    });
  }

  /** Subscribes to the events and endpoints topics; `SyncMaps` for everything; hello to the serving nodes. */
  async open(): Promise<void> {
    const group = `${this.p.topicPrefix}.client.${this.p.id}`;
    const onError = (e: unknown, record: BusRecord) => this.p.onProblem(`bus record of ${record.topic} at ${record.offset} not handled`, e);
    this.subscriptions.push(await this.p.bus.subscribe(this.topics.events, group, (r) => this.onEvents(r), { onError }));
    this.subscriptions.push(await this.p.bus.subscribe(this.topics.endpoints, group, (r) => this.onEndpoints(r), { onError }));
    this.maps.want({ all: true, members: true });
    this.hello();
  }

  /** Resolves once the singleton has answered (the members it publishes come after the maps it sent). */
  whenReady(): Promise<void> {
    if (this.heardSingleton) return Promise.resolve();
    return new Promise((resolve) => this.readyWaiters.push(resolve));
  }

  follower(dataset: DatasetRef): ShardMapFollower | undefined {
    return this.maps.followers.get(dataset);
  }

  config(dataset: DatasetRef): DatasetConfig | undefined {
    return this.maps.configs.get(dataset);
  }

  endpoint(dataset: DatasetRef, node: NodeId): Endpoint | undefined {
    return this.endpoints.get(dataset)?.get(node);
  }

  /** Called after every change of any map the client applies, and of any node's endpoints. */
  onChange(listener: () => void): () => void {
    this.changeListeners.add(listener);
    return () => this.changeListeners.delete(listener);
  }

  /**
   * The dataset's map, asked for if the client has none: resolves once it has it, rejects with
   * `UNKNOWN_DATASET` when the singleton does not know it.
   */
  wantMap(dataset: DatasetRef): Promise<void> {
    if (this.maps.followers.get(dataset)?.mapper && this.maps.configs.has(dataset)) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const list = this.waiters.get(dataset) ?? [];
      list.push({ resolve, reject });
      this.waiters.set(dataset, list);
      this.maps.want({ dataset });
    });
  }

  /** Asks every serving node to announce its endpoints again (at most every 200 ms). */
  hello(): void {
    const now = this.p.clock.now();
    if (now - this.lastHello < 200) return;
    this.lastHello = now;
    this.p.bus.produce(this.topics.endpoints, helloRecord(this.p.id)).catch((e: unknown) => this.p.onProblem('saying hello to the serving nodes failed', e));
  }

  async close(): Promise<void> {
    this.closed = true;
    this.syncTimer?.();
    const subs = this.subscriptions;
    this.subscriptions = [];
    await Promise.all(subs.map((s) => s.close().catch(() => undefined)));
    for (const [dataset, list] of this.waiters) for (const w of list) w.reject(new ShardherdClientError('CLOSED', 'the client is closed', { dataset }));
    this.waiters.clear();
  }

  private heard(): void {
    this.heardSingleton = true;
    for (const r of this.readyWaiters.splice(0)) r();
  }

  private settle(dataset: DatasetRef, error?: Error): void {
    const list = this.waiters.get(dataset);
    if (!list) return;
    this.waiters.delete(dataset);
    for (const w of list) {
      if (error) w.reject(error);
      else w.resolve();
    }
  }

  private onEvents(record: BusRecord): void {
    if (this.closed) return;
    const parsed = parseEventsMessage(record.value);
    if (!parsed.ok) return this.p.onProblem(`malformed record of ${record.topic} at ${record.offset} skipped`, parsed.error.reason);
    const m = parsed.value;
    // Nothing from a singleton older than the newest one heard (as a node's guardian).
    if (m.epoch < this.maxEpoch) return;
    this.maxEpoch = m.epoch;
    switch (m.kind) {
      case 'map-changes':
        return this.maps.changes(m);
      case 'map-snapshot':
        return this.maps.snapshot(m);
      case 'members':
        return this.maps.membersRecord(m);
      case 'members-change':
        return this.maps.membersChange(m);
      case 'digest':
        this.heard();
        return this.maps.digest(m);
      case 'publish':
        if (m.message.type === 'DatasetRemoved' || (m.message.type === 'DatasetUnknown' && m.to.includes(this.subscriber))) {
          const dataset = m.message.dataset;
          this.maps.gone(dataset);
          this.settle(dataset, new ShardherdClientError('UNKNOWN_DATASET', `the cluster ${this.p.topicPrefix} has no dataset ${dataset}`, { dataset }));
        }
        return;
      case 'fence':
      case 'release':
      case 'cluster-state-request':
        return;
    }
  }

  private onEndpoints(record: BusRecord): void {
    const parsed = parseEndpointsRecord(record.value);
    if (!parsed.ok) return this.p.onProblem(`malformed record of ${record.topic} at ${record.offset} skipped`, parsed.error.reason);
    const r = parsed.value;
    if (r.kind === 'hello') return;
    let byNode = this.endpoints.get(r.dataset);
    if (r.kind === 'endpoint') {
      if (!byNode) this.endpoints.set(r.dataset, (byNode = new Map()));
      const { format: _f, kind: _k, ...endpoint } = r;
      byNode.set(r.node, endpoint);
    } else if (byNode?.get(r.node)?.incarnation === r.incarnation) {
      byNode.delete(r.node);
    }
    for (const l of this.changeListeners) l();
  }
}
