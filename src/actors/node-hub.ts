// What a node delivers locally: messages to subscribers it hosts and replies to requests it sent.
import type { Cancel } from '../cluster/clock.js';
import type { ReplyTo, SubscriberId } from '../core/ids.js';
import type { Reply, SubscriberMessage } from '../core/shard-manager/protocol.js';

export type Deliver = (message: SubscriberMessage) => void;

/** A request that got no reply in time. */
export class RequestTimeoutError extends Error {
  constructor(readonly replyTo: string, readonly timeoutMs: number) {
    super(`no reply to ${replyTo} within ${timeoutMs} ms (is there a singleton?)`);
    this.name = 'RequestTimeoutError';
  }
}

export class NodeHub {
  private readonly subscribers = new Map<SubscriberId, Deliver>();
  private readonly waiting = new Map<ReplyTo, { resolve: (r: Reply) => void; cancel: Cancel }>();

  register(id: SubscriberId, deliver: Deliver): void {
    this.subscribers.set(id, deliver);
  }

  unregister(id: SubscriberId): boolean {
    return this.subscribers.delete(id);
  }

  /** Delivers to a local subscriber; false if there is none with that id (it went away). */
  deliver(id: SubscriberId, message: SubscriberMessage): boolean {
    const d = this.subscribers.get(id);
    if (!d) return false;
    d(message);
    return true;
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
