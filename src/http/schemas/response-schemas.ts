// What the routes answer, as JSON Schema for the OpenAPI description. The routes do not serialize
// through them (answers are plain JSON.stringify, so a schema can never drop a field a client
// reads); test/unit/openapi.test.ts drives the API and checks every answer against its route's
// schema for that status, so the description cannot drift from what the API does.

const str = { type: 'string' } as const;
const int = { type: 'integer' } as const;
const bool = { type: 'boolean' } as const;
const strings = { type: 'array', items: str } as const;
const ref = (id: string) => ({ $ref: `${id}#` }) as const;

/** An object whose listed properties are all required except `optional`, and nothing else. */
function object(properties: Record<string, object>, optional: readonly string[] = [], extra: Record<string, unknown> = {}) {
  return { type: 'object', additionalProperties: false, required: Object.keys(properties).filter((k) => !optional.includes(k)), properties, ...extra };
}

const STATUSES = ['Unassigned', 'Assigned', 'Recovery', 'Active', 'Error', 'Stopped', 'Down'];
const statusType = { type: 'string', enum: STATUSES } as const;
const countsPerStatus = { type: 'object', additionalProperties: false, properties: Object.fromEntries(STATUSES.map((s) => [s, int])) } as const;

export const ErrorBody = {
  $id: 'ErrorBody',
  description: "Every error on shardherd's routes; the request changed nothing",
  ...object({
    error: { type: 'string', description: 'A stable name scripts match on (docs/OPERATIONS.md lists them)' },
    reason: { type: 'string', description: 'What happened and what to do' },
  }),
};

export const FiloDbError = {
  $id: 'FiloDbError',
  description: "Every error on FiloDB's routes, in FiloDB's envelope, with `reason` beside it",
  ...object({ status: { type: 'string', enum: ['error'] }, errorType: { type: 'string', description: "The error's name" }, error: str, reason: str }),
};

export const FiloDbSuccess = { $id: 'FiloDbSuccess', ...object({ status: { type: 'string', enum: ['success'] }, data: { type: 'array', maxItems: 0 } }) };

export const FiloDbDatasets = { $id: 'FiloDbDatasets', ...object({ status: { type: 'string', enum: ['success'] }, data: strings }) };

const filodbStatus = {
  type: 'string',
  pattern: '^ShardStatus(Unassigned|Assigned|Active|Stopped|Down|Recovery\\(\\d+\\)|Error\\([\\s\\S]*\\))$',
  description: "FiloDB's ShardStatus.toString: ShardStatusError(<message>) for an errored shard",
} as const;

export const FiloDbShardStatuses = {
  $id: 'FiloDbShardStatuses',
  ...object({
    status: { type: 'string', enum: ['success'] },
    data: {
      type: 'array',
      items: object(
        {
          shard: int,
          status: filodbStatus,
          address: { type: 'string', description: "The first copy's node, empty when none" },
          owners: { type: 'array', items: object({ node: str, placement: str, status: filodbStatus }) },
          reason: { type: 'string', description: 'Why the shard lacks copies' },
        },
        ['reason'],
      ),
    },
  }),
};

const shardStatus = {
  type: 'object',
  additionalProperties: false,
  required: ['type'],
  properties: { type: statusType, progressPct: int, message: str },
} as const;

const datasetSource = {
  oneOf: [
    object({ type: { type: 'string', enum: ['synthetic'] }, recordsPerSecond: { type: 'number' } }),
    object({ type: { type: 'string', enum: ['kafka'] }, topic: str, startFrom: { type: 'string', enum: ['earliest', 'latest'] } }),
  ],
} as const;

const cooldown = object({
  shard: int,
  reassignedAt: { type: 'integer', description: 'ms since the epoch' },
  endsAt: { type: 'integer', description: 'ms since the epoch' },
});

const datasetFields = {
  name: str,
  numShards: int,
  replicationFactor: int,
  minNumNodes: int,
  strategy: { type: 'string', enum: ['filodb-default', 'balanced'] },
  source: datasetSource,
  epoch: int,
  version: int,
  counts: countsPerStatus,
  cooldowns: { type: 'array', items: cooldown },
  mapUnavailable: { type: 'string', description: 'Why this node cannot show the shards' },
};

