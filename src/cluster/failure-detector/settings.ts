// The failure detector's settings (docs/ARCHITECTURE.md §11.6): each one's default and what it
// bounds, and the checks that refuse, naming the key, settings that cannot work. The values derived
// from them are the core's (src/core/failure-detection/timing.ts), as the judgement reads them.
import { z } from 'zod';
import { wholeNumber } from '../kafka-options.js';
import {
  DRIFT_FACTOR,
  FAILURE_DETECTOR_MODES,
  type FailureDetectorMode,
  type FailureDetectorSettings,
  leaseWaitMs,
} from '../../core/failure-detection/timing.js';

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

/** The options as a user writes them (every key optional). */
export interface FailureDetectorOptions {
  readonly mode?: FailureDetectorMode | undefined;
  /** How often a node renews its lease. Default 100 ms. */
  readonly heartbeatIntervalMs?: number | undefined;
  /** The silence after which a node is evicted with its quorum of votes (¾ of it when every helper confirms). Default 1800 ms. */
  readonly suspicionTimeoutMs?: number | undefined;
  /** The least number of helpers asked to probe a suspected node. Default 3. */
  readonly indirectProbes?: number | undefined;
  /** How long a node goes on writing after its last renewal was sent. Default 500 ms. */
  readonly leaseMs?: number | undefined;
  /**
   * How long the singleton's own lease in the MetaStore runs after its last renewal was sent.
   * Default 5000 ms: well above a Cassandra lightweight transaction's own timeouts (2 s to write,
   * 1 s of contention), so a slow store does not take the role away; a crashed singleton is
   * replaced after this long too: a refused connection is no proof that its process is gone.
   */
  readonly singletonLeaseMs?: number | undefined;
  /**
   * How long after a member is first listed the singleton does not evict it on silence: a node that
   * is still starting (loading, compiling, connecting) may not heartbeat yet, and the group's
   * session is the backstop meanwhile. Default three suspicion timeouts (5400 ms); 0 turns it off.
   */
  readonly joinGraceMs?: number | undefined;
}

/** The join grace when none is set: this many suspicion timeouts. */
export const JOIN_GRACE_TIMEOUTS = 3;

export const FAILURE_DETECTOR_DEFAULTS: FailureDetectorSettings = Object.freeze({
  mode: 'session-only',
  heartbeatIntervalMs: 100,
  suspicionTimeoutMs: 1800,
  indirectProbes: 3,
  leaseMs: 500,
  singletonLeaseMs: 5000,
  joinGraceMs: JOIN_GRACE_TIMEOUTS * 1800,
});

/** Absent (undefined or null) means the default. */
const ms = wholeNumber(1, 'must be a positive whole number of milliseconds').nullish();

const schema = z.strictObject({
  mode: z.enum(FAILURE_DETECTOR_MODES, { error: (issue) => `must be "session-only" or "heartbeat", got ${JSON.stringify(issue.input)}` }).nullish(),
  heartbeatIntervalMs: ms,
  suspicionTimeoutMs: ms,
  indirectProbes: wholeNumber(0, 'must be a whole number >= 0')
    .max(64, { error: (issue) => `must be at most 64, got ${String(issue.input)}` })
    .nullish(),
  leaseMs: ms,
  singletonLeaseMs: ms,
  joinGraceMs: wholeNumber(0, 'must be a whole number of milliseconds >= 0').nullish(),
});

/** A setting that cannot work: `key` names it with its prefix (`failureDetector.leaseMs`). */
export class FailureDetectorSettingsError extends RangeError {
  constructor(
    readonly key: string,
    reason: string,
  ) {
    super(`${key} ${reason}`);
    this.name = 'FailureDetectorSettingsError';
  }
}

/**
 * Applies the defaults and refuses, naming the key (under `prefix`), what cannot work: values that
 * are not positive whole numbers, an unknown key or mode, a suspicion timeout shorter than three
 * heartbeats, a lease shorter than two heartbeats (one lost renewal would stop the node), a lease
 * that with the drift margin outlasts the suspicion timeout.
 */
export function failureDetectorSettings(options: unknown = {}, prefix = 'failureDetector'): FailureDetectorSettings {
  const name = (key: string) => (key === '' ? prefix : `${prefix}.${key}`);
  const parsed = schema.safeParse(options ?? {});
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    if (issue.code === 'unrecognized_keys') throw new FailureDetectorSettingsError(name(issue.keys[0] ?? ''), 'is not a known key');
    throw new FailureDetectorSettingsError(name(issue.path.map(String).join('.')), issue.message);
  }
  const o = parsed.data;
  const d = FAILURE_DETECTOR_DEFAULTS;
  const s: FailureDetectorSettings = {
    mode: o.mode ?? d.mode,
    heartbeatIntervalMs: o.heartbeatIntervalMs ?? d.heartbeatIntervalMs,
    suspicionTimeoutMs: o.suspicionTimeoutMs ?? d.suspicionTimeoutMs,
    indirectProbes: o.indirectProbes ?? d.indirectProbes,
    leaseMs: o.leaseMs ?? d.leaseMs,
    singletonLeaseMs: o.singletonLeaseMs ?? d.singletonLeaseMs,
    // Derived from the suspicion timeout actually set, so a longer timeout gets a longer grace.
    joinGraceMs: o.joinGraceMs ?? JOIN_GRACE_TIMEOUTS * (o.suspicionTimeoutMs ?? d.suspicionTimeoutMs),
  };
  const h = s.heartbeatIntervalMs;
  if (s.suspicionTimeoutMs < 3 * h) {
    throw new FailureDetectorSettingsError(
      name('suspicionTimeoutMs'),
      `(${s.suspicionTimeoutMs}) must be at least three heartbeats (3 × heartbeatIntervalMs = ${3 * h})`,
    );
  }
  if (s.leaseMs < 2 * h) {
    throw new FailureDetectorSettingsError(
      name('leaseMs'),
      `(${s.leaseMs}) must be at least two heartbeats (2 × heartbeatIntervalMs = ${2 * h}): one lost renewal would stop the node`,
    );
  }
  if (leaseWaitMs(s) > s.suspicionTimeoutMs) {
    const most = Math.floor(s.suspicionTimeoutMs / DRIFT_FACTOR);
    throw new FailureDetectorSettingsError(
      name('leaseMs'),
      `(${s.leaseMs}) must not be longer than the suspicion timeout with the clock drift margin: at most suspicionTimeoutMs / ${DRIFT_FACTOR.toFixed(4)} = ${most}`,
    );
  }
  if (s.singletonLeaseMs < 4 * h) {
    throw new FailureDetectorSettingsError(
      name('singletonLeaseMs'),
      `(${s.singletonLeaseMs}) must be at least four heartbeats (4 × heartbeatIntervalMs = ${4 * h}): it is renewed every quarter of it, and its successor looks every heartbeat`,
    );
  }
  if (s.singletonLeaseMs < s.leaseMs) {
    throw new FailureDetectorSettingsError(
      name('singletonLeaseMs'),
      `(${s.singletonLeaseMs}) must be at least leaseMs (${s.leaseMs}): the singleton grants no node lease past its own, so a shorter one would cut every grant short`,
    );
  }
  if (s.joinGraceMs > 0 && s.joinGraceMs < s.suspicionTimeoutMs) {
    throw new FailureDetectorSettingsError(
      name('joinGraceMs'),
      `(${s.joinGraceMs}) must be 0 (no grace) or at least the suspicion timeout (${s.suspicionTimeoutMs}): a shorter grace ends before any eviction on silence could happen anyway`,
    );
  }
  return Object.freeze(s);
}
