// What a node delivers locally: messages to subscribers it hosts and replies to requests it sent.
import type { Cancel } from '../cluster/clock.js';
import type { DatasetRef, ReplyTo, SubscriberId } from '../core/ids.js';
import type { Reply, SubscriberMessage } from '../core/shard-manager/protocol.js';

export type Deliver = (message: SubscriberMessage) => void;

/** A request that got no reply in time. */
export class RequestTimeoutError extends Error {
  constructor(
    readonly replyTo: string,
    readonly timeoutMs: number,
  ) {
    super(`no reply to ${replyTo} within ${timeoutMs} ms (is there a singleton?)`);
    this.name = 'RequestTimeoutError';
  }
}

export class NodeHub {
  private readonly subscribers = new Map<SubscriberId, { readonly deliver: Deliver; readonly dataset: DatasetRef | undefined }>();
  private readonly waiting = new Map<ReplyTo, { resolve: (r: Reply) => void; cancel: Cancel }>();

  /** A local subscriber; with a dataset, it also gets every change of that dataset's map the node applies. */
  register(id: SubscriberId, deliver: Deliver, dataset?: DatasetRef): void {
    this.subscribers.set(id, { deliver, dataset });
  }

  unregister(id: SubscriberId): boolean {
    return this.subscribers.delete(id);
  }

  /** Delivers to a local subscriber; false if there is none with that id (it went away). */
  deliver(id: SubscriberId, message: SubscriberMessage): boolean {
    const d = this.subscribers.get(id);
    if (!d) return false;
    d.deliver(message);
    return true;
  }

  /** Delivers to every local subscriber of `dataset` the message, built once if any is there. */
  deliverToDataset(dataset: DatasetRef, message: () => SubscriberMessage): void {
    let built: SubscriberMessage | undefined;
    for (const d of this.subscribers.values()) if (d.dataset === dataset) d.deliver((built ??= message()));
  }

  expect(replyTo: ReplyTo, resolve: (r: Reply) => void, cancel: Cancel): void {
    this.waiting.set(replyTo, { resolve, cancel });
  }

  /** Resolves the request waiting for `replyTo`; false if none waits (late, or a duplicate). */
  resolve(replyTo: ReplyTo, reply: Reply): boolean {
    const w = this.waiting.get(replyTo);
    if (!w) return false;
    this.waiting.delete(replyTo);
    w.cancel();
    w.resolve(reply);
    return true;
  }

  forget(replyTo: ReplyTo): void {
    this.waiting.get(replyTo)?.cancel();
    this.waiting.delete(replyTo);
  }

  get subscriberCount(): number {
    return this.subscribers.size;
  }
}
