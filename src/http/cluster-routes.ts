// shardherd's own routes under /api/v1: the cluster at a glance, datasets, members, the singleton,
// cooldowns and the planned node operations (drain, replace, undrain). Every reply of the singleton
// maps to one status code; a refusal changed nothing.
import type { FastifyInstance } from 'fastify';
import type { ShardherdNode } from '../actors/node-process.js';
import type { Request } from '../protocol/wire.js';
import { validateDatasetConfig } from '../core/dataset-config.js';
import type { ReplyTo } from '../core/ids.js';
import type { NodeOperationRefusal, Reply } from '../core/shard-manager/protocol.js';
import { ApiError } from './api-error.js';
import { clusterSummary, clusterView, DATASET_PATH, datasetView, describeDataset, parseDatasetParam } from './cluster-view.js';
import { answers, MUTATION_ERRORS, READ_ERRORS, schemaRef } from './schemas/answers.js';
import { DatasetParams, NodeParams, NoQuery, SetupDatasetQuery } from './schemas/request-schemas.js';
import { idempotencyKeyOf } from './idempotency-key.js';
import { expectReply, type SingletonClient } from './singleton-client.js';

const REFUSAL_STATUS: Record<NodeOperationRefusal, number> = {
  'bad-node': 400,
  'unknown-node': 404,
  isolation: 409,
  serving: 409,
  capacity: 409,
  conflict: 409,
};

function setupAnswer(reply: Reply): { code: number; body: unknown } {
  switch (reply.type) {
    case 'DatasetVerified':
      return { code: 201, body: { dataset: reply.dataset, created: true } };
    case 'DatasetExists':
      return { code: 200, body: { dataset: reply.dataset, created: false } };
    case 'DatasetConflict':
      throw new ApiError(409, 'DatasetConflict', reply.message);
    case 'BadSchema':
      throw new ApiError(400, 'BadSchema', reply.message);
    case 'BadData':
      throw new ApiError(422, 'BadData', reply.message);
    case 'IsolationImpossible':
      throw new ApiError(409, 'IsolationImpossible', reply.message);
    case 'DatasetTooLarge':
      throw new ApiError(413, 'DatasetTooLarge', reply.message);
    default:
      throw new ApiError(500, 'UnexpectedReply', `the singleton answered ${reply.type}`);
  }
}

function nodeOperationAnswer(reply: Reply): { code: number; body: unknown } {
  if (reply.type === 'NodeOperationAccepted') {
    const { type: _, ...body } = reply;
    return { code: 202, body };
  }
  if (reply.type === 'NodeOperationRefused') throw new ApiError(REFUSAL_STATUS[reply.reason], `NodeOperationRefused:${reply.reason}`, reply.message);
  throw new ApiError(500, 'UnexpectedReply', `the singleton answered ${reply.type}`);
}

/** A malformed node id in a path answers as the singleton's refusal of it did before the path was checked. */
const NODE_PATH = { invalidParams: 'NodeOperationRefused:bad-node' } as const;

export function registerClusterRoutes(app: FastifyInstance, singleton: SingletonClient): void {
  app.get(
    '/api/v1/overview',
    {
      schema: {
        tags: ['cluster'],
        summary: "Members, the singleton, every dataset's shards with owners and reasons, node operations",
        response: answers('shardherd', { 200: { schema: 'ClusterView', description: 'The cluster' } }, READ_ERRORS),
      },
    },
    () => clusterView(singleton),
  );

  registerDatasetRoutes(app, singleton);
  registerMemberRoutes(app, singleton);
  registerNodeOperationRoutes(app, singleton);
}

