import type { DatasetRef, SubscriberId } from './ids.js';

/**
 * Who receives the events of which dataset, as an immutable value (FiloDB's `ShardSubscriptions`).
 * Watchers (node guardians) are subscribed to every dataset, present and future.
 * Every operation returns a new value, or the same one when nothing changes.
 */
export class ShardSubscriptions {
  private constructor(
    private readonly byDataset: ReadonlyMap<DatasetRef, ReadonlySet<SubscriberId>>,
    readonly watchers: ReadonlySet<SubscriberId>,
  ) {}

  static readonly empty = new ShardSubscriptions(new Map(), new Set());

  /** Builds subscriptions from plain lists (e.g. recovered from a guardian's cache). */
  static of(subscriptions: Iterable<{ dataset: DatasetRef; subscribers: Iterable<SubscriberId> }>, watchers: Iterable<SubscriberId> = []): ShardSubscriptions {
    // One set per dataset, filled in place: recovery merges a copy of every dataset's list from each guardian.
    const map = new Map<DatasetRef, Set<SubscriberId>>();
    for (const s of subscriptions) {
      let set = map.get(s.dataset);
      if (!set) map.set(s.dataset, (set = new Set()));
      for (const id of s.subscribers) set.add(id);
    }
    return new ShardSubscriptions(map, new Set(watchers));
  }

  /** Datasets that have a subscription, in insertion order. */
  datasets(): DatasetRef[] {
    return [...this.byDataset.keys()];
  }

  hasDataset(dataset: DatasetRef): boolean {
    return this.byDataset.has(dataset);
  }

  /** Subscribers of a dataset (watchers included), sorted so fan-out order is deterministic. */
  subscribersOf(dataset: DatasetRef): SubscriberId[] {
    return [...(this.byDataset.get(dataset) ?? [])].sort();
  }

  isSubscribed(subscriber: SubscriberId, dataset: DatasetRef): boolean {
    return this.byDataset.get(dataset)?.has(subscriber) ?? false;
  }

  /** A dataset with no subscription yet gets one holding every watcher; an existing one is untouched (FiloDB's `:+`). */
  addDataset(dataset: DatasetRef): ShardSubscriptions {
    if (this.byDataset.has(dataset)) return this;
    return new ShardSubscriptions(new Map(this.byDataset).set(dataset, new Set(this.watchers)), this.watchers);
  }

  /** Drops a dataset's subscription (FiloDB's `- ds`). */
  removeDataset(dataset: DatasetRef): ShardSubscriptions {
    if (!this.byDataset.has(dataset)) return this;
    const map = new Map(this.byDataset);
    map.delete(dataset);
    return new ShardSubscriptions(map, this.watchers);
  }

  /** Adds `subscriber` to `dataset`'s subscription, only if the dataset has one. Idempotent. */
  subscribe(subscriber: SubscriberId, dataset: DatasetRef): ShardSubscriptions {
    const subs = this.byDataset.get(dataset);
    if (!subs || subs.has(subscriber)) return this;
    return new ShardSubscriptions(new Map(this.byDataset).set(dataset, new Set(subs).add(subscriber)), this.watchers);
  }

  /** Makes `watcher` a subscriber of every existing dataset and of every dataset added later. */
  subscribeAll(watcher: SubscriberId): ShardSubscriptions {
    if (this.watchers.has(watcher) && [...this.byDataset.values()].every((s) => s.has(watcher))) return this;
    const map = new Map<DatasetRef, ReadonlySet<SubscriberId>>();
    for (const [ds, subs] of this.byDataset) map.set(ds, subs.has(watcher) ? subs : new Set(subs).add(watcher));
    return new ShardSubscriptions(map, new Set(this.watchers).add(watcher));
  }

  /**
   * Removes `subscriber` from one dataset, or, without a dataset, from every dataset and from the
   * watchers. Removing someone who is not subscribed changes nothing.
   */
  unsubscribe(subscriber: SubscriberId, dataset?: DatasetRef): ShardSubscriptions {
    const targets = dataset === undefined ? [...this.byDataset.keys()] : [dataset];
    if (!targets.some((ds) => this.isSubscribed(subscriber, ds)) && (dataset !== undefined || !this.watchers.has(subscriber))) return this;
    const map = new Map(this.byDataset);
    for (const ds of targets) {
      const subs = map.get(ds);
      if (subs?.has(subscriber)) {
        const next = new Set(subs);
        next.delete(subscriber);
        map.set(ds, next);
      }
    }
    const watchers = dataset === undefined && this.watchers.has(subscriber) ? new Set([...this.watchers].filter((w) => w !== subscriber)) : this.watchers;
    return new ShardSubscriptions(map, watchers);
  }

  /** Both sets of subscriptions together: recovery must never drop a subscriber either side knows. */
  union(other: ShardSubscriptions): ShardSubscriptions {
    let out: ShardSubscriptions = ShardSubscriptions.of([...this.toList(), ...other.toList()], [...this.watchers, ...other.watchers]);
    for (const w of out.watchers) out = out.subscribeAll(w);
    return out;
  }

  /** Everything removed. */
  clear(): ShardSubscriptions {
    return ShardSubscriptions.empty;
  }

  /** Plain lists, datasets and subscribers sorted: for messages, caches and equality in tests. */
  toList(): { dataset: DatasetRef; subscribers: SubscriberId[] }[] {
    return [...this.byDataset.keys()].sort().map((dataset) => ({ dataset, subscribers: this.subscribersOf(dataset) }));
  }

  watcherList(): SubscriberId[] {
    return [...this.watchers].sort();
  }
}
