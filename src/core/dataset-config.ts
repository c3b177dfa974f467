import { z } from 'zod';
import type { DatasetRef } from './ids.js';
import { parseDatasetRef } from './ids.js';
import { err, ok, type Result } from './result.js';
import { isValidShardCount, log2Shards, MAX_SHARDS } from './spread.js';

/** Where a dataset's records come from. With Kafka, partition p of `topic` is shard p. */
export type IngestionSourceConfig =
  | { readonly type: 'synthetic'; readonly recordsPerSecond: number }
  | { readonly type: 'kafka'; readonly topic: string; readonly startFrom: 'earliest' | 'latest' };

/** A validated dataset configuration. Build one with `validateDatasetConfig`. */
export interface DatasetConfig {
  readonly ref: DatasetRef;
  /** Power of two, 1..65536; fixed for the dataset's lifetime. */
  readonly numShards: number;
  /** Nodes the shards are sized for: no node takes more than `ceil(numShards / minNumNodes)`. */
  readonly minNumNodes: number;
  /** Default spread: a shard key covers `2^spread` shards. 0..log2(numShards); default 1 (0 for 1 shard). */
  readonly spread: number;
  /**
   * Copies of each shard, in distinct isolation groups (racks) whenever the members span enough of
   * them. 1 (the default) is FiloDB's single owner; above 1 needs the `balanced` strategy.
   */
  readonly replicationFactor: number;
  /** Who places the shards: FiloDB's strategy (the default, never moves a placed shard) or `balanced`. */
  readonly strategy: PlacementStrategyName;
  /**
   * How many planned moves (rebalance, drain, replace) of this dataset may be in flight at once; the
   * next ones start as these finish. Forced moves (a copy's node died) are never held back.
   */
  readonly maxConcurrentMoves: number;
  /**
   * Where a copy with no checkpoint of its own starts (a new replica, a planned move's new copy, a
   * copy re-created after its node died): `earliest` (the default) from the earliest offset the
   * source still holds, so the copy holds every record its source retains; `serving-copies` from
   * the furthest checkpoint of the shard's other copies, for sinks that only need the tail. Either
   * way the copy reports `IngestionStarted` only once it has reached the end offset seen at its
   * start. A shard no copy ever checkpointed starts as `source.startFrom` says.
   */
  readonly copyStartFrom: CopyStartFrom;
  /**
   * `balanced` only: how long a lost node's copies are kept for it (ms) when their shards still
   * have another serving copy. A node back under the same id within it takes them back with no move;
   * after it they are re-created elsewhere. 0: re-created at once. Default 60 000 for `balanced`
   * (a restart takes 10–30 s; Elasticsearch waits 1 minute too), always 0 for `filodb-default`.
   */
  readonly replacementDelayMs: number;
  /**
   * `balanced` only: place by measured load, not by copy counts (docs/PLACEMENT.md, "The
   * `load-aware` mode"). Absent: copy counts (the default).
   */
  readonly loadBalance?: LoadBalanceConfig;
  readonly source: IngestionSourceConfig;
}

/** What each node's copies report, per second over a window, that load-aware placement evens out. */
export type LoadMeasure = 'records' | 'bytes' | 'sink-time' | 'weight';
export const LOAD_MEASURES: readonly LoadMeasure[] = ['records', 'bytes', 'sink-time', 'weight'];

/** How a `balanced` dataset evens out measured load (see `DatasetConfig.loadBalance`). */
export interface LoadBalanceConfig {
  /**
   * `records` (the default) or `bytes` ingested per second, `sink-time` (ms its sink spends per
   * second), or `weight` (a node's own hook's figure per copy, such as CPU or series).
   */
  readonly measure: LoadMeasure;
  /** Every node's load within this fraction of its weighted share: the target (default 0.05, ±5 %). */
  readonly band: number;
  /**
   * Load alone moves copies only when a node is outside this wider band (default 0.10, ±10 %), so a
   * load wavering at the target's edge moves nothing: the moves then bring nodes within `band`.
   */
  readonly triggerBand: number;
  /** ...and has been for this long (ms, default 180 000: TiKV waits 3 minutes before a hot move). */
  readonly sustainMs: number;
  /** Copies moved for load alone per rolling hour, at most (default 64; joins, drains and lost copies are not counted). */
  readonly maxMovesPerHour: number;
  /**
   * Copies one node gains plus sheds in a load round, at most (default 4), so no node catches up
   * many new copies at once. (A load round moves at most the dataset's `maxConcurrentMoves` in all.)
   */
  readonly maxConcurrentMovesPerNode: number;
  /** A shard moved for load is not moved for load again for this long (ms, default 600 000). */
  readonly shardCooldownMs: number;
  /** A copy's report counts for this long (ms, default 60 000); a shard without a fresh report counts as the mean of the others. */
  readonly staleMs: number;
}

