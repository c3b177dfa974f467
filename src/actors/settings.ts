import { z } from 'zod';
import { DEFAULT_MAX_MAP_BYTES, DEFAULT_REASSIGNMENT_COOLDOWN_MS, DEFAULT_SETTLE_WINDOW_MS } from '../core/shard-manager/shard-manager.js';
import { configErrorOf } from '../cluster/config-error.js';
import { failureDetectorSchema, type FailureDetectorOptions, type FailureDetectorSettings } from '../cluster/failure-detector/settings.js';

// The key is in the ConfigError that reports it: the message is only the requirement.
const ms = () => z.number({ error: 'must be a number of milliseconds' }).int().min(0);

/**
 * The runtime's own keys with their checks and defaults. Exported so that a node config's `runtime`
 * section is these keys (its topic prefix and failure detector come from other sections there).
 */
export const runtimeFields = {
  /** How often the singleton publishes its digest of every map's stamp (bounds staleness after a lost message). */
  publishIntervalMs: ms().min(1).default(5_000),
  /** How long a node waits for the singleton to acknowledge a report before it sends it again. */
  reportResendMs: ms().min(1).default(2_000),
  /** How long a new singleton waits for the guardians' answers during recovery. */
  recoveryReplyTimeoutMs: ms().min(1).default(2_000),
  /** Reassignment cooldown after an ingestion error (FiloDB: 2 hours). */
  reassignmentCooldownMs: ms().default(DEFAULT_REASSIGNMENT_COOLDOWN_MS),
  /**
   * How long a membership change that leaves every shard of a `balanced` dataset served waits for
   * more changes before one round decides them all (0: a round at every change).
   */
  settleWindowMs: ms().default(DEFAULT_SETTLE_WINDOW_MS),
  /**
   * How often a shard's ingestion polls its source when the last read was empty, doubled with each
   * empty read in a row up to 10 times (an idle shard polls less); a source that says when records
   * arrive, like Kafka's, wakes it at once instead.
   */
  pollIntervalMs: ms().min(1).default(100),
  /**
   * Least time between two checkpoints of a shard (0: after every batch). A crash replays at most
   * this much more; a shard that stops writes its last checkpoint first.
   */
  checkpointIntervalMs: ms().default(1_000),
  /**
   * How long a sink call may take before the shard fails with `SINK_TIMEOUT` and is moved (0: no
   * limit). The call cannot be cancelled: if it lands later, its token is older than the next
   * owner's and a fencing sink refuses it.
   */
  sinkTimeoutMs: ms().default(30_000),
  /**
   * Most records a shard may have accepted and not yet checkpointed: checkpoints are written in the
   * background, and a shard reads on while they are; past this many it waits for them. A crash
   * replays at most this many records more; a store slower than ingestion slows ingestion only past
   * it. 0: every batch waits for its checkpoint (the behaviour before checkpoints were decoupled).
   */
  maxUncheckpointedRecords: z
    .number({ error: 'maxUncheckpointedRecords must be a number of records' })
    .int()
    .min(0)
    .max(Number.MAX_SAFE_INTEGER)
    .default(100_000),
  /** Most records read per poll (one sink call). */
  batchSize: z.number().int().min(1).max(100_000).default(2_000),
  /**
   * How often a node reports its copies' measured load (records, bytes and sink time per second) to
   * the singleton, for datasets placed by load: one record per dataset per window, never per copy.
   */
  loadReportIntervalMs: ms().min(1000).default(10_000),
  /** Recovery progress is reported when it has grown by this many percent (coalescing). */
  progressStepPct: z.number().int().min(1).max(100).default(10),
  /** First and largest delay between retries of a failed MetaStore write. */
  retryInitialMs: ms().min(1).default(100),
  retryMaxMs: ms().min(1).default(5_000),
  /**
   * The largest encoded map the singleton may have to send or store (bytes): a dataset whose map
   * could grow past it is refused at setup. At most the bus's `maxMessageBytes` (64 MiB by default).
   */
  maxMapBytes: z.number().int().min(1024).default(DEFAULT_MAX_MAP_BYTES),
  /** Checkpoint group that a node's ingestion writes (FiloDB's flush groups collapse to one). */
  checkpointGroup: z.string().min(1).default('0'),
};

/** The check between runtime keys, as a zod refinement. */
export function checkRetries(s: { readonly retryInitialMs: number; readonly retryMaxMs: number }, ctx: z.RefinementCtx): void {
  if (s.retryMaxMs < s.retryInitialMs) ctx.addIssue({ code: 'custom', path: ['retryMaxMs'], message: 'must be at least retryInitialMs' });
}

const schema = z
  .strictObject({
    /** Topic name prefix: one cluster per prefix. */
    topicPrefix: z
      .string()
      .regex(/^[A-Za-z0-9._-]{1,100}$/)
      .default('shardherd'),
    ...runtimeFields,
    /** The failure detector (docs/ARCHITECTURE.md §11), with its own defaults and checks. */
    failureDetector: failureDetectorSchema,
  })
  .superRefine(checkRetries);

/** Runtime settings, every key optional with the documented default. */
export type RuntimeOptions = Omit<z.input<typeof schema>, 'failureDetector'> & { failureDetector?: FailureDetectorOptions | undefined };
/** Validated runtime settings with defaults filled in. */
export type RuntimeSettings = Readonly<Omit<z.output<typeof schema>, 'failureDetector'> & { failureDetector: FailureDetectorSettings }>;

/** Validates options, failing fast with a `ConfigError` that names the key (`failureDetector.leaseMs`). */
export function runtimeSettings(options: RuntimeOptions = {}): RuntimeSettings {
  const r = schema.safeParse(options);
  if (!r.success) throw configErrorOf(r.error, { label: 'invalid runtime setting ' });
  return r.data;
}
