// A TCP server on 127.0.0.1 that counts the connections it is offered and closes each at once: a
// stand-in for a broker or Cassandra that a test expects a node never to reach.
import { createServer, type Server } from 'node:net';

export async function countingServer(): Promise<{ server: Server; port: number; connections: () => number }> {
  let connections = 0;
  const server = createServer((socket) => {
    connections += 1;
    socket.destroy();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, port: (server.address() as { port: number }).port, connections: () => connections };
}
