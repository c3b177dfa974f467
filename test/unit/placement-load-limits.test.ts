// The per-node limit of the load-aware strategy (`maxMovesPerNode`): what the load round passes as
// `loadBalance.maxConcurrentMovesPerNode`, so that no node gains or sheds many copies at once.
// Judged from the maps, against the current one, with the hard rules read by the copy-count
// contract's own checker (test/support/exact-placement), none of the strategy's code.
//
// SHARDHERD_LOAD_INPUTS (1500) random inputs from SHARDHERD_LOAD_SEED (1) up; a failure names its seed.
import { describe, expect, it } from 'vitest';
import { nodeId, type NodeId } from '../../src/core/ids.js';
import { LoadAwarePlacementStrategy, type LoadAwareInput } from '../../src/core/placement/load-aware-strategy.js';
import type { Placement, PlacementNode } from '../../src/core/placement/placement-types.js';
import { SeededRandom } from '../../src/sim/random.js';
import { mostPlaced, OUTSIDE_TOLERANCE, scoreLoadMap } from '../support/load-placement-checker.js';
import { randomLoadInput } from '../support/random-load-inputs.js';

const INPUTS = Number(process.env.SHARDHERD_LOAD_INPUTS ?? 1500);
const FIRST_SEED = Number(process.env.SHARDHERD_LOAD_SEED ?? 1);
const BAND = 0.05;
const strategy = new LoadAwarePlacementStrategy(BAND);

function decided(input: LoadAwareInput) {
  const d = strategy.decide(input);
  if (!d.ok) throw new Error(`refused: ${d.error.message}`);
  return d.value;
}

const sameMap = (a: Placement, b: Placement) => a.length === b.length && a.every((ids, s) => ids.join(',') === b[s]!.join(','));

/** Per node: the copies it gained plus the copies it shed from `before` to `after`. */
function changedPerNode(before: readonly (readonly NodeId[])[], after: Placement): Map<NodeId, number> {
  const changed = new Map<NodeId, number>();
  const count = (n: NodeId) => changed.set(n, (changed.get(n) ?? 0) + 1);
  after.forEach((ids, s) => {
    for (const n of ids) if (!before[s]!.includes(n)) count(n);
    for (const n of before[s]!) if (!ids.includes(n)) count(n);
  });
  return changed;
}

const most = (m: Map<NodeId, number>) => Math.max(0, ...m.values());

/**
 * A random input whose current map is complete and valid (the strategy's own map of a random
 * input), under new loads: the copy-count strategy then keeps every copy where it is, so every
 * copy that moves is a move for load, counted against the limit.
 */
function settledInput(seed: number): { input: LoadAwareInput; counted: number[] } {
  const { input } = randomLoadInput(seed);
  const current = decided(input).placement;
  const r = new SeededRandom(seed * 31 + 7);
  const loads = Array.from({ length: input.numShards }, () => r.pick([0, 1, 2, 5, 10, 20]) + r.int(0, 9) / 10);
  return { input: { ...input, current, loads }, counted: loads };
}

