// A port on 127.0.0.1 that is free now: for a process started next to listen on (a node's detector
// endpoint behind a proxy), or one nothing listens on. Chosen below the ephemeral range (Linux:
// from 32768, macOS: from 49152): a port the OS hands out for `listen(0)` is one it also hands to
// outgoing connections, and one of those (another process's Kafka or Cassandra client) once took a
// node's detector port between the pick and the node's own listen (EADDRINUSE).
import { createServer } from 'node:net';

const LOWEST = 20_000;
const SPAN = 12_000;

export async function freePort(): Promise<number> {
  for (let attempt = 0; attempt < 100; attempt++) {
    const port = LOWEST + Math.floor(Math.random() * SPAN);
    if ((await listenOnce(port)) !== undefined) return port;
  }
  // Every try was taken (a crowded machine): any port the OS has free.
  return (await listenOnce(0))!;
}

/** Listens on `port` (0: any) and closes again; the port it had, or undefined if it was taken. */
async function listenOnce(port: number): Promise<number | undefined> {
  const server = createServer();
  const listening = await new Promise<boolean>((resolve) => {
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => resolve(true));
  });
  if (!listening) return undefined;
  const got = (server.address() as { port: number }).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return got;
}
