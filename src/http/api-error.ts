// Every error the HTTP API answers is JSON `{ error, reason }` with a status that fits, and the
// request that caused it changed nothing. FiloDB's routes answer in FiloDB's envelope instead
// (`{ status: "error", errorType, error }`), with the same `reason` beside it.
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';

export class ApiError extends Error {
  constructor(
    readonly statusCode: number,
    /** A stable name scripts can match on, e.g. `DatasetUnknown`. */
    readonly error: string,
    /** What happened and what to do, for a person. */
    readonly reason: string,
  ) {
    super(reason);
    this.name = 'ApiError';
  }
}

/** The body of an error answer: FiloDB's envelope on FiloDB's paths, `{ error, reason }` elsewhere. */
export function errorBody(url: string, error: string, reason: string): Record<string, unknown> {
  if (isFiloDbPath(url)) return { status: 'error', errorType: error, error: reason, reason };
  return { error, reason };
}

const isFiloDbPath = (url: string) => url === '/api/v1/cluster' || url.startsWith('/api/v1/cluster/') || url.startsWith('/api/v1/cluster?');

/** Fastify's error handler: ApiErrors as they are, validation errors as 400, anything else as 500. */
export function sendError(e: FastifyError | ApiError | Error, req: FastifyRequest, res: FastifyReply): FastifyReply {
  if (e instanceof ApiError) return res.code(e.statusCode).send(errorBody(req.url, e.error, e.reason));
  const fe = e as FastifyError;
  if (fe.validation) return res.code(400).send(errorBody(req.url, 'BadRequest', fe.message));
  if (fe.statusCode && fe.statusCode >= 400 && fe.statusCode < 500) return res.code(fe.statusCode).send(errorBody(req.url, fe.code ?? 'BadRequest', fe.message));
  req.log.error({ err: e }, 'request failed');
  return res.code(500).send(errorBody(req.url, 'InternalError', e.message));
}
