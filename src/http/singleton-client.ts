// Requests a route sends to the singleton over the bus, from whichever node received the HTTP
// request. No answer in time (no singleton yet, a failover, a partition) becomes a 503 that says so.
import { RequestTimeoutError } from '../actors/node-hub.js';
import type { ShardherdNode } from '../actors/node-process.js';
import type { Request } from '../protocol/wire.js';
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

  /** A question that changes nothing: no answer in time is a 503, and asking again is harmless. */
  async ask(build: (replyTo: ReplyTo) => Request): Promise<Reply> {
    const { node, timeoutMs } = this;
    if (node.state !== 'running') throw new ApiError(503, 'NodeNotRunning', `${node.node} is ${node.state}: ask another node`);
    try {
      return await node.request(build, timeoutMs);
    } catch (e) {
      if (e instanceof RequestTimeoutError) {
        throw new ApiError(
          503,
          'SingletonUnavailable',
          `no singleton answered ${node.node} within ${timeoutMs} ms (none elected yet, or a failover is under way); try again`,
        );
      }
      throw e;
    }
  }

  /**
   * A request that changes the cluster, sent under its idempotency key: sent again with the same
   * key, to any node, it is applied once and answered as the first time (the singleton keeps the
   * last 100 it applied). No answer in time is a 504: the request may still be applied, so it did
   * not change "nothing"; sending it again with the same key tells what it did.
   */
  async change(idempotencyKey: string, build: (replyTo: ReplyTo) => Request): Promise<Reply> {
    const { node, timeoutMs } = this;
    if (node.state !== 'running') throw new ApiError(503, 'NodeNotRunning', `${node.node} is ${node.state}: ask another node`);
    let reply: Reply;
    try {
      reply = await node.request((replyTo) => ({ ...build(replyTo), idempotencyKey }) as Request, timeoutMs);
    } catch (e) {
      if (e instanceof RequestTimeoutError) {
        throw new ApiError(
          504,
          'OutcomeUnknown',
          `no singleton answered ${node.node} within ${timeoutMs} ms (none elected yet, a failover under way, or a singleton behind its inbox): the request may still be applied. Send it again with the header Idempotency-Key: ${idempotencyKey} to learn its outcome; it is applied once`,
        );
      }
      throw e;
    }
    if (reply.type === 'RequestIdReused') throw new ApiError(422, 'IdempotencyKeyReused', reply.message);
    return reply;
  }
}

/** What an `Idempotency-Key` header may hold. */
export const IDEMPOTENCY_KEY = /^[A-Za-z0-9._:-]{1,128}$/;

/** The reply if it has the expected type; anything else is a 500 naming what came instead. */
export function expectReply<T extends Reply['type']>(reply: Reply, type: T): Extract<Reply, { type: T }> {
  if (reply.type === type) return reply as Extract<Reply, { type: T }>;
  throw new ApiError(500, 'UnexpectedReply', `the singleton answered ${reply.type} where ${type} was expected`);
}