/** What `loadBalance` may leave out. */
export type LoadBalanceConfigInput = Partial<LoadBalanceConfig>;

export const DEFAULT_LOAD_BALANCE: LoadBalanceConfig = {
  measure: 'records',
  band: 0.05,
  triggerBand: 0.1,
  sustainMs: 180_000,
  maxMovesPerHour: 64,
  maxConcurrentMovesPerNode: 4,
  shardCooldownMs: 600_000,
  staleMs: 60_000,
};

/** Where a copy without a checkpoint of its own starts (see `DatasetConfig.copyStartFrom`). */
export type CopyStartFrom = 'earliest' | 'serving-copies';
export const COPY_START_FROM: readonly CopyStartFrom[] = ['earliest', 'serving-copies'];

/**
 * What `validateDatasetConfig` (and `EmbeddedCluster.setupDataset`) accept: a `DatasetConfig` whose
 * fields with defaults may be left out, and whose `ref` may be a plain string (checked there).
 */
export interface DatasetConfigInput {
  readonly ref: string;
  readonly numShards: number;
  readonly minNumNodes: number;
  /** Default 1 (0 for 1 shard). */
  readonly spread?: number;
  /** Default 1. */
  readonly replicationFactor?: number;
  /** Default `filodb-default`. */
  readonly strategy?: PlacementStrategyName;
  /** Default 16. */
  readonly maxConcurrentMoves?: number;
  /** Default `earliest`. */
  readonly copyStartFrom?: CopyStartFrom;
  /** Default 60 000 with `balanced`, 0 (and only 0) with `filodb-default`. */
  readonly replacementDelayMs?: number;
  /** Default: absent (copy counts). `{}` takes every default of `DEFAULT_LOAD_BALANCE`. */
  readonly loadBalance?: LoadBalanceConfigInput;
  readonly source: IngestionSourceConfigInput;
}

/** An ingestion source as written in a dataset config: `recordsPerSecond` defaults to 100, `startFrom` to `earliest`. */
export type IngestionSourceConfigInput =
  | { readonly type: 'synthetic'; readonly recordsPerSecond?: number }
  | { readonly type: 'kafka'; readonly topic: string; readonly startFrom?: 'earliest' | 'latest' };

/** The strategies a dataset can name. */
export type PlacementStrategyName = 'filodb-default' | 'balanced';
export const PLACEMENT_STRATEGIES: readonly PlacementStrategyName[] = ['filodb-default', 'balanced'];
/** The most copies of a shard a dataset may ask for. */
export const MAX_REPLICATION_FACTOR = 8;
export const DEFAULT_MAX_CONCURRENT_MOVES = 16;
/**
 * A lost node's copies are kept for it this long (ms): a process restart or a rolling deploy of one
 * node takes 10–30 s, Elasticsearch delays re-allocation after a node leaves by 1 minute
 * (`index.unassigned.node_left.delayed_timeout`) for the same reason, and with RF ≥ 2 the other
 * copies keep serving and ingesting meanwhile.
 */
export const DEFAULT_REPLACEMENT_DELAY_MS = 60_000;
/** A day: a longer delay is a node given up on by hand (drain it), not one waited for. */
export const MAX_REPLACEMENT_DELAY_MS = 24 * 60 * 60 * 1000;

/** Why a dataset config was refused, naming the first bad field (a dotted path such as `source.topic`). */
export interface InvalidDatasetConfig {
  readonly type: 'InvalidDatasetConfig';
  readonly field: string;
  readonly message: string;
}

const KAFKA_TOPIC = /^[A-Za-z0-9._-]{1,249}$/;

const sourceSchema = z.discriminatedUnion('type', [
  z.strictObject({
    type: z.literal('synthetic'),
    recordsPerSecond: z.number().positive().max(1_000_000).default(100),
  }),
  z.strictObject({
    type: z.literal('kafka'),
    topic: z.string().regex(KAFKA_TOPIC, 'must be a Kafka topic name: 1 to 249 of letters, digits, ".", "_", "-"'),
    // Earliest by default: a shard with no checkpoint must not silently skip the backlog (FiloDB's O13).
    startFrom: z.enum(['earliest', 'latest']).default('earliest'),
  }),
]);

