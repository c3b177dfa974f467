// Where a bus subscription reads, whichever client library it runs on: whether its group gave it
// the topic at its last join, the next offset it delivers, and when `subscribe` may resolve.
import type { Logger } from 'pino';
import { KafkaBusError } from './errors.js';

export interface MemberPositionParams {
  readonly topic: string;
  readonly group: string;
  readonly log: Logger;
  /** The group's committed offset, as the broker has it now. */
  readonly committedOffset: () => Promise<number | undefined>;
  /** Where a subscription that has none committed starts. */
  readonly startIfUncommitted: number;
}

/** A join's positioning: the offset to read from, or undefined when a newer join overtook it. */
export type Positioned = number | undefined;

export class MemberPosition {
  /** Whether this member was given partition 0 at its last join. */
  owns = false;
  /** The next offset to deliver; unknown until the member first owns the topic. */
  private next: number | undefined;
  /** Counts joins, so that a positioning overtaken by a newer join does nothing. */
  private joins = 0;
  private ready = false;
  private readonly opened = deferred<void>();

  constructor(private readonly p: MemberPositionParams) {}

  /** Resolves once the member has joined and, if it owns the topic, knows where it reads; rejects if it never does. */
  get whenOpen(): Promise<void> {
    return this.opened.promise;
  }

  /** The next offset to deliver, once known. */
  get position(): number | undefined {
    return this.next;
  }

  /**
   * A join's outcome. When it gave the member the topic, resolves with where the member reads from
   * then: the group's committed offset or the next record it has not seen yet, whichever is later
   * (undefined when a newer join came first); a member without the topic resolves undefined at once.
   */
  async joined(owns: boolean): Promise<Positioned> {
    const join = ++this.joins;
    this.owns = owns;
    this.p.log.debug({ event: 'bus.subscription.joined', owns }, owns ? 'bus subscription owns its topic' : 'bus subscription joined without the topic');
    if (!owns) {
      this.markReady();
      return undefined;
    }
    let committed: number | undefined;
    try {
      committed = await this.p.committedOffset();
    } catch (e) {
      this.p.log.error({ err: e, event: 'bus.position.unknown' }, 'cannot read the committed offset: going on from the position this subscription knows');
    }
    if (join !== this.joins) return undefined;
    const next = this.next === undefined ? (committed ?? this.p.startIfUncommitted) : Math.max(this.next, committed ?? 0);
    this.next = next;
    this.p.log.debug({ event: 'bus.subscription.positioned', offset: next, committed }, 'bus subscription positioned');
    return next;
  }

  /** Whether a join came after the one numbered `join` (see `currentJoin`). */
  isCurrent(join: number): boolean {
    return join === this.joins;
  }

  get currentJoin(): number {
    return this.joins;
  }

  /** The member reads from here on: `subscribe` resolves. */
  markReady(): void {
    if (this.ready) return;
    this.ready = true;
    this.opened.resolve();
  }

  get isReady(): boolean {
    return this.ready;
  }

  /** The subscription failed or closed before it was open. */
  failOpen(error: unknown): void {
    if (!this.ready) this.opened.reject(error);
  }

  /** Takes the record at `offset` for delivery; false when it was delivered already (a client may fetch from before a seek once). */
  take(offset: number): boolean {
    if (this.next !== undefined && offset < this.next) return false;
    this.next = offset + 1;
    return true;
  }

  /** Goes on from `offset` when the records before it are gone (never back). */
  skipTo(offset: number): void {
    if (this.next === undefined || offset > this.next) this.next = offset;
  }

  /** Refuses a commit that must not move the group's position: a bad offset, a closed or replaced subscription. */
  checkCommit(offset: number, closed: boolean): void {
    const { topic, group } = this.p;
    if (!Number.isSafeInteger(offset) || offset < 0) throw new RangeError(`commit offset must be a non-negative integer, got ${offset}`);
    if (closed) throw new KafkaBusError('CLOSED', `cannot commit on ${topic} for group ${group}: the subscription is closed`, { topic, group });
    if (!this.owns) {
      throw new KafkaBusError('NOT_OWNER', `cannot commit on ${topic} for group ${group}: a newer subscription of the group owns the topic`, { topic, group });
    }
  }
}

interface Deferred<T> {
  readonly promise: Promise<T>;
  readonly resolve: (value: T) => void;
  readonly reject: (error: unknown) => void;
}

function deferred<T>(): Deferred<T> {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  // The subscription may fail before anyone awaits it; its awaiting caller still sees the error.
  promise.catch(() => undefined);
  return { promise, resolve, reject };
}
