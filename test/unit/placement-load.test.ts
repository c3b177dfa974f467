// Issue 37: the load-aware mode of the balanced strategy, checked by an integer program solved
// exactly with HiGHS (test/support/load-placement-checker.ts, none of the strategy's code) on
// thousands of random small inputs, and on the cases its rules name.
//
// SHARDHERD_LOAD_INPUTS (1500) random inputs from SHARDHERD_LOAD_SEED (1) up; a failure names its seed.
import { beforeAll, describe, expect, it } from 'vitest';
import { nodeId, type NodeId } from '../../src/core/ids.js';
import { LoadAwarePlacementStrategy, type LoadAwareInput } from '../../src/core/placement/load-aware-strategy.js';
import type { Placement, PlacementNode } from '../../src/core/placement/placement-types.js';
import { SeededRandom } from '../../src/sim/random.js';
import { fewestMoves, leastOutside, loadSolver, mostPlaced, OUTSIDE_TOLERANCE, scoreLoadMap } from '../support/load-placement-checker.js';
import { randomLoadInput } from '../support/random-load-inputs.js';

const INPUTS = Number(process.env.SHARDHERD_LOAD_INPUTS ?? 1500);
const FIRST_SEED = Number(process.env.SHARDHERD_LOAD_SEED ?? 1);
const BAND = 0.05;
const strategy = new LoadAwarePlacementStrategy(BAND);

const sameMap = (a: Placement, b: Placement) => a.length === b.length && a.every((ids, s) => ids.join(',') === b[s]!.join(','));

function decided(input: LoadAwareInput) {
  const d = strategy.decide(input);
  if (!d.ok) throw new Error(`refused: ${d.error.message}`);
  return d.value;
}