export const ShardView = {
  $id: 'ShardView',
  ...object(
    {
      shard: int,
      status: statusType,
      progressPct: int,
      error: { type: 'string', description: 'The ingestion error of a shard in Error' },
      owners: {
        type: 'array',
        items: object({ node: str, placement: { type: 'string', enum: ['Initializing', 'Available', 'Leaving'] }, status: statusType, error: str }, ['error']),
      },
      reason: { type: 'string', description: 'Why the shard has fewer copies than its replication factor' },
    },
    ['progressPct', 'error', 'reason'],
  ),
};

export const DatasetView = { $id: 'DatasetView', ...object({ ...datasetFields, shards: { type: 'array', items: ref('ShardView') } }, ['mapUnavailable']) };

export const DatasetSummaries = { $id: 'DatasetSummaries', ...object({ datasets: { type: 'array', items: object(datasetFields, ['mapUnavailable']) } }) };

export const SingletonView = { $id: 'SingletonView', ...object({ node: str, incarnation: str, epoch: int, address: str }, ['address']) };

export const MemberView = {
  $id: 'MemberView',
  ...object({ node: str, incarnation: str, rack: str, weight: { type: 'number' }, address: str, joinedAt: int, singleton: bool, copies: int }, [
    'rack',
    'address',
  ]),
};

export const MemberList = { $id: 'MemberList', ...object({ members: { type: 'array', items: ref('MemberView') } }) };

const nodeOperations = object({ draining: strings, replacements: { type: 'array', items: object({ old: str, new: str }) } });

const problem = { event: str, cause: str, message: str, count: int, firstAt: int, lastAt: int };

export const ClusterView = {
  $id: 'ClusterView',
  description: 'The cluster as the page and the CLI show it',
  ...object({
    answeredBy: object({ node: str, incarnation: str, singleton: bool }, ['incarnation']),
    singleton: { ...object({ node: str, incarnation: str, epoch: int, address: str }, ['address']), nullable: true },
    members: { type: 'array', items: ref('MemberView') },
    datasets: { type: 'array', items: ref('DatasetView') },
    operations: nodeOperations,
    problems: { type: 'array', items: object({ ...problem, node: str }) },
  }),
};

export const Cooldowns = { $id: 'Cooldowns', ...object({ cooldowns: { type: 'array', items: object({ dataset: str, ...cooldown.properties }) } }) };

export const NodeOperationsState = {
  $id: 'NodeOperationsState',
  ...object({ operations: nodeOperations, copies: { type: 'array', items: object({ node: str, copies: int, leaving: int }) } }),
};

export const NodeOperationAccepted = {
  $id: 'NodeOperationAccepted',
  description: 'Accepted: the moves run in the background; `pending` while a replacement waits for its node to join',
  ...object({ operation: { type: 'string', enum: ['remove', 'replace', 'add'] }, node: str, moves: int, pending: bool, message: str }),
};

export const DatasetSetUp = {
  $id: 'DatasetSetUp',
  ...object({ dataset: str, created: { type: 'boolean', description: 'false: the same config was set up already, nothing changed' } }),
};

export const DatasetRemoved = { $id: 'DatasetRemoved', ...object({ dataset: str, removed: { type: 'boolean', enum: [true] } }) };

export const Health = {
  $id: 'Health',
  ...object({ ok: bool, state: str, member: bool, singletonHeard: bool, singletonSilentMs: int, reason: str }, ['singletonSilentMs', 'reason']),
};

const member = object({ node: str, incarnation: str, joinedAt: int, rack: str, address: str, weight: { type: 'number' } }, ['rack', 'address', 'weight']);

