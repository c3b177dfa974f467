// The failure detector's settings (docs/ARCHITECTURE.md §11.6): defaults, derived timings, and every
// setting that cannot work refused at start with a message naming the key.
import { describe, expect, it } from 'vitest';
import {
  DRIFT_FACTOR,
  FAILURE_DETECTOR_DEFAULTS,
  stallCreditMs,
  failureDetectorSettings,
  lateAfterMs,
  leaseWaitMs,
  MAX_CLOCK_DRIFT,
  probeTimeoutMs,
  singletonLeaseWaitMs,
  singletonRenewalMs,
  quorumSilenceMs,
} from '../../src/cluster/failure-detector/settings.js';
import { ConfigError } from '../../src/cluster/config-error.js';

const refusal = (options: unknown, prefix?: string): ConfigError => {
  try {
    failureDetectorSettings(options, prefix);
  } catch (e) {
    if (e instanceof ConfigError) return e;
    throw e;
  }
  throw new Error(`accepted ${JSON.stringify(options)}`);
};

describe('failureDetectorSettings', () => {
  it('defaults to session-only with the documented timings, which pass their own checks', () => {
    expect(failureDetectorSettings()).toEqual({
      mode: 'session-only',
      heartbeatIntervalMs: 100,
      suspicionTimeoutMs: 1800,
      indirectProbes: 3,
      leaseMs: 500,
      singletonLeaseMs: 5000,
      joinGraceMs: 5400,
    });
    expect(failureDetectorSettings({})).toEqual(FAILURE_DETECTOR_DEFAULTS);
    expect(failureDetectorSettings(null)).toEqual(FAILURE_DETECTOR_DEFAULTS);
    expect(failureDetectorSettings({ mode: 'heartbeat', leaseMs: null }).mode).toBe('heartbeat');
  });

  it('derives the waits from the heartbeat and the lease, the lease stretched by the drift bound', () => {
    const s = failureDetectorSettings({ mode: 'heartbeat' });
    expect(MAX_CLOCK_DRIFT).toBe(0.01);
    expect(DRIFT_FACTOR).toBeCloseTo(1.0202, 4);
    expect(leaseWaitMs(s)).toBe(511); // ceil(500 × 1.0202…)
    expect(lateAfterMs(s)).toBe(200);
    expect(probeTimeoutMs(s)).toBe(200);
    expect(quorumSilenceMs(s)).toBe(1300); // ⅔ × 1800 + 100
  });

  it.each([
    [{ heartbeatIntervalMs: 'fast' }, 'failureDetector.heartbeatIntervalMs', /must be a positive whole number of milliseconds, got fast/],
    [{ heartbeatIntervalMs: -5 }, 'failureDetector.heartbeatIntervalMs', /got -5/],
    [{ heartbeatIntervalMs: 0 }, 'failureDetector.heartbeatIntervalMs', /positive/],
    [{ suspicionTimeoutMs: 1800.5 }, 'failureDetector.suspicionTimeoutMs', /whole number/],
    [{ leaseMs: Number.NaN }, 'failureDetector.leaseMs', /got NaN/],
    [{ indirectProbes: -1 }, 'failureDetector.indirectProbes', /whole number >= 0, got -1/],
    [{ indirectProbes: 65 }, 'failureDetector.indirectProbes', /at most 64/],
    [{ mode: 'gossip' }, 'failureDetector.mode', /must be "session-only" or "heartbeat", got "gossip"/],
    [{ heartbeatMs: 100 }, 'failureDetector.heartbeatMs', /is not a known key/],
    [{ singletonLeaseMs: '1s' }, 'failureDetector.singletonLeaseMs', /positive whole number of milliseconds, got 1s/],
  ])('refuses %j naming %s', (options, key, reason) => {
    const e = refusal(options);
    expect(e.key).toBe(key);
    expect(e.message.startsWith(`${key} `)).toBe(true);
    expect(e.message).toMatch(reason);
  });

  it('refuses a suspicion timeout shorter than three heartbeats, and takes exactly three', () => {
    const e = refusal({ heartbeatIntervalMs: 200, suspicionTimeoutMs: 599, leaseMs: 400 });
    expect(e.key).toBe('failureDetector.suspicionTimeoutMs');
    expect(e.message).toMatch(/\(599\) must be at least three heartbeats \(3 × heartbeatIntervalMs = 600\)/);
    expect(failureDetectorSettings({ heartbeatIntervalMs: 200, suspicionTimeoutMs: 600, leaseMs: 400 }).suspicionTimeoutMs).toBe(600);
  });

  it('refuses a lease shorter than two heartbeats: one lost renewal would stop the node', () => {
    const e = refusal({ heartbeatIntervalMs: 100, leaseMs: 150 });
    expect(e.key).toBe('failureDetector.leaseMs');
    expect(e.message).toMatch(/at least two heartbeats/);
  });

  it('refuses a lease longer than the suspicion timeout, the drift margin included', () => {
    expect(refusal({ suspicionTimeoutMs: 1000, leaseMs: 1001 }).key).toBe('failureDetector.leaseMs');
    // 1000 fits without the margin, not with it: 1000 × 1.0202 > 1000.
    const e = refusal({ suspicionTimeoutMs: 1000, leaseMs: 1000 });
    expect(e.message).toMatch(/must not be longer than the suspicion timeout with the clock drift margin: at most suspicionTimeoutMs \/ 1\.0202 = 980/);
    expect(failureDetectorSettings({ suspicionTimeoutMs: 1000, leaseMs: 980 }).leaseMs).toBe(980);
  });

  it('refuses a singleton lease shorter than four heartbeats or than a node lease: its grants could not last', () => {
    expect(refusal({ heartbeatIntervalMs: 100, singletonLeaseMs: 399 }).message).toMatch(
      /^failureDetector\.singletonLeaseMs \(399\) must be at least four heartbeats/,
    );
    const e = refusal({ leaseMs: 600, singletonLeaseMs: 599 });
    expect(e.key).toBe('failureDetector.singletonLeaseMs');
    expect(e.message).toMatch(/must be at least leaseMs \(600\)/);
    const s = failureDetectorSettings({ leaseMs: 600, singletonLeaseMs: 600 });
    expect(singletonRenewalMs(s)).toBe(150);
    expect(singletonLeaseWaitMs(s)).toBe(613); // ceil(600 × 1.0202…)
    expect(singletonLeaseWaitMs(FAILURE_DETECTOR_DEFAULTS)).toBe(5102); // ceil(5000 × 1.0202…)
  });

  it('derives the join grace from the suspicion timeout set, takes 0 (no grace), and refuses one shorter than the timeout', () => {
    expect(failureDetectorSettings({ suspicionTimeoutMs: 3000 }).joinGraceMs).toBe(9000);
    expect(failureDetectorSettings({ joinGraceMs: 0 }).joinGraceMs).toBe(0);
    expect(failureDetectorSettings({ joinGraceMs: 1800 }).joinGraceMs).toBe(1800);
    const e = refusal({ joinGraceMs: 1799 });
    expect(e.key).toBe('failureDetector.joinGraceMs');
    expect(e.message).toMatch(/must be 0 \(no grace\) or at least the suspicion timeout \(1800\)/);
    expect(refusal({ joinGraceMs: -1 }).message).toMatch(/whole number of milliseconds >= 0, got -1/);
  });

  it('credits a reported stall up to one suspicion timeout, and nothing for none or nonsense', () => {
    const s = failureDetectorSettings({});
    expect(stallCreditMs(undefined, s)).toBe(0);
    expect(stallCreditMs(0, s)).toBe(0);
    expect(stallCreditMs(-5, s)).toBe(0);
    expect(stallCreditMs(Number.NaN, s)).toBe(0);
    expect(stallCreditMs(700, s)).toBe(700);
    expect(stallCreditMs(3_600_000, s)).toBe(1800);
  });

  it('names the key under the prefix it is given', () => {
    expect(refusal({ leaseMs: 'x' }, 'runtime.failureDetector').key).toBe('runtime.failureDetector.leaseMs');
    expect(refusal('heartbeat').key).toBe('failureDetector');
  });
});
