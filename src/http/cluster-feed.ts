// The live feed behind `GET /api/v1/events` (server-sent events) and the web page. While at least
// one client listens, the node follows every dataset with its own `ShardEventSubscriber`; each map
// change (and, for membership changes that move no shard, a slow tick) makes one fresh cluster view,
// sent to every client. Views are coalesced, so a burst of shard events costs one request to the
// singleton, not one per event.
import { ShardEventSubscriber } from '../client/shard-event-subscriber.js';
import type { DatasetRef } from '../core/ids.js';
import { ApiError } from './api-error.js';
import { clusterView, type ClusterView } from './cluster-view.js';
import type { SingletonClient } from './singleton-client.js';

/** One message of the feed: a view, or why there is none right now. */
export type FeedMessage =
  { readonly type: 'view'; readonly view: ClusterView } | { readonly type: 'unavailable'; readonly error: string; readonly reason: string };
type Client = (message: FeedMessage) => void;

export interface ClusterFeedOptions {
  /**
   * Coalescing window of map changes (default 25 ms): long enough for the records of one decision,
   * short enough that a page shows a change well within 200 ms. A burst costs no more for it:
   * views are built one at a time, and changes during a build make one more build after it.
   */
  readonly debounceMs?: number;
  /** A view is sent at least this often, for changes no shard event announces (default 2000 ms). */
  readonly refreshMs?: number;
}

export class ClusterFeed {
  private readonly clients = new Set<Client>();
  private readonly subscribers = new Map<DatasetRef, ShardEventSubscriber>();
  /** The node incarnation the subscribers live in: a restarted node needs new ones. */
  private incarnation: string | undefined;
  private last: FeedMessage | undefined;
  private pending: NodeJS.Timeout | undefined;
  private ticker: NodeJS.Timeout | undefined;
  private building = false;
  private again = false;
  private readonly debounceMs: number;
  private readonly refreshMs: number;

  constructor(
    private readonly singleton: SingletonClient,
    options: ClusterFeedOptions = {},
  ) {
    this.debounceMs = options.debounceMs ?? 25;
    this.refreshMs = options.refreshMs ?? 2_000;
  }

  /** Adds a client; it gets the last message at once (if any) and every later one. Returns its removal. */
  listen(client: Client): () => void {
    this.clients.add(client);
    if (this.last) client(this.last);
    if (this.clients.size === 1) this.begin();
    return () => {
      this.clients.delete(client);
      if (this.clients.size === 0) this.end();
    };
  }

  close(): void {
    this.clients.clear();
    this.end();
  }

  private begin(): void {
    this.ticker = setInterval(() => this.changed(), this.refreshMs);
    this.changed();
  }

  private end(): void {
    clearInterval(this.ticker);
    clearTimeout(this.pending);
    this.ticker = undefined;
    this.pending = undefined;
    for (const s of this.subscribers.values()) s.close();
    this.subscribers.clear();
    this.last = undefined;
  }

  private changed(): void {
    if (this.pending || this.clients.size === 0) return;
    this.pending = setTimeout(() => {
      this.pending = undefined;
      void this.build();
    }, this.debounceMs);
  }

  private async build(): Promise<void> {
    if (this.building) {
      this.again = true;
      return;
    }
    this.building = true;
    try {
      const view = await clusterView(this.singleton);
      this.follow(view.datasets.map((d) => d.name as DatasetRef));
      this.send({ type: 'view', view });
    } catch (e) {
      const error = e instanceof ApiError ? e.error : 'InternalError';
      this.send({ type: 'unavailable', error, reason: e instanceof Error ? e.message : String(e) });
    } finally {
      this.building = false;
      if (this.again) {
        this.again = false;
        this.changed();
      }
    }
  }

  /** Follows exactly these datasets: a subscriber for each new one, closed for each removed one. */
  private follow(datasets: readonly DatasetRef[]): void {
    if (this.clients.size === 0 || this.singleton.node.state !== 'running') return;
    const wanted = new Set(datasets);
    const renewAll = this.incarnation !== this.singleton.node.incarnation;
    this.incarnation = this.singleton.node.incarnation;
    for (const [ref, s] of this.subscribers) {
      if (renewAll || !wanted.has(ref)) {
        s.close();
        this.subscribers.delete(ref);
      }
    }
    for (const ref of wanted)
      if (!this.subscribers.has(ref)) this.subscribers.set(ref, new ShardEventSubscriber(this.singleton.node, ref, () => this.changed()));
  }

  private send(message: FeedMessage): void {
    if (this.clients.size === 0) return;
    this.last = message;
    for (const client of this.clients) client(message);
  }
}
