// What an application embeds to follow a dataset's shard map: a query router, an ingestion worker,
// a dashboard. It keeps a local copy current from the singleton's snapshot and events, resyncs by
// itself when it misses something or a new singleton takes over, and unsubscribes on close.
import type { Cancel } from '../cluster/clock.js';
import type { DatasetRef, SubscriberId } from '../core/ids.js';
import { ShardMapFollower } from '../core/map-follower.js';
import type { SubscriberMessage } from '../core/shard-manager/protocol.js';
import type { ShardMapper } from '../core/shard-mapper.js';
import type { LocalNode } from './local-node.js';
import { NEWEST_MAP_FORMAT } from '../core/map-codec.js';

export type ShardMapListener = (map: ShardMapper, message: SubscriberMessage) => void;

export class ShardEventSubscriber {
  readonly id: SubscriberId;
  private readonly follower: ShardMapFollower;
  private closed = false;
  private heard = false;
  private cancelWatchdog: Cancel = () => {};
  /** Resyncs asked for (a gap, a new epoch, or silence): useful to see how often messages were lost. */
  resyncs = 0;

  /**
   * Gotchas: a subscription can be lost with its request or in a failover; a subscriber that hears
   * nothing for `2.5 ×` the singleton's publish interval (it hears the map's stamp at every digest)
   * subscribes again, as does one whose map is older than the digest says.
   */
  constructor(
    private readonly node: LocalNode,
    readonly dataset: DatasetRef,
    private readonly listener: ShardMapListener = () => {},
  ) {
    this.follower = new ShardMapFollower(dataset);
    this.id = node.registerSubscriber((m) => this.onMessage(m), undefined, dataset);
    this.subscribe();
    this.watch(Math.ceil(node.services.settings.publishIntervalMs * 2.5));
  }

  private subscribe(): void {
    this.node.tell({ type: 'Subscribe', subscriber: this.id, dataset: this.dataset, mapFormat: NEWEST_MAP_FORMAT });
  }

  private watch(everyMs: number): void {
    const incarnation = this.node.incarnation;
    this.cancelWatchdog = this.node.services.clock.schedule(everyMs, () => {
      // A subscriber dies with its node's incarnation.
      if (this.closed || this.node.incarnation !== incarnation || this.node.state === 'crashed') return;
      if (!this.heard) {
        this.resyncs += 1;
        this.subscribe();
      }
      this.heard = false;
      this.watch(everyMs);
    });
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
    this.cancelWatchdog();
    this.node.unregisterSubscriber(this.id);
    this.node.tell({ type: 'Unsubscribe', subscriber: this.id, dataset: this.dataset });
  }

  private onMessage(m: SubscriberMessage): void {
    if (this.closed) return;
    // Silence is what the watchdog looks for: before its first map a subscriber has heard nothing
    // that counts (its subscription or its answer may have been lost).
    if (this.follower.mapper || m.type === 'CurrentShardSnapshot') this.heard = true;
    let outcome: 'applied' | 'stale' | 'gap' = 'stale';
    if (m.type === 'CurrentShardSnapshot') outcome = this.follower.applySnapshot(m.snapshot);
    else if (m.type === 'StampedShardEvent') outcome = this.follower.applyEvent(m);
    else if (m.type === 'ShardMapStamp') {
      // The digest's stamp: nothing to apply; behind it (or with no map at all), this subscriber
      // missed something.
      if (m.dataset !== this.dataset || this.follower.checkStamp(m) !== 'gap') return;
      outcome = 'gap';
      if (!this.follower.mapper) {
        this.resyncs += 1;
        return this.subscribe();
      }
    }
    // Before the first map, changes are a gap by nature: the snapshot asked for is on its way
    // (the digest or the watchdog asks again if it was lost).
    if (outcome === 'gap' && this.follower.mapper) {
      // Subscribing again is how a subscriber resyncs: the singleton answers with a fresh snapshot.
      this.resyncs += 1;
      this.subscribe();
    }
    if (outcome === 'applied' && this.follower.mapper) this.listener(this.follower.mapper, m);
  }
}
