// What the mutating routes accept, as JSON Schema: the routes validate with these (Ajv, no type
// coercion, unknown fields refused) and the OpenAPI description shows them as its components. An
// operator's typo must be refused, never read as something else: `{"shardList":"7"}` is not [7].
import { MAX_REPLACEMENT_DELAY_MS, MAX_REPLICATION_FACTOR } from '../../core/dataset-config.js';
import { DATASET_REF_PATTERN, MAX_DATASET_REF_LENGTH, MAX_NODE_ID_LENGTH, NODE_ID_PATTERN } from '../../core/ids.js';
import { MAX_SHARDS } from '../../core/spread.js';

/** A dataset's name, exactly as `parseDatasetRef` takes it. */
const DatasetName = { type: 'string', pattern: DATASET_REF_PATTERN, maxLength: MAX_DATASET_REF_LENGTH } as const;
/** A node id, exactly as `parseNodeId` takes it. */
const NodeIdString = { type: 'string', pattern: NODE_ID_PATTERN, maxLength: MAX_NODE_ID_LENGTH } as const;

/** The path of a route about one dataset. */
export const DatasetParams = {
  type: 'object',
  required: ['dataset'],
  properties: { dataset: { ...DatasetName, description: "The dataset's name" } },
} as const;

/** The path of a route about one shard of a dataset. */
export const ShardParams = {
  type: 'object',
  additionalProperties: false,
  required: ['dataset', 'shard'],
  properties: {
    dataset: { ...DatasetName, description: "The dataset's name" },
    shard: { type: 'string', pattern: '^[0-9]{1,9}$', maxLength: 9, description: 'The shard number' },
  },
} as const;

/** The path of a node operation. */
export const NodeParams = {
  type: 'object',
  required: ['node'],
  properties: { node: { ...NodeIdString, description: "The node's id" } },
} as const;

const POWERS_OF_TWO = Array.from({ length: Math.log2(MAX_SHARDS) + 1 }, (_, i) => 2 ** i);

/** A list of shard numbers. Ranges, duplicates and ownership are FiloDB's checks, answered with its words (`BadSchema`). */
const ShardList = {
  type: 'array',
  description: "Shard numbers; an empty list, or numbers out of range or repeated, are refused with FiloDB's BadSchema",
  items: { type: 'integer' },
  maxItems: MAX_SHARDS,
} as const;

export const StartShardsBody = {
  $id: 'StartShardsBody',
  type: 'object',
  description: "FiloDB's AssignShardConfig",
  required: ['address', 'shardList'],
  additionalProperties: false,
  properties: {
    address: { type: 'string', minLength: 1, maxLength: 256, description: 'The node id to start the shards on (FiloDB: its address)' },
    shardList: ShardList,
  },
} as const;

export const StopShardsBody = {
  $id: 'StopShardsBody',
  type: 'object',
  description: "FiloDB's UnassignShardConfig",
  required: ['shardList'],
  additionalProperties: false,
  properties: { shardList: ShardList },
} as const;

export const ReplaceNodeBody = {
  $id: 'ReplaceNodeBody',
  type: 'object',
  required: ['with'],
  additionalProperties: false,
  properties: { with: { ...NodeIdString, description: 'The node id that takes the copies (it may join later); not the node replaced' } },
} as const;

/**
 * A dataset config as written (src/core/dataset-config.ts validates it again, with what JSON
 * Schema cannot say: the spread's bound by numShards, replicas needing `balanced`; those answer
 * `BadSchema` naming the field too).
 */
