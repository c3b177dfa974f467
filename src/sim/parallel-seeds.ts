// Runs a range of simulation seeds on worker threads (each seed is independent and deterministic),
// handing out small batches on demand so a slow seed does not hold a whole share back. Results
// stream back a batch at a time; a long run keeps only the seeds that broke an invariant, so its
// memory stays flat however many seeds it runs.
import { availableParallelism } from 'node:os';
import type { Worker } from 'node:worker_threads';
import { startModuleWorker } from '../cluster/module-worker.js';
import type { SimulationReport } from './simulation.js';

export interface SeedBatch {
  readonly seeds: readonly number[];
}

export type SeedResult = Pick<SimulationReport, 'seed' | 'violations' | 'stats' | 'history'> & {
  /** With `fingerprint`: the hash of the seed's whole report (`fingerprint.ts`). */
  readonly fingerprint?: string;
};

export interface ParallelSeedsOptions {
  readonly from: number;
  readonly count: number;
  /** Fault steps per seed. */
  readonly steps?: number;
  /** Run the failure detector with its faults and invariants (`SimulationOptions.detector`). */
  readonly detector?: boolean;
  /** With `detector`, the real world's faults (`SimulationOptions.worldFaults`, default on). */
  readonly worldFaults?: boolean;
  /** Also send back each seed's fingerprint (`fingerprint.ts`). Default off. */
  readonly fingerprint?: boolean;
  /** Default: the machine's available parallelism. */
  readonly workers?: number;
  /** Seeds per batch (default 5). */
  readonly batchSize?: number;
  /** Seeds of the range not to run (those a resumed run's journal already holds). */
  readonly skip?: (seed: number) => boolean;
  /** Every finished seed, in completion order. */
  readonly onResult?: (result: SeedResult) => void;
  /**
   * Which results the returned list holds: every seed's (default), or only those of seeds with
   * violations (for runs of many thousand seeds: `onResult` still sees every one).
   */
  readonly keep?: 'all' | 'violations';
}

/**
 * A worker's young generation, MB (the default is a few): the simulation allocates short-lived
 * objects at a high rate, and with a larger nursery the scavenger ran about half as much of the
 * time (12 % of the CPU profile down to 7 %), for at most this much more memory per worker.
 */
const YOUNG_GENERATION_MB = 192;

/** A worker running seed-worker (see `startModuleWorker`). */
function startWorker(steps: number, detector: boolean, worldFaults: boolean, fingerprint: boolean): Worker {
  const workerData = { steps, detector, worldFaults, fingerprint };
  return startModuleWorker(import.meta.url, 'seed-worker', { workerData, resourceLimits: { maxYoungGenerationSizeMb: YOUNG_GENERATION_MB } });
}

/** Runs seeds `from .. from + count - 1`; resolves with the results kept (`keep`), ordered by seed. */
export async function runSeedsInParallel(o: ParallelSeedsOptions): Promise<SeedResult[]> {
  const next = { seed: o.from };
  const end = o.from + o.count;
  const batchSize = o.batchSize ?? 5;
  const results: SeedResult[] = [];
  const workers = Math.max(1, Math.min(o.workers ?? availableParallelism(), o.count));
  await Promise.all(
    Array.from(
      { length: workers },
      () =>
        new Promise<void>((resolve, reject) => {
          const worker = startWorker(o.steps ?? 25, o.detector ?? false, o.worldFaults ?? true, o.fingerprint ?? false);
          worker.on('message', (batch: SeedResult[]) => {
            for (const r of batch) {
              if (o.keep !== 'violations' || r.violations.length > 0) results.push(r);
              o.onResult?.(r);
            }
            const seeds: number[] = [];
            for (; next.seed < end && seeds.length < batchSize; next.seed++) if (!o.skip?.(next.seed)) seeds.push(next.seed);
            worker.postMessage(seeds.length > 0 ? ({ seeds } satisfies SeedBatch) : null);
          });
          worker.on('error', reject);
          worker.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`a simulation worker exited with code ${code}`))));
        }),
    ),
  );
  return results.sort((a, b) => a.seed - b.seed);
}
