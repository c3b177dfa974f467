// A client of a cluster that is not a member (never owns shards, never the singleton): a query
// router, a gateway. It follows every dataset's map from the bus and where nodes serve them, and
// carries routed requests to the copies that serve a shard, with redirections, replica failover,
// spreading, optional hedging and a deadline (./shard-call.ts has the rules).
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import type { Bus } from '../cluster/bus.js';
import { RealClock, type Clock } from '../cluster/clock.js';
import type { DatasetConfig } from '../core/dataset-config.js';
import { partitionKeyHash, shardKeyHash } from '../core/hashing.js';
import type { DatasetRef, NodeId, ShardNum } from '../core/ids.js';
import type { ShardCheck } from '../core/shard-check.js';
import type { ShardMapper } from '../core/shard-mapper.js';
import { ingestionShard, queryShards } from '../core/spread.js';
import { requestPath, STATUS, type RedirectBody } from '../protocol/routed-wire.js';
import { Cancellation } from '../core/cancellation.js';
import { HandlerError, ShardherdClientError, type RemoteError } from './client-errors.js';
import { ClusterFollower } from './cluster-follower.js';
import { HttpTransport, type RequestTransport } from './http-transport.js';
import { LearnedMoves } from './learned-moves.js';
import { LatencyWindow, ReplicaChoice, Suspicions, type SpreadPolicy, type SuspicionOptions } from './replica-choice.js';
import { RetryBudget, type RetryBudgetOptions } from './retry-budget.js';
import { callShard, type CallPorts } from './shard-call.js';

/** Labels: a shard key (`_ws_`, `_ns_`, `_metric_`…) or a series' full label set. */
export type Labels = Readonly<Record<string, string>>;

/** Which shard a request is for: a shard number, or the record's keys as a gateway writes them (`ShardedProducer.shardOf`). */
export type RequestTarget = { readonly shard: number } | { readonly shardKey: Labels; readonly partitionKey: Labels; readonly spread?: number };

export interface RequestOptions {
  /** The whole request, failovers included. Default: the client's `deadlineMs`. */
  readonly deadlineMs?: number;
  /** Hedge this request (see `ShardherdClientOptions.hedge`); default: the client's setting. */
  readonly hedge?: boolean;
}

export interface ShardherdClientOptions {
  /** The cluster's bus: a `MemoryBus` of an embedded cluster, a `KafkaBus` (see `connectKafkaClient` in `shardherd/kafka`). */
  readonly bus: Bus;
  /**
   * The cluster's topic prefix: the `cluster` key of its nodes' config files (`topicPrefix` of the
   * runtime settings for nodes made in code). Default `shardherd`, as `cluster`'s default.
   */
  readonly topicPrefix?: string;
  /** Default a `RealClock`. */
  readonly clock?: Clock;
  /** A name for this client on the bus (its consumer group); default random. */
  readonly name?: string;
  readonly log?: Logger;
  /** How long `connect` waits for the singleton's answer. Default 10 000 ms. */
  readonly connectTimeoutMs?: number;
  /** Default deadline of a request. Default 5000 ms. */
  readonly deadlineMs?: number;
  /**
   * How long a copy may take before the next copy is asked as well (the first is not given up: the
   * first answer wins; only the deadline ends a request). Default 1000 ms.
   */
  readonly attemptTimeoutMs?: number;
  /**
   * Shard requests this client has in flight at most (a fan-out counts one per shard); one more is
   * refused at once with `OVERLOADED`, so a router under more load than the cluster answers keeps
   * its memory and answers on time. Default 1024.
   */
  readonly maxInFlight?: number;
  /** Attempts beyond each request's first (see `RetryBudget`). Default 0.2 per request, 10 per second. */
  readonly retryBudget?: RetryBudgetOptions;
  /** How reads spread over a shard's serving copies. Default `round-robin`. */
  readonly spread?: SpreadPolicy;
  /** This client's rack: copies in it are asked first. */
  readonly rack?: string;
  /**
   * Ask a second copy when the first has not answered after `delayMs` (default: the p95 of the
   * dataset's recent latencies, at least 1 ms; no hedge before 20 requests). Default off.
   */
  readonly hedge?: boolean | { readonly delayMs: number };
  /** MOVED and ASK answers followed per request. Default 5. */
  readonly maxRedirects?: number;
  /** First wait before every copy is asked again (doubling to 8×). Default 10 ms. */
  readonly retryBackoffMs?: number;
  /** Probing of suspected nodes. */
  readonly probe?: SuspicionOptions;
  /** How long a `SyncMaps` waits for its answer before it is asked again. Default 1000 ms. */
  readonly syncRetryMs?: number;
  /** Default keep-alive `node:http` (`HttpTransport`). */
  readonly transport?: RequestTransport;
  /** Called by `close` after the client's own resources (the Kafka factory closes its bus there). */
  readonly onClose?: () => Promise<void>;
}

