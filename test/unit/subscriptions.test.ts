// FiloDB's ShardSubscriptionsSpec (reference §7.5, items 1–8) for our immutable ShardSubscriptions,
// plus the value semantics (no-ops return the same object, originals never change) and `union`.
//
// Name mapping: FiloDB's `subscriptions :+ ShardSubscription(ds)` is `addDataset(ds)`, `- ds` is
// `removeDataset(ds)`, `subscribe(watcher)` is `subscribeAll(watcher)`.
// Difference from FiloDB: our `addDataset` puts the existing watchers into the new dataset's
// subscription straight away (FiloDB's `:+` adds an empty subscription and relies on the caller).
import { describe, expect, it } from 'vitest';
import { datasetRef, subscriberId } from '../../src/core/ids.js';
import { ShardSubscriptions } from '../../src/core/subscriptions.js';

const ds1 = datasetRef('ds1');
const ds2 = datasetRef('ds2');
const ds3 = datasetRef('ds3');
const a = subscriberId('router-a');
const b = subscriberId('router-b');
const w = subscriberId('guardian-w');
const v = subscriberId('guardian-v');

const empty = ShardSubscriptions.empty;
const withDatasets = (...dss: ReturnType<typeof datasetRef>[]): ShardSubscriptions => dss.reduce((s, ds) => s.addDataset(ds), empty);

describe('ShardSubscriptionsSpec (FiloDB reference §7.5)', () => {
  it('1. adding the same subscriber twice has no effect', () => {
    const once = withDatasets(ds1).subscribe(a, ds1);
    const twice = once.subscribe(a, ds1);
    expect(twice).toBe(once);
    expect(twice.subscribersOf(ds1)).toEqual([a]);
    expect(twice.toList()).toEqual([{ dataset: ds1, subscribers: [a] }]);
  });

  it('2. removing an unknown subscriber has no effect', () => {
    const s = withDatasets(ds1, ds2).subscribe(a, ds1).subscribeAll(w);
    expect(s.unsubscribe(b)).toBe(s);
    expect(s.unsubscribe(b, ds1)).toBe(s);
    // subscribed elsewhere, but not to ds2
    expect(s.unsubscribe(a, ds2)).toBe(s);
    // a dataset nobody has
    expect(s.unsubscribe(a, ds3)).toBe(s);
    expect(s.toList()).toEqual([
      { dataset: ds1, subscribers: [w, a] },
      { dataset: ds2, subscribers: [w] },
    ]);
  });

  it('3. adding a dataset that already has a subscription has no effect (its subscribers are kept)', () => {
    const s = withDatasets(ds1).subscribe(a, ds1);
    expect(s.addDataset(ds1)).toBe(s);
    expect(s.addDataset(ds1).subscribersOf(ds1)).toEqual([a]);
  });

  it('4. subscribe(x, ds) is idempotent, and does nothing for a dataset without a subscription', () => {
    const s1 = withDatasets(ds1, ds2).subscribe(a, ds1).subscribe(a, ds2);
    const s2 = s1.subscribe(a, ds1).subscribe(a, ds2);
    expect(s2).toBe(s1);
    expect(s2.isSubscribed(a, ds1)).toBe(true);
    expect(s2.isSubscribed(a, ds2)).toBe(true);

    const noDataset = withDatasets(ds1);
    expect(noDataset.subscribe(a, ds3)).toBe(noDataset);
    expect(noDataset.hasDataset(ds3)).toBe(false);
  });

  it('5. unsubscribe(x) removes the subscriber from every dataset; unsubscribe(x, ds) from that one only', () => {
    const s = withDatasets(ds1, ds2, ds3).subscribe(a, ds1).subscribe(a, ds2).subscribe(b, ds2);
    const oneOnly = s.unsubscribe(a, ds1);
    expect(oneOnly.isSubscribed(a, ds1)).toBe(false);
    expect(oneOnly.isSubscribed(a, ds2)).toBe(true);

    const gone = s.unsubscribe(a);
    expect(gone.toList()).toEqual([
      { dataset: ds1, subscribers: [] },
      { dataset: ds2, subscribers: [b] },
      { dataset: ds3, subscribers: [] },
    ]);
    // the datasets themselves stay
    expect(gone.datasets()).toEqual([ds1, ds2, ds3]);
  });

  it('6. subscribeAll(watcher) adds the watcher to every dataset, present and future; unsubscribe(watcher) empties the watchers', () => {
    const s = withDatasets(ds1, ds2).subscribe(a, ds1).subscribeAll(w);
    expect(s.watcherList()).toEqual([w]);
    expect(s.subscribersOf(ds1)).toEqual([w, a]);
    expect(s.subscribersOf(ds2)).toEqual([w]);

    // ours: a dataset added later is born with the watchers in it
    const later = s.addDataset(ds3);
    expect(later.subscribersOf(ds3)).toEqual([w]);

    const unwatched = later.unsubscribe(w);
    expect(unwatched.watcherList()).toEqual([]);
    expect(unwatched.watchers.size).toBe(0);
    expect(unwatched.toList()).toEqual([
      { dataset: ds1, subscribers: [a] },
      { dataset: ds2, subscribers: [] },
      { dataset: ds3, subscribers: [] },
    ]);
    // and a dataset added after that no longer gets the former watcher
    expect(unwatched.removeDataset(ds3).addDataset(ds3).subscribersOf(ds3)).toEqual([]);
  });

  it('6b. subscribeAll of a watcher already everywhere has no effect; unsubscribing a watcher from one dataset keeps it a watcher', () => {
    const s = withDatasets(ds1, ds2).subscribeAll(w);
    expect(s.subscribeAll(w)).toBe(s);

    const partial = s.unsubscribe(w, ds1);
    expect(partial.isSubscribed(w, ds1)).toBe(false);
    expect(partial.watcherList()).toEqual([w]);
    // subscribing it to all again puts it back into ds1
    expect(partial.subscribeAll(w).isSubscribed(w, ds1)).toBe(true);
  });

  it('7. removeDataset drops the subscription; removing an unknown dataset has no effect', () => {
    const s = withDatasets(ds1, ds2).subscribe(a, ds1).subscribe(a, ds2);
    const removed = s.removeDataset(ds1);
    expect(removed.hasDataset(ds1)).toBe(false);
    expect(removed.subscribersOf(ds1)).toEqual([]);
    expect(removed.toList()).toEqual([{ dataset: ds2, subscribers: [a] }]);
    expect(removed.removeDataset(ds3)).toBe(removed);
  });

  it('8. clear empties everything: datasets, subscribers and watchers', () => {
    const cleared = withDatasets(ds1, ds2).subscribe(a, ds1).subscribeAll(w).clear();
    expect(cleared.toList()).toEqual([]);
    expect(cleared.datasets()).toEqual([]);
    expect(cleared.watcherList()).toEqual([]);
    // no watcher survives into a dataset added afterwards
    expect(cleared.addDataset(ds1).subscribersOf(ds1)).toEqual([]);
  });
});

