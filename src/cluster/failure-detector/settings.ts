// The failure detector's settings (docs/ARCHITECTURE.md §11.6): each one's default and what it
// bounds, the values derived from them, and the checks that refuse, naming the key, settings that
// cannot work.
import { z } from 'zod';
import { wholeNumber } from '../kafka-options.js';

/** `session-only`: today's detection by the membership's session alone; `heartbeat`: §11. */
export const FAILURE_DETECTOR_MODES = ['session-only', 'heartbeat'] as const;
export type FailureDetectorMode = (typeof FAILURE_DETECTOR_MODES)[number];

/**
 * The most a clock's rate may differ from real time (1 %: quartz is 1e-4, NTP slews at most 5e-4).
 * Every duration is measured on one machine's monotonic clock; this bound is all the design
 * assumes of two machines' clocks.
 */
export const MAX_CLOCK_DRIFT = 0.01;
/**
 * What a wait must be stretched by to surely outlast a duration another machine measures from an
 * earlier instant: (1 + ρ) / (1 − ρ) (§11.7).
 */
export const DRIFT_FACTOR = (1 + MAX_CLOCK_DRIFT) / (1 - MAX_CLOCK_DRIFT);

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

/** The settings with their defaults, checked. */
export interface FailureDetectorSettings {
  readonly mode: FailureDetectorMode;
  readonly heartbeatIntervalMs: number;
  readonly suspicionTimeoutMs: number;
  readonly indirectProbes: number;
  readonly leaseMs: number;
  readonly singletonLeaseMs: number;
  readonly joinGraceMs: number;
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
  indirectProbes: wholeNumber(0, 'must be a whole number >= 0').max(64, { error: (issue) => `must be at most 64, got ${String(issue.input)}` }).nullish(),
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
    throw new FailureDetectorSettingsError(name('suspicionTimeoutMs'), `(${s.suspicionTimeoutMs}) must be at least three heartbeats (3 × heartbeatIntervalMs = ${3 * h})`);
  }
  if (s.leaseMs < 2 * h) {
    throw new FailureDetectorSettingsError(name('leaseMs'), `(${s.leaseMs}) must be at least two heartbeats (2 × heartbeatIntervalMs = ${2 * h}): one lost renewal would stop the node`);
  }
  if (leaseWaitMs(s) > s.suspicionTimeoutMs) {
    const most = Math.floor(s.suspicionTimeoutMs / DRIFT_FACTOR);
    throw new FailureDetectorSettingsError(name('leaseMs'), `(${s.leaseMs}) must not be longer than the suspicion timeout with the clock drift margin: at most suspicionTimeoutMs / ${DRIFT_FACTOR.toFixed(4)} = ${most}`);
  }
  if (s.singletonLeaseMs < 4 * h) {
    throw new FailureDetectorSettingsError(name('singletonLeaseMs'), `(${s.singletonLeaseMs}) must be at least four heartbeats (4 × heartbeatIntervalMs = ${4 * h}): it is renewed every quarter of it, and its successor looks every heartbeat`);
  }
  if (s.singletonLeaseMs < s.leaseMs) {
    throw new FailureDetectorSettingsError(name('singletonLeaseMs'), `(${s.singletonLeaseMs}) must be at least leaseMs (${s.leaseMs}): the singleton grants no node lease past its own, so a shorter one would cut every grant short`);
  }
  if (s.joinGraceMs > 0 && s.joinGraceMs < s.suspicionTimeoutMs) {
    throw new FailureDetectorSettingsError(name('joinGraceMs'), `(${s.joinGraceMs}) must be 0 (no grace) or at least the suspicion timeout (${s.suspicionTimeoutMs}): a shorter grace ends before any eviction on silence could happen anyway`);
  }
  return Object.freeze(s);
}

// ------------------------------------------------------------------ derived (§11.5)

