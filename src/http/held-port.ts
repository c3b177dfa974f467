// An HTTP port bound before the server that will answer on it exists: a node takes its status port
// first thing, so a port in use fails the start before the node connects to anything or joins,
// and the API later takes over the very socket (no window in which another process could take it).
// Until then every request is answered 503 "Starting", as a node's routes answer while it starts.
import { createServer, type RequestListener, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface HeldHttpPort {
  /** The listening server; the API answers through it once `handOver` was called. */
  readonly server: Server;
  /** `http://host:port`, with the port the OS chose when 0 was asked for. */
  readonly url: string;
  /** Sends every request from now on to `listener` instead of the "starting" answer. */
  handOver(listener: RequestListener): void;
  /** Stops listening and ends the open connections (an event stream would keep `close` waiting). */
  close(): Promise<void>;
}

const STARTING = JSON.stringify({ error: 'Starting', reason: 'the node is still starting: try again' });

/** Listens on `host:port` at once; rejects with the listen error itself (`code` EADDRINUSE, EACCES, ...). */
export async function holdHttpPort(host: string, port: number): Promise<HeldHttpPort> {
  const starting: RequestListener = (_req, res) => {
    res.writeHead(503, { 'content-type': 'application/json; charset=utf-8', 'retry-after': '1' }).end(STARTING);
  };
  const server = createServer(starting);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ host, port }, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  // A wildcard address is no place to connect to: the URL names this machine's loopback, as
  // Fastify's own listen does for 0.0.0.0.
  const shownHost =
    address.address === '0.0.0.0' ? '127.0.0.1' : address.address === '::' ? '[::1]' : address.family === 'IPv6' ? `[${address.address}]` : address.address;
  let closed: Promise<void> | undefined;
  return {
    server,
    url: `http://${shownHost}:${address.port}`,
    handOver: (listener) => {
      server.off('request', starting);
      server.on('request', listener);
    },
    close: () =>
      (closed ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      })),
  };
}
