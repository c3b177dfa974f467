import { z } from 'zod';
import { DEFAULT_MAX_MAP_BYTES, DEFAULT_REASSIGNMENT_COOLDOWN_MS, DEFAULT_SETTLE_WINDOW_MS } from '../core/shard-manager/shard-manager.js';
import { failureDetectorSettings, type FailureDetectorOptions, type FailureDetectorSettings } from '../cluster/failure-detector/settings.js';

const ms = (what: string) =>
  z
    .number({ error: `${what} must be a number of milliseconds` })
    .int()
    .min(0);

const schema = z.strictObject({
  /** Topic name prefix: one cluster per prefix. */
  topicPrefix: z
    .string()
    .regex(/^[A-Za-z0-9._-]{1,100}$/)
    .default('shardherd'),
  /** How often the singleton publishes its digest of every map's stamp (bounds staleness after a lost message). */
  publishIntervalMs: ms('publishIntervalMs').min(1).default(5_000),
  /** How long a node waits for the singleton to acknowledge a report before it sends it again. */
  reportResendMs: ms('reportResendMs').min(1).default(2_000),
  /** How long a new singleton waits for the guardians' answers during recovery. */
  recoveryReplyTimeoutMs: ms('recoveryReplyTimeoutMs').min(1).default(2_000),
  /** Reassignment cooldown after an ingestion error (FiloDB: 2 hours). */
  reassignmentCooldownMs: ms('reassignmentCooldownMs').default(DEFAULT_REASSIGNMENT_COOLDOWN_MS),
  /**
   * How long a membership change that leaves every shard of a `balanced` dataset served waits for
   * more changes before one round decides them all (0: a round at every change).
   */
  settleWindowMs: ms('settleWindowMs').default(DEFAULT_SETTLE_WINDOW_MS),
  /**
   * How often a shard's ingestion polls its source when the last read was empty, doubled with each
   * empty read in a row up to 10 times (an idle shard polls less); a source that says when records
   * arrive, like Kafka's, wakes it at once instead.
   */
  pollIntervalMs: ms('pollIntervalMs').min(1).default(100),
  /**
   * Least time between two checkpoints of a shard (0: after every batch). A crash replays at most
   * this much more; a shard that stops writes its last checkpoint first.
   */
  checkpointIntervalMs: ms('checkpointIntervalMs').default(1_000),
  /**
   * How long a sink call may take before the shard fails with `SINK_TIMEOUT` and is moved (0: no
   * limit). The call cannot be cancelled: if it lands later, its token is older than the next
   * owner's and a fencing sink refuses it.
   */
  sinkTimeoutMs: ms('sinkTimeoutMs').default(30_000),
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
  /** Recovery progress is reported when it has grown by this many percent (coalescing). */
  progressStepPct: z.number().int().min(1).max(100).default(10),
  /** First and largest delay between retries of a failed MetaStore write. */
  retryInitialMs: ms('retryInitialMs').min(1).default(100),
  retryMaxMs: ms('retryMaxMs').min(1).default(5_000),
  /**
   * The largest encoded map the singleton may have to send or store (bytes): a dataset whose map
   * could grow past it is refused at setup. At most the bus's `maxMessageBytes` (64 MiB by default).
   */
  maxMapBytes: z.number().int().min(1024).default(DEFAULT_MAX_MAP_BYTES),
  /** Checkpoint group that a node's ingestion writes (FiloDB's flush groups collapse to one). */
  checkpointGroup: z.string().min(1).default('0'),
  /** The failure detector (docs/ARCHITECTURE.md §11): checked by `failureDetectorSettings`. */
  failureDetector: z.unknown().optional(),
});

/** Runtime settings, every key optional with the documented default. */
export type RuntimeOptions = Omit<z.input<typeof schema>, 'failureDetector'> & { failureDetector?: FailureDetectorOptions | undefined };
/** Validated runtime settings with defaults filled in. */
export type RuntimeSettings = Readonly<Omit<z.output<typeof schema>, 'failureDetector'> & { failureDetector: FailureDetectorSettings }>;

/** Validates options, failing fast with a message that names the key. */
export function runtimeSettings(options: RuntimeOptions = {}): RuntimeSettings {
  const r = schema.safeParse(options);
  if (!r.success) {
    const i = r.error.issues[0];
    const key = i?.code === 'unrecognized_keys' ? i.keys[0] : i?.path.join('.');
    throw new RangeError(`invalid runtime setting ${key}: ${i?.message}`);
  }
  if (r.data.retryMaxMs < r.data.retryInitialMs) throw new RangeError('invalid runtime setting retryMaxMs: must be at least retryInitialMs');
  let failureDetector: FailureDetectorSettings;
  try {
    failureDetector = failureDetectorSettings(r.data.failureDetector);
  } catch (e) {
    throw new RangeError(`invalid runtime setting ${e instanceof Error ? e.message : String(e)}`, { cause: e });
  }
  return { ...r.data, failureDetector };
}
