// The HTTP API every node serves: FiloDB's cluster routes, shardherd's own under /api/v1, the live
// web page at `/`, server-sent events, Prometheus metrics, health and the node's own status, and an
// OpenAPI description at /api/v1/openapi.json. Any node answers; what needs the singleton goes to
// it over the bus. Reads are open; every route that changes the cluster needs the bearer token.
import { readFile } from 'node:fs/promises';
import type { RequestListener } from 'node:http';
import swagger from '@fastify/swagger';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import type { ShardherdNode } from '../actors/node-process.js';
import { bearerMatches, removeTokenFile, resolveAccessToken, type AccessToken } from './access-token.js';
import { answerClientError, errorBody, isFiloDbPath, sendError } from './api-error.js';
import { FAVICON_SVG, FAVICON_TYPE } from './favicon.js';
import type { HeldHttpPort } from './held-port.js';
import { answers, registerApiSchemas, schemaRef, withAnswer, withRefusals } from './schemas/answers.js';
import { readStrictBodies, STRICT_AJV } from './strict-bodies.js';
import { ClusterFeed, type ClusterFeedOptions, type FeedMessage } from './cluster-feed.js';
import { serveEventStream } from './event-stream.js';
import { registerClusterRoutes } from './cluster-routes.js';
import { registerFiloDbRoutes } from './filodb-routes.js';
import { registerPageRoutes, type PageRoutesOptions } from './page-routes.js';
import { nodeStatus } from './node-status.js';
import { NodeStatusQuery } from './schemas/request-schemas.js';
import { assignIdempotencyKey } from './idempotency-key.js';
import { SingletonClient } from './singleton-client.js';
import { RouteTable } from './route-table.js';

export interface NodeApiOptions {
  /** Default 127.0.0.1. */
  readonly host?: string;
  /** 0 picks a free port. */
  readonly port: number;
  /**
   * A port already listening (`holdHttpPort`): the API answers on it instead of listening itself,
   * and `host` and `port` are ignored. `close()` closes it.
   */
  readonly held?: HeldHttpPort;
  /** The bearer token for mutating routes; else `SHARDHERD_TOKEN`, else a generated one (see `resolveAccessToken`). */
  readonly token?: string | undefined;
  readonly log?: Logger;
  readonly feed?: ClusterFeedOptions;
  /** The status page's event stream: how often ingestion is sampled, how much history it keeps. */
  readonly page?: PageRoutesOptions;
  /** How long a route waits for the singleton's answer before it answers 503 (default 5000 ms). */
  readonly singletonTimeoutMs?: number;
  /** Where `SHARDHERD_TOKEN` and `SHARDHERD_TOKEN_DIR` are read (default `process.env`). */
  readonly env?: NodeJS.ProcessEnv;
}

export interface NodeApi {
  /** `http://host:port`. */
  readonly url: string;
  readonly token: AccessToken;
  close(): Promise<void>;
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The route changes the cluster: it needs the bearer token. */
    mutates?: boolean;
  }
}

const PAGE = new URL('./status-page.html', import.meta.url);

/**
 * Serves the API of `node`. The embedded demo passes a function instead, so the page keeps working
 * while the story kills and restarts nodes: each request is answered by the node it returns then.
 */
export async function startNodeApi(node: ShardherdNode | (() => ShardherdNode), options: NodeApiOptions): Promise<NodeApi> {
  return (await prepareNodeApi(node, options)).open();
}

/** A node's API with its routes ready (schemas compiled), not yet answering: `open` makes it answer. */
export interface PreparedNodeApi {
  open(): Promise<NodeApi>;
}

/**
 * `startNodeApi` in two: the routes are made and their schemas compiled now, and the API answers
 * once `open` is called. Making them takes a new process about half a second in one task (loading
 * the HTTP framework's modules, compiling every schema); a node does it before it joins the
 * cluster, where nothing waits on its event loop yet, and opens its API once it has joined.
 */
