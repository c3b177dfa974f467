// Requests a route sends to the singleton over the bus, from whichever node received the HTTP
// request. No answer in time (no singleton yet, a failover, a partition) becomes a 503 that says so.
import { RequestTimeoutError } from '../actors/node-hub.js';
import type { ShardherdNode } from '../actors/node-process.js';
import type { Request } from '../actors/wire.js';
import type { ReplyTo } from '../core/ids.js';
import type { Reply } from '../core/shard-manager/protocol.js';
import { ApiError } from './api-error.js';

/** How long a route waits for the singleton by default. */
export const SINGLETON_TIMEOUT_MS = 5_000;

export class SingletonClient {
  constructor(
    /** The node that answers HTTP requests (a function for the embedded demo, whose nodes die and restart). */
    private readonly nodeOf: () => ShardherdNode,
    readonly timeoutMs = SINGLETON_TIMEOUT_MS,
  ) {}

  get node(): ShardherdNode {
    return this.nodeOf();
  }

  async ask(build: (replyTo: ReplyTo) => Request): Promise<Reply> {
    const { node, timeoutMs } = this;
    if (node.state !== 'running') throw new ApiError(503, 'NodeNotRunning', `${node.node} is ${node.state}: ask another node`);
    try {
      return await node.request(build, timeoutMs);
    } catch (e) {
      if (e instanceof RequestTimeoutError) {
        throw new ApiError(503, 'SingletonUnavailable', `no singleton answered ${node.node} within ${timeoutMs} ms (none elected yet, or a failover is under way); try again`);
      }
      throw e;
    }
  }
}

/** The reply if it has the expected type; anything else is a 500 naming what came instead. */
export function expectReply<T extends Reply['type']>(reply: Reply, type: T): Extract<Reply, { type: T }> {
  if (reply.type === type) return reply as Extract<Reply, { type: T }>;
  throw new ApiError(500, 'UnexpectedReply', `the singleton answered ${reply.type} where ${type} was expected`);
}
