// The failure detector's timing (docs/ARCHITECTURE.md §11.5, §11.6): its settings once checked, the
// clock-drift bound the design assumes, and every duration derived from them. Pure arithmetic:
// the judgement (`judge.ts`) and the runtime both read it; the options and their checks are the
// runtime's (src/cluster/failure-detector/settings.ts).

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
