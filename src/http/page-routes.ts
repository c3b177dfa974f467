// The routes behind the status page: its event stream, one shard's details (copies with rate and
// lag, its recent history), and what this node ingests (read by the node that serves a page). The
// page itself is served at `/` by node-api.ts.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ApiError } from './api-error.js';
import { serveEventStream } from './event-stream.js';
import type { ClusterFeed } from './cluster-feed.js';
import { clusterView, parseDatasetParam } from './cluster-view.js';
import { IngestionSampler, type IngestionSamplerOptions } from './ingestion-sampler.js';
import { nodeIngestion } from './node-ingestion.js';
import { PageFeed, type PageFeedOptions, type PageMessage } from './page-feed.js';
import { pageView } from './page-state.js';
import { StringTable } from '../core/string-table.js';
import { shardDetails } from './shard-details.js';
import { answers, READ_ERRORS } from './schemas/answers.js';
import { PAGE_SCHEMAS } from './schemas/page-schemas.js';
import { NoQuery, ShardParams } from './schemas/request-schemas.js';
import type { SingletonClient } from './singleton-client.js';

export interface PageRoutesOptions extends PageFeedOptions {
  readonly sampler?: IngestionSamplerOptions;
}

export function registerPageRoutes(app: FastifyInstance, singleton: SingletonClient, feed: ClusterFeed, options: PageRoutesOptions = {}): { close(): void } {
  const sampler = new IngestionSampler(() => singleton.node, options.sampler);
  const page = new PageFeed(feed, sampler, () => singleton.node, options);
  for (const schema of PAGE_SCHEMAS) app.addSchema(schema);

  app.get(
    '/api/v1/page/events',
    {
      schema: {
        tags: ['cluster'],
        summary:
          'Server-sent events for the status page: a compact `snapshot`, then `changes` (only what changed), `ingestion` (rate and lag per node), `unavailable`',
        querystring: NoQuery,
        response: { 200: { description: 'An event stream that stays open', content: { 'text/event-stream': { schema: { type: 'string' } } } } },
      },
    },
    (req, res) => stream(req, res, page),
  );

  app.get<{ Params: { dataset: string; shard: string } }>(
    '/api/v1/page/shards/:dataset/:shard',
    {
      schema: {
        tags: ['cluster'],
        summary: 'One shard for the status page: its copies with their ingestion rate and lag, and its recent changes',
        params: ShardParams,
        querystring: NoQuery,
        response: { 200: { description: 'The shard', $ref: 'ShardDetails#' }, ...answers('shardherd', {}, [400, 404, ...READ_ERRORS]) },
      },
    },
    async (req) => {
      const dataset = parseDatasetParam(req.params.dataset);
      const shard = Number(req.params.shard);
      const found = page.shard(dataset, shard);
      if (found) return found;
      // No page watches (or the feed has no view yet): the shard as the cluster has it now, without history or rates.
      const view = pageView(await clusterView(singleton, dataset), new StringTable(), Date.now());
      const details = shardDetails(view, dataset, shard, [], []);
      if (details) return details;
      const d = view.datasets.find((x) => x.name === dataset);
      if (!d) throw new ApiError(404, 'DatasetUnknown', `Dataset ${dataset} is not registered`);
      if (d.mapUnavailable !== undefined) throw new ApiError(503, 'MapUnavailable', `this node cannot show the map of ${dataset}: ${d.mapUnavailable}`);
      throw new ApiError(404, 'ShardUnknown', `dataset ${dataset} has shards 0 to ${d.numShards - 1}, not ${shard}`);
    },
  );

  app.get(
    '/api/v1/node/ingestion',
    {
      schema: {
        tags: ['node'],
        summary: 'What this node ingests now: per copy the next offset and the lag behind the end of its stream',
        querystring: NoQuery,
        response: { 200: { description: "This node's copies", $ref: 'NodeIngestion#' }, ...answers('shardherd', {}, []) },
      },
    },
    () => nodeIngestion(singleton.node),
  );

  return { close: () => page.close() };
}

function stream(req: FastifyRequest, res: FastifyReply, page: PageFeed): void {
  serveEventStream(req, res, (send) => page.listen((m: PageMessage) => send(m.event, m.data)));
}
