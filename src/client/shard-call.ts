// One routed request for one shard, through the copies that serve it: the failover rules shared by
// `ShardherdClient` and `ShardRouter`. A transport error or a timeout → the node is suspected and
// the next serving copy is asked at once; TRYAGAIN → the next copy, and when every copy said so, again
// after a short backoff (a handoff in progress); MOVED → the copies it names (learned for later
// requests); ASK → that copy, this once; an application error → the caller, at once. All inside one
// deadline, with a per-attempt timeout, and optionally a hedge: a second copy asked after a delay,
// the first answer winning and the other cancelled.
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
  started?(node: NodeId): void;
  finished?(node: NodeId): void;
}

export interface CallOptions {
  /** The whole call, redirections and failovers included. */
  readonly deadlineMs: number;
  /** One attempt on one copy (cut to what is left of the deadline). */
  readonly attemptTimeoutMs: number;
  /** Ask a second copy when the first has not answered after this long (none: no hedging). */
  readonly hedgeDelayMs?: number | undefined;
  /** MOVED and ASK answers followed before `TOO_MANY_REDIRECTS`. */
  readonly maxRedirects: number;
  /** First wait when every copy said TRYAGAIN (doubling to 8×). */
  readonly retryBackoffMs: number;
  /** For errors. */
  readonly dataset: string;
}

class AttemptTimeout extends Error {
  override readonly name = 'AttemptTimeout';
}

type Event<T> =
  | { readonly kind: 'done'; readonly id: number; readonly node: NodeId; readonly answer?: AttemptAnswer<T>; readonly error?: unknown }
  | { readonly kind: 'hedge' }
  | { readonly kind: 'retry' }
  | { readonly kind: 'deadline' };

export async function callShard<T>(ports: CallPorts<T>, shard: number, options: CallOptions): Promise<T | undefined> {
  const { clock } = ports;
  const started = clock.now();
  const deadline = started + options.deadlineMs;
  const context = { dataset: options.dataset, shard };
  const events: Event<T>[] = [];
  let wake: (() => void) | undefined;
  const push = (e: Event<T>) => {
    events.push(e);
    wake?.();
    wake = undefined;
  };
  const inflight = new Map<number, { node: NodeId; cancellation: Cancellation; cancel: Cancel; at: number }>();
  // No timer of its own for the deadline while an attempt runs: each attempt's timeout is cut to the
  // deadline, so it fires then (one timer per request, not two: they cost on the hot path).
  const timers: Cancel[] = [];
  /** Copies asked in this round; a round ends when every copy was asked (then a backoff, then a new round). */
  const tried = new Set<NodeId>();
  const failures: { node: NodeId; error: unknown }[] = [];
  let askNext: NodeId | undefined;
  let redirects = 0;
  let retryLater = false;
  let hedged = options.hedgeDelayMs === undefined;
  let backoff = options.retryBackoffMs;
  let ids = 0;

  const launch = (node: NodeId): void => {
    const id = ++ids;
    const cancellation = new Cancellation();
    const timeoutMs = Math.max(0, Math.min(options.attemptTimeoutMs, deadline - clock.now()));
    const cancel = clock.schedule(timeoutMs, () => {
      const timeout = new AttemptTimeout(`no answer from ${node} within ${timeoutMs} ms`);
      cancellation.cancel(timeout);
      push(clock.now() >= deadline ? { kind: 'deadline' } : { kind: 'done', id, node, error: timeout });
    });
    inflight.set(id, { node, cancellation, cancel, at: clock.now() });
    tried.add(node);
    ports.started?.(node);
    let sent: Promise<AttemptAnswer<T>>;
    try {
      sent = ports.send(node, shard, ports.version(), cancellation);
    } catch (e) {
      sent = Promise.reject(e);
    }
    sent.then((answer) => push({ kind: 'done', id, node, answer }), (error: unknown) => push({ kind: 'done', id, node, error }));
    if (!hedged && options.hedgeDelayMs !== undefined) {
      hedged = true;
      timers.push(clock.schedule(options.hedgeDelayMs, () => push({ kind: 'hedge' })));
    }
  };
  const pick = (): NodeId | undefined => {
    if (askNext !== undefined) {
      const n = askNext;
      askNext = undefined;
      return n;
    }
    const candidates = ports.candidates(shard);
    if (inflight.size === 0) return candidates.find((n) => !tried.has(n));
    const busy = new Set([...inflight.values()].map((a) => a.node));
    return candidates.find((n) => !tried.has(n) && !busy.has(n));
  };
  /** Nothing in flight: the next copy, a new round after a backoff, or the end. */
  const goOn = (): void => {
    if (inflight.size > 0) return;
    if (clock.now() >= deadline) return push({ kind: 'deadline' });
    const node = pick();
    if (node !== undefined) return launch(node);
    if (retryLater) {
      retryLater = false;
      const wait = Math.min(backoff, deadline - clock.now());
      backoff = Math.min(backoff * 2, options.retryBackoffMs * 8);
      timers.push(clock.schedule(wait, () => push({ kind: 'retry' })));
      return;
    }
    const why = failures.length > 0
      ? `every serving copy failed: ${failures.map((f) => `${f.node}: ${describe(f.error)}`).join('; ')}`
      : 'the map shows no serving copy';
    throw new ShardherdClientError('SHARD_UNAVAILABLE', `${options.dataset}/${shard}: ${why}`, { ...context, cause: failures.at(-1)?.error });
  };

  try {
    goOn();
    for (;;) {
      while (events.length === 0) await new Promise<void>((resolve) => (wake = resolve));
      const e = events.shift()!;
      switch (e.kind) {
        case 'deadline': {
          const last = failures.at(-1);
          throw new ShardherdClientError('DEADLINE_EXCEEDED', `${options.dataset}/${shard}: no answer within ${options.deadlineMs} ms${last ? ` (last failure: ${last.node}: ${describe(last.error)})` : ''}`, { ...context, cause: last?.error });
        }
        case 'hedge': {
          const node = inflight.size > 0 ? pick() : undefined;
          if (node !== undefined) launch(node);
          break;
        }
        case 'retry':
          tried.clear();
          goOn();
          break;
        case 'done': {
          const attempt = inflight.get(e.id);
          if (!attempt) break; // timed out already, or lost to the other copy
          inflight.delete(e.id);
          attempt.cancel();
          ports.finished?.(e.node);
          if (e.answer === undefined) {
            if (ports.isApplicationError(e.error)) throw e.error;
            failures.push({ node: e.node, error: e.error });
            ports.failed(e.node, e.error);
            goOn();
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
              break;
            case 'ask':
              if (++redirects > options.maxRedirects) throw tooManyRedirects(options, shard, redirects);
              askNext = check.node;
              break;
            case 'tryagain':
            case 'unknown':
              // `unknown` from a node that has no map of the dataset yet (it just started): as TRYAGAIN.
              retryLater = true;
              break;
          }
          goOn();
          break;
        }
      }
    }
  } finally {
    for (const cancel of timers) cancel();
    for (const a of inflight.values()) {
      a.cancel();
      a.cancellation.cancel(new Error('the request ended'));
      ports.finished?.(a.node);
    }
  }
}

function tooManyRedirects(options: CallOptions, shard: number, redirects: number): ShardherdClientError {
  return new ShardherdClientError('TOO_MANY_REDIRECTS', `${options.dataset}/${shard}: ${redirects} redirections (more than ${options.maxRedirects})`, { dataset: options.dataset, shard });
}

function describe(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
