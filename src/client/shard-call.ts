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
  const { clock } = ports;
  const deadline = clock.now() + options.deadlineMs;
  const context = { dataset: options.dataset, shard };
  const events: Event<T>[] = [];
  let wake: (() => void) | undefined;
  const push = (e: Event<T>) => {
    events.push(e);
    wake?.();
    wake = undefined;
  };
  const inflight = new Map<number, { node: NodeId; cancellation: Cancellation; cancel: Cancel; at: number }>();
  // No timer of its own for the deadline on the usual path: an attempt's timer is cut to the
  // deadline and, once it fired as slow, set again for the deadline, and a round's wait is cut to
  // it too, so something always fires then (one timer per request, not two: they cost).
  const timers: Cancel[] = [];
  /** Copies asked in this round; a new round (after a backoff) asks them all again. */
  const tried = new Set<NodeId>();
  /** Each copy's last failure, for the error at the end. */
  const failures = new Map<NodeId, unknown>();
  let askNext: NodeId | undefined;
  let redirects = 0;
  let waitedForAnswer = false; // an attempt ran out its timeout, or a copy said TRYAGAIN
  let roundPending = false;
  let hedged = options.hedgeDelayMs === undefined;
  let backoff = options.retryBackoffMs;
  let ids = 0;

  const launch = (node: NodeId): void => {
    const id = ++ids;
    const cancellation = new Cancellation();
    const at = clock.now();
    const timeoutMs = Math.max(0, Math.min(options.attemptTimeoutMs, deadline - at));
    const atDeadline = () => push({ kind: 'deadline' });
    const cancel = clock.schedule(timeoutMs, () => {
      if (clock.now() >= deadline) return atDeadline();
      // Not given up: it may still answer. Its timer now stands for the deadline.
      const attempt = inflight.get(id);
      if (attempt) attempt.cancel = clock.schedule(deadline - clock.now(), atDeadline);
      push({ kind: 'slow', id, node, afterMs: timeoutMs });
    });
    inflight.set(id, { node, cancellation, cancel, at });
    tried.add(node);
    ports.started?.(node);
    let sent: Promise<AttemptAnswer<T>>;
    try {
      sent = ports.send(node, shard, ports.version(), cancellation);
    } catch (e) {
      sent = Promise.reject(e);
    }
    sent.then(
      (answer) => push({ kind: 'done', id, node, answer }),
      (error: unknown) => push({ kind: 'done', id, node, error }),
    );
    if (!hedged && options.hedgeDelayMs !== undefined) {
      hedged = true;
      timers.push(clock.schedule(options.hedgeDelayMs, () => push({ kind: 'hedge' })));
    }
  };
  const busy = (node: NodeId): boolean => {
    for (const a of inflight.values()) if (a.node === node) return true;
    return false;
  };
  /** The copy to ask next: an ASK's, else the first candidate neither asked in this round nor in flight. */
  const pick = (): NodeId | undefined => {
    if (askNext !== undefined) {
      const n = askNext;
      askNext = undefined;
      return n;
    }
    return ports.candidates(shard).find((n) => !tried.has(n) && !busy(n));
  };
  /**
   * Asks another copy if one is left in this round (a redirection's is `free` of the retry budget),
   * else plans a new round after a backoff, unless an attempt in flight may still answer and no
   * copy is idle. Throws when the retry budget is spent with nothing left in flight.
   */
  const askAnother = (free = false): void => {
    if (clock.now() >= deadline) return push({ kind: 'deadline' });
    const node = pick();
    if (node !== undefined) {
      if (free || ids === 0 || ports.retryBudget?.tryWithdraw() !== false) return launch(node);
      // A copy is left to ask, and the client declines to: its own overload protection, not the shard's state.
      if (inflight.size === 0)
        throw new ShardherdClientError(
          'OVERLOADED',
          `${options.dataset}/${shard}: the client's retry budget is spent, so ${node} was not asked: ${failuresText()}`,
          { ...context, cause: [...failures.values()].at(-1) },
        );
      return;
    }
    const candidates = ports.candidates(shard);
    const someIdle = candidates.length === 0 || candidates.some((n) => !busy(n));
    if (roundPending || (inflight.size > 0 && !someIdle)) return;
    roundPending = true;
    const wait = Math.min(backoff, deadline - clock.now());
    backoff = Math.min(backoff * 2, options.retryBackoffMs * MAX_BACKOFF_FACTOR);
    timers.push(clock.schedule(wait, () => push({ kind: 'round' })));
  };
  const failuresText = (): string =>
    failures.size > 0 ? [...failures].map(([node, error]) => `${node}: ${describe(error)}`).join('; ') : 'the map shows no serving copy';
  function unavailable(why: string): ShardherdClientError {
    return new ShardherdClientError('SHARD_UNAVAILABLE', `${options.dataset}/${shard}: ${why}: ${failuresText()}`, {
      ...context,
      cause: [...failures.values()].at(-1),
    });
  }

  const stopListening = options.cancellation?.onCancel((reason) => push({ kind: 'cancelled', reason }));
  try {
    if (options.cancellation?.cancelled) throw options.cancellation.reason;
    askAnother();
    for (;;) {
      while (events.length === 0) await new Promise<void>((resolve) => (wake = resolve));
      const e = events.shift()!;
      switch (e.kind) {
        case 'cancelled':
          throw e.reason;
        case 'deadline': {
          // Nothing but fast failures (or no copy at all): the shard is unavailable; else it was slow.
          if (!waitedForAnswer && inflight.size === 0) throw unavailable(`no copy could be reached within the deadline (${options.deadlineMs} ms)`);
          throw new ShardherdClientError('DEADLINE_EXCEEDED', `${options.dataset}/${shard}: no answer within ${options.deadlineMs} ms (${failuresText()})`, {
            ...context,
            cause: [...failures.values()].at(-1),
          });
        }
        case 'slow': {
          if (!inflight.has(e.id)) break;
          waitedForAnswer = true;
          const timeout = new AttemptTimeout(`no answer from ${e.node} within ${e.afterMs} ms`);
          failures.set(e.node, timeout);
          ports.failed(e.node, timeout);
          askAnother();
          break;
        }
        case 'hedge': {
          if (inflight.size === 0) break;
          const node = pick();
          if (node !== undefined && ports.retryBudget?.tryWithdraw() !== false) launch(node);
          break;
        }
        case 'round':
          roundPending = false;
          tried.clear();
          askAnother();
          break;
        case 'done': {
          const attempt = inflight.get(e.id);
          if (!attempt) break;
          inflight.delete(e.id);
          attempt.cancel();
          ports.finished?.(e.node);
          if (e.answer === undefined) {
            if (ports.isApplicationError(e.error)) throw e.error;
            failures.set(e.node, e.error);
            ports.failed(e.node, e.error);
            askAnother();
            break;
          }
          const { check, value } = e.answer;
          ports.answered(e.node, clock.now() - attempt.at, check.type === 'ok');
          switch (check.type) {
            case 'ok':
              return value;
            case 'moved':
              if (++redirects > options.maxRedirects) throw tooManyRedirects(options, shard, redirects);
              ports.learn(shard, check);
              tried.clear();
              askAnother(true);
              break;
            case 'ask':
              if (++redirects > options.maxRedirects) throw tooManyRedirects(options, shard, redirects);
              askNext = check.node;
              askAnother(true);
              break;
            case 'tryagain':
            case 'unknown':
              // `unknown` from a node that has no map of the dataset yet (it just started): as TRYAGAIN.
              waitedForAnswer = true;
              failures.set(e.node, new Error(check.type === 'tryagain' ? 'not serving right now (TRYAGAIN)' : 'has no map of the dataset yet'));
              askAnother();
              break;
          }
          break;
        }
      }
    }
  } finally {
    stopListening?.();
    for (const cancel of timers) cancel();
    for (const a of inflight.values()) {
      a.cancel();
      a.cancellation.cancel(new Error('the request ended'));
      ports.finished?.(a.node);
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