/** Per-shard outcome of a fan-out. */
export type ShardOutcome<R> =
  { readonly shard: ShardNum; readonly ok: true; readonly value: R } | { readonly shard: ShardNum; readonly ok: false; readonly error: ShardherdClientError };

/** What a fan-out returns: every shard's answer or error, in shard order. */
export interface FanOutResult<R> {
  readonly shards: readonly ShardOutcome<R>[];
  readonly values: readonly R[];
  readonly errors: readonly ShardherdClientError[];
}

/** An embedded cluster, as far as a client needs it (an `EmbeddedCluster` is one). */
export interface EmbeddedClusterLike {
  readonly bus: Bus;
  readonly clock: Clock;
  readonly topicPrefix: string;
}

interface DatasetRouting {
  readonly moves: LearnedMoves;
  readonly latencies: LatencyWindow;
}

/**
 * A cluster's client that is not a member. `request` carries a request to a copy that serves the
 * shard: MOVED / ASK / TRYAGAIN followed, a transport error or a timeout failed over to the next
 * copy at once (the node is suspected for all its shards until a probe finds it back), all within
 * the deadline; the typed `ShardherdClientError` otherwise.
 *
 * Gotchas: a handler's error (`HandlerError`) is never failed over: it is the application's answer,
 * the same on every copy. A request may reach a handler more than once (a late copy, a hedge).
 * Datasets and endpoints are learned from the bus: a node that serves without `node.serve` for
 * this dataset is skipped, and the request waits for it within its deadline.
 */
export class ShardherdClient {
  private readonly follower: ClusterFollower;
  private readonly clock: Clock;
  private readonly transport: RequestTransport;
  private readonly suspicions: Suspicions;
  private readonly choice: ReplicaChoice;
  private readonly routing = new Map<DatasetRef, DatasetRouting>();
  private readonly o: Required<
    Pick<ShardherdClientOptions, 'deadlineMs' | 'attemptTimeoutMs' | 'maxRedirects' | 'retryBackoffMs' | 'connectTimeoutMs' | 'maxInFlight'>
  >;
  private readonly retryBudget: RetryBudget;
  private inFlight = 0;
  private closed = false;
  /** Ends every request in flight with `CLOSED` when the client closes. */
  private readonly closing = new Cancellation();

  private constructor(private readonly options: ShardherdClientOptions) {
    this.clock = options.clock ?? new RealClock();
    this.transport = options.transport ?? new HttpTransport();
    this.o = {
      deadlineMs: positive(options.deadlineMs, 5_000, 'deadlineMs'),
      attemptTimeoutMs: positive(options.attemptTimeoutMs, 1_000, 'attemptTimeoutMs'),
      maxRedirects: options.maxRedirects ?? 5,
      retryBackoffMs: positive(options.retryBackoffMs, 10, 'retryBackoffMs'),
      connectTimeoutMs: positive(options.connectTimeoutMs, 10_000, 'connectTimeoutMs'),
      maxInFlight: wholeAtLeastOne(options.maxInFlight, 1024, 'maxInFlight'),
    };
    this.retryBudget = new RetryBudget(this.clock, options.retryBudget);
    const id = `${options.name ?? 'client'}@${randomBytes(6).toString('hex')}`;
    this.follower = new ClusterFollower({
      bus: options.bus,
      clock: this.clock,
      topicPrefix: options.topicPrefix ?? 'shardherd',
      id,
      syncRetryMs: positive(options.syncRetryMs, 1_000, 'syncRetryMs'),
      onProblem: (what, detail) => options.log?.warn({ detail }, what),
    });
    this.suspicions = new Suspicions(this.clock, (node) => this.probe(node), options.probe);
    this.choice = new ReplicaChoice(this.suspicions, (node) => this.rackOf(node), {
      ...(options.spread ? { spread: options.spread } : {}),
      ...(options.rack === undefined ? {} : { rack: options.rack }),
    });
  }