/** The datasets: list, read, set up, remove, and their placement and load balancing. */
function registerDatasetRoutes(app: FastifyInstance, singleton: SingletonClient): void {
  app.get(
    '/api/v1/datasets',
    {
      schema: {
        tags: ['datasets'],
        summary: 'Every dataset with its map stamp and shard counts per status',
        response: answers('shardherd', { 200: { schema: 'DatasetSummaries', description: 'Every dataset' } }, READ_ERRORS),
      },
    },
    async () => {
      const { datasets } = await clusterSummary(singleton);
      return { datasets };
    },
  );

  app.get<{ Params: { dataset: string } }>(
    '/api/v1/datasets/:dataset',
    {
      config: DATASET_PATH,
      schema: {
        params: DatasetParams,
        tags: ['datasets'],
        summary: 'One dataset: config, shards with owners and reasons, cooldowns',
        response: answers('shardherd', { 200: { schema: 'DatasetView', description: 'The dataset' } }, [400, 404, ...READ_ERRORS]),
      },
    },
    async (req) => datasetView(await describeDataset(singleton, parseDatasetParam(req.params.dataset))),
  );

  app.post<{ Body: unknown; Querystring: { createTopic?: 'true' | 'false' } }>(
    '/api/v1/datasets',
    {
      // A config outside the schema is a bad dataset config: FiloDB's name for it, as the singleton's own check answers.
      config: { mutates: true, invalidBody: 'BadSchema' },
      schema: {
        tags: ['datasets'],
        summary: 'Set up a dataset (idempotent for the same config); createTopic=true first creates its Kafka topic with numShards partitions',
        querystring: SetupDatasetQuery,
        body: schemaRef('DatasetConfigInput'),
        response: answers(
          'shardherd',
          {
            201: { schema: 'DatasetSetUp', description: 'Set up (`created: true`)' },
            200: { schema: 'DatasetSetUp', description: 'The same config was set up already: nothing changed (`created: false`)' },
          },
          [...MUTATION_ERRORS, 409],
        ),
      },
    },
    async (req, res) => {
      if (req.query.createTopic === 'true') await createTopic(singleton.node, req.body);
      const answer = setupAnswer(
        await singleton.change(idempotencyKeyOf(req), (replyTo) => ({ type: 'SetupDataset', config: req.body, replyTo }) as unknown as Request),
      );
      return res.code(answer.code).send(answer.body);
    },
  );

  app.delete<{ Params: { dataset: string } }>(
    '/api/v1/datasets/:dataset',
    {
      config: { mutates: true, ...DATASET_PATH },
      schema: {
        tags: ['datasets'],
        summary: 'Remove a dataset: its shards stop everywhere',
        params: DatasetParams,
        querystring: NoQuery,
        response: answers('shardherd', { 200: { schema: 'DatasetRemoved', description: 'Removed' } }, [...MUTATION_ERRORS, 404]),
      },
    },
    async (req) => {
      const dataset = parseDatasetParam(req.params.dataset);
      const reply = await singleton.change(idempotencyKeyOf(req), (replyTo) => ({ type: 'RemoveDataset', dataset, replyTo }));
      if (reply.type === 'DatasetUnknown') throw new ApiError(404, 'DatasetUnknown', `Dataset ${dataset} is not registered`);
      expectReply(reply, 'Success');
      return { dataset, removed: true };
    },
  );

  app.get<{ Params: { dataset: string } }>(
    '/api/v1/datasets/:dataset/placement',
    {
      config: DATASET_PATH,
      schema: {
        params: DatasetParams,
        querystring: NoQuery,
        tags: ['datasets'],
        summary: "A load-aware dataset's load per node, its bands, and the moves a load round would make now, with why (a dry run)",
        response: answers('shardherd', { 200: { schema: 'PlacementExplanation', description: 'The load view and the dry run' } }, [
          400,
          404,
          409,
          ...READ_ERRORS,
        ]),
      },
    },
    async (req) => {
      const dataset = parseDatasetParam(req.params.dataset);
      const reply = await singleton.ask((replyTo) => ({ type: 'ExplainPlacement', dataset, replyTo }));
      return loadAnswer(reply, 'PlacementExplanation').explanation;
    },
  );

  app.put<{ Params: { dataset: string }; Body: { paused: boolean } }>(
    '/api/v1/datasets/:dataset/load-balancing',
    {
      config: { mutates: true, ...DATASET_PATH },
      schema: {
        params: DatasetParams,
        querystring: NoQuery,
        body: schemaRef('LoadBalancingBody'),
        tags: ['datasets'],
        summary: "Pause or resume a load-aware dataset's moves for load (joins, drains and lost copies still move)",
        response: answers('shardherd', { 200: { schema: 'LoadBalancing', description: 'Applied' } }, [...MUTATION_ERRORS, 404, 409]),
      },
    },
    async (req) => {
      const dataset = parseDatasetParam(req.params.dataset);
      const reply = await singleton.change(idempotencyKeyOf(req), (replyTo) => ({ type: 'SetLoadBalancing', dataset, paused: req.body.paused, replyTo }));
      const { type: _, ...body } = loadAnswer(reply, 'LoadBalancingSet');
      return body;
    },
  );
}

