// How routed requests travel over HTTP between a client and a node serving a dataset, and how a
// node says where it serves (endpoint records on the bus's endpoints topic). Shared by both sides;
// every record carries a format version and a reader refuses what it does not understand.
import { z } from 'zod';
import type { DatasetRef, Incarnation, NodeId } from '../core/ids.js';
import { err, ok, type Result } from '../core/result.js';
import type { ShardCheck } from '../core/shard-check.js';

/** The path of a shard's requests: `POST` with the JSON payload as body. */
export const requestPath = (dataset: DatasetRef, shard: number): string => `/shardherd/v1/datasets/${encodeURIComponent(dataset)}/shards/${shard}`;
/** `GET`: 200 while the node serves (the client's probe of a suspected node). */
export const HEALTH_PATH = '/shardherd/v1/health';
/** The map version the client routed with (the node compares it with its own: MOVED or TRYAGAIN). */
export const MAP_VERSION_HEADER = 'x-shardherd-map-version';

/**
 * Statuses of an answer: 200 the handler's JSON answer; 421 (misdirected) a `ShardCheck` that is not
 * `ok` (MOVED, ASK, TRYAGAIN, unknown); 500 the handler threw (`{ error: RemoteError }`); 400 a body
 * that is not JSON; 404 no such path or dataset; 503 the node is not serving (stopping, not a member).
 */
export const STATUS = { ok: 200, redirect: 421, handlerFailed: 500, badRequest: 400, notFound: 404, overloaded: 429, notServing: 503 } as const;

/** The body of a 421 answer. */
export type RedirectBody = Exclude<ShardCheck, { type: 'ok' }>;

const ENDPOINTS_FORMAT = 1;

/** Where a node serves a dataset's requests (`url`: `http://host:port`), under its incarnation. */
export interface Endpoint {
  readonly node: NodeId;
  readonly incarnation: Incarnation;
  readonly dataset: DatasetRef;
  readonly url: string;
  /** The node's rack, for clients that ask their own rack first. */
  readonly rack?: string;
}

/**
 * Records of the endpoints topic: a node announces each dataset it serves when it starts serving
 * it and whenever a client says hello; it withdraws them when it stops. A client says hello when it
 * starts and when its map names a node it has no endpoint of.
 */
export type EndpointsRecord =
  | ({ readonly format: 1; readonly kind: 'endpoint' } & Endpoint)
  | { readonly format: 1; readonly kind: 'withdrawn'; readonly node: NodeId; readonly incarnation: Incarnation; readonly dataset: DatasetRef }
  | { readonly format: 1; readonly kind: 'hello'; readonly from: string };

const token = z.string().min(1).max(256);
const endpointsS = z.discriminatedUnion('kind', [
  z.object({
    format: z.literal(ENDPOINTS_FORMAT),
    kind: z.literal('endpoint'),
    node: token,
    incarnation: token,
    dataset: token,
    url: z.string().url().max(500),
    rack: token.optional(),
  }),
  z.object({ format: z.literal(ENDPOINTS_FORMAT), kind: z.literal('withdrawn'), node: token, incarnation: token, dataset: token }),
  z.object({ format: z.literal(ENDPOINTS_FORMAT), kind: z.literal('hello'), from: token }),
]);

export function parseEndpointsRecord(value: unknown): Result<EndpointsRecord, { reason: string }> {
  const r = endpointsS.safeParse(value);
  if (r.success) return ok(r.data as EndpointsRecord);
  const i = r.error.issues[0];
  return err({ reason: `malformed endpoints record: ${i?.path.join('.') || '(root)'}: ${i?.message ?? 'invalid'}` });
}

export const endpointRecord = (e: Endpoint): EndpointsRecord => ({ format: ENDPOINTS_FORMAT, kind: 'endpoint', ...e });
export const withdrawnRecord = (e: Pick<Endpoint, 'node' | 'incarnation' | 'dataset'>): EndpointsRecord => ({
  format: ENDPOINTS_FORMAT,
  kind: 'withdrawn',
  node: e.node,
  incarnation: e.incarnation,
  dataset: e.dataset,
});
export const helloRecord = (from: string): EndpointsRecord => ({ format: ENDPOINTS_FORMAT, kind: 'hello', from });