  /**
   * Connects: follows the cluster's maps and endpoints and waits for the singleton's first answer.
   * Rejects with `CONNECT_FAILED` when nothing answers within `connectTimeoutMs` (a wrong prefix, no
   * running cluster, a bus that cannot be reached); nothing is left open then.
   */
  static async connect(options: ShardherdClientOptions): Promise<ShardherdClient> {
    const client = new ShardherdClient(options);
    const prefix = options.topicPrefix ?? 'shardherd';
    const { connectTimeoutMs } = client.o;
    let timer: () => void = () => {};
    const timeout = new Promise<never>((_, reject) => {
      timer = client.clock.schedule(connectTimeoutMs, () =>
        reject(
          new ShardherdClientError(
            'CONNECT_FAILED',
            `no shardherd cluster answered on topic prefix ${prefix} within ${connectTimeoutMs} ms (is the prefix right, and is a node running?)`,
          ),
        ),
      );
    });
    try {
      await Promise.race([
        client.follower.open().catch((e: unknown) => {
          throw new ShardherdClientError('CONNECT_FAILED', `could not follow the cluster ${prefix} on its bus: ${e instanceof Error ? e.message : String(e)}`, {
            cause: e,
          });
        }),
        timeout,
      ]);
      await Promise.race([client.follower.whenReady(), timeout]);
      return client;
    } catch (e) {
      await client.close();
      throw e;
    } finally {
      timer();
    }
  }

  /** Connects to an `EmbeddedCluster` of this process (its memory bus and prefix). */
  static connectEmbedded(cluster: EmbeddedClusterLike, options: Omit<ShardherdClientOptions, 'bus' | 'topicPrefix' | 'clock'> = {}): Promise<ShardherdClient> {
    return ShardherdClient.connect({ ...options, bus: cluster.bus, clock: cluster.clock, topicPrefix: cluster.topicPrefix });
  }

  /**
   * The dataset's config as the cluster has it (shards, spread, source), waiting for it up to
   * `deadlineMs` (default the client's): what a gateway needs to write records where routers look.
   * Rejects with `UNKNOWN_DATASET` or `DEADLINE_EXCEEDED`.
   */
  async datasetConfig(dataset: DatasetRef, options: { readonly deadlineMs?: number } = {}): Promise<DatasetConfig> {
    await this.mapWithin(dataset, deadlineOf(options, this.o.deadlineMs, dataset));
    const config = this.follower.config(dataset);
    if (!config)
      throw new ShardherdClientError('UNKNOWN_DATASET', `the cluster ${this.options.topicPrefix ?? 'shardherd'} has no dataset ${dataset}`, { dataset });
    return config;
  }

  /**
   * Resolves once the client can route every shard of `dataset`: it has the map, and each shard has
   * a serving copy on a node whose request endpoint it knows. A router that awaits this after
   * `connect` is ready to take traffic, instead of failing its first requests while it learns.
   * Rejects with `UNKNOWN_DATASET`, or `DEADLINE_EXCEEDED` naming shards still without such a copy
   * once `deadlineMs` (default the client's `connectTimeoutMs`) passed.
   */
  async whenServed(dataset: DatasetRef, options: { readonly deadlineMs?: number } = {}): Promise<void> {
    const deadlineMs = deadlineOf(options, this.o.connectTimeoutMs, dataset);
    const started = this.clock.now();
    const map = await this.mapWithin(dataset, deadlineMs);
    const unserved = (): number[] => {
      const now = this.map(dataset) ?? map;
      const left: number[] = [];
      for (let s = 0; s < now.numShards; s++) if (!now.servingNodes(s).some((n) => this.follower.endpoint(dataset, n) !== undefined)) left.push(s);
      return left;
    };
    if (unserved().length === 0) return;
    this.follower.hello();
    await new Promise<void>((resolve, reject) => {
      let stopListening: () => void = () => {};
      const cancel = this.clock.schedule(Math.max(0, deadlineMs - (this.clock.now() - started)), () => {
        stopListening();
        const left = unserved();
        reject(
          new ShardherdClientError(
            'DEADLINE_EXCEEDED',
            `${dataset}: ${left.length} of ${map.numShards} shards had no serving copy this client can reach within ${deadlineMs} ms (shards ${left.slice(0, 10).join(', ')}${left.length > 10 ? ', …' : ''}): are their nodes serving the dataset (node.serve)?`,
            { dataset },
          ),
        );
      });
      stopListening = this.follower.onChange(() => {
        if (this.closed || unserved().length > 0) return;
        stopListening();
        cancel();
        resolve();
      });
    });
  }

