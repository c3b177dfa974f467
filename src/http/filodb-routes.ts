// FiloDB's cluster routes, same paths and JSON shapes, so its scripts keep working:
//   GET  /api/v1/cluster                       {"status":"success","data":["<dataset>", ...]}
//   GET  /api/v1/cluster/:dataset/status       {"status":"success","data":[{"shard":0,"status":"ShardStatusActive","address":"<node>"}, ...]}
//                                               (an errored shard's status is "ShardStatusError(<message>)", FiloDB's toString)
//   POST /api/v1/cluster/:dataset/startshards  body {"address":"<node>","shardList":[...]}  → {"status":"success","data":[]}
//   POST /api/v1/cluster/:dataset/stopshards   body {"shardList":[...]}                    → {"status":"success","data":[]}
// Errors are FiloDB's `{"status":"error","errorType":..., "error":...}` plus `reason`.
// Fixed on the way (FiloDB's known bugs): an unknown dataset is a 404 on every route, not a 400;
// `errorType` is the error's name (`BadSchema`), not its whole `toString`; a malformed address is
// a 400 instead of crashing the singleton; the capacity check is exact. `address` is the node id
// (shardherd has no Akka addresses), and each status entry also lists every copy (`owners`) and,
// for a shard without all its copies, `reason`.
import type { FastifyInstance } from 'fastify';
import type { DatasetRef } from '../core/ids.js';
import type { Reply } from '../core/shard-manager/protocol.js';
import { assertNever } from '../core/result.js';
import { STOPPED_REASON } from '../core/shard-manager/describe.js';
import type { ShardMapper } from '../core/shard-mapper.js';
import type { ShardStatus } from '../core/status.js';
import { ApiError } from './api-error.js';
import { DATASET_PATH, describeDataset, missingReasons, parseDatasetParam } from './cluster-view.js';
import { answers, MUTATION_ERRORS, READ_ERRORS, schemaRef } from './schemas/answers.js';
import { DatasetParams, NoQuery } from './schemas/request-schemas.js';
import { idempotencyKeyOf } from './idempotency-key.js';
import { expectReply, type SingletonClient } from './singleton-client.js';

/**
 * A status as FiloDB's `ShardStatus.toString` spells it: its case classes print their fields, so
 * an errored shard is `ShardStatusError(<message>)` (the cause, where FiloDB's users look for it)
 * as a recovering one is `ShardStatusRecovery(<pct>)`.
 */
export function filodbStatusName(status: ShardStatus): string {
  switch (status.type) {
    case 'Recovery':
      return `ShardStatusRecovery(${status.progressPct})`;
    case 'Error':
      return `ShardStatusError(${status.message})`;
    case 'Unassigned':
    case 'Assigned':
    case 'Active':
    case 'Stopped':
    case 'Down':
      return `ShardStatus${status.type}`;
    default:
      return assertNever(status);
  }
}

const success = (data: readonly unknown[]) => ({ status: 'success', data });

/** Why shards without a copy have none, as far as the map itself says. */
function localReasons(mapper: ShardMapper): Map<number, string> {
  const out = new Map<number, string>();
  for (const shard of mapper.unassignedShards()) {
    const status = mapper.statusForShard(shard);
    if (status.type === 'Error') out.set(shard, `its ingestion failed: ${status.message}`);
    else if (status.type === 'Stopped') out.set(shard, STOPPED_REASON);
  }
  return out;
}

/** A start/stop reply as HTTP: Success → 200, an unknown dataset → 404, FiloDB's refusals → 400. */
function answerShardCommand(reply: Reply, dataset: DatasetRef): ReturnType<typeof success> {
  switch (reply.type) {
    case 'Success':
      return success([]);
    case 'DatasetUnknown':
      throw new ApiError(404, 'DatasetUnknown', `Dataset ${dataset} is not registered`);
    case 'BadSchema':
    case 'BadData':
      throw new ApiError(400, reply.type, reply.message);
    default:
      throw new ApiError(500, 'UnexpectedReply', `the singleton answered ${reply.type}`);
  }
}

