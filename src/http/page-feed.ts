// The status page's event stream (GET /api/v1/page/events). It follows the cluster feed (one view
// per burst of map changes, and one every refresh, each asked of the singleton) and, in between,
// this node's own copies of the maps (looked at every `pollMs`): a map change shows as soon as the
// node has it, the rest of the view when the singleton answers (`withFollowedMaps`). A page gets
// its view once, as a `snapshot`, then only what changed (`changes`); every sample of the members'
// ingestion goes out as `ingestion`. It keeps, for as long as pages watch (and a minute after, so a
// reload keeps it), a timeline of recent events and each shard's last changes. Messages are
// serialised once for every page that listens.
import type { ShardherdNode } from '../actors/node-process.js';
import type { ClusterFeed, FeedMessage } from './cluster-feed.js';
import type { ClusterView } from './cluster-view.js';
import { withFollowedMaps, type FollowedMapLike } from './followed-view.js';
import type { IngestionSampler, NodeSample } from './ingestion-sampler.js';
import { diffViews, pageView, type PageView, type TimelineEvent } from './page-state.js';
import { StringTable } from '../core/string-table.js';
import { shardDetails, type ShardDetails } from './shard-details.js';

export interface PageFeedOptions {
  /** How often the node's own copies of the maps are looked at for changes (default 40 ms). */
  readonly pollMs?: number;
  /** How often the members' ingestion is read (default 2000 ms). */
  readonly sampleMs?: number;
  /** How long the feed keeps its state after the last page left (default 60 000 ms). */
  readonly lingerMs?: number;
  /** Events the timeline keeps (default 200). */
  readonly timelineSize?: number;
  /** Changes kept per shard (default 10). */
  readonly historySize?: number;
  /**
   * Shard events one update adds to the timeline (default 20): a drain changes hundreds of shards
   * at once; the rest is summed up in one line, and every shard's own history keeps its change.
   */
  readonly eventsPerUpdate?: number;
}

export interface PageMessage {
  readonly event: 'snapshot' | 'changes' | 'ingestion' | 'unavailable';
  /** The message as JSON, serialised once for every page. */
  readonly data: string;
}

export interface IngestionRows {
  readonly at: number;
  readonly nodes: readonly NodeSample[];
}

type Client = (message: PageMessage) => void;

const stampsOf = (maps: ReadonlyMap<string, FollowedMapLike> | undefined): string =>
  maps ? [...maps].map(([dataset, m]) => `${dataset}@${m.epoch}.${m.version}`).join(' ') : '';

export class PageFeed {
  private readonly clients = new Set<Client>();
  private readonly table = new StringTable();
  private view: PageView | undefined;
  /** The last view the singleton answered (through the cluster feed): all but the newest shards. */
  private described: ClusterView | undefined;
  /** The stamps of the node's maps the shown view was built from. */
  private shownStamps = '';
  private polling: NodeJS.Timeout | undefined;
  private building = false;
  private again = false;
  private timeline: TimelineEvent[] = [];
  private readonly history = new Map<string, TimelineEvent[]>();
  private ingestion: PageMessage | undefined;
  private unavailable: PageMessage | undefined;
  /** When the singleton stopped answering (the first failed view since the last answered one). */
  private unavailableSince: number | undefined;
  private stopFollowing: (() => void) | undefined;
  private sampling: NodeJS.Timeout | undefined;
  private lingering: NodeJS.Timeout | undefined;
  /** Counts the feed's starts and ends: a sample still under way when the feed ends is dropped. */
  private run = 0;
  private readonly sampleMs: number;
  private readonly pollMs: number;
  private readonly lingerMs: number;
  private readonly timelineSize: number;
  private readonly historySize: number;
  private readonly eventsPerUpdate: number;

  constructor(
    private readonly feed: ClusterFeed,
    private readonly sampler: IngestionSampler,
    /** The node whose maps the page shows (a function: the embedded demo's answering node changes). */
    private readonly node: () => ShardherdNode,
    options: PageFeedOptions = {},
  ) {
    this.sampleMs = options.sampleMs ?? 2_000;
    this.pollMs = options.pollMs ?? 40;
    this.lingerMs = options.lingerMs ?? 60_000;
    this.timelineSize = options.timelineSize ?? 200;
    this.historySize = options.historySize ?? 10;
    this.eventsPerUpdate = options.eventsPerUpdate ?? 20;
  }

  /** Adds a page: it gets the current snapshot (if any) at once, then every later message. Returns its removal. */
  listen(client: Client): () => void {
    clearTimeout(this.lingering);
    this.lingering = undefined;
    this.clients.add(client);
    if (this.view) {
      client(this.snapshot());
      if (this.ingestion) client(this.ingestion);
      if (this.unavailable) client(this.unavailable);
    }
    if (!this.stopFollowing) this.begin();
    return () => {
      this.clients.delete(client);
      if (this.clients.size === 0 && this.stopFollowing) this.lingering = setTimeout(() => this.end(), this.lingerMs);
    };
  }

  /** Whether it follows the cluster now (a page listens, or left less than `lingerMs` ago). */
  get active(): boolean {
    return this.stopFollowing !== undefined;
  }

  /** One shard's details from the current view, or undefined when the feed has no view or no such shard. */
  shard(dataset: string, shard: number): ShardDetails | undefined {
    return this.view && shardDetails(this.view, dataset, shard, this.sampler.copies(dataset, shard), this.history.get(`${dataset}/${shard}`) ?? []);
  }

