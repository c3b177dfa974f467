// One routed request for one shard, through the copies that serve it: the failover rules shared by
// `ShardherdClient` and `ShardRouter`. The deadline is the only give-up time:
// - a transport error → the node is suspected and the next serving copy is asked at once;
// - no answer within the attempt timeout → the next copy is asked too, and the slow one is not
//   given up: whichever answers first wins (a slow handler still answers its request);
// - TRYAGAIN → the next copy; MOVED → the copies it names (learned for later requests); ASK → that
//   copy, this once; an application error → the caller, at once;
// - when every copy was asked in a round and none is left to ask, all again after a backoff
//   (doubling, to 8×), until one answers or the deadline passes.
// Attempts beyond the first (not redirections) draw on the caller's retry budget, so a sick cluster
// sees a bounded share of extra load. Optionally a hedge: a second copy asked after a delay.
import type { Clock, Cancel } from '../cluster/clock.js';
import type { NodeId } from '../core/ids.js';
import type { ShardCheck } from '../core/shard-check.js';
import { Cancellation, type AttemptCancellation } from '../core/cancellation.js';
import { ShardherdClientError } from './client-errors.js';

/** What a node answered: its check, and the handler's answer when the check is `ok`. */
export interface AttemptAnswer<T> {
  readonly check: ShardCheck;
  readonly value?: T;
}

/** What a call needs of its client or router. */
export interface CallPorts<T> {
  readonly clock: Clock;
  /** The copies to ask for the shard now (what a MOVED taught, else the map's serving copies), in the order to ask them. */
  candidates(shard: number): readonly NodeId[];
  /** The map version the requests carry. */
  version(): number;
  /** A MOVED answer: the caller's map is stale for this shard. */
  learn(shard: number, check: Extract<ShardCheck, { type: 'moved' }>): void;
  /** Asks `node`; throws on a transport error (or when the attempt is called off). */
  send(node: NodeId, shard: number, version: number, cancellation: AttemptCancellation): Promise<AttemptAnswer<T>>;
  /** An error `send` threw that is the application's (not failed over). */
  isApplicationError(e: unknown): boolean;
  /** A transport error or a timeout on `node`. */
  failed(node: NodeId, error: unknown): void;
  /** `node` answered (any check) after `ms`. */
  answered(node: NodeId, ms: number, ok: boolean): void;
  /** Attempts beyond the first (retries, slow-copy and hedged asks, new rounds); absent: unbounded. */
  readonly retryBudget?: { tryWithdraw(): boolean };
  started?(node: NodeId): void;
  finished?(node: NodeId): void;
}

export interface CallOptions {
  /** The whole call, redirections and failovers included. */
  readonly deadlineMs: number;
  /** How long a copy may take before the next one is asked as well (it is not given up). */
  readonly attemptTimeoutMs: number;
  /** Ask a second copy when the first has not answered after this long (none: no hedging). */
  readonly hedgeDelayMs?: number | undefined;
  /** MOVED and ASK answers followed before `TOO_MANY_REDIRECTS`. */
  readonly maxRedirects: number;
  /** First wait before a new round, once every copy was asked (doubling to 8×). */
  readonly retryBackoffMs: number;
  /** For errors. */
  readonly dataset: string;
  /** Ends the call at once with the cancellation's reason (the client closed). */
  readonly cancellation?: AttemptCancellation;
}

class AttemptTimeout extends Error {
  override readonly name = 'AttemptTimeout';
}

type Event<T> =
  | { readonly kind: 'done'; readonly id: number; readonly node: NodeId; readonly answer?: AttemptAnswer<T>; readonly error?: unknown }
  /** An attempt ran for the attempt timeout without an answer. */
  | { readonly kind: 'slow'; readonly id: number; readonly node: NodeId; readonly afterMs: number }
  | { readonly kind: 'hedge' }
  | { readonly kind: 'round' }
  | { readonly kind: 'deadline' }
  | { readonly kind: 'cancelled'; readonly reason: unknown };

/** The most a new round's backoff grows to, as a multiple of `retryBackoffMs`. */
const MAX_BACKOFF_FACTOR = 8;

export async function callShard<T>(ports: CallPorts<T>, shard: number, options: CallOptions): Promise<T | undefined> {
  return new ShardCall(ports, shard, options).run();
}

/** An attempt in flight: the copy asked, how to call it off, its timer, when it started. */
interface Attempt {
  readonly node: NodeId;
  readonly cancellation: Cancellation;
  cancel: Cancel;
  readonly at: number;
}