const ms = (max: number, what: string) =>
  z
    .number({ error: 'must be a number of milliseconds' })
    .int('must be an integer (ms)')
    .min(0, 'must not be negative')
    .max(max, `must be at most ${max} (${what})`);
const HOUR = 60 * 60 * 1000;
const MAX_COPIES = MAX_SHARDS * MAX_REPLICATION_FACTOR;
/** A number of copies moved at once: at least one, else nothing would ever move. */
const copies = z
  .number({ error: 'must be a number of copies' })
  .int('must be an integer')
  .min(1, 'must be at least 1')
  .max(MAX_COPIES, `must be at most ${MAX_COPIES}`);

const loadBalanceSchema = z
  .strictObject({
    measure: z
      .enum(['records', 'bytes', 'sink-time', 'weight'], { error: 'must be "records", "bytes", "sink-time" or "weight"' })
      .default(DEFAULT_LOAD_BALANCE.measure),
    band: z.number({ error: 'must be a fraction such as 0.05 (±5 %)' }).gt(0, 'must be above 0').lt(1, 'must be below 1').default(DEFAULT_LOAD_BALANCE.band),
    triggerBand: z.number({ error: 'must be a fraction such as 0.1 (±10 %)' }).gt(0, 'must be above 0').lt(1, 'must be below 1').optional(),
    sustainMs: ms(24 * HOUR, 'a day').default(DEFAULT_LOAD_BALANCE.sustainMs),
    maxMovesPerHour: z.number().int('must be an integer').min(0, 'must not be negative').max(MAX_COPIES).default(DEFAULT_LOAD_BALANCE.maxMovesPerHour),
    maxConcurrentMovesPerNode: copies.default(DEFAULT_LOAD_BALANCE.maxConcurrentMovesPerNode),
    shardCooldownMs: ms(24 * HOUR, 'a day').default(DEFAULT_LOAD_BALANCE.shardCooldownMs),
    staleMs: ms(HOUR, 'an hour').min(1000, 'must be at least 1000 (a report window)').default(DEFAULT_LOAD_BALANCE.staleMs),
  })
  .transform((c) => ({ ...c, triggerBand: c.triggerBand ?? Math.max(c.band, DEFAULT_LOAD_BALANCE.triggerBand) }))
  .refine((c) => c.triggerBand >= c.band, {
    path: ['triggerBand'],
    message: 'must be at least band: moves start outside the trigger band and end within the band',
  });

const configSchema = z
  .strictObject({
    ref: z.string().refine((s) => parseDatasetRef(s).ok, 'must be a letter, then up to 63 letters, digits, "_" or "-"'),
    numShards: z.number().refine(isValidShardCount, `must be a power of two between 1 and ${MAX_SHARDS}`),
    minNumNodes: z.number().int('must be an integer').min(1, 'must be at least 1').max(MAX_SHARDS),
    spread: z.number().int('must be an integer').optional(),
    replicationFactor: z
      .number()
      .int('must be an integer')
      .min(1, 'must be at least 1')
      .max(MAX_REPLICATION_FACTOR, `must be at most ${MAX_REPLICATION_FACTOR}`)
      .default(1),
    strategy: z.enum(['filodb-default', 'balanced']).default('filodb-default'),
    maxConcurrentMoves: z.number().int('must be an integer').min(1, 'must be at least 1').max(MAX_SHARDS).default(DEFAULT_MAX_CONCURRENT_MOVES),
    // Earliest by default: a new copy that skipped records its source still holds would serve less than its peers.
    copyStartFrom: z
      .enum(['earliest', 'serving-copies'], {
        error: 'must be "earliest" (the earliest retained offset) or "serving-copies" (the furthest checkpoint of the other copies)',
      })
      .default('earliest'),
    replacementDelayMs: z
      .number({ error: 'must be a number of milliseconds' })
      .int('must be an integer (ms)')
      .min(0, 'must not be negative')
      .max(MAX_REPLACEMENT_DELAY_MS, `must be at most ${MAX_REPLACEMENT_DELAY_MS} (a day)`)
      .optional(),
    loadBalance: loadBalanceSchema.optional(),
    source: sourceSchema,
  })
  .superRefine((c, ctx) => {
    if (!isValidShardCount(c.numShards)) return;
    const maxSpread = log2Shards(c.numShards);
    if (c.spread !== undefined && (c.spread < 0 || c.spread > maxSpread)) {
      ctx.addIssue({ code: 'custom', path: ['spread'], message: `must be between 0 and log2(numShards) = ${maxSpread}` });
    }
    // FiloDB's strategy places one owner per shard and never moves one: replicas need `balanced`.
    if (c.replicationFactor > 1 && c.strategy !== 'balanced') {
      ctx.addIssue({
        code: 'custom',
        path: ['replicationFactor'],
        message: `above 1 needs "strategy": "balanced" (FiloDB's strategy places one owner per shard)`,
      });
    }
    // FiloDB's datasets re-place a lost node's shards at once, as FiloDB does: a delay would be ignored.
    if ((c.replacementDelayMs ?? 0) > 0 && c.strategy !== 'balanced') {
      ctx.addIssue({
        code: 'custom',
        path: ['replacementDelayMs'],
        message: `above 0 needs "strategy": "balanced" (FiloDB's strategy re-places a lost node's shards at once)`,
      });
    }
    if (c.loadBalance !== undefined && c.strategy !== 'balanced') {
      ctx.addIssue({ code: 'custom', path: ['loadBalance'], message: `needs "strategy": "balanced" (FiloDB's strategy never moves a placed shard)` });
    }
  });