  /** The client's current map of a dataset (undefined if it has none). Do not mutate it. */
  map(dataset: DatasetRef): ShardMapper | undefined {
    return this.follower.follower(dataset)?.mapper;
  }

  /** Nodes suspected now (a failed request; until a probe finds them back). */
  get suspected(): readonly NodeId[] {
    return this.suspicions.list();
  }

  /**
   * Sends `payload` (JSON) to a copy serving the target shard and resolves with the handler's answer.
   * Rejects with a `ShardherdClientError`: `UNKNOWN_DATASET`, `SHARD_OUT_OF_RANGE`, `NOT_SERIALIZABLE`
   * and `INVALID_OPTION` (nothing sent), `OVERLOADED` (`maxInFlight` requests in flight already:
   * nothing sent; or a copy failed and the retry budget allows no other attempt now),
   * `HANDLER_FAILED` (a `HandlerError`), `SHARD_UNAVAILABLE` (every serving copy failed until the
   * deadline, or none serves), `DEADLINE_EXCEEDED`,
   * `TOO_MANY_REDIRECTS`, `CLOSED` (also when the client closes while the request is in flight).
   */
  async request<R = unknown>(dataset: DatasetRef, target: RequestTarget, payload: unknown, options: RequestOptions = {}): Promise<R> {
    const deadlineMs = deadlineOf(options, this.o.deadlineMs, dataset);
    const body = serialise(payload, dataset);
    const started = this.clock.now();
    // The map at hand without a wait (the usual case): an await costs on every request.
    const map = (!this.closed && this.follower.follower(dataset)?.mapper) || (await this.mapWithin(dataset, deadlineMs));
    const shard = this.shardOf(dataset, map, target);
    return this.call<R>(dataset, shard, body, deadlineMs - (this.clock.now() - started), options);
  }

  /**
   * Sends `payload` to every shard a query for `shardKey` must visit (FiloDB's spread arithmetic;
   * `spread` defaults to the dataset's) in parallel, and gathers every shard's answer or error:
   * it never rejects for one shard's failure (only for the dataset or the payload).
   */
  async fanOut<R = unknown>(
    dataset: DatasetRef,
    query: { readonly shardKey: Labels; readonly spread?: number },
    payload: unknown,
    options: RequestOptions = {},
  ): Promise<FanOutResult<R>> {
    const deadlineMs = deadlineOf(options, this.o.deadlineMs, dataset);
    const body = serialise(payload, dataset);
    const started = this.clock.now();
    const map = await this.mapWithin(dataset, deadlineMs);
    const spread = query.spread ?? this.follower.config(dataset)?.spread ?? 0;
    const shards = queryShards(map.numShards, shardKeyHash(query.shardKey), spread);
    const left = deadlineMs - (this.clock.now() - started);
    const outcomes = await Promise.all(
      shards.map((shard) =>
        this.call<R>(dataset, shard, body, left, options).then(
          (value): ShardOutcome<R> => ({ shard, ok: true, value }),
          (e: unknown): ShardOutcome<R> => ({ shard, ok: false, error: asClientError(e, dataset, shard) }),
        ),
      ),
    );
    return {
      shards: outcomes,
      values: outcomes.flatMap((o) => (o.ok ? [o.value] : [])),
      errors: outcomes.flatMap((o) => (o.ok ? [] : [o.error])),
    };
  }