export const NodeStatus = {
  $id: 'NodeStatus',
  ...object(
    {
      node: str,
      incarnation: str,
      pid: int,
      state: { type: 'string', enum: ['stopped', 'running', 'stopping', 'paused', 'crashed'] },
      restarting: object({ attempt: int, error: str, retryInMs: int }),
      member: bool,
      running: {
        type: 'array',
        description: 'the copies this node runs, dataset and shard order, the first 1000 unless `?running=all`',
        items: object(
          {
            dataset: str,
            shard: int,
            status: shardStatus,
            writingUnder: object({ epoch: int, version: int }, [], {
              description: 'the fencing token its writes carry now; absent while the node acts on no map that gives it the copy (it writes nothing then)',
            }),
          },
          ['writingUnder'],
        ),
      },
      runningCounts: { type: 'object', description: 'every copy this node runs, counted per dataset and status', additionalProperties: countsPerStatus },
      runningAnswer: object({ ageMs: int, waitingMs: int }, ['ageMs'], {
        description:
          'how old the answer under running and runningCounts is (ms; absent before the first) and how long a fresher one has been asked for (0: none outstanding): /status shows the last answer of a busy guardian',
      }),
      knownEpoch: int,
      singletonAt: object({ node: str, incarnation: str, epoch: int, address: str }, ['address']),
      writeLease: object({ held: bool, waitingShards: int, longestWaitMs: int }),
      maps: { type: 'array', items: object({ dataset: str, epoch: int, version: int, numShards: int, statuses: countsPerStatus, copies: countsPerStatus }) },
      singleton: object({
        epoch: int,
        members: { type: 'array', items: member },
        maps: { type: 'array', items: object({ dataset: str, numShards: int, epoch: int, version: int }) },
        subscriptions: { type: 'array', items: object({ dataset: str, subscribers: strings }) },
        watchers: strings,
      }),
      problems: { type: 'array', items: object(problem) },
      stalled: {
        type: 'array',
        description: 'actors whose handler has run 10 s or more, the longest first: the messages behind one wait with it',
        items: object({ actor: str, message: str, forMs: int }),
      },
    },
    ['incarnation', 'restarting', 'knownEpoch', 'singletonAt', 'writeLease', 'singleton', 'stalled'],
  ),
};

const num = { type: 'number' } as const;

export const PlacementExplanation = {
  $id: 'PlacementExplanation',
  description: "A load-aware dataset's load view and what a load round would do now: a dry run, nothing changes",
  ...object(
    {
      dataset: str,
      measure: { type: 'string', enum: ['records', 'bytes', 'sink-time', 'weight'] },
      band: num,
      triggerBand: num,
      paused: bool,
      measured: { ...int, description: 'Shards with a fresh load figure' },
      serving: { ...int, description: 'Shards with a serving copy' },
      nodes: {
        type: 'array',
        items: object(
          {
            node: str,
            weight: num,
            copies: int,
            load: num,
            share: num,
            lo: num,
            hi: num,
            hotShard: { ...int, description: 'The hot shard this node carries alone (its band is that copy’s load)' },
          },
          ['hotShard'],
        ),
      },
      hotShards: { type: 'array', items: int },
      imbalancedSince: { ...int, description: 'Since when (ms since the epoch) a node has been outside the trigger band' },
      movesLastHour: int,
      maxMovesPerHour: int,
      maxConcurrentMoves: { ...int, description: "The most copies one load round moves (the dataset's maxConcurrentMoves)" },
      maxConcurrentMovesPerNode: { ...int, description: 'The most copies one node gains plus sheds in a load round' },
      refused: { type: 'object', additionalProperties: int, description: 'Load figures refused, by why (never acted on)' },
      verdict: {
        type: 'string',
        enum: [
          'would-move',
          'balanced',
          'within-trigger',
          'paused',
          'waiting',
          'moves-in-flight',
          'hourly-limit',
          'view-incomplete',
          'no-gain',
          'not-load-aware',
        ],
      },
      message: str,
      moves: { type: 'array', items: object({ shard: int, from: str, to: str, load: { type: ['number', 'null'] }, why: str }) },
      outsideBefore: num,
      outsideAfter: num,
    },
    ['imbalancedSince'],
  ),
};

export const LoadBalancing = { $id: 'LoadBalancing', ...object({ dataset: str, paused: bool }) };

export const RESPONSE_SCHEMAS = [
  ErrorBody,
  FiloDbError,
  FiloDbSuccess,
  FiloDbDatasets,
  FiloDbShardStatuses,
  ShardView,
  DatasetView,
  DatasetSummaries,
  SingletonView,
  MemberView,
  MemberList,
  ClusterView,
  Cooldowns,
  NodeOperationsState,
  NodeOperationAccepted,
  DatasetSetUp,
  DatasetRemoved,
  Health,
  NodeStatus,
  PlacementExplanation,
  LoadBalancing,
] as const;
