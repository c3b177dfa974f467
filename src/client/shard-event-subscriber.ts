// What an application embeds to follow a dataset's shard map: a query router, an ingestion worker,
// a dashboard. It keeps a local copy current from the singleton's snapshot and events, resyncs by
// itself when it misses something or a new singleton takes over, and unsubscribes on close.
import type { DatasetRef, SubscriberId } from '../core/ids.js';
import { ShardMapFollower } from '../core/map-follower.js';
import type { SubscriberMessage } from '../core/shard-manager/protocol.js';
import type { ShardMapper } from '../core/shard-mapper.js';
import type { ShardherdNode } from '../actors/node-process.js';

export type ShardMapListener = (map: ShardMapper, message: SubscriberMessage) => void;

export class ShardEventSubscriber {
  readonly id: SubscriberId;
  private readonly follower: ShardMapFollower;
  private closed = false;
  /** Resyncs asked for (a gap or a new epoch): useful to see how often messages were lost. */
  resyncs = 0;

  constructor(
    private readonly node: ShardherdNode,
    readonly dataset: DatasetRef,
    private readonly listener: ShardMapListener = () => {},
  ) {
    this.follower = new ShardMapFollower(dataset);
    this.id = node.registerSubscriber((m) => this.onMessage(m));
    node.tell({ type: 'Subscribe', subscriber: this.id, dataset });
  }

  /** The current map, or undefined before the first snapshot. */
  get map(): ShardMapper | undefined {
    return this.follower.mapper;
  }

  get epoch(): number {
    return this.follower.epoch;
  }

  get version(): number {
    return this.follower.version;
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.node.unregisterSubscriber(this.id);
    this.node.tell({ type: 'Unsubscribe', subscriber: this.id, dataset: this.dataset });
  }

  private onMessage(m: SubscriberMessage): void {
    if (this.closed) return;
    let outcome: 'applied' | 'stale' | 'gap' = 'stale';
    if (m.type === 'CurrentShardSnapshot') outcome = this.follower.applySnapshot(m.snapshot);
    else if (m.type === 'StampedShardEvent') outcome = this.follower.applyEvent(m);
    if (outcome === 'gap') {
      // Subscribing again is how a subscriber resyncs: the singleton answers with a fresh snapshot.
      this.resyncs += 1;
      this.node.tell({ type: 'Subscribe', subscriber: this.id, dataset: this.dataset });
    }
    if (outcome === 'applied' && this.follower.mapper) this.listener(this.follower.mapper, m);
  }
}
