// The failure detector's settings (docs/ARCHITECTURE.md §11.6): each one's default and what it
// bounds, and the checks that refuse, naming the key, settings that cannot work. The values derived
// from them are the core's (src/core/failure-detection/timing.ts), as the judgement reads them.
import { z } from 'zod';
import { configErrorOf } from '../config-error.js';
import { wholeNumber, withDefault } from '../kafka-options.js';
import { DRIFT_FACTOR, FAILURE_DETECTOR_MODES, type FailureDetectorSettings, leaseWaitMs } from '../../core/failure-detection/timing.js';

// The timing is the core's (pure); re-exported here, where the runtime reads its settings.
export {
  DRIFT_FACTOR,
  FAILURE_DETECTOR_MODES,
  MAX_CLOCK_DRIFT,
  type FailureDetectorMode,
  type FailureDetectorSettings,
  singletonRenewalMs,
  singletonLeaseWaitMs,
  readGraceMs,
  leaseWaitMs,
  lateAfterMs,
  quorumSilenceMs,
  probeTimeoutMs,
  probePeriodMs,
  stallCreditMs,
  stallThresholdMs,
} from '../../core/failure-detection/timing.js';

/** The join grace when none is set: this many suspicion timeouts. */
export const JOIN_GRACE_TIMEOUTS = 3;

const ms = (fallback: number) => withDefault(wholeNumber(1, 'must be a positive whole number of milliseconds'), fallback);

/**
 * Each key's check and default, absent meaning the default. Exported so that the node config's
 * `failureDetector` section is these keys and its endpoint's, checked by the same rules.
 */
export const failureDetectorFields = {
  mode: withDefault(
    z.enum(FAILURE_DETECTOR_MODES, { error: (issue) => `must be "session-only" or "heartbeat", got ${JSON.stringify(issue.input)}` }),
    'session-only',
  ),
  /** How often a node renews its lease. Default 100 ms. */
  heartbeatIntervalMs: ms(100),
  /** The silence after which a node is evicted with its quorum of votes (¾ of it when every helper confirms). Default 1800 ms. */
  suspicionTimeoutMs: ms(1800),
  /** The least number of helpers asked to probe a suspected node. Default 3. */
  indirectProbes: withDefault(wholeNumber(0, 'must be a whole number >= 0').max(64, { error: (issue) => `must be at most 64, got ${String(issue.input)}` }), 3),
  /** How long a node goes on writing after its last renewal was sent. Default 500 ms. */
  leaseMs: ms(500),
  /**
   * How long the singleton's own lease in the MetaStore runs after its last renewal was sent.
   * Default 5000 ms: well above a Cassandra lightweight transaction's own timeouts (2 s to write,
   * 1 s of contention), so a slow store does not take the role away; a crashed singleton is
   * replaced after this long too: a refused connection is no proof that its process is gone.
   */
  singletonLeaseMs: ms(5000),
  /**
   * How long after a member is first listed the singleton does not evict it on silence: a node that
   * is still starting (loading, compiling, connecting) may not heartbeat yet, and the group's
   * session is the backstop meanwhile. Default three suspicion timeouts (5400 ms); 0 turns it off.
   * Its default depends on another key, so `completeTimings` fills it in.
   */
  joinGraceMs: wholeNumber(0, 'must be a whole number of milliseconds >= 0').nullish(),
};

type Fields = z.output<z.ZodObject<typeof failureDetectorFields>>;

/** The defaults that depend on other keys: the join grace follows the suspicion timeout actually set. */
export function completeTimings({ joinGraceMs, ...o }: Fields): FailureDetectorSettings {
  return { ...o, joinGraceMs: joinGraceMs ?? JOIN_GRACE_TIMEOUTS * o.suspicionTimeoutMs };
}

/** The first timing that cannot work with the others, as [key, reason]; undefined when they all can. */
function conflict(s: FailureDetectorSettings): [keyof FailureDetectorSettings, string] | undefined {
  const h = s.heartbeatIntervalMs;
  if (s.suspicionTimeoutMs < 3 * h)
    return ['suspicionTimeoutMs', `(${s.suspicionTimeoutMs}) must be at least three heartbeats (3 × heartbeatIntervalMs = ${3 * h})`];
  if (s.leaseMs < 2 * h)
    return ['leaseMs', `(${s.leaseMs}) must be at least two heartbeats (2 × heartbeatIntervalMs = ${2 * h}): one lost renewal would stop the node`];
  if (leaseWaitMs(s) > s.suspicionTimeoutMs) {
    const most = Math.floor(s.suspicionTimeoutMs / DRIFT_FACTOR);
    return [
      'leaseMs',
      `(${s.leaseMs}) must not be longer than the suspicion timeout with the clock drift margin: at most suspicionTimeoutMs / ${DRIFT_FACTOR.toFixed(4)} = ${most}`,
    ];
  }
  if (s.singletonLeaseMs < 4 * h)
    return [
      'singletonLeaseMs',
      `(${s.singletonLeaseMs}) must be at least four heartbeats (4 × heartbeatIntervalMs = ${4 * h}): it is renewed every quarter of it, and its successor looks every heartbeat`,
    ];
  if (s.singletonLeaseMs < s.leaseMs)
    return [
      'singletonLeaseMs',
      `(${s.singletonLeaseMs}) must be at least leaseMs (${s.leaseMs}): the singleton grants no node lease past its own, so a shorter one would cut every grant short`,
    ];
  if (s.joinGraceMs > 0 && s.joinGraceMs < s.suspicionTimeoutMs)
    return [
      'joinGraceMs',
      `(${s.joinGraceMs}) must be 0 (no grace) or at least the suspicion timeout (${s.suspicionTimeoutMs}): a shorter grace ends before any eviction on silence could happen anyway`,
    ];
  return undefined;
}

/**
 * The checks between timings, as a zod refinement: a suspicion timeout shorter than three
 * heartbeats, a lease shorter than two heartbeats (one lost renewal would stop the node), a lease
 * that with the drift margin outlasts the suspicion timeout, a singleton lease that its grants
 * would outlast, a join grace that ends before any eviction could happen.
 */
export function checkTimings(s: FailureDetectorSettings, ctx: z.RefinementCtx): void {
  const found = conflict(s);
  if (found !== undefined) ctx.addIssue({ code: 'custom', path: [found[0]], message: found[1] });
}

/** The failure detector's settings: absent (undefined or null) is every default. */
export const failureDetectorSchema = z.preprocess((v) => v ?? {}, z.strictObject(failureDetectorFields).transform(completeTimings).superRefine(checkTimings));

/** The options as a user writes them (every key optional). */
export type FailureDetectorOptions = z.input<z.ZodObject<typeof failureDetectorFields>>;

export const FAILURE_DETECTOR_DEFAULTS: FailureDetectorSettings = Object.freeze(failureDetectorSchema.parse({}));

/**
 * Applies the defaults and refuses what cannot work with a `ConfigError` naming the key under
 * `prefix` (`failureDetector.leaseMs`).
 */
export function failureDetectorSettings(options: unknown = {}, prefix = 'failureDetector'): FailureDetectorSettings {
  const parsed = failureDetectorSchema.safeParse(options);
  if (!parsed.success) throw configErrorOf(parsed.error, { prefix });
  return Object.freeze(parsed.data);
}
