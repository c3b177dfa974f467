// The whole cluster — real nodes, actors and core over in-memory adapters — under a seeded fault
// schedule, with docs/ARCHITECTURE.md §9's invariants checked after every step. A failure names the seed:
// `npm run sim -- --seed <n> --verbose` replays it step by step.
import { describe, expect, it } from 'vitest';
import { runSimulation, type SimulationReport } from '../../src/sim/simulation.js';

const SEEDS = Number(process.env.SHARDHERD_SIM_SEEDS ?? 300);

const describeFailure = (r: SimulationReport) =>
  `seed ${r.seed}: ${r.violations.slice(0, 3).map((v) => `[${v.invariant} at step ${v.step}] ${v.message}`).join('; ')}\n${r.history.join('\n')}`;

describe('whole-cluster simulation', () => {
  it(`keeps I1–I9 under faults for ${SEEDS} seeds`, async () => {
    const failed: string[] = [];
    let failovers = 0;
    let crashes = 0;
    for (let seed = 1; seed <= SEEDS; seed++) {
      const r = await runSimulation({ seed });
      failovers += r.stats.failovers;
      crashes += r.stats.crashes;
      if (r.violations.length > 0) failed.push(describeFailure(r));
    }
    expect(failed, failed.join('\n\n')).toEqual([]);
    // The schedule really exercised failures: not a quiet run that cannot fail.
    expect(failovers).toBeGreaterThan(SEEDS / 2);
    expect(crashes).toBeGreaterThan(SEEDS);
  }, 600_000);

  it('is deterministic: the same seed gives the same run', async () => {
    const a = await runSimulation({ seed: 4242 });
    const b = await runSimulation({ seed: 4242 });
    expect(b.history).toEqual(a.history);
    expect(b.stats).toEqual(a.stats);
    expect(a.history.length).toBeGreaterThan(3);
  });

  it('reports a lost record: the checker itself catches a broken sink', async () => {
    const r = await runSimulation({ seed: 7, faults: false, sinkDrops: (ds, shard, offset) => ds === 'alpha' && shard === 2 && offset === 30 });
    expect(r.violations.map((v) => v.invariant)).toEqual(['I5']);
    expect(r.violations[0]!.message).toMatch(/^alpha\/2: record 30 was produced but never ingested/);
  });

  it('without faults nothing is ingested twice and nothing is lost', async () => {
    const r = await runSimulation({ seed: 1, faults: false });
    expect(r.violations).toEqual([]);
    expect(r.stats.duplicates).toBe(0);
    expect(r.stats.recordsIngested).toBeGreaterThan(12 * 20 * 30);
  });
});
