// Seeds run on worker threads give exactly the reports the same seeds give in this thread: the
// simulation is deterministic wherever it runs, so `npm run sim` can spread any range over cores.
import { describe, expect, it } from 'vitest';
import { runSeedsInParallel, type SeedResult } from '../../src/sim/parallel-seeds.js';
import { runSimulation } from '../../src/sim/simulation.js';

describe('parallel simulation seeds', () => {
  it('match the same seeds run one by one, each seed once, ordered by seed', async () => {
    const seen: number[] = [];
    const parallel = await runSeedsInParallel({ from: 11, count: 6, workers: 2, batchSize: 2, onResult: (r) => seen.push(r.seed) });
    expect(parallel.map((r) => r.seed)).toEqual([11, 12, 13, 14, 15, 16]);
    expect(seen.sort((a, b) => a - b)).toEqual([11, 12, 13, 14, 15, 16]);
    for (const r of parallel) {
      const here = await runSimulation({ seed: r.seed });
      expect(r.stats, `seed ${r.seed}`).toEqual(here.stats);
      expect(r.violations).toEqual(here.violations);
    }
  }, 120_000);

  it('keeps only the seeds with violations when asked (a long run), yet reports every seed as it finishes', async () => {
    const seen: SeedResult[] = [];
    const kept = await runSeedsInParallel({ from: 11, count: 2, workers: 1, keep: 'violations', onResult: (r) => seen.push(r) });
    expect(seen.map((r) => r.seed).sort((a, b) => a - b)).toEqual([11, 12]);
    expect(kept).toEqual(seen.filter((r) => r.violations.length > 0).sort((a, b) => a.seed - b.seed));
  }, 120_000);
});