  close(): void {
    this.clients.clear();
    this.end();
  }

  private begin(): void {
    this.run++;
    this.stopFollowing = this.feed.listen((m) => this.onFeed(m));
    this.scheduleSample(0);
    this.schedulePoll();
  }

  private end(): void {
    clearTimeout(this.lingering);
    clearTimeout(this.sampling);
    clearTimeout(this.polling);
    this.polling = undefined;
    this.described = undefined;
    this.shownStamps = '';
    this.lingering = undefined;
    this.sampling = undefined;
    this.stopFollowing?.();
    this.stopFollowing = undefined;
    this.run++;
    this.view = undefined;
    this.timeline = [];
    this.history.clear();
    this.ingestion = undefined;
    this.unavailable = undefined;
    this.unavailableSince = undefined;
    this.sampler.reset();
  }

  private onFeed(message: FeedMessage): void {
    if (message.type === 'unavailable') {
      // The outage began at its first failed view, not its latest: a page says since when it lasts.
      this.unavailableSince ??= Date.now();
      this.unavailable = { event: 'unavailable', data: JSON.stringify({ error: message.error, reason: message.reason, since: this.unavailableSince }) };
      this.send(this.unavailable);
      return;
    }
    this.unavailable = undefined;
    this.unavailableSince = undefined;
    this.described = message.view;
    void this.rebuild();
  }

  /** Looks at the node's maps now and then; a newer one than shown makes a new view at once. */
  private schedulePoll(): void {
    const run = this.run;
    this.polling = setTimeout(() => {
      void (async () => {
        if (this.described && stampsOf(await this.maps()) !== this.shownStamps) await this.rebuild();
        if (run === this.run) this.schedulePoll();
      })();
    }, this.pollMs);
  }

  private async maps(): Promise<ReadonlyMap<string, FollowedMapLike> | undefined> {
    const node = this.node();
    return node.state === 'running' ? ((await node.cache().catch(() => undefined))?.maps as ReadonlyMap<string, FollowedMapLike> | undefined) : undefined;
  }

  /** The singleton's last view with the node's newest maps, shown; one at a time (a call meanwhile makes one more after). */
  private async rebuild(): Promise<void> {
    if (this.building) {
      this.again = true;
      return;
    }
    this.building = true;
    try {
      do {
        this.again = false;
        const run = this.run;
        const maps = await this.maps();
        if (run !== this.run || !this.described) return;
        this.shownStamps = stampsOf(maps);
        this.show(maps ? withFollowedMaps(this.described, maps) : this.described);
      } while (this.again);
    } finally {
      this.building = false;
    }
  }

  private show(view: ClusterView): void {
    const next = pageView(view, this.table, Date.now());
    const prev = this.view;
    this.view = next;
    if (!prev) {
      this.send(this.snapshot());
      return;
    }
    const { changes, events } = diffViews(prev, next);
    const shown = this.record(events, next.at);
    // Nothing changed still says so: the page's "last updated" is the time of the last view it was sent.
    this.send({
      event: 'changes',
      data: JSON.stringify({ ...(changes ?? { at: next.at }), ...(shown.length > 0 ? { events: shown } : {}), ...this.outage() }),
    });
  }

  /**
   * During an outage the node's own maps still move the shards, but the rest of the view is the
   * singleton's last answer: such a message says since when, so the page does not call it live.
   */
  private outage(): { unavailableSince?: number } {
    return this.unavailableSince === undefined ? {} : { unavailableSince: this.unavailableSince };
  }

  /** Keeps the events (timeline and histories); returns those the timeline took. */
  private record(events: readonly TimelineEvent[], at: number): TimelineEvent[] {
    const shown: TimelineEvent[] = [];
    let shardEvents = 0;
    let left = 0;
    for (const e of events) {
      if (e.shard !== undefined) {
        const key = `${e.dataset}/${e.shard}`;
        const list = this.history.get(key) ?? [];
        list.push(e);
        if (list.length > this.historySize) list.shift();
        this.history.set(key, list);
        if (++shardEvents > this.eventsPerUpdate) {
          left++;
          continue;
        }
      }
      shown.push(e);
    }
    if (left > 0) shown.push({ at, more: left, what: `and ${left} more shard change${left === 1 ? '' : 's'} (each in its shard's history)` });
    this.timeline.push(...shown);
    if (this.timeline.length > this.timelineSize) this.timeline.splice(0, this.timeline.length - this.timelineSize);
    return shown;
  }

  private snapshot(): PageMessage {
    return { event: 'snapshot', data: JSON.stringify({ ...this.view, timeline: this.timeline, ...this.outage() }) };
  }

  private scheduleSample(delayMs: number): void {
    const run = this.run;
    this.sampling = setTimeout(() => void this.sample(run), delayMs);
  }

  private async sample(run: number): Promise<void> {
    if (run !== this.run) return;
    if (this.view) {
      try {
        const nodes = await this.sampler.sample(this.view.members);
        if (run !== this.run) return;
        const rows: IngestionRows = { at: Date.now(), nodes };
        this.ingestion = { event: 'ingestion', data: JSON.stringify(rows) };
        this.send(this.ingestion);
      } catch {
        // The next sample tries again; the page keeps the last rows it had.
      }
    }
    // The first sample waits for the first view (its members); the rest keep the pace.
    if (run === this.run) this.scheduleSample(this.view ? this.sampleMs : 100);
  }

  private send(message: PageMessage): void {
    for (const client of this.clients) client(message);
  }
}
