// A seed's fingerprint: a hash of everything a run reports (its history step by step, its
// violations, its stats, how long it ran). Two versions of the simulator that give a seed the same
// fingerprint ran it the same way, so an optimisation can be checked to change no behaviour by
// comparing the fingerprints of a range of seeds before and after.
import { createHash } from 'node:crypto';
import type { SimulationReport } from './simulation.js';

export type FingerprintedReport = Pick<SimulationReport, 'seed' | 'steps' | 'simulatedMs' | 'history' | 'violations' | 'stats'>;

/** A short hex hash of the report (the stats' keys in a fixed order, so it does not depend on how they were built). */
export function fingerprintOf(r: FingerprintedReport): string {
  const stats = Object.fromEntries(Object.entries(r.stats).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
  const canonical = JSON.stringify({ seed: r.seed, steps: r.steps, simulatedMs: r.simulatedMs, history: r.history, violations: r.violations, stats });
  return createHash('sha256').update(canonical).digest('hex').slice(0, 16);
}
