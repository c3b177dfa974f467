// A worker thread of the parallel simulation: runs the seeds the main thread hands it, one batch at
// a time, and sends back each report (the history only when a seed broke an invariant; its
// fingerprint, when asked, stands for the whole of it).
import { parentPort, workerData } from 'node:worker_threads';
import { fingerprintOf } from './fingerprint.js';
import { runSimulation } from './simulation.js';
import type { SeedBatch, SeedResult } from './parallel-seeds.js';

const { steps, detector, worldFaults, fingerprint } = workerData as { steps: number; detector: boolean; worldFaults: boolean; fingerprint: boolean };
const port = parentPort!;

port.on('message', async (batch: SeedBatch | null) => {
  if (batch === null) {
    port.close();
    return;
  }
  const results: SeedResult[] = [];
  for (const seed of batch.seeds) {
    const r = await runSimulation({ seed, steps, detector, worldFaults });
    results.push({
      seed,
      violations: r.violations,
      stats: r.stats,
      history: r.violations.length > 0 ? r.history : [],
      ...(fingerprint ? { fingerprint: fingerprintOf(r) } : {}),
    });
  }
  port.postMessage(results);
});
port.postMessage([]); // ready
