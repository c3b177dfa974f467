// A server-sent event stream on a hijacked reply, as both of the node's streams (the cluster feed and
// the status page's) serve it.
import type { FastifyReply, FastifyRequest } from 'fastify';

/** Sends one event of the stream. */
export type SendEvent = (event: string, data: string) => void;

/**
 * Opens the stream: its headers, the client's reconnection delay, a comment now and then that keeps
 * proxies from closing an idle stream; `listen` starts the events and returns what stops them, which
 * runs when the client goes. A HEAD request gets the headers alone and the reply ends: a stream opened
 * for it would never end, as nothing of it is sent.
 */
export function serveEventStream(req: FastifyRequest, res: FastifyReply, listen: (send: SendEvent) => () => void): void {
  res.hijack();
  const raw = res.raw;
  raw.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache', Connection: 'keep-alive' });
  if (req.method === 'HEAD') {
    raw.end();
    return;
  }
  raw.write('retry: 2000\n\n');
  const stop = listen((event, data) => raw.write(`event: ${event}\ndata: ${data}\n\n`));
  const keepAlive = setInterval(() => raw.write(': keep-alive\n\n'), 15_000);
  req.raw.on('close', () => {
    clearInterval(keepAlive);
    stop();
  });
}