  /** Stops following the cluster and closes the connections; requests in flight end with `CLOSED` or their own outcome. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.closing.cancel(new ShardherdClientError('CLOSED', 'the client was closed while the request was in flight'));
    this.suspicions.close();
    await this.follower.close();
    this.transport.close();
    await this.options.onClose?.();
  }

  // ------------------------------------------------------------------ internals

  private async mapWithin(dataset: DatasetRef, deadlineMs: number): Promise<ShardMapper> {
    if (this.closed) throw new ShardherdClientError('CLOSED', 'the client is closed', { dataset });
    const have = this.follower.follower(dataset)?.mapper;
    if (have) return have;
    let cancel: () => void = () => {};
    try {
      await Promise.race([
        this.follower.wantMap(dataset),
        new Promise<never>((_, reject) => {
          cancel = this.clock.schedule(deadlineMs, () =>
            reject(new ShardherdClientError('DEADLINE_EXCEEDED', `no map of ${dataset} within ${deadlineMs} ms`, { dataset })),
          );
        }),
      ]);
    } finally {
      cancel();
    }
    return this.follower.follower(dataset)!.mapper!;
  }

  private shardOf(dataset: DatasetRef, map: ShardMapper, target: RequestTarget): ShardNum {
    if ('shard' in target) {
      if (!Number.isInteger(target.shard) || target.shard < 0 || target.shard >= map.numShards) {
        throw new ShardherdClientError('SHARD_OUT_OF_RANGE', `shard ${target.shard} is out of range: ${dataset} has shards 0..${map.numShards - 1}`, {
          dataset,
          shard: target.shard,
        });
      }
      return target.shard as ShardNum;
    }
    const spread = target.spread ?? this.follower.config(dataset)?.spread ?? 0;
    return ingestionShard(map.numShards, shardKeyHash(target.shardKey), partitionKeyHash(target.partitionKey), spread);
  }

  private routingOf(dataset: DatasetRef): DatasetRouting {
    let r = this.routing.get(dataset);
    if (!r) this.routing.set(dataset, (r = { moves: new LearnedMoves(), latencies: new LatencyWindow() }));
    return r;
  }

  private async call<R>(dataset: DatasetRef, shard: number, body: string, deadlineMs: number, options: RequestOptions): Promise<R> {
    if (this.closed) throw new ShardherdClientError('CLOSED', 'the client is closed', { dataset, shard });
    if (this.inFlight >= this.o.maxInFlight) {
      throw new ShardherdClientError(
        'OVERLOADED',
        `${dataset}/${shard}: this client has ${this.inFlight} requests in flight already (maxInFlight ${this.o.maxInFlight}); nothing was sent`,
        { dataset, shard },
      );
    }
    this.inFlight += 1;
    this.retryBudget.deposit();
    try {
      return await this.callCopies<R>(dataset, shard, body, deadlineMs, options);
    } finally {
      this.inFlight -= 1;
    }
  }

  private callCopies<R>(dataset: DatasetRef, shard: number, body: string, deadlineMs: number, options: RequestOptions): Promise<R> {
    const routing = this.routingOf(dataset);
    const path = requestPath(dataset, shard);
    const version = () => this.follower.follower(dataset)?.version ?? 0;
    const ports: CallPorts<R> = {
      clock: this.clock,
      version,
      candidates: (s) => this.choice.order(routing.moves.nodes(s, version()) ?? this.map(dataset)?.servingNodes(s) ?? []),
      learn: (s, check) => routing.moves.learn(s, check.nodes, check.version, version()),
      send: async (node, s, v, cancellation) => {
        const endpoint = this.follower.endpoint(dataset, node);
        if (!endpoint) {
          // The node has not said where it serves (yet): ask it, and treat it as a copy not ready.
          this.follower.hello();
          return { check: { type: 'tryagain', version: v } };
        }
        const answer = await this.transport.post(endpoint.url, path, v, body, cancellation);
        return interpret<R>(answer.status, answer.body, { dataset, shard: s, node });
      },
      isApplicationError: (e) => e instanceof ShardherdClientError,
      failed: (node) => this.suspicions.suspect(node),
      answered: (node, ms, ok) => {
        this.suspicions.cleared(node);
        if (ok) routing.latencies.add(ms);
      },
      started: (node) => this.choice.started(node),
      finished: (node) => this.choice.finished(node),
      retryBudget: this.retryBudget,
    };
    const hedge = options.hedge ?? (this.options.hedge !== undefined && this.options.hedge !== false);
    const hedgeDelayMs = !hedge
      ? undefined
      : typeof this.options.hedge === 'object'
        ? this.options.hedge.delayMs
        : routing.latencies.p95() === undefined
          ? undefined
          : Math.max(1, routing.latencies.p95()!);
    return callShard<R>(ports, shard, {
      deadlineMs: Math.max(0, deadlineMs),
      attemptTimeoutMs: this.o.attemptTimeoutMs,
      hedgeDelayMs,
      maxRedirects: this.o.maxRedirects,
      retryBackoffMs: this.o.retryBackoffMs,
      dataset,
      cancellation: this.closing,
    }) as Promise<R>;
  }

  private rackOf(node: NodeId): string | undefined {
    for (const dataset of this.routing.keys()) {
      const rack = this.follower.endpoint(dataset, node)?.rack;
      if (rack !== undefined) return rack;
    }
    return undefined;
  }

  /** A suspected node's probe: its health path on any dataset's port it announced. */
  private async probe(node: NodeId): Promise<boolean> {
    for (const dataset of this.routing.keys()) {
      const endpoint = this.follower.endpoint(dataset, node);
      if (!endpoint) continue;
      const abort = new AbortController();
      const cancel = this.clock.schedule(this.o.attemptTimeoutMs, () => abort.abort());
      try {
        return await this.transport.probe(endpoint.url, abort.signal);
      } catch {
        return false;
      } finally {
        cancel();
      }
    }
    // No address for it any more: it withdrew; nothing to wait for.
    return true;
  }
}