/** One call: the attempts in flight, the copies asked in this round, and the events that move it on. */
class ShardCall<T> {
  private readonly clock: Clock;
  private readonly deadline: number;
  private readonly events: Event<T>[] = [];
  private wake: (() => void) | undefined;
  private readonly inflight = new Map<number, Attempt>();
  // No timer of its own for the deadline on the usual path: an attempt's timer is cut to the
  // deadline and, once it fired as slow, set again for the deadline, and a round's wait is cut to
  // it too, so something always fires then (one timer per request, not two: they cost).
  private readonly timers: Cancel[] = [];
  /** Copies asked in this round; a new round (after a backoff) asks them all again. */
  private readonly tried = new Set<NodeId>();
  /** Each copy's last failure, for the error at the end. */
  private readonly failures = new Map<NodeId, unknown>();
  private askNext: NodeId | undefined;
  private redirects = 0;
  /** An attempt ran out its timeout, or a copy said TRYAGAIN. */
  private waitedForAnswer = false;
  private roundPending = false;
  private hedged: boolean;
  private backoff: number;
  private ids = 0;

  constructor(
    private readonly ports: CallPorts<T>,
    private readonly shard: number,
    private readonly options: CallOptions,
  ) {
    this.clock = ports.clock;
    this.deadline = this.clock.now() + options.deadlineMs;
    this.hedged = options.hedgeDelayMs === undefined;
    this.backoff = options.retryBackoffMs;
  }

  async run(): Promise<T | undefined> {
    const { cancellation } = this.options;
    const stopListening = cancellation?.onCancel((reason) => this.push({ kind: 'cancelled', reason }));
    try {
      if (cancellation?.cancelled) throw cancellation.reason;
      this.askAnother();
      for (;;) {
        while (this.events.length === 0) await new Promise<void>((resolve) => (this.wake = resolve));
        const ended = this.handle(this.events.shift()!);
        if (ended !== undefined) return ended.value;
      }
    } finally {
      stopListening?.();
      this.release();
    }
  }

  private readonly push = (e: Event<T>): void => {
    this.events.push(e);
    this.wake?.();
    this.wake = undefined;
  };

  /** What an event does; an `ok` answer ends the call with its value, a failure of the call throws. */
  private handle(e: Event<T>): { readonly value: T | undefined } | undefined {
    switch (e.kind) {
      case 'cancelled':
        throw e.reason;
      case 'deadline':
        throw this.deadlineError();
      case 'slow':
        this.onSlow(e);
        return undefined;
      case 'hedge':
        this.onHedge();
        return undefined;
      case 'round':
        this.roundPending = false;
        this.tried.clear();
        this.askAnother();
        return undefined;
      case 'done':
        return this.onDone(e);
    }
  }

  private onSlow(e: Extract<Event<T>, { kind: 'slow' }>): void {
    if (!this.inflight.has(e.id)) return;
    this.waitedForAnswer = true;
    const timeout = new AttemptTimeout(`no answer from ${e.node} within ${e.afterMs} ms`);
    this.failures.set(e.node, timeout);
    this.ports.failed(e.node, timeout);
    this.askAnother();
  }

  private onHedge(): void {
    if (this.inflight.size === 0) return;
    const node = this.pick();
    if (node !== undefined && this.ports.retryBudget?.tryWithdraw() !== false) this.launch(node);
  }

  private onDone(e: Extract<Event<T>, { kind: 'done' }>): { readonly value: T | undefined } | undefined {
    const attempt = this.inflight.get(e.id);
    if (!attempt) return undefined;
    this.inflight.delete(e.id);
    attempt.cancel();
    this.ports.finished?.(e.node);
    if (e.answer === undefined) {
      if (this.ports.isApplicationError(e.error)) throw e.error;
      this.failures.set(e.node, e.error);
      this.ports.failed(e.node, e.error);
      this.askAnother();
      return undefined;
    }
    const { check, value } = e.answer;
    this.ports.answered(e.node, this.clock.now() - attempt.at, check.type === 'ok');
    switch (check.type) {
      case 'ok':
        return { value };
      case 'moved':
        this.redirected();
        this.ports.learn(this.shard, check);
        this.tried.clear();
        this.askAnother(true);
        return undefined;
      case 'ask':
        this.redirected();
        this.askNext = check.node;
        this.askAnother(true);
        return undefined;
      case 'tryagain':
      case 'unknown':
        // `unknown` from a node that has no map of the dataset yet (it just started): as TRYAGAIN.
        this.waitedForAnswer = true;
        this.failures.set(e.node, new Error(check.type === 'tryagain' ? 'not serving right now (TRYAGAIN)' : 'has no map of the dataset yet'));
        this.askAnother();
        return undefined;
    }
  }