describe('ShardSubscriptions as an immutable value', () => {
  it('no operation changes the value it was called on', () => {
    const s = withDatasets(ds1, ds2).subscribe(a, ds1).subscribeAll(w);
    const before = { list: s.toList(), watchers: s.watcherList(), datasets: s.datasets() };

    s.addDataset(ds3);
    s.removeDataset(ds1);
    s.subscribe(b, ds2);
    s.subscribeAll(v);
    s.unsubscribe(a);
    s.unsubscribe(w);
    s.unsubscribe(w, ds2);
    s.clear();
    s.union(withDatasets(ds3).subscribe(b, ds3).subscribeAll(v));

    expect({ list: s.toList(), watchers: s.watcherList(), datasets: s.datasets() }).toEqual(before);
  });

  it('the shared empty value stays empty', () => {
    empty.addDataset(ds1).subscribe(a, ds1).subscribeAll(w);
    expect(empty.toList()).toEqual([]);
    expect(empty.watcherList()).toEqual([]);
  });

  it('toList and subscribersOf are sorted, so equal subscriptions list equally whatever the insertion order', () => {
    const x = withDatasets(ds2, ds1).subscribe(b, ds1).subscribe(a, ds1);
    const y = withDatasets(ds1, ds2).subscribe(a, ds1).subscribe(b, ds1);
    expect(x.subscribersOf(ds1)).toEqual([a, b]);
    expect(x.toList()).toEqual(y.toList());
    expect(x.toList().map((e) => e.dataset)).toEqual([ds1, ds2]);
  });

  it('of() rebuilds subscriptions from plain lists, merging repeated datasets', () => {
    const s = ShardSubscriptions.of(
      [
        { dataset: ds1, subscribers: [a] },
        { dataset: ds1, subscribers: [b] },
        { dataset: ds2, subscribers: [] },
      ],
      [w],
    );
    expect(s.toList()).toEqual([
      { dataset: ds1, subscribers: [a, b] },
      { dataset: ds2, subscribers: [] },
    ]);
    expect(s.watcherList()).toEqual([w]);
  });
});

describe('ShardSubscriptions.union', () => {
  it('never drops a subscriber from either side', () => {
    const left = withDatasets(ds1, ds2).subscribe(a, ds1).subscribe(a, ds2);
    const right = withDatasets(ds1, ds3).subscribe(b, ds1).subscribe(b, ds3);
    const u = left.union(right);
    expect(u.toList()).toEqual([
      { dataset: ds1, subscribers: [a, b] },
      { dataset: ds2, subscribers: [a] },
      { dataset: ds3, subscribers: [b] },
    ]);
    // symmetric in content
    expect(right.union(left).toList()).toEqual(u.toList());
  });

  it('keeps the watchers of both sides and subscribes them to every dataset, including those only the other side knows', () => {
    const left = withDatasets(ds1).subscribeAll(w);
    const right = withDatasets(ds2).subscribe(a, ds2).subscribeAll(v);
    const u = left.union(right);
    expect(u.watcherList()).toEqual([v, w]);
    expect(u.toList()).toEqual([
      { dataset: ds1, subscribers: [v, w] },
      { dataset: ds2, subscribers: [v, w, a] },
    ]);
    // and into future datasets
    expect(u.addDataset(ds3).subscribersOf(ds3)).toEqual([v, w]);
  });

  it('with an empty side gives the other side back in content', () => {
    const s = withDatasets(ds1, ds2).subscribe(a, ds1).subscribeAll(w);
    expect(s.union(empty).toList()).toEqual(s.toList());
    expect(empty.union(s).toList()).toEqual(s.toList());
    expect(empty.union(s).watcherList()).toEqual([w]);
  });
});