/** The members, the singleton, the cooldowns and the node operations in flight, as read. */
function registerMemberRoutes(app: FastifyInstance, singleton: SingletonClient): void {
  app.get(
    '/api/v1/members',
    {
      schema: {
        tags: ['cluster'],
        summary: "Members oldest first, with rack, weight, incarnation, copies and the singleton's host",
        response: answers('shardherd', { 200: { schema: 'MemberList', description: 'The members' } }, READ_ERRORS),
      },
    },
    async () => ({ members: (await clusterSummary(singleton)).members }),
  );

  app.get(
    '/api/v1/singleton',
    {
      schema: {
        tags: ['cluster'],
        summary: 'Which node hosts the singleton, its epoch and address',
        response: answers('shardherd', { 200: { schema: 'SingletonView', description: 'The lease holder' } }, READ_ERRORS),
      },
    },
    async () => {
      const view = await clusterSummary(singleton);
      if (!view.singleton) throw new ApiError(503, 'NoSingleton', 'no singleton holds the lease yet');
      return view.singleton;
    },
  );

  app.get(
    '/api/v1/cooldowns',
    {
      schema: {
        tags: ['cluster'],
        summary: 'Shards inside their reassignment cooldown, per dataset',
        response: answers('shardherd', { 200: { schema: 'Cooldowns', description: 'The cooldowns in force' } }, READ_ERRORS),
      },
    },
    async () => {
      const view = await clusterSummary(singleton);
      return { cooldowns: view.datasets.flatMap((d) => d.cooldowns.map((c) => ({ dataset: d.name, ...c }))) };
    },
  );

  app.get(
    '/api/v1/node-operations',
    {
      schema: {
        tags: ['node operations'],
        summary: 'Drains and replacements in flight, and the copies each member still holds',
        response: answers('shardherd', { 200: { schema: 'NodeOperationsState', description: 'The operations in flight' } }, READ_ERRORS),
      },
    },
    async () => {
      const { type: _, ...state } = expectReply(await singleton.ask((replyTo) => ({ type: 'GetNodeOperations', replyTo })), 'NodeOperationsState');
      return state;
    },
  );
}

/** Drain, undrain and replace a node. */
function registerNodeOperationRoutes(app: FastifyInstance, singleton: SingletonClient): void {
  const nodeOperation = (path: string, summary: string, build: (node: string, body: { with?: string }, replyTo: ReplyTo) => Request, body?: object) => {
    app.post<{ Params: { node: string }; Body: { with?: string } }>(
      path,
      {
        config: { mutates: true, ...NODE_PATH },
        schema: {
          tags: ['node operations'],
          summary,
          params: NodeParams,
          querystring: NoQuery,
          ...(body ? { body } : {}),
          response: answers('shardherd', { 202: { schema: 'NodeOperationAccepted', description: 'Accepted: the moves run in the background' } }, [
            ...MUTATION_ERRORS,
            404,
            409,
          ]),
        },
      },
      async (req, res) => {
        const answer = nodeOperationAnswer(await singleton.change(idempotencyKeyOf(req), (replyTo) => build(req.params.node, req.body ?? {}, replyTo)));
        return res.code(answer.code).send(answer.body);
      },
    );
  };
  nodeOperation('/api/v1/nodes/:node/drain', 'Hand every copy of the node to others (new copy first), then release it', (n, _b, replyTo) => ({
    type: 'RemoveNode',
    node: n,
    replyTo,
  }));
  nodeOperation('/api/v1/nodes/:node/undrain', 'Cancel a drain or a pending replacement: the node takes copies again', (n, _b, replyTo) => ({
    type: 'AddNode',
    node: n,
    replyTo,
  }));
  nodeOperation(
    '/api/v1/nodes/:node/replace',
    'Hand each copy of the node to the node named in `with` (which may join later)',
    (n, b, replyTo) => ({ type: 'ReplaceNode', old: n, new: b.with ?? '', replyTo }),
    schemaRef('ReplaceNodeBody'),
  );
}

/** The singleton's answer to a load-aware dataset's request, or the error it means. */
function loadAnswer<T extends 'PlacementExplanation' | 'LoadBalancingSet'>(reply: Reply, type: T): Extract<Reply, { type: T }> {
  if (reply.type === 'DatasetUnknown') throw new ApiError(404, 'DatasetUnknown', `Dataset ${reply.dataset} is not registered`);
  if (reply.type === 'NotLoadAware') throw new ApiError(409, 'NotLoadAware', reply.message);
  return expectReply(reply, type);
}

/** `createTopic=true`: the dataset's Kafka topic is created (or found right) before the singleton checks it. */
async function createTopic(node: ShardherdNode, body: unknown): Promise<void> {
  const config = validateDatasetConfig(body);
  if (!config.ok) throw new ApiError(400, 'BadSchema', config.error.message);
  const source = node.services.source;
  if (config.value.source.type !== 'kafka')
    throw new ApiError(400, 'NoTopic', `dataset ${config.value.ref} reads a ${config.value.source.type} source: it has no topic to create`);
  if (!source.createTopic) throw new ApiError(400, 'TopicCreationUnsupported', "this node's ingestion source cannot create topics");
  try {
    await source.createTopic(config.value);
  } catch (e) {
    throw new ApiError(422, 'TopicNotCreated', e instanceof Error ? e.message : String(e));
  }
}