function shuffled<T>(xs: readonly T[], seed: number): T[] {
  const r = new SeededRandom(seed);
  const out = [...xs];
  for (let i = out.length - 1; i > 0; i--) {
    const j = r.int(0, i);
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

describe('issue 37: load-aware placement against an exact integer program', () => {
  beforeAll(async () => {
    await loadSolver();
  });

  it(`on ${INPUTS} random small inputs: the hard rules always, the band as the program reaches it on nine in ten, moves within 1.10 × its fewest`, async () => {
    const failures: string[] = [];
    let compared = 0;
    let reached = 0;
    let ourMoves = 0;
    let fewestTotal = 0;
    let worstExtraMoves = 0;
    let hot = 0;
    for (let seed = FIRST_SEED; seed < FIRST_SEED + INPUTS; seed++) {
      const { input, counted } = randomLoadInput(seed);
      const fail = (what: string) => failures.push(`seed ${seed}: ${what}`);
      const { placement, report } = decided(input);
      const score = scoreLoadMap(input, counted, BAND, placement);
      if (score.problems.length > 0) fail(`breaks the hard rules: ${score.problems.map((p) => p.detail).join('; ')}`);
      if (score.placed !== mostPlaced(input)) fail(`places ${score.placed} copies, a valid map places ${mostPlaced(input)}`);
      if (!sameMap(decided({ ...input, current: placement }).placement, placement)) fail('asked again with its own map, it moves copies');
      if (!sameMap(decided({ ...input, nodes: shuffled(input.nodes, seed) }).placement, placement)) fail('another order of the nodes gives another map');
      if (report.hotShards.length > 0) {
        // A copy above every node's band: the program's band objective does not apply (see docs/PLACEMENT.md).
        hot += 1;
        continue;
      }
      const least = await leastOutside(input, counted, BAND);
      compared += 1;
      if (score.outside > least + OUTSIDE_TOLERANCE) continue;
      reached += 1;
      const fewest = await fewestMoves(input, counted, BAND, least + OUTSIDE_TOLERANCE);
      ourMoves += score.moves;
      fewestTotal += fewest;
      worstExtraMoves = Math.max(worstExtraMoves, score.moves - fewest);
    }
    expect(failures).toEqual([]);
    // The documented gap of the heuristic (docs/PLACEMENT.md): measured, and held here.
    expect(compared).toBeGreaterThan(INPUTS / 2);
    expect(reached / compared).toBeGreaterThanOrEqual(0.9);
    expect(ourMoves).toBeLessThanOrEqual(1.1 * fewestTotal);
    expect(worstExtraMoves).toBeLessThanOrEqual(3);
    expect(hot).toBeGreaterThan(0);
  }, 300_000);
});

describe('issue 37: the load-aware rules', () => {
  const racked = (n: number, racks: number): PlacementNode[] =>
    Array.from({ length: n }, (_, i) => ({ id: nodeId(`n${String(i).padStart(2, '0')}`), group: `r${i % racks}`, weight: 1 }));
  const empty = (shards: number) => Array.from({ length: shards }, () => [] as NodeId[]);
  const loadsOn = (placement: Placement, loads: readonly number[]) => {
    const on = new Map<string, number>();
    placement.forEach((ids, s) => ids.forEach((id) => on.set(id, (on.get(id) ?? 0) + loads[s]!)));
    return on;
  };

  it('a copy hotter than any node’s band is placed alone on a node and reported; every other node is within the band of what is left', () => {
    const nodes = racked(8, 2);
    const loads = [100, ...Array.from({ length: 63 }, (_, s) => 1 + (s % 3))];
    const { placement, report } = decided({ numShards: 64, replicationFactor: 2, nodes, current: empty(64), loads });
    expect(report.hotShards).toEqual([0]);
    const hotNodes = placement[0]!;
    for (const id of hotNodes) expect(placement.filter((ids) => ids.includes(id)).length).toBe(1);
    const on = loadsOn(placement, loads);
    const cold = nodes.filter((n) => !hotNodes.includes(n.id)).map((n) => on.get(n.id) ?? 0);
    const mean = cold.reduce((a, b) => a + b, 0) / cold.length;
    for (const l of cold) expect(Math.abs(l / mean - 1)).toBeLessThanOrEqual(BAND + 1e-9);
  });

  it('with no load measured it counts copies: every node within the band of an even share', () => {
    const nodes = racked(6, 3);
    const { placement } = decided({ numShards: 60, replicationFactor: 3, nodes, current: empty(60), loads: [] });
    for (const n of nodes) expect(placement.filter((ids) => ids.includes(n.id)).length).toBe(30);
  });

  it('a shard not measured counts as the mean of the measured ones, never as zero', () => {
    const nodes = racked(2, 1);
    // Shard 3 unmeasured counts 10: 10 + 10 against 10 + 10, not 10 + 10 + 10 against 10.
    const loads = [10, 10, 10, undefined];
    const { placement } = decided({ numShards: 4, replicationFactor: 1, nodes, current: empty(4), loads });
    const counts = nodes.map((n) => placement.filter((ids) => ids.includes(n.id)).length);
    expect(counts).toEqual([2, 2]);
  });

  it('moves what must go, not the whole map: one shard of a balanced map turned five times hotter moves three copies', () => {
    const nodes = racked(4, 1);
    const loads = Array.from({ length: 64 }, () => 1);
    const first = decided({ numShards: 64, replicationFactor: 1, nodes, current: empty(64), loads }).placement;
    const hotter = loads.map((l, s) => (s === 0 ? 5 : l));
    const { placement } = decided({ numShards: 64, replicationFactor: 1, nodes, current: first, loads: hotter });
    const moved = placement.filter((ids, s) => ids.join() !== first[s]!.join()).length;
    // 68 of load over 4 nodes is 17 each (16.15..17.85): shard 0's node (5 + 15 = 20) sheds three copies of 1, one to each other node.
    expect(moved).toBe(3);
    for (const l of loadsOn(placement, hotter).values()) expect(l).toBe(17);
  });

  it.each([
    ['NaN', [1, Number.NaN]],
    ['negative', [1, -1]],
    ['infinite', [1, Number.POSITIVE_INFINITY]],
    ['a list of the wrong length', [1, 1, 1]],
  ])('refuses a load that is %s with InvalidPlacementInput, placing nothing', (_, loads) => {
    const d = strategy.decide({ numShards: 2, replicationFactor: 1, nodes: racked(2, 1), current: empty(2), loads });
    expect(d.ok).toBe(false);
    if (!d.ok) expect(d.error.type).toBe('InvalidPlacementInput');
  });

  it.each([0, 1, -0.1, Number.NaN])('refuses a band of %s at setup with a RangeError', (band) => {
    expect(() => new LoadAwarePlacementStrategy(band)).toThrow(RangeError);
  });
});
