// The node's HTTP endpoint for operators and tests: what this node is, what it runs, and — on the
// node that hosts the singleton — the cluster's datasets, maps and subscriptions. Bound to the
// configured host (127.0.0.1 by default); read-only except for setting up a dataset.
import Fastify, { type FastifyInstance } from 'fastify';
import type { ShardherdNode } from '../actors/node-process.js';
import type { Request } from '../actors/wire.js';
import { nodeStatus } from './node-status.js';

export interface StatusServer {
  /** `http://host:port` it listens on. */
  readonly url: string;
  close(): Promise<void>;
}

export async function startStatusServer(node: ShardherdNode, host: string, port: number): Promise<StatusServer> {
  const app: FastifyInstance = Fastify({ logger: false });
  app.get('/healthz', async (_req, res) => {
    const ok = node.state === 'running' && node.isMember;
    return res.code(ok ? 200 : 503).send({ ok, state: node.state, member: node.isMember });
  });
  app.get('/status', async () => nodeStatus(node));
  // The body is an untrusted dataset config: the singleton validates it and answers with a reply.
  app.post('/datasets', async (req, res) => {
    const reply = await node.request((replyTo) => ({ type: 'SetupDataset', config: req.body, replyTo }) as unknown as Request);
    const ok = reply.type === 'DatasetVerified' || reply.type === 'DatasetExists';
    return res.code(ok ? 200 : 400).send(reply);
  });
  const url = await app.listen({ host, port });
  return { url, close: () => app.close() };
}