/**
 * Checks an untrusted dataset config (from a file, a request, the bus) and fills in defaults.
 * Returns the typed config, or an error naming the first bad field.
 *
 * Gotchas: `numShards` 0 is refused (FiloDB accepts it); unknown keys are refused, so a typo
 * cannot silently fall back to a default.
 */
export function validateDatasetConfig(input: unknown): Result<DatasetConfig, InvalidDatasetConfig> {
  // reportInput: tell a missing field from a wrong-typed one.
  const parsed = configSchema.safeParse(input, { reportInput: true });
  if (!parsed.success) {
    // An unknown key first: `numShard` for `numShards` is the cause, "numShards is required" the symptom.
    const issues = parsed.error.issues;
    const issue = issues.find((i) => i.code === 'unrecognized_keys') ?? issues[0];
    const path = issue?.path.map(String).join('.') ?? '';
    const unknownKeys = issue?.code === 'unrecognized_keys' ? issue.keys : [];
    const field = unknownKeys.length > 0 ? [path, unknownKeys[0]].filter(Boolean).join('.') : path || '(root)';
    const message = issue?.code === 'invalid_type' && issue.input === undefined ? 'is required' : (issue?.message ?? 'is invalid');
    return err({ type: 'InvalidDatasetConfig', field, message: `${field} ${message}` });
  }
  const c = parsed.data;
  return ok({
    ref: c.ref as DatasetRef,
    numShards: c.numShards,
    minNumNodes: c.minNumNodes,
    spread: c.spread ?? Math.min(1, log2Shards(c.numShards)),
    replicationFactor: c.replicationFactor,
    strategy: c.strategy,
    maxConcurrentMoves: c.maxConcurrentMoves,
    copyStartFrom: c.copyStartFrom,
    replacementDelayMs: c.replacementDelayMs ?? (c.strategy === 'balanced' ? DEFAULT_REPLACEMENT_DELAY_MS : 0),
    ...(c.loadBalance === undefined ? {} : { loadBalance: c.loadBalance }),
    source: c.source,
  });
}

/** Field-by-field differences between two configs of the same dataset (empty when equal). */
export function datasetConfigDifferences(a: DatasetConfig, b: DatasetConfig): string[] {
  const fields = [
    'ref',
    'numShards',
    'minNumNodes',
    'spread',
    'replicationFactor',
    'strategy',
    'maxConcurrentMoves',
    'copyStartFrom',
    'replacementDelayMs',
    'loadBalance',
    'source',
  ] as const;
  return fields.filter((f) => JSON.stringify(canonical(a[f])) !== JSON.stringify(canonical(b[f])));
}

/** A config as JSON with every object's keys sorted: equal configs give equal text, whatever the order of their keys. */
export function canonicalConfigJson(config: DatasetConfig): string {
  return JSON.stringify(canonical(config));
}

function canonical(v: unknown): unknown {
  if (v === null || typeof v !== 'object') return v;
  return Object.fromEntries(
    Object.entries(v)
      .sort(([x], [y]) => (x < y ? -1 : 1))
      .map(([k, x]) => [k, canonical(x)]),
  );
}
