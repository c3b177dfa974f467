// A node's server for one dataset's routed requests (node:http, a port of its own): it answers
// MOVED / ASK / TRYAGAIN from the node's own map itself, so the application's handler only ever
// sees shards its node serves. Payloads and answers are JSON.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Cancellation } from '../core/cancellation.js';
import type { DatasetRef, ShardNum } from '../core/ids.js';
import type { ShardCheck } from '../core/shard-check.js';
import { HEALTH_PATH, MAP_VERSION_HEADER, requestPath, STATUS } from '../protocol/routed-wire.js';

/** One request as the handler sees it: a shard its node serves, the caller's payload, and a signal aborted when the caller goes away. */
export interface ShardRequest<P = unknown> {
  readonly dataset: DatasetRef;
  readonly shard: ShardNum;
  readonly payload: P;
  readonly signal: AbortSignal;
}

/**
 * The application's handler of a dataset's requests. Its answer must be JSON (`undefined` is sent as
 * `null`); what it throws reaches the caller as a `HandlerError` with its name and message.
 *
 * Gotchas: a request may run more than once (a copy that answered too late, a hedged request, a
 * connection lost after the handler ran): handlers should be reads, or idempotent.
 */
export type ShardRequestHandler<P = unknown, R = unknown> = (request: ShardRequest<P>) => R | Promise<R>;

/** What the server needs of its node. */
export interface ServingNode {
  /** What the node answers about `shard` to a client whose map is at `routerVersion`. */
  check(dataset: DatasetRef, shard: number, routerVersion: number): ShardCheck;
  /** False while the node is not a running member: every request is answered 503. */
  serving(): boolean;
}

export interface DatasetServerOptions {
  /** Default 127.0.0.1. */
  readonly host?: string;
  /** Default 0: an ephemeral port. */
  readonly port?: number;
  /** The host clients are told to connect to; default `host`. */
  readonly advertisedHost?: string;
  /**
   * Requests the handler runs at once on this node for this dataset; one more is answered at once
   * as overloaded (HTTP 429), and the client asks another copy, instead of queueing past its
   * deadline. Default 256.
   */
  readonly maxInFlight?: number;
}

/** The handler calls a dataset server runs at once when `maxInFlight` is not set. */
export const DEFAULT_MAX_IN_FLIGHT = 256;

/** `maxInFlight` or its default; a `RangeError` naming it when it is not a whole number >= 1. */
export function checkedMaxInFlight(options: DatasetServerOptions): number {
  const v = options.maxInFlight ?? DEFAULT_MAX_IN_FLIGHT;
  if (!Number.isInteger(v) || v < 1) throw new RangeError(`serve option maxInFlight must be a whole number >= 1, got ${String(options.maxInFlight)}`);
  return v;
}

export class DatasetServer {
  private constructor(
    private readonly server: Server,
    /** `http://host:port`, as clients reach it. */
    readonly url: string,
  ) {}

  static async open(dataset: DatasetRef, handler: ShardRequestHandler, node: ServingNode, options: DatasetServerOptions = {}): Promise<DatasetServer> {
    const host = options.host ?? '127.0.0.1';
    const maxInFlight = checkedMaxInFlight(options);
    let inFlight = 0;
    const prefix = requestPath(dataset, 0).slice(0, -1);
    // A request that fails before it is answered (its connection lost mid-body) is dropped with its socket.
    const server = createServer((req, res) => void answer(req, res).catch(() => res.destroy()));
    // Clients keep connections open; a socket idle longer than theirs would be closed under a request in flight.
    server.keepAliveTimeout = 65_000;

    async function answer(req: IncomingMessage, res: ServerResponse): Promise<void> {
      const url = req.url ?? '';
      if (req.method === 'GET' && url === HEALTH_PATH) return send(res, node.serving() ? STATUS.ok : STATUS.notServing, { serving: node.serving() });
      if (req.method !== 'POST' || !url.startsWith(prefix))
        return send(res, STATUS.notFound, { error: { name: 'NotFound', message: `no ${req.method} ${url} here` } });
      const shard = Number(url.slice(prefix.length));
      const body = await readBody(req);
      if (!node.serving()) return send(res, STATUS.notServing, { error: { name: 'NotServing', message: 'this node is not serving now' } });
      const check = node.check(dataset, shard, Number(req.headers[MAP_VERSION_HEADER] ?? 0) || 0);
      if (check.type !== 'ok') return send(res, STATUS.redirect, check);
      let payload: unknown;
      try {
        payload = body.length === 0 ? null : JSON.parse(body);
      } catch (e) {
        return send(res, STATUS.badRequest, { error: { name: 'BadPayload', message: `the payload is not JSON: ${(e as Error).message}` } });
      }
      if (inFlight >= maxInFlight)
        return send(res, STATUS.overloaded, {
          error: { name: 'Overloaded', message: `this node runs ${inFlight} requests of ${dataset} already (maxInFlight ${maxInFlight})` },
        });
      // The handler's signal is made only if the handler looks at it (an AbortController per request costs).
      const callerGone = new Cancellation();
      res.on('close', () => {
        if (!res.writableFinished) callerGone.cancel(new Error('the caller went away'));
      });
      let result: unknown;
      inFlight += 1;
      try {
        result = await handler({
          dataset,
          shard: shard as ShardNum,
          payload,
          get signal() {
            return callerGone.signal;
          },
        });
      } catch (e) {
        return send(res, STATUS.handlerFailed, { error: remoteError(e) });
      } finally {
        inFlight -= 1;
      }
      let json: string;
      try {
        json = JSON.stringify(result ?? null);
      } catch (e) {
        return send(res, STATUS.handlerFailed, { error: { name: 'NotSerializable', message: `the handler's answer is not JSON: ${(e as Error).message}` } });
      }
      sendJson(res, STATUS.ok, json);
    }

    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(options.port ?? 0, host, () => {
        server.off('error', reject);
        resolve();
      });
    });
    const { port } = server.address() as AddressInfo;
    return new DatasetServer(server, `http://${options.advertisedHost ?? host}:${port}`);
  }

  /** Stops accepting connections and drops the open ones at once: clients fail over at once too. */
  close(): Promise<void> {
    return new Promise((resolve) => {
      this.server.close(() => resolve());
      this.server.closeAllConnections();
    });
  }
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(chunks.length === 1 ? chunks[0]!.toString('utf8') : Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

function remoteError(e: unknown): { name: string; message: string; code?: string } {
  if (!(e instanceof Error)) return { name: 'Error', message: String(e) };
  const code = (e as { code?: unknown }).code;
  return { name: e.name, message: e.message, ...(typeof code === 'string' ? { code } : {}) };
}

function send(res: ServerResponse, status: number, body: unknown): void {
  sendJson(res, status, JSON.stringify(body));
}

function sendJson(res: ServerResponse, status: number, json: string): void {
  if (res.destroyed) return;
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(json) });
  res.end(json);
}
