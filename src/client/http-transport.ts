// The client's transport: Node's own HTTP client with keep-alive connections (no dependency).
// `node:http` with a keep-alive Agent measured faster than the global `fetch` (undici) for small
// JSON requests (bench/routed-requests.bench.ts), so it is the default; `fetch` stays selectable.
import { Agent, request as httpRequest } from 'node:http';
import { HEALTH_PATH, MAP_VERSION_HEADER } from '../protocol/routed-wire.js';
import { Cancellation, type AttemptCancellation } from '../core/cancellation.js';

/** One HTTP answer. */
export interface TransportAnswer {
  readonly status: number;
  readonly body: string;
}

/** How a client reaches the nodes: bring your own to add TLS or another protocol's client. */
export interface RequestTransport {
  /**
   * POSTs `body` (JSON) to `url` + `path` with the map version; rejects on a transport error or when
   * the attempt is called off (`cancellation.onCancel`, or its `signal` for APIs that take one).
   */
  post(url: string, path: string, mapVersion: number, body: string, cancellation: AttemptCancellation): Promise<TransportAnswer>;
  /** A light health request: true when the node answers 200. */
  probe(url: string, signal: AbortSignal): Promise<boolean>;
  close(): void;
}

export interface HttpTransportOptions {
  /** Connections kept per node address. Default 64. */
  readonly maxSockets?: number;
}

/** Keep-alive `node:http`. */
export class HttpTransport implements RequestTransport {
  private readonly agent: Agent;
  private readonly hosts = new Map<string, { hostname: string; port: number }>();

  constructor(options: HttpTransportOptions = {}) {
    this.agent = new Agent({ keepAlive: true, maxSockets: options.maxSockets ?? 64, scheduling: 'lifo' });
  }

  post(url: string, path: string, mapVersion: number, body: string, cancellation: AttemptCancellation): Promise<TransportAnswer> {
    return this.call(
      url,
      'POST',
      path,
      { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)), [MAP_VERSION_HEADER]: String(mapVersion) },
      body,
      cancellation,
    );
  }

  async probe(url: string, signal: AbortSignal): Promise<boolean> {
    const cancellation = new Cancellation();
    if (signal.aborted) cancellation.cancel(signal.reason);
    else signal.addEventListener('abort', () => cancellation.cancel(signal.reason), { once: true });
    const answer = await this.call(url, 'GET', HEALTH_PATH, {}, undefined, cancellation);
    return answer.status === 200;
  }

  close(): void {
    this.agent.destroy();
  }

  private call(
    url: string,
    method: string,
    path: string,
    headers: Record<string, string>,
    body: string | undefined,
    cancellation: AttemptCancellation,
  ): Promise<TransportAnswer> {
    if (cancellation.cancelled) return Promise.reject(cancellation.reason);
    let host = this.hosts.get(url);
    if (!host) {
      const u = new URL(url);
      host = { hostname: u.hostname, port: Number(u.port || 80) };
      this.hosts.set(url, host);
    }
    return new Promise((resolve, reject) => {
      // Not the request's `signal` option: Node then adds and removes an abort listener per request.
      const req = httpRequest({ agent: this.agent, hostname: host.hostname, port: host.port, method, path, headers }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          off();
          resolve({ status: res.statusCode ?? 0, body: chunks.length === 1 ? chunks[0]!.toString('utf8') : Buffer.concat(chunks).toString('utf8') });
        });
        res.on('error', fail);
      });
      const fail = (e: unknown) => {
        off();
        reject(e);
      };
      const off = cancellation.onCancel((reason) => req.destroy(reason instanceof Error ? reason : new Error(String(reason))));
      req.on('error', fail);
      req.end(body);
    });
  }
}

/** The global `fetch` (undici in Node 20): measured slower than `HttpTransport`; kept for comparison. */
export class FetchTransport implements RequestTransport {
  async post(url: string, path: string, mapVersion: number, body: string, cancellation: AttemptCancellation): Promise<TransportAnswer> {
    const res = await fetch(url + path, {
      method: 'POST',
      headers: { 'content-type': 'application/json', [MAP_VERSION_HEADER]: String(mapVersion) },
      body,
      signal: cancellation.signal,
    });
    return { status: res.status, body: await res.text() };
  }

  async probe(url: string, signal: AbortSignal): Promise<boolean> {
    const res = await fetch(url + HEALTH_PATH, { signal });
    await res.arrayBuffer();
    return res.status === 200;
  }

  close(): void {}
}
