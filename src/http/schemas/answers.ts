// The statuses each route answers, with their schemas, for the OpenAPI description: successes by
// schema id, errors in the envelope of the route's family (FiloDB's or shardherd's). Every schema
// here is registered once with `addSchema` and appears in the description's `components`.
import type { FastifyInstance } from 'fastify';
import { REQUEST_SCHEMAS } from './request-schemas.js';
import { RESPONSE_SCHEMAS } from './response-schemas.js';

export function registerApiSchemas(app: FastifyInstance): void {
  for (const schema of [...REQUEST_SCHEMAS, ...RESPONSE_SCHEMAS]) app.addSchema(schema);
}

/** A reference to a registered schema, as a route's body or answer. */
export const schemaRef = (id: (typeof REQUEST_SCHEMAS | typeof RESPONSE_SCHEMAS)[number]['$id']) => ({ $ref: `${id}#` });

/** What each error status means on this API (docs/OPERATIONS.md lists the names). */
const ERRORS = {
  400: "Refused: the request is not as this route takes it (BadRequest, MalformedBody, BadDatasetName), or the cluster's checks refused it (BadSchema, BadData, NodeOperationRefused:bad-node); nothing changed",
  401: 'Unauthorized: this route changes the cluster and needs `Authorization: Bearer <token>`',
  403: "Forbidden: the bearer token is not this node's",
  404: 'Not found: the dataset or node is unknown (DatasetUnknown, NodeOperationRefused:unknown-node)',
  409: 'Conflict with the cluster as it is (DatasetConflict, IsolationImpossible, NotLoadAware, NodeOperationRefused:capacity|isolation|serving|conflict); nothing changed',
  413: "Too large: the body (BodyTooLarge), or the dataset's map for the bus (DatasetTooLarge)",
  415: 'UnsupportedMediaType: a body must be sent as application/json',
  422: "The dataset's Kafka topic cannot carry it (BadData), or could not be created (TopicNotCreated); or the Idempotency-Key was used before for another request (IdempotencyKeyReused); nothing changed",
  500: 'InternalError or UnexpectedReply: a bug; the request may or may not have been applied',
  503: 'The singleton did not answer in time (SingletonUnavailable), this node is not running (NodeNotRunning) or is still starting (Starting): try again',
  504: 'OutcomeUnknown: no singleton answered a request that changes the cluster in time; it may still be applied. Send it again with the same Idempotency-Key (echoed in that response header) to learn its outcome: it is applied once',
} as const;

export type ErrorStatus = keyof typeof ERRORS;

/** The `response` of a route's schema: its successes (status → schema id, with what it means) and its error statuses. */
export function answers(
  family: 'filodb' | 'shardherd',
  ok: Readonly<Record<number, { readonly schema: Parameters<typeof schemaRef>[0]; readonly description: string }>>,
  errors: readonly ErrorStatus[],
): Record<number, object> {
  const envelope = family === 'filodb' ? 'FiloDbError' : 'ErrorBody';
  const out: Record<number, object> = {};
  for (const [status, { schema, description }] of Object.entries(ok)) out[Number(status)] = { description, ...schemaRef(schema) };
  for (const status of [...errors, 500 as const]) out[status] = { description: ERRORS[status], ...schemaRef(envelope) };
  return out;
}

/** Errors every route that needs the singleton may answer. */
export const READ_ERRORS: readonly ErrorStatus[] = [503];
/** Errors every mutating route may answer besides its own (a body sent where none is taken is refused too). */
export const MUTATION_ERRORS: readonly ErrorStatus[] = [400, 401, 403, 413, 415, 422, 503, 504];

/**
 * A route's `response` with the refusals the API answers before its handler runs: 400 when one of
 * its request schemas refuses the request, 401 and 403 when it needs the token. Added to every
 * route as it is declared, so no route can leave them out of the description.
 */
export function withRefusals(family: 'filodb' | 'shardherd', schema: Readonly<Record<string, unknown>>, mutates: boolean): Record<string, unknown> {
  const validates = ['params', 'querystring', 'body'].some((part) => schema[part] !== undefined);
  const refusals: ErrorStatus[] = [...(validates ? [400 as const] : []), ...(mutates ? [401 as const, 403 as const] : [])];
  const declared = (schema.response ?? {}) as Record<string, object>;
  const missing = refusals.filter((status) => declared[status] === undefined);
  if (missing.length === 0) return schema;
  const { 500: _internal, ...added } = answers(family, {}, missing);
  return { ...schema, response: { ...declared, ...added } };
}

/** `answers` with one more status whose answer is not a registered schema (text, an event stream, a health body at 503). */
export function withAnswer(responses: Record<number, object>, status: number, answer: object): Record<number, object> {
  return { ...responses, [status]: answer };
}