export async function prepareNodeApi(node: ShardherdNode | (() => ShardherdNode), options: NodeApiOptions): Promise<PreparedNodeApi> {
  const held = options.held;
  // Fastify hands its request listener to the factory; a held port gets it once the routes are ready.
  let listener: RequestListener | undefined;
  const routes = new RouteTable();
  // Known once the port is: a generated token's file is named after it.
  const access: { token?: AccessToken } = {};
  // forceCloseConnections: an open event stream must not keep `close()` waiting.
  const app = Fastify({
    logger: false,
    bodyLimit: 1024 * 1024,
    forceCloseConnections: true,
    ajv: STRICT_AJV,
    // Any path parameter reaches its route, whose schema bounds it after the token is checked: the
    // router's own bound (100 characters) refused long ones first, in its own shape, even unauthorized.
    routerOptions: { maxParamLength: Number.MAX_SAFE_INTEGER },
    clientErrorHandler: answerClientError,
    // A path the router cannot decode: refused in the project's shape, as any request to its path would be first.
    frameworkErrors: (error, req, res) => refuseBeforeRouting(req, res, routes, access.token, options.log) ?? sendError(error, req, res),
    ...(held
      ? {
          serverFactory: (handler: RequestListener) => {
            listener = handler;
            return held.server;
          },
        }
      : {}),
  });
  // Answers are JSON as the handlers build them: the response schemas describe them (and a test
  // checks they do), they never reshape them (fast-json-stringify would drop a field they omit).
  app.setSerializerCompiler(() => (data) => JSON.stringify(data));
  registerApiSchemas(app);
  readStrictBodies(app);
  const singleton = new SingletonClient(typeof node === 'function' ? node : () => node, options.singletonTimeoutMs);
  const feed = new ClusterFeed(singleton, options.feed);
  app.setErrorHandler(sendError);
  app.setNotFoundHandler((req, res) => answerUnrouted(req, res, routes));
  app.addHook('onRequest', async (req, res) => {
    // Answered before its body is read: a method the path does not take is a 405 whatever it carries.
    if (req.is404) return answerUnrouted(req, res, routes);
    if (!req.routeOptions.config.mutates) return;
    const refused = refuseUnauthorized(req, res, access.token, options.log);
    if (refused) return refused;
    const badKey = assignIdempotencyKey(req, res);
    if (badKey) return res.code(badKey.code).send(errorBody(req.url, badKey.error, badKey.reason));
    return undefined;
  });
  await app.register(swagger, {
    openapi: {
      openapi: '3.0.3',
      info: {
        title: 'shardherd node API',
        version: '1',
        description: "FiloDB-compatible cluster routes and shardherd's own. Mutating routes need `Authorization: Bearer <token>`.",
      },
      components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } } },
    },
    // The HEAD twin Fastify adds to every GET route answers too, so the description says so.
    exposeHeadRoutes: true,
    // Components named as registered (`#/components/schemas/ErrorBody`), not `def-0`.
    refResolver: { buildLocalReference: (json, _baseUri, _fragment, i) => (typeof json.$id === 'string' ? json.$id : `def-${i}`) },
  });
  routes.follow(app);
  // The OpenAPI description says which routes need the token, and what each answers before its handler runs.
  app.addHook('onRoute', (route) => {
    const mutates = route.config?.mutates === true;
    if (mutates) route.schema = { ...route.schema, security: [{ bearer: [] }] };
    if (route.schema?.response !== undefined)
      route.schema = withRefusals(isFiloDbPath(route.url) ? 'filodb' : 'shardherd', route.schema as Record<string, unknown>, mutates);
  });
  registerRoutes(app, singleton, feed);
  const page = registerPageRoutes(app, singleton, feed, options.page);
  await app.ready();
  return { open: () => openNodeApi({ app, page, feed, listener, access }, options) };
}

