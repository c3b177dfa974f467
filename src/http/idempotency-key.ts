// The idempotency key of a request that changes the cluster: the client's `Idempotency-Key` header,
// or one this node makes up and sends back in the same header, so that a client whose request
// timed out (504 OutcomeUnknown) can send it again and learn what it did, applied once.
import { randomUUID } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { IDEMPOTENCY_KEY } from './singleton-client.js';

const keys = new WeakMap<FastifyRequest, string>();

/**
 * Reads (or makes) the key of a changing request and echoes it; a refusal (a key that is not one)
 * as `{ code, error, reason }`, for the hook to send.
 */
export function assignIdempotencyKey(req: FastifyRequest, res: FastifyReply): { code: number; error: string; reason: string } | undefined {
  const header = req.headers['idempotency-key'];
  if (Array.isArray(header)) return { code: 400, error: 'BadRequest', reason: 'the Idempotency-Key header is sent more than once' };
  if (header !== undefined && !IDEMPOTENCY_KEY.test(header)) {
    return { code: 400, error: 'BadRequest', reason: 'the Idempotency-Key header must be 1 to 128 letters, digits or . _ : -' };
  }
  const key = header ?? randomUUID();
  keys.set(req, key);
  void res.header('Idempotency-Key', key);
  return undefined;
}

/** The key `assignIdempotencyKey` gave this request (every changing route's request has one). */
export function idempotencyKeyOf(req: FastifyRequest): string {
  const key = keys.get(req);
  if (key === undefined) throw new Error(`${req.method} ${req.url} has no idempotency key: only changing routes have one`);
  return key;
}
