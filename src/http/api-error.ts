// Every error the HTTP API answers is JSON `{ error, reason }` with a status that fits, and the
// request that caused it changed nothing. FiloDB's routes answer in FiloDB's envelope instead
// (`{ status: "error", errorType, error }`), with the same `reason` beside it.
import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The error name a path parameter outside the route's schema answers (default `BadRequest`). */
    invalidParams?: string;
  }
}

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

/** Whether a path is one of FiloDB's routes, whose errors are in FiloDB's envelope. */
export const isFiloDbPath = (url: string) => url === '/api/v1/cluster' || url.startsWith('/api/v1/cluster/') || url.startsWith('/api/v1/cluster?');

/**
 * Fastify's own refusals of a request, by its code, as the project's documented names: a client
 * matches on `BadRequest`, never on `FST_ERR_CTP_INVALID_JSON_BODY`, which may change with Fastify.
 */
const FASTIFY_REFUSALS: Readonly<Record<string, { readonly code: number; readonly error: string; readonly reason: string }>> = {
  FST_ERR_CTP_INVALID_JSON_BODY: { code: 400, error: 'MalformedBody', reason: 'the body is not valid JSON' },
  FST_ERR_CTP_EMPTY_JSON_BODY: { code: 400, error: 'MalformedBody', reason: 'the content type says JSON but the body is empty' },
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: { code: 400, error: 'MalformedBody', reason: "the body's length is not its Content-Length" },
  FST_ERR_CTP_INVALID_MEDIA_TYPE: { code: 415, error: 'UnsupportedMediaType', reason: 'a body must be JSON: send it with Content-Type: application/json' },
  FST_ERR_CTP_BODY_TOO_LARGE: { code: 413, error: 'BodyTooLarge', reason: 'the body is larger than the API takes (1 MiB)' },
  FST_ERR_BAD_URL: { code: 400, error: 'BadRequest', reason: 'the path is not valid percent-encoding' },
};

/** Fastify's error handler: ApiErrors as they are, refused requests under the project's names, anything else as 500. */
export function sendError(e: FastifyError | ApiError | Error, req: FastifyRequest, res: FastifyReply): FastifyReply {
  if (e instanceof ApiError) return res.code(e.statusCode).send(errorBody(req.url, e.error, e.reason));
  const fe = e as FastifyError;
  if (fe.validation) {
    const name = validationErrorName(fe.validationContext, req);
    return res.code(400).send(errorBody(req.url, name, fe.message));
  }
  const known = fe.code === undefined ? undefined : FASTIFY_REFUSALS[fe.code];
  if (known) return res.code(known.code).send(errorBody(req.url, known.error, known.reason));
  if (fe.statusCode && fe.statusCode >= 400 && fe.statusCode < 500) return res.code(fe.statusCode).send(errorBody(req.url, 'BadRequest', fe.message));
  req.log.error({ err: e }, 'request failed');
  return res.code(500).send(errorBody(req.url, 'InternalError', e.message));
}

function validationErrorName(context: string | undefined, req: FastifyRequest): string {
  const config = req.routeOptions.config;
  if (context === 'body') return config.invalidBody ?? 'BadRequest';
  if (context === 'params') return config.invalidParams ?? 'BadRequest';
  return 'BadRequest';
}

/** What Node's HTTP parser refuses before any route sees the request, by the parser's code. */
const CLIENT_ERRORS: Readonly<Record<string, { readonly code: number; readonly error: string; readonly reason: string }>> = {
  HPE_HEADER_OVERFLOW: { code: 431, error: 'HeadersTooLarge', reason: 'the request line and headers are larger than the node takes (16 KiB)' },
  ERR_HTTP_REQUEST_TIMEOUT: { code: 408, error: 'RequestTimeout', reason: 'the request did not arrive in time' },
};

/**
 * Fastify's `clientErrorHandler`: a request Node's parser refuses is answered in the project's shape.
 * Bytes after a request that asked to close its connection (a body the request did not announce,
 * or the rest of one a route refused unread) are not a request: the request's own answer goes out
 * and closes the connection, where Fastify's handler also sent the bytes an answer of their own.
 */
export function answerClientError(e: Error & { code?: string }, socket: Duplex): void {
  if (e.code === 'ECONNRESET' || e.code === 'HPE_CLOSED_CONNECTION' || socket.destroyed) return;
  if (!socket.writable) {
    socket.destroy();
    return;
  }
  const known = (e.code === undefined ? undefined : CLIENT_ERRORS[e.code]) ?? {
    code: 400,
    error: 'MalformedRequest',
    reason: 'the request is not valid HTTP/1.1',
  };
  const body = JSON.stringify({ error: known.error, reason: known.reason });
  socket.end(
    `HTTP/1.1 ${known.code} ${STATUS_CODES[known.code]}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}