  private launch(node: NodeId): void {
    const { clock, deadline, options, ports, push } = this;
    const id = ++this.ids;
    const cancellation = new Cancellation();
    const at = clock.now();
    const timeoutMs = Math.max(0, Math.min(options.attemptTimeoutMs, deadline - at));
    const atDeadline = () => push({ kind: 'deadline' });
    const cancel = clock.schedule(timeoutMs, () => {
      if (clock.now() >= deadline) return atDeadline();
      // Not given up: it may still answer. Its timer now stands for the deadline.
      const attempt = this.inflight.get(id);
      if (attempt) attempt.cancel = clock.schedule(deadline - clock.now(), atDeadline);
      push({ kind: 'slow', id, node, afterMs: timeoutMs });
    });
    this.inflight.set(id, { node, cancellation, cancel, at });
    this.tried.add(node);
    ports.started?.(node);
    let sent: Promise<AttemptAnswer<T>>;
    try {
      sent = ports.send(node, this.shard, ports.version(), cancellation);
    } catch (e) {
      sent = Promise.reject(e);
    }
    sent.then(
      (answer) => push({ kind: 'done', id, node, answer }),
      (error: unknown) => push({ kind: 'done', id, node, error }),
    );
    if (!this.hedged && options.hedgeDelayMs !== undefined) {
      this.hedged = true;
      this.timers.push(clock.schedule(options.hedgeDelayMs, () => push({ kind: 'hedge' })));
    }
  }

  private busy(node: NodeId): boolean {
    for (const a of this.inflight.values()) if (a.node === node) return true;
    return false;
  }

  /** The copy to ask next: an ASK's, else the first candidate neither asked in this round nor in flight. */
  private pick(): NodeId | undefined {
    if (this.askNext !== undefined) {
      const n = this.askNext;
      this.askNext = undefined;
      return n;
    }
    return this.ports.candidates(this.shard).find((n) => !this.tried.has(n) && !this.busy(n));
  }

  /**
   * Asks another copy if one is left in this round (a redirection's is `free` of the retry budget),
   * else plans a new round after a backoff, unless an attempt in flight may still answer and no
   * copy is idle. Throws when the retry budget is spent with nothing left in flight.
   */
  private askAnother(free = false): void {
    const { clock, deadline, options } = this;
    if (clock.now() >= deadline) return this.push({ kind: 'deadline' });
    const node = this.pick();
    if (node !== undefined) {
      if (free || this.ids === 0 || this.ports.retryBudget?.tryWithdraw() !== false) return this.launch(node);
      // A copy is left to ask, and the client declines to: its own overload protection, not the shard's state.
      if (this.inflight.size === 0) {
        throw new ShardherdClientError(
          'OVERLOADED',
          `${options.dataset}/${this.shard}: the client's retry budget is spent, so ${node} was not asked: ${this.failuresText()}`,
          this.errorContext(),
        );
      }
      return;
    }
    const candidates = this.ports.candidates(this.shard);
    const someIdle = candidates.length === 0 || candidates.some((n) => !this.busy(n));
    if (this.roundPending || (this.inflight.size > 0 && !someIdle)) return;
    this.roundPending = true;
    const wait = Math.min(this.backoff, deadline - clock.now());
    this.backoff = Math.min(this.backoff * 2, options.retryBackoffMs * MAX_BACKOFF_FACTOR);
    this.timers.push(clock.schedule(wait, () => this.push({ kind: 'round' })));
  }

  /** A MOVED or ASK followed: one more redirection, refused past `maxRedirects`. */
  private redirected(): void {
    if (++this.redirects > this.options.maxRedirects) throw tooManyRedirects(this.options, this.shard, this.redirects);
  }

  /** Nothing but fast failures (or no copy at all): the shard is unavailable; else it was slow. */
  private deadlineError(): ShardherdClientError {
    const { dataset, deadlineMs } = this.options;
    if (!this.waitedForAnswer && this.inflight.size === 0) {
      return new ShardherdClientError(
        'SHARD_UNAVAILABLE',
        `${dataset}/${this.shard}: no copy could be reached within the deadline (${deadlineMs} ms): ${this.failuresText()}`,
        this.errorContext(),
      );
    }
    return new ShardherdClientError(
      'DEADLINE_EXCEEDED',
      `${dataset}/${this.shard}: no answer within ${deadlineMs} ms (${this.failuresText()})`,
      this.errorContext(),
    );
  }

  private failuresText(): string {
    return this.failures.size > 0 ? [...this.failures].map(([node, error]) => `${node}: ${describe(error)}`).join('; ') : 'the map shows no serving copy';
  }

  private errorContext(): { dataset: string; shard: number; cause: unknown } {
    return { dataset: this.options.dataset, shard: this.shard, cause: [...this.failures.values()].at(-1) };
  }

  /** The call ended: its timers stopped, the attempts still in flight called off. */
  private release(): void {
    for (const cancel of this.timers) cancel();
    for (const a of this.inflight.values()) {
      a.cancel();
      a.cancellation.cancel(new Error('the request ended'));
      this.ports.finished?.(a.node);
    }
  }
}

function tooManyRedirects(options: CallOptions, shard: number, redirects: number): ShardherdClientError {
  return new ShardherdClientError('TOO_MANY_REDIRECTS', `${options.dataset}/${shard}: ${redirects} redirections (more than ${options.maxRedirects})`, {
    dataset: options.dataset,
    shard,
  });
}

function describe(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
