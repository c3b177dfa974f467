// What the status page's routes answer, as JSON Schema for the OpenAPI description (registered by
// page-routes.ts); test/unit/openapi.test.ts checks the answers against them, as for every route.

const str = { type: 'string' } as const;
const int = { type: 'integer' } as const;
const num = { type: 'number' } as const;

function object(properties: Record<string, object>, optional: readonly string[] = [], extra: Record<string, unknown> = {}) {
  return { type: 'object', additionalProperties: false, required: Object.keys(properties).filter((k) => !optional.includes(k)), properties, ...extra };
}

const statusType = { type: 'string', enum: ['Unassigned', 'Assigned', 'Recovery', 'Active', 'Error', 'Stopped', 'Down'] } as const;

export const NodeIngestion = {
  $id: 'NodeIngestion',
  description: 'What this node ingests now, per copy',
  ...object(
    {
      node: str,
      incarnation: { type: 'string', description: 'Absent while the node does not run' },
      at: { type: 'integer', description: "When it was read, on the node's clock (ms)" },
      tracked: { type: 'boolean', description: 'false: the node keeps no metrics and cannot say what it ingests' },
      copies: {
        type: 'array',
        items: object(
          {
            dataset: str,
            shard: int,
            position: { type: 'integer', description: 'The offset of the next record to ingest' },
            lag: { type: 'integer', description: 'End offset minus position; absent when the end offset did not come within a second' },
          },
          ['lag'],
        ),
      },
    },
    ['incarnation'],
  ),
};

const timelineEvent = object(
  {
    at: int,
    dataset: str,
    shard: int,
    from: { type: 'string', description: 'The status before, as a letter (A, R, N, E, S, D, U)' },
    to: { type: 'string', description: 'The status after, as a letter' },
    more: { type: 'integer', description: 'On a line standing for shard changes the timeline left out: how many' },
    what: str,
  },
  ['dataset', 'shard', 'from', 'to', 'more'],
);

export const ShardDetails = {
  $id: 'ShardDetails',
  description: 'One shard as the status page shows it',
  ...object(
    {
      dataset: str,
      shard: int,
      status: statusType,
      progressPct: int,
      error: { type: 'string', description: 'The ingestion error of a shard in Error' },
      reason: { type: 'string', description: 'Why the shard has fewer copies than its replication factor' },
      replicationFactor: int,
      copies: {
        type: 'array',
        items: object(
          {
            node: str,
            placement: { type: 'string', enum: ['Initializing', 'Available', 'Leaving'] },
            status: statusType,
            error: str,
            ingestion: {
              description: 'As last sampled; absent when its node was not read (no HTTP address, no answer) or no page watches',
              ...object({ position: int, ratePerSec: { ...num, description: 'Records per second between the last two readings' }, lag: int, at: int }, [
                'ratePerSec',
                'lag',
              ]),
            },
          },
          ['error', 'ingestion'],
        ),
      },
      history: { type: 'array', description: 'Its last changes, oldest first, since a page began watching on this node', items: timelineEvent },
      at: { type: 'integer', description: 'When the view shown was made (ms)' },
    },
    ['progressPct', 'error', 'reason'],
  ),
};

export const PAGE_SCHEMAS = [NodeIngestion, ShardDetails] as const;
