// How the API reads request bodies: JSON only, valid UTF-8, validated by the route's schema without
// coercing types (`"7"` is not 7, `null` not 0, `true` not 1), unknown fields refused, and nothing
// in the body of a route that takes none. A refused body answers one of the project's error names
// (api-error.ts) and changes nothing: an operator's typo must never stop a shard.
import type { FastifyInstance, FastifyServerOptions } from 'fastify';
import { ApiError } from './api-error.js';

/** Fastify's Ajv options: its defaults coerce types, fill in defaults and drop unknown fields silently. */
export const STRICT_AJV: NonNullable<FastifyServerOptions['ajv']> = {
  customOptions: { coerceTypes: false, useDefaults: false, removeAdditional: false, allErrors: false },
};

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The error name a body outside the route's schema answers (default `BadRequest`). */
    invalidBody?: string;
  }
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

export function readStrictBodies(app: FastifyInstance): void {
  // Only JSON: Fastify also reads text/plain, which would hand a route a string.
  app.removeContentTypeParser(['application/json', 'text/plain']);
  const json = app.getDefaultJsonParser('error', 'error');
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (req, body, done) => {
    let text: string;
    try {
      // JSON is UTF-8 (RFC 8259): invalid bytes must not become U+FFFD inside a node name.
      text = utf8.decode(body as Buffer);
    } catch {
      done(new ApiError(400, 'MalformedBody', 'the body is not valid UTF-8'), undefined);
      return;
    }
    json(req, text, done);
  });
  app.addHook('preValidation', async (req) => {
    if (req.routeOptions.schema?.body !== undefined || req.body === undefined) return;
    // `{}` is what `curl -d '{}'` habits send to a route without a body: it says nothing.
    const empty = typeof req.body === 'object' && req.body !== null && !Array.isArray(req.body) && Object.keys(req.body).length === 0;
    if (!empty) throw new ApiError(400, 'BadRequest', `${req.method} ${req.routeOptions.url} takes no body`);
  });
}