/** What `prepareNodeApi` made, for `openNodeApi`. */
interface Prepared {
  readonly app: FastifyInstance;
  readonly page: { close(): void };
  readonly feed: ClusterFeed;
  /** The request listener Fastify handed over, for a held port. */
  readonly listener: RequestListener | undefined;
  /** The bearer token, set once the API answers (the routes refuse mutations until then). */
  readonly access: { token?: AccessToken };
}

async function openNodeApi({ app, page, feed, listener, access }: Prepared, options: NodeApiOptions): Promise<NodeApi> {
  const held = options.held;
  let url: string;
  if (held) {
    held.handOver(listener!);
    url = held.url;
  } else {
    url = await app.listen({ host: options.host ?? '127.0.0.1', port: options.port });
  }
  const token = resolveAccessToken(options.token, (app.server.address() as { port: number }).port, options.env);
  access.token = token;
  if (token.origin === 'generated') {
    options.log?.info(
      { event: 'http.token', file: token.file },
      `mutating routes need the bearer token ${token.token} (also written to ${token.file}, readable by this user only)`,
    );
  }
  options.log?.info({ event: 'http.listening', url, tokenFrom: token.origin }, `HTTP API and status page at ${url}`);
  return {
    url,
    token,
    close: async () => {
      page.close();
      feed.close();
      await app.close();
      // Fastify closes only a server it listened with itself.
      await held?.close();
      removeTokenFile(token);
    },
  };
}

/** A request no route takes: 405 with the methods its path takes, or 404 for an unknown path. */
function answerUnrouted(req: FastifyRequest, res: FastifyReply, routes: RouteTable): FastifyReply {
  const path = req.url.split('?')[0]!;
  const allowed = routes.methodsAt(path);
  if (allowed.length === 0) return res.code(404).send(errorBody(req.url, 'NotFound', `no route ${req.method} ${path}`));
  return res
    .code(405)
    .header('Allow', allowed.join(', '))
    .send(errorBody(req.url, 'MethodNotAllowed', `${path} takes ${allowed.join(', ')}, not ${req.method}`));
}

/**
 * What a request the router could not route answers before its own error: a method its path does
 * not take, and a missing token where its route needs one, as they would be answered if it had been routed.
 */
function refuseBeforeRouting(
  req: FastifyRequest,
  res: FastifyReply,
  routes: RouteTable,
  token: AccessToken | undefined,
  log: Logger | undefined,
): FastifyReply | undefined {
  if (!routes.methodsAt(req.url).includes(req.method)) return answerUnrouted(req, res, routes);
  return routes.mutates(req.method, req.url) ? refuseUnauthorized(req, res, token, log) : undefined;
}

/** Refuses a request to a route that changes the cluster without this node's token; undefined when it may go on. */
function refuseUnauthorized(req: FastifyRequest, res: FastifyReply, token: AccessToken | undefined, log: Logger | undefined): FastifyReply | undefined {
  const refusal = authorize(req, token);
  if (!refusal) return undefined;
  log?.warn({ event: 'http.refused', method: req.method, url: req.url, reason: refusal.error }, 'a request that changes the cluster was refused');
  return res
    .code(refusal.code)
    .header('WWW-Authenticate', 'Bearer realm="shardherd"')
    .send(errorBody(req.url, refusal.error, refusal.reason));
}

function authorize(req: FastifyRequest, token: AccessToken | undefined): { code: number; error: string; reason: string } | undefined {
  if (!token) return { code: 503, error: 'Starting', reason: 'the node is still starting: try again' };
  const header = req.headers.authorization;
  if (!header)
    return {
      code: 401,
      error: 'Unauthorized',
      reason: 'this route changes the cluster: send the header "Authorization: Bearer <token>" (the node logs where its token is)',
    };
  if (!bearerMatches(header, token.token)) return { code: 403, error: 'Forbidden', reason: "the bearer token is not this node's" };
  return undefined;
}