export const DatasetConfigInput = {
  $id: 'DatasetConfigInput',
  type: 'object',
  required: ['ref', 'numShards', 'minNumNodes', 'source'],
  additionalProperties: false,
  properties: {
    ref: { ...DatasetName, description: "The dataset's name" },
    numShards: { type: 'integer', enum: POWERS_OF_TWO, description: "A power of two; fixed for the dataset's lifetime" },
    minNumNodes: { type: 'integer', minimum: 1, maximum: MAX_SHARDS },
    spread: { type: 'integer', minimum: 0, maximum: Math.log2(MAX_SHARDS), description: 'Default 1 (0 for 1 shard); at most log2(numShards)' },
    replicationFactor: { type: 'integer', minimum: 1, maximum: MAX_REPLICATION_FACTOR, description: 'Default 1; above 1 needs strategy balanced' },
    strategy: { type: 'string', enum: ['filodb-default', 'balanced'], description: 'Default filodb-default' },
    maxConcurrentMoves: { type: 'integer', minimum: 1, maximum: MAX_SHARDS, description: 'Default 16' },
    copyStartFrom: { type: 'string', enum: ['earliest', 'serving-copies'], description: 'Default earliest' },
    replacementDelayMs: {
      type: 'integer',
      minimum: 0,
      maximum: MAX_REPLACEMENT_DELAY_MS,
      description:
        "How long a lost node's copies are kept for it before they are placed elsewhere (balanced only; default 60000 for balanced, 0 for filodb-default)",
    },
    loadBalance: {
      type: 'object',
      additionalProperties: false,
      description: 'Balanced only: place by measured load, not copy counts (docs/PLACEMENT.md, "The load-aware mode"); {} takes every default',
      properties: {
        measure: { type: 'string', enum: ['records', 'bytes', 'sink-time', 'weight'], description: 'Default records' },
        band: { type: 'number', minimum: 0, maximum: 1, description: 'Above 0 and below 1: every node within this fraction of its share; default 0.05' },
        triggerBand: {
          type: 'number',
          minimum: 0,
          maximum: 1,
          description: 'Above 0 and below 1, at least band: load alone moves copies only when a node is outside this band; default max(band, 0.1)',
        },
        sustainMs: {
          type: 'integer',
          minimum: 0,
          maximum: 86_400_000,
          description: 'How long a node must stay outside the trigger band before copies move; default 180000',
        },
        maxMovesPerHour: { type: 'integer', minimum: 0, maximum: 524_288, description: 'Copies moved for load per rolling hour; default 64' },
        maxConcurrentMovesPerNode: {
          type: 'integer',
          minimum: 1,
          maximum: 524_288,
          description: 'Copies one node gains plus sheds in a load round; default 4',
        },
        shardCooldownMs: {
          type: 'integer',
          minimum: 0,
          maximum: 86_400_000,
          description: 'A shard moved for load waits this long before the next; default 600000',
        },
        staleMs: { type: 'integer', minimum: 1000, maximum: 3_600_000, description: 'How long a load figure counts; default 60000' },
      },
    },
    source: {
      oneOf: [
        {
          type: 'object',
          required: ['type'],
          additionalProperties: false,
          properties: {
            type: { type: 'string', enum: ['synthetic'] },
            recordsPerSecond: { type: 'number', minimum: 0, maximum: 1_000_000, description: 'Above 0; default 100' },
          },
        },
        {
          type: 'object',
          required: ['type', 'topic'],
          additionalProperties: false,
          properties: {
            type: { type: 'string', enum: ['kafka'] },
            topic: { type: 'string', pattern: '^[A-Za-z0-9._-]{1,249}$' },
            startFrom: { type: 'string', enum: ['earliest', 'latest'], description: 'Default earliest' },
          },
        },
      ],
    },
  },
} as const;

/** `POST /api/v1/datasets?createTopic=true|false`: a query string is text, read as what it says, never coerced. */
export const SetupDatasetQuery = {
  type: 'object',
  additionalProperties: false,
  properties: {
    createTopic: { type: 'string', enum: ['true', 'false'], description: "true: create the dataset's Kafka topic with numShards partitions first" },
  },
} as const;

/** `/status`: the copies this node runs are listed up to a bound unless asked for all. */
export const NodeStatusQuery = {
  type: 'object',
  additionalProperties: false,
  properties: {
    running: { type: 'string', enum: ['all'], description: 'all: list every copy this node runs (by default the first 1000; `runningCounts` counts them all)' },
  },
} as const;

/** A mutating route without query parameters refuses any. */
export const NoQuery = { type: 'object', properties: {}, additionalProperties: false } as const;

/** `PUT /api/v1/datasets/:dataset/load-balancing`: pause or resume the moves for load. */
export const LoadBalancingBody = {
  $id: 'LoadBalancingBody',
  type: 'object',
  required: ['paused'],
  additionalProperties: false,
  properties: { paused: { type: 'boolean', description: 'true: copies move for load no more (joins, drains and lost copies still do); false: they do again' } },
} as const;

export const REQUEST_SCHEMAS = [StartShardsBody, StopShardsBody, ReplaceNodeBody, DatasetConfigInput, LoadBalancingBody] as const;