export function registerFiloDbRoutes(app: FastifyInstance, singleton: SingletonClient): void {
  app.get(
    '/api/v1/cluster',
    {
      schema: {
        tags: ['FiloDB'],
        summary: 'The registered datasets (FiloDB shape)',
        response: answers('filodb', { 200: { schema: 'FiloDbDatasets', description: "The datasets' names" } }, READ_ERRORS),
      },
    },
    async () => {
      // From the datasets this node follows (no bus round trip: monitors poll this); a node that
      // follows none yet (just started) asks the singleton.
      const cache = await singleton.node.cache();
      if (cache && cache.configs.size > 0) return success([...cache.configs.keys()].sort());
      const reply = expectReply(await singleton.ask((replyTo) => ({ type: 'ListRegisteredDatasets', replyTo })), 'RegisteredDatasets');
      return success(reply.datasets);
    },
  );

  app.get<{ Params: { dataset: string } }>(
    '/api/v1/cluster/:dataset/status',
    {
      config: DATASET_PATH,
      schema: {
        params: DatasetParams,
        tags: ['FiloDB'],
        summary: 'Per shard: status and owner (FiloDB shape, plus owners and reason)',
        response: answers('filodb', { 200: { schema: 'FiloDbShardStatuses', description: 'Every shard, in order' } }, [400, 404, ...READ_ERRORS]),
      },
    },
    async (req) => {
      const dataset = parseDatasetParam(req.params.dataset);
      // From this node's own copy of the map, as every node holds it (no bus round trip: monitors
      // poll this, and a singleton behind its inbox must not make it fail). A shard's reason is then
      // what the map says (its error, or an operator's stop); the singleton's fuller reasons (a
      // cooldown, no room) are on /api/v1/datasets/:dataset. A node without the map asks the singleton.
      const local = (await singleton.node.cache())?.maps.get(dataset)?.mapper;
      const { mapper, missing } = local
        ? { mapper: local, missing: localReasons(local) }
        : await (async () => {
            const { description, map } = await describeDataset(singleton, dataset);
            return { mapper: map.mapper, missing: missingReasons(description) };
          })();
      return success(
        Array.from({ length: mapper.numShards }, (_, shard) => mapper.recordForShard(shard)).map((record, shard) => ({
          shard,
          status: filodbStatusName(record.status),
          address: record.assignments[0]?.node ?? '',
          owners: record.assignments.map((a) => ({ node: a.node, placement: a.placement, status: filodbStatusName(a.status) })),
          ...(missing.has(shard) ? { reason: missing.get(shard) } : {}),
        })),
      );
    },
  );

  app.post<{ Params: { dataset: string }; Body: { address: string; shardList: number[] } }>(
    '/api/v1/cluster/:dataset/startshards',
    {
      config: { mutates: true, ...DATASET_PATH },
      schema: {
        params: DatasetParams,
        tags: ['FiloDB'],
        summary: 'Start stopped or unassigned shards on a node (FiloDB body)',
        body: schemaRef('StartShardsBody'),
        querystring: NoQuery,
        response: answers('filodb', { 200: { schema: 'FiloDbSuccess', description: 'Started' } }, [...MUTATION_ERRORS, 404]),
      },
    },
    async (req) => {
      const dataset = parseDatasetParam(req.params.dataset);
      const { address, shardList: shards } = req.body;
      return answerShardCommand(
        await singleton.change(idempotencyKeyOf(req), (replyTo) => ({ type: 'StartShards', dataset, node: address, shards, replyTo })),
        dataset,
      );
    },
  );

  app.post<{ Params: { dataset: string }; Body: { shardList: number[] } }>(
    '/api/v1/cluster/:dataset/stopshards',
    {
      config: { mutates: true, ...DATASET_PATH },
      schema: {
        params: DatasetParams,
        tags: ['FiloDB'],
        summary: 'Stop shards (FiloDB body); they stay unassigned until started or a membership change',
        body: schemaRef('StopShardsBody'),
        querystring: NoQuery,
        response: answers('filodb', { 200: { schema: 'FiloDbSuccess', description: 'Stopped' } }, [...MUTATION_ERRORS, 404]),
      },
    },
    async (req) => {
      const dataset = parseDatasetParam(req.params.dataset);
      return answerShardCommand(
        await singleton.change(idempotencyKeyOf(req), (replyTo) => ({ type: 'StopShards', dataset, shards: req.body.shardList, replyTo })),
        dataset,
      );
    },
  );
}