/** A node's HTTP answer as a check and a value, or the typed error it stands for. */
function interpret<R>(status: number, body: string, where: { dataset: string; shard: number; node: NodeId }): { check: ShardCheck; value?: R } {
  switch (status) {
    case STATUS.ok:
      return { check: { type: 'ok', version: 0 }, value: JSON.parse(body) as R };
    case STATUS.redirect:
      return { check: JSON.parse(body) as RedirectBody };
    case STATUS.handlerFailed:
      throw new HandlerError(remoteOf(body), where);
    case STATUS.notServing:
    case STATUS.overloaded:
      // Stopping, not a member right now, or running as many requests as it takes: another copy,
      // or this one again after a backoff.
      return { check: { type: 'tryagain', version: 0 } };
    default:
      throw new Error(`${where.node} answered HTTP ${status} for ${where.dataset}/${where.shard}: ${body.slice(0, 200)}`);
  }
}

function remoteOf(body: string): RemoteError {
  try {
    const e = (JSON.parse(body) as { error?: RemoteError }).error;
    if (e && typeof e.message === 'string') return e;
  } catch {
    // not JSON: reported as it came
  }
  return { name: 'Error', message: body.slice(0, 500) };
}

function serialise(payload: unknown, dataset: string): string {
  let json: string | undefined;
  try {
    json = JSON.stringify(payload);
  } catch (e) {
    throw new ShardherdClientError('NOT_SERIALIZABLE', `the payload cannot be sent as JSON: ${(e as Error).message}`, { dataset, cause: e });
  }
  if (json === undefined) throw new ShardherdClientError('NOT_SERIALIZABLE', `the payload (${typeof payload}) cannot be sent as JSON`, { dataset });
  return json;
}

function asClientError(e: unknown, dataset: string, shard: number): ShardherdClientError {
  return e instanceof ShardherdClientError
    ? e
    : new ShardherdClientError('SHARD_UNAVAILABLE', `${dataset}/${shard}: ${e instanceof Error ? e.message : String(e)}`, { dataset, shard, cause: e });
}

/** The longest wait a timer can hold (Node's timers fire at once beyond it): about 24.8 days. */
const MAX_WAIT_MS = 2_147_483_647;

/** A call's deadline: its own, else the client's; a typed `INVALID_OPTION` when it cannot be waited for. */
function deadlineOf(options: { readonly deadlineMs?: number }, fallback: number, dataset: string): number {
  const v = options.deadlineMs;
  if (v === undefined) return fallback;
  if (typeof v !== 'number' || !Number.isFinite(v) || v <= 0 || v > MAX_WAIT_MS) {
    throw new ShardherdClientError(
      'INVALID_OPTION',
      `deadlineMs must be a positive number of milliseconds up to ${MAX_WAIT_MS}, got ${String(v)}; nothing was sent`,
      { dataset },
    );
  }
  return v;
}

function wholeAtLeastOne(value: number | undefined, fallback: number, key: string): number {
  const v = value ?? fallback;
  if (!Number.isInteger(v) || v < 1) throw new RangeError(`ShardherdClient option ${key} must be a whole number >= 1, got ${String(value)}`);
  return v;
}

function positive(value: number | undefined, fallback: number, key: string): number {
  const v = value ?? fallback;
  if (!(v > 0) || !Number.isFinite(v) || v > MAX_WAIT_MS)
    throw new RangeError(`ShardherdClient option ${key} must be a positive number of milliseconds up to ${MAX_WAIT_MS}, got ${String(value)}`);
  return v;
}