describe('the per-node limit of the load-aware strategy (maxMovesPerNode)', () => {
  it(`on ${INPUTS} random inputs: no node gains plus sheds more than the limit, the hard rules always, and decisions after it go on until none moves`, () => {
    const failures: string[] = [];
    let limitedOnce = 0;
    let reachedLikeUnlimited = 0;
    let unlimitedReached = 0;
    for (let seed = FIRST_SEED; seed < FIRST_SEED + INPUTS; seed++) {
      const { input, counted } = settledInput(seed);
      const fail = (what: string) => failures.push(`seed ${seed}: ${what}`);
      const k = 1 + (seed % 3);
      const first = decided({ ...input, maxMovesPerNode: k });
      if (most(changedPerNode(input.current, first.placement)) > k)
        fail(`a node changed ${most(changedPerNode(input.current, first.placement))} copies, limit ${k}`);
      if (first.report.limited) limitedOnce += 1;
      // Later decisions, each from the map the one before left, with the same limit.
      let map = first.placement;
      let atRest = false;
      for (let round = 0; round < 50 && !atRest; round++) {
        const score = scoreLoadMap(input, counted, BAND, map);
        if (score.problems.length > 0) fail(`breaks the hard rules: ${score.problems.map((p) => p.detail).join('; ')}`);
        if (score.placed !== mostPlaced(input)) fail(`places ${score.placed} copies, a valid map places ${mostPlaced(input)}`);
        const next = decided({ ...input, current: map, maxMovesPerNode: k });
        if (most(changedPerNode(map, next.placement)) > k) fail(`round ${round + 1}: a node changed more than ${k} copies`);
        // Placing a hot copy alone changes the bands, not the load outside them: never more of it.
        if (next.report.outsideAfter > next.report.outsideBefore + OUTSIDE_TOLERANCE) fail(`round ${round + 1} raised the load outside the band`);
        atRest = sameMap(next.placement, map);
        map = next.placement;
      }
      if (!atRest) fail('still moving copies after 50 decisions');
      const unlimited = scoreLoadMap(input, counted, BAND, decided(input).placement).outside;
      if (unlimited <= OUTSIDE_TOLERANCE) {
        unlimitedReached += 1;
        if (scoreLoadMap(input, counted, BAND, map).outside <= OUTSIDE_TOLERANCE) reachedLikeUnlimited += 1;
      }
    }
    expect(failures.slice(0, 10)).toEqual([]);
    // The limit binds on many of these inputs, and the decisions after it mostly end where one unlimited decision does.
    expect(limitedOnce).toBeGreaterThan(INPUTS / 10);
    expect(reachedLikeUnlimited / unlimitedReached).toBeGreaterThanOrEqual(0.9);
  });

  it(`on ${INPUTS} random inputs with lost and misplaced copies: the hard rules and the most copies placed under any limit`, () => {
    const failures: string[] = [];
    for (let seed = FIRST_SEED; seed < FIRST_SEED + INPUTS; seed++) {
      const { input, counted } = randomLoadInput(seed);
      const { placement } = decided({ ...input, maxMovesPerNode: 1 + (seed % 4) });
      const score = scoreLoadMap(input, counted, BAND, placement);
      if (score.problems.length > 0) failures.push(`seed ${seed}: breaks the hard rules: ${score.problems.map((p) => p.detail).join('; ')}`);
      if (score.placed !== mostPlaced(input)) failures.push(`seed ${seed}: places ${score.placed} copies, a valid map places ${mostPlaced(input)}`);
    }
    expect(failures.slice(0, 10)).toEqual([]);
  });

  it(`a limit no node reaches decides exactly as no limit, on ${INPUTS} random inputs`, () => {
    const failures: string[] = [];
    for (let seed = FIRST_SEED; seed < FIRST_SEED + INPUTS; seed++) {
      const { input } = randomLoadInput(seed);
      const none = decided(input);
      const large = decided({ ...input, maxMovesPerNode: 1000 });
      if (!sameMap(none.placement, large.placement)) failures.push(`seed ${seed}: another map`);
      if (JSON.stringify({ ...none.report, limited: false }) !== JSON.stringify(large.report)) failures.push(`seed ${seed}: another report`);
    }
    expect(failures.slice(0, 10)).toEqual([]);
  });

  const racked = (n: number, racks: number): PlacementNode[] =>
    Array.from({ length: n }, (_, i) => ({ id: nodeId(`n${String(i).padStart(2, '0')}`), group: `r${i % racks}`, weight: 1 }));

  it('a node with many copies to shed sheds at most the limit per decision; the decisions after it end where one unlimited decision does', () => {
    const nodes = racked(4, 1);
    const loads = Array.from({ length: 64 }, () => 1);
    const even = decided({ numShards: 64, replicationFactor: 1, nodes, current: Array.from({ length: 64 }, () => []), loads }).placement;
    // Every shard of the first node turns twice as hot: it must shed about a third of its load.
    const hot = loads.map((l, s) => (even[s]!.includes(nodes[0]!.id) ? 2 : l));
    const unlimited = decided({ numShards: 64, replicationFactor: 1, nodes, current: even, loads: hot });
    expect(most(changedPerNode(even, unlimited.placement))).toBeGreaterThan(3);
    let map: Placement = even;
    let decisions = 0;
    for (;;) {
      const d = decided({ numShards: 64, replicationFactor: 1, nodes, current: map, loads: hot, maxMovesPerNode: 3 });
      if (sameMap(d.placement, map)) break;
      expect(most(changedPerNode(map, d.placement))).toBeLessThanOrEqual(3);
      map = d.placement;
      decisions += 1;
    }
    expect(decisions).toBeGreaterThan(1);
    expect(scoreLoadMap({ numShards: 64, replicationFactor: 1, nodes, current: map }, hot, BAND, map).outside).toBe(0);
  });

  it('a hot copy whose placement the limit does not allow now stays where it is (the map valid), and a later decision places it alone', () => {
    const nodes = racked(4, 2);
    const loads = Array.from({ length: 16 }, () => 1);
    const current = decided({ numShards: 16, replicationFactor: 2, nodes, current: Array.from({ length: 16 }, () => []), loads }).placement;
    // Shard 0 turns hotter than any node's band: each of its copies must end alone on a node.
    const hot = loads.map((l, s) => (s === 0 ? 40 : l));
    const input: LoadAwareInput = { numShards: 16, replicationFactor: 2, nodes, current, loads: hot };
    expect(decided(input).report.hotShards).toEqual([0]);
    let map: Placement = current;
    for (let round = 0; round < 20; round++) {
      const d = decided({ ...input, current: map, maxMovesPerNode: 1 });
      const score = scoreLoadMap(input, hot, BAND, d.placement);
      expect(score.problems).toEqual([]);
      expect(score.placed).toBe(32);
      expect(most(changedPerNode(map, d.placement))).toBeLessThanOrEqual(1);
      if (sameMap(d.placement, map)) break;
      map = d.placement;
    }
    for (const id of map[0]!) expect(map.filter((ids) => ids.includes(id)).length).toBe(1);
  });

  it.each([0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY])('refuses maxMovesPerNode %s with InvalidPlacementInput', (maxMovesPerNode) => {
    const d = strategy.decide({ numShards: 2, replicationFactor: 1, nodes: racked(2, 1), current: [[], []], loads: [1, 1], maxMovesPerNode });
    expect(d.ok).toBe(false);
    if (!d.ok) expect(d.error).toMatchObject({ type: 'InvalidPlacementInput', message: expect.stringContaining('maxMovesPerNode') });
  });
});

describe('a weight or band that makes the load-aware bands impossible is refused at setup', () => {
  it.each([0, -1, Number.NaN, Number.POSITIVE_INFINITY])('a node of weight %s: InvalidPlacementInput, placing nothing', (weight) => {
    const nodes = [
      { id: nodeId('a'), group: 'r0', weight: 1 },
      { id: nodeId('b'), group: 'r1', weight },
    ];
    const d = strategy.decide({ numShards: 2, replicationFactor: 1, nodes, current: [[], []], loads: [1, 1] });
    expect(d.ok).toBe(false);
    if (!d.ok) expect(d.error).toMatchObject({ type: 'InvalidPlacementInput', message: expect.stringContaining('weight') });
  });

  it.each([1, 1.5, -0.05, 0])('a band of %s: RangeError', (band) => {
    expect(() => new LoadAwarePlacementStrategy(band)).toThrow(/the load band must be above 0 and below 1/);
  });
});
