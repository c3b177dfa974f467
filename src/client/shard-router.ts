// A query router's view of a dataset for users who bring their own transport: shard key + spread →
// shards (FiloDB's arithmetic), shard → the nodes that serve it (Available/Active copies; Leaving
// copies serve until removed), what the nodes answer when its map is stale (MOVED: learn it now,
// not at the next snapshot; ASK: follow it once), and the client's failover rules (./shard-call.ts).
import type { DatasetRef, NodeId, ShardNum } from '../core/ids.js';
import type { ShardCheck } from '../core/shard-check.js';
import { queryShards } from '../core/spread.js';
import { ShardEventSubscriber } from './shard-event-subscriber.js';
import type { LocalNode } from './local-node.js';
import { ShardherdClientError, type ClientErrorCode } from './client-errors.js';
import { LearnedMoves } from './learned-moves.js';
import { ReplicaChoice, Suspicions, type SpreadPolicy } from './replica-choice.js';
import { RetryBudget, type RetryBudgetOptions } from './retry-budget.js';
import { callShard } from './shard-call.js';

const REASONS: Partial<Record<ClientErrorCode, RoutingError['reason']>> = {
  SHARD_UNAVAILABLE: 'no-serving-node',
  TOO_MANY_REDIRECTS: 'too-many-redirects',
  DEADLINE_EXCEEDED: 'deadline',
  OVERLOADED: 'overloaded',
};

/** Why a routed request gave up: typed, never an endless loop. A `ShardherdClientError` with the router's `reason`. */
export class RoutingError extends ShardherdClientError {
  get reason(): 'no-serving-node' | 'too-many-redirects' | 'deadline' | 'overloaded' | 'unknown' {
    return REASONS[this.code] ?? 'unknown';
  }
}

/** What a node answered to a routed request: its check, and the payload when it served it. */
export type RoutedAnswer<T> = { readonly check: ShardCheck; readonly value?: T };

export interface ShardRouterOptions {
  /** Redirections (MOVED, ASK) followed per request before a `too-many-redirects` error. Default 3. */
  readonly maxHops?: number;
  /** The whole request. Default 5000 ms. */
  readonly deadlineMs?: number;
  /** How long one `send` may take before the next copy is asked as well (the first still counts). Default 1000 ms. */
  readonly attemptTimeoutMs?: number;
  /** Sends beyond each request's first (see `RetryBudget`). Default 0.2 per request, 10 per second. */
  readonly retryBudget?: RetryBudgetOptions;
  /** How requests spread over a shard's copies. Default `round-robin`. */
  readonly spread?: SpreadPolicy;
  /** How long a node whose `send` threw is asked last (doubling while it keeps failing, to 5 s). Default 500 ms. */
  readonly suspectMs?: number;
  /** Errors of `send` that are the application's: passed to the caller, not failed over. Default: none. */
  readonly isApplicationError?: (e: unknown) => boolean;
}

export class ShardRouter {
  private readonly subscriber: ShardEventSubscriber;
  private readonly moves = new LearnedMoves();
  private readonly suspicions: Suspicions;
  private readonly choice: ReplicaChoice;
  private readonly options: ShardRouterOptions;
  private readonly retryBudget: RetryBudget;

  constructor(
    private readonly node: LocalNode,
    readonly dataset: DatasetRef,
    options: ShardRouterOptions = {},
  ) {
    this.subscriber = new ShardEventSubscriber(node, dataset);
    this.options = options;
    // No probe: the router has no transport of its own; a suspicion lapses and the node is tried again.
    this.suspicions = new Suspicions(node.services.clock, undefined, { probeInitialMs: options.suspectMs ?? 500 });
    this.choice = new ReplicaChoice(this.suspicions, () => undefined, options.spread ? { spread: options.spread } : {});
    this.retryBudget = new RetryBudget(node.services.clock, options.retryBudget);
  }

  /** The router's map version (0 before its first snapshot). */
  get version(): number {
    return this.subscriber.version;
  }

  /** The shards a query for this shard key must visit (FiloDB's spread arithmetic). */
  shardsFor(shardKeyHash: number, spread: number): ShardNum[] {
    const map = this.subscriber.map;
    if (!map) throw new RoutingError('UNKNOWN_DATASET', `no map of ${this.dataset} yet`, { dataset: this.dataset });
    return queryShards(map.numShards, shardKeyHash, spread);
  }

  /** Nodes serving `shard`: what a MOVED answer taught, else the map's serving copies (sorted as the map has them). */
  nodesFor(shard: number): readonly NodeId[] {
    return this.moves.nodes(shard, this.version) ?? this.subscriber.map?.servingNodes(shard) ?? [];
  }

  /** Applies a node's answer: MOVED updates the shard's nodes at once; the others change nothing. */
  learn(shard: number, check: ShardCheck): void {
    if (check.type === 'moved') this.moves.learn(shard, check.nodes, check.version, this.version);
  }

  /**
   * Sends a request for `shard` through `send(node, routerVersion, signal)`, which asks `node` with
   * the router's map version and returns its check and, when `ok`, the payload. The rules:
   * - `ok`: the payload is returned. MOVED: the nodes it names are asked (and learned for later
   *   requests); ASK: that node, this once; TRYAGAIN (or `unknown`: a node without the map yet): the
   *   next copy, and when every copy said so, all again after a short backoff.
   * - `send` throws (unless `isApplicationError` says it is the application's, then it is rethrown):
   *   the next serving copy is asked at once, and the node is asked last by later requests for a
   *   while. A `send` that has not settled within `attemptTimeoutMs` is kept (its answer still
   *   counts) and the next copy is asked as well; the others' `signal`s abort once one answered.
   * - When every copy was asked, all again after a backoff, until `deadlineMs`: the only give-up
   *   time. Sends beyond each request's first draw on the router's retry budget.
   * - Copies are asked in a rotating order (the load spreads), suspected ones last.
   * - Gives up with a `RoutingError`: `no-serving-node` (every copy failed until the deadline, or
   *   the map shows none), `overloaded` (a copy failed and the retry budget allows no other attempt
   *   now), `too-many-redirects`, `deadline`.
   */
  async request<T>(shard: number, send: (node: NodeId, routerVersion: number, signal: AbortSignal) => Promise<RoutedAnswer<T>>): Promise<T | undefined> {
    this.retryBudget.deposit();
    try {
      return await callShard<T>(
        {
          clock: this.node.services.clock,
          candidates: (s) => this.choice.order(this.nodesFor(s)),
          version: () => this.version,
          learn: (s, check) => this.learn(s, check),
          send: (node, _s, version, cancellation) => send(node, version, cancellation.signal),
          isApplicationError: (e) => this.options.isApplicationError?.(e) ?? false,
          failed: (node) => this.suspicions.suspect(node),
          answered: (node) => this.suspicions.cleared(node),
          retryBudget: this.retryBudget,
        },
        shard,
        {
          deadlineMs: this.options.deadlineMs ?? 5_000,
          attemptTimeoutMs: this.options.attemptTimeoutMs ?? 1_000,
          maxRedirects: this.options.maxHops ?? 3,
          retryBackoffMs: 10,
          dataset: this.dataset,
        },
      );
    } catch (e) {
      if (e instanceof ShardherdClientError && !(e instanceof RoutingError)) {
        throw new RoutingError(e.code, e.message, { dataset: this.dataset, shard, ...(e.cause === undefined ? {} : { cause: e.cause }) });
      }
      throw e;
    }
  }

  close(): void {
    this.subscriber.close();
    this.suspicions.close();
  }
}
