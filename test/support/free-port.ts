// A port on 127.0.0.1 that the OS just handed out and that was closed again: free for a process
// started next to listen on (a node's detector endpoint behind a proxy), or one nothing listens on.
import { createServer } from 'node:net';

export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}