function registerRoutes(app: FastifyInstance, singleton: SingletonClient, feed: ClusterFeed): void {
  app.get('/api/v1/openapi.json', { schema: { hide: true } }, () => app.swagger());
  const health = { description: 'This node runs and is a member', schema: 'Health' } as const;
  app.get(
    '/healthz',
    {
      schema: {
        tags: ['node'],
        summary: '200 when this node runs, is a member and hears from a singleton (within two publish intervals), else 503 saying which is not so',
        response: withAnswer(answers('shardherd', { 200: health }, []), 503, {
          description: 'This node does not run, is not a member, or hears from no singleton',
          ...schemaRef('Health'),
        }),
      },
    },
    async (_req, res) => {
      const node = singleton.node;
      // A singleton publishes at least a digest every publishIntervalMs: two missed ones is silence.
      const boundMs = 2 * node.services.settings.publishIntervalMs;
      const silentMs = node.singletonSilentMs();
      const hears = silentMs !== undefined && silentMs <= boundMs;
      const reason =
        node.state !== 'running'
          ? `${node.node} is ${node.state}`
          : !node.isMember
            ? `${node.node} is not a member`
            : !hears
              ? `${node.node} has heard from no singleton ${silentMs === undefined ? 'yet' : `for ${Math.round(silentMs)} ms`} (more than ${boundMs} ms: none elected yet, a failover under way, or a singleton stalled)`
              : undefined;
      return res.code(reason === undefined ? 200 : 503).send({
        ok: reason === undefined,
        state: node.state,
        member: node.isMember,
        singletonHeard: hears,
        ...(silentMs === undefined ? {} : { singletonSilentMs: Math.round(silentMs) }),
        ...(reason === undefined ? {} : { reason }),
      });
    },
  );
  const status = {
    schema: {
      tags: ['node'],
      summary: 'This node: identity, shards it runs, where the singleton is, the maps it follows',
      querystring: NodeStatusQuery,
      response: answers('shardherd', { 200: { schema: 'NodeStatus', description: 'This node' } }, [400]),
    },
  };
  const statusOf = (req: FastifyRequest) => nodeStatus(singleton.node, { allRunning: (req.query as { running?: string }).running === 'all' });
  app.get('/status', status, statusOf);
  app.get('/api/v1/node', status, statusOf);
  app.get(
    '/metrics',
    {
      schema: {
        tags: ['node'],
        summary: 'Prometheus metrics of this node',
        response: withAnswer(answers('shardherd', {}, [404]), 200, {
          description: 'Prometheus text format 0.0.4',
          content: { 'text/plain': { schema: { type: 'string' } } },
        }),
      },
    },
    async (_req, res) => {
      const { node } = singleton;
      if (!node.metrics) return res.code(404).send({ error: 'NoMetrics', reason: 'this node was started without a metrics registry' });
      return res.header('Content-Type', node.metrics.contentType).send(await node.metrics.scrape());
    },
  );
  app.get(
    '/api/v1/events',
    {
      schema: {
        tags: ['cluster'],
        summary: 'Server-sent events: a `view` (as /api/v1/overview) on every change, `unavailable` when the singleton does not answer',
        response: { 200: { description: 'An event stream that stays open', content: { 'text/event-stream': { schema: { type: 'string' } } } } },
      },
    },
    (req, res) => streamFeed(req, res, feed),
  );
  app.get('/', { schema: { hide: true } }, async (_req, res) => res.type('text/html; charset=utf-8').send(await readFile(PAGE)));
  for (const path of ['/favicon.svg', '/favicon.ico']) {
    app.get(path, { schema: { hide: true } }, (_req, res) => res.type(FAVICON_TYPE).header('Cache-Control', 'max-age=86400').send(FAVICON_SVG));
  }
  registerFiloDbRoutes(app, singleton);
  registerClusterRoutes(app, singleton);
}

function streamFeed(req: FastifyRequest, res: FastifyReply, feed: ClusterFeed): void {
  serveEventStream(req, res, (send) =>
    feed.listen((m: FeedMessage) => send(m.type, JSON.stringify(m.type === 'view' ? m.view : { error: m.error, reason: m.reason }))),
  );
}