/** How often the singleton renews its own lease: four times per lease, so one slow renewal costs nothing. */
export function singletonRenewalMs(s: Pick<FailureDetectorSettings, 'singletonLeaseMs'>): number {
  return Math.max(1, Math.floor(s.singletonLeaseMs / 4));
}

/** How long a successor must see one renewal unchanged before the holder's lease has surely run out. */
export function singletonLeaseWaitMs(s: Pick<FailureDetectorSettings, 'singletonLeaseMs'>): number {
  return Math.ceil(s.singletonLeaseMs * DRIFT_FACTOR);
}

/**
 * How long a node whose lease lapsed still answers routed requests (reads): a failover of the
 * singleton leaves every node without grants for up to the singleton's lease, a renewal and a
 * recovery (measured on real processes: up to 7 s with the 5 s lease on a quiet machine), while
 * nobody can evict anyone or move a copy, and the copies still hold what they ingested; twice the
 * lease wait leaves room for a slow recovery. A node cut off from a live singleton answers for this
 * long too, with what it ingested until its lease lapsed (its writes pause at once), unless it
 * hears its copies moved or it was evicted first; clients whose map is newer ask the copies it names.
 */
export function readGraceMs(s: Pick<FailureDetectorSettings, 'singletonLeaseMs' | 'suspicionTimeoutMs'>): number {
  return 2 * singletonLeaseWaitMs(s) + s.suspicionTimeoutMs;
}

/** How long the singleton waits after its last grant before a node's lease has surely run out. */
export function leaseWaitMs(s: Pick<FailureDetectorSettings, 'leaseMs'>): number {
  return Math.ceil(s.leaseMs * DRIFT_FACTOR);
}

/** A node not heard for this long is late: it is probed. */
export function lateAfterMs(s: Pick<FailureDetectorSettings, 'heartbeatIntervalMs'>): number {
  return 2 * s.heartbeatIntervalMs;
}

/**
 * How long a majority of the observers must have failed to reach a node, in every round, before it
 * may be evicted on silence: ⅔ of the suspicion timeout and a heartbeat. A probe finds a node
 * unreachable within its timeout of the outage's start, so this many ms of failures mean at least
 * ⅔ T − 2 h + h of outage as the majority saw it (1.1 s with the defaults: above the 1 s pauses a
 * node must survive), whatever the singleton's own link says.
 */
export function quorumSilenceMs(s: Pick<FailureDetectorSettings, 'heartbeatIntervalMs' | 'suspicionTimeoutMs'>): number {
  return Math.ceil((2 * s.suspicionTimeoutMs) / 3) + s.heartbeatIntervalMs;
}

/** How long a probe waits for its ack. */
export function probeTimeoutMs(s: Pick<FailureDetectorSettings, 'heartbeatIntervalMs'>): number {
  return 2 * s.heartbeatIntervalMs;
}

/** While a node stays late, its probes are repeated this often. */
export function probePeriodMs(s: Pick<FailureDetectorSettings, 'heartbeatIntervalMs'>): number {
  return 3 * s.heartbeatIntervalMs;
}

/**
 * The most silence one self-reported stall excuses (§11.5): a node that says its event loop stalled
 * for `stalledMs` is not counted as silent for that long after the heartbeat that said it, but never
 * for more than one suspicion timeout per claim; each claim must come in a heartbeat that is heard,
 * so a node that stops being heard is evicted at most one timeout later than one that claims nothing.
 */
export function stallCreditMs(stalledMs: number | undefined, s: Pick<FailureDetectorSettings, 'suspicionTimeoutMs'>): number {
  if (stalledMs === undefined || !Number.isFinite(stalledMs) || stalledMs <= 0) return 0;
  return Math.min(stalledMs, s.suspicionTimeoutMs);
}

/** A timer that fires more than this late means the process did not run meanwhile (a stall). */
export function stallThresholdMs(s: Pick<FailureDetectorSettings, 'heartbeatIntervalMs'>): number {
  return s.heartbeatIntervalMs;
}
