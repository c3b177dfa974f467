// The exact placement checker (test/support/placement-checker.ts) checked before it judges anything:
// its min-cost flow against enumeration, its fair shares against a second formulation, its reading
// of the contract (held shards, frozen copies on absent nodes) on small hand-made inputs, and its
// optima against every valid map of hundreds of random tiny inputs.
import { describe, expect, it } from 'vitest';
import type { NodeId } from '../../src/core/ids.js';
import type { Placement, PlacementInput, PlacementStrategy } from '../../src/core/placement/placement-types.js';
import { err, ok } from '../../src/core/result.js';
import { SeededRandom } from '../../src/sim/random.js';
import { bruteForceOptimum } from '../support/exact-placement/brute-force.js';
import type { ContractNode } from '../support/exact-placement/contract.js';
import { MinCostFlow } from '../support/exact-placement/min-cost-flow.js';
import { checkPlacement, exactOptimum, fairShares, invalidInputReason, scorePlacement, type ProblemKind } from '../support/placement-checker.js';
import { readContract } from '../support/exact-placement/contract.js';
import { RandomPlacementHistory } from '../support/random-placement-steps.js';
import { judgeStep } from '../support/strategy-vs-checker.js';

const node = (id: string, group: string, weight = 1, absent = false): ContractNode => ({
  id: id as NodeId,
  group,
  weight,
  ...(absent ? { absent: true } : {}),
});
const map = (shards: string[][]): Placement => shards.map((ids) => ids as NodeId[]);
const close = (a: number | undefined, b: number | undefined): boolean => (a === undefined || b === undefined ? a === b : Math.abs(a - b) < 1e-9);

describe('MinCostFlow', () => {
  it('finds the cheapest partial assignment, negative costs included, as enumeration does', () => {
    const rng = new SeededRandom(7);
    for (let round = 0; round < 300; round++) {
      const rows = rng.int(1, 4);
      const cols = rng.int(1, 4);
      const cost = Array.from({ length: rows }, () => Array.from({ length: cols }, () => (rng.chance(0.2) ? undefined : rng.int(-9, 9))));
      const flow = new MinCostFlow(2 + rows + cols);
      for (let r = 0; r < rows; r++) flow.addArc(0, 2 + r, 1, 0);
      for (let c = 0; c < cols; c++) flow.addArc(2 + rows + c, 1, 1, 0);
      cost.forEach((line, r) => line.forEach((x, c) => x !== undefined && flow.addArc(2 + r, 2 + rows + c, 1, x)));
      // Enumeration: each row takes no column or one unused column with an arc.
      const best = (r: number, used: number): number => {
        if (r === rows) return 0;
        let b = best(r + 1, used);
        cost[r]!.forEach((x, c) => {
          if (x !== undefined && !(used & (1 << c))) b = Math.min(b, x + best(r + 1, used | (1 << c)));
        });
        return b;
      };
      expect(flow.solve(0, 1)).toBe(best(0, 0));
    }
  });
});

describe('fair shares (water-filling by weight under group capacities)', () => {
  it('matches the issue: weights 4 | 1 + 4 at RF 2, three shards: the capped rack splits 3 as 0.6 and 2.4', () => {
    const shares = fairShares(
      [node('n0', 'r0', 4), node('n1', 'r1', 1), node('new', 'r1', 4)],
      6,
      new Map([
        ['r0', 3],
        ['r1', 3],
      ]),
    );
    expect(shares.map((s) => s.q)).toEqual([3, 0.6, 2.4].map((x) => expect.closeTo(x, 12)));
    expect(shares.map((s) => [s.lo, s.hi])).toEqual([
      [3, 3],
      [0, 1],
      [2, 3],
    ]);
  });

  it('gives an integral share lo = hi despite float noise (weights 0.1, 0.2, 0.3 sharing 6)', () => {
    const shares = fairShares(
      [node('a', 'a', 0.1), node('b', 'b', 0.2), node('c', 'c', 0.3)],
      6,
      new Map([
        ['a', 9],
        ['b', 9],
        ['c', 9],
      ]),
    );
    expect(shares.map((s) => [s.lo, s.hi])).toEqual([
      [1, 1],
      [2, 2],
      [3, 3],
    ]);
  });

  it('equals the level λ solving Σ_g min(cap_g, W_g·λ) = T, found by bisection', () => {
    const rng = new SeededRandom(11);
    for (let round = 0; round < 500; round++) {
      const groups = Array.from({ length: rng.int(1, 5) }, (_, g) => `g${g}`);
      const nodes = Array.from({ length: rng.int(1, 9) }, (_, i) => node(`n${i}`, rng.pick(groups), rng.pick([1, 1, 2, 3, 5, 0.5, 1.5, 0.3])));
      const present = new Set(nodes.map((n) => n.group));
      const capacity = new Map([...present].map((g) => [g, rng.int(0, 40)]));
      const total = rng.int(0, 120);
      const shares = fairShares(nodes, total, capacity);
      const weightOf = (g: string): number => nodes.filter((n) => n.group === g).reduce((s, n) => s + n.weight, 0);
      const held = (level: number): number => [...present].reduce((s, g) => s + Math.min(capacity.get(g)!, weightOf(g) * level), 0);
      let [low, high] = [0, 1e6];
      for (let k = 0; k < 200; k++) {
        const mid = (low + high) / 2;
        if (held(mid) < total) low = mid;
        else high = mid;
      }
      const expected = nodes.map((n) => n.weight * Math.min(high, capacity.get(n.group)! / weightOf(n.group)));
      shares.forEach((s, i) => expect(s.q).toBeCloseTo(expected[i]!, 6));
      expect(shares.reduce((s, x) => s + x.q, 0)).toBeCloseTo(
        Math.min(
          total,
          [...capacity.values()].reduce((a, b) => a + b, 0),
        ),
        6,
      );
      for (const s of shares) expect(s.hi - s.lo).toBeLessThanOrEqual(1);
    }
  });
});

describe('the contract as the checker reads it', () => {
  it('lists every way a map breaks the hard rules', () => {
    const input: PlacementInput = {
      numShards: 7,
      replicationFactor: 2,
      nodes: [node('a', 'r0'), node('b', 'r0'), node('c', 'r1'), node('x', 'r1', 1, true)],
      current: map([[], [], [], ['a', 'b'], ['x'], ['c', 'x'], []]),
      held: new Set([3]),
    };
    const kinds = (shards: string[][]): ProblemKind[] => [...new Set(scorePlacement(input, map(shards)).problems.map((p) => p.kind))].sort();
    // Shard 4 is frozen on absent x; shard 5's copy on x is not (c serves r1 for it: the copy that serves is kept).
    const valid = [['a', 'c'], ['b', 'c'], ['a'], ['a', 'b'], ['a', 'x'], ['b', 'c'], ['a', 'c']];
    expect(kinds(valid)).toEqual([]);
    expect(kinds([['a', 'b'], ...valid.slice(1)])).toEqual(['isolation']);
    expect(kinds([['a', 'a'], ...valid.slice(1)])).toEqual(['duplicate']);
    expect(kinds([['c', 'a'], ...valid.slice(1)])).toEqual(['order']);
    expect(kinds([['a', 'gone'], ...valid.slice(1)])).toEqual(['unlisted']);
    expect(kinds([['a', 'c', 'x'], ...valid.slice(1)])).toEqual(['absent-given', 'isolation', 'too-many']);
    expect(kinds([...valid.slice(0, 3), ['a'], ...valid.slice(4)])).toEqual(['held-changed']);
    expect(kinds([...valid.slice(0, 4), ['a', 'c'], ...valid.slice(5)])).toEqual(['frozen-dropped']);
    expect(kinds([...valid.slice(0, 5), ['b', 'x'], valid[6]!])).toEqual(['absent-given']);
    expect(kinds(valid.slice(1))).toEqual(['shard-count']);
  });

  it('keeps a held shard as it is (two copies in one rack included) and counts it in the loads', () => {
    const input: PlacementInput = {
      numShards: 3,
      replicationFactor: 2,
      nodes: [node('a', 'r0'), node('b', 'r0'), node('c', 'r1')],
      current: map([['a', 'b'], [], []]),
      held: new Set([0]),
    };
    const best = exactOptimum(input);
    expect(best.witness[0]).toEqual(['a', 'b']);
    // T = 2 held + 2 × 2 placed = 6; r0 may hold 2 (held) + 2 = 4, r1 two at most: a and b share 4.
    expect(best.shares.map((s) => s.share.q)).toEqual([2, 2, 2]);
    expect(best.objective).toEqual({ placed: 4, violation: 0, moves: 4 });
  });

  it('freezes the copies on absent nodes: one per rack (the lowest id), at most c, and gives absent nodes nothing', () => {
    const input: PlacementInput = {
      numShards: 2,
      replicationFactor: 2,
      nodes: [node('a1', 'r0', 1, true), node('a2', 'r0', 1, true), node('b1', 'r1', 1, true), node('c1', 'r2', 1, true), node('p', 'r3'), node('q', 'r0')],
      current: map([['c1', 'a2', 'b1', 'a1'], []]),
    };
    const best = exactOptimum(input);
    // Shard 0: a1 for r0 (not a2), b1, c1; the two lowest stay (c = 2) and nothing is left to place.
    expect(best.witness[0]).toEqual(['a1', 'b1']);
    // Shard 1 has nothing frozen: two copies on present nodes of distinct racks.
    expect(best.witness[1]).toEqual(['p', 'q']);
    expect(best.objective).toEqual({ placed: 2, violation: 0, moves: 2 });
  });

  it("takes a frozen copy's rack out of the shard's room: the rack's capacity drops and so does its share", () => {
    // RF 2: shard 0 is frozen on absent `a` in r0, so it may only add a copy in r1; shard 1 may use
    // both. r0 may hold 1 copy, not 2: heavy `q` gets 1 (not 2.25), and `p` the other 2.
    const input: PlacementInput = {
      numShards: 2,
      replicationFactor: 2,
      nodes: [node('a', 'r0', 1, true), node('p', 'r1'), node('q', 'r0', 3)],
      current: map([['a'], []]),
    };
    expect(readContract(input).shares.map((s) => s.q)).toEqual([2, 1]);
    // The contract's bounds while `a` is absent are those as if it were present (issue 33), since a
    // map meets them: r0 capped at 2 copies shared by weight, q 1.5 (1..2) and a 0.5; p 2.
    const best = exactOptimum(input);
    expect(best.shares.map((s) => [s.id, s.share.q])).toEqual([
      ['p', 2],
      ['q', 1.5],
    ]);
    expect(best.objective).toEqual({ placed: 3, violation: 0, moves: 3 });
  });

  it("keeps a map while a node is away: the bounds as if it were present (issue 33's smallest case)", () => {
    // 1 shard, RF 2; n0 (r0, weight 4) is absent and holds nothing; over the present nodes alone
    // n3 (r0, weight 3) would have to hold the copy r0 may take, a move; as if n0 were present, r0's
    // share is split 4:3 and n3 may hold none: the map stays.
    const input: PlacementInput = {
      numShards: 1,
      replicationFactor: 2,
      nodes: [node('n0', 'r0', 4, true), node('n1', 'r1'), node('n2', 'r2'), node('n3', 'r0', 3)],
      current: map([['n1', 'n2']]),
    };
    const brute = bruteForceOptimum(input);
    expect(brute.objective).toEqual({ placed: 2, violation: 0, moves: 0 });
    expect(exactOptimum(input).objective).toEqual(brute.objective);
    // When no map meets those bounds (the absent node's copies had to be placed again), the shares
    // over the present nodes decide, as before: RF 1, 6 shards, n0 absent with its 2 re-placed; as
    // if present each would hold exactly 2, and 6 copies do not fit on two nodes at 2.
    const lost: PlacementInput = {
      numShards: 6,
      replicationFactor: 1,
      nodes: [node('n0', 'r0', 1, true), node('n1', 'r1'), node('n2', 'r2')],
      current: map([[], [], ['n1'], ['n1'], ['n2'], ['n2']]),
    };
    expect(exactOptimum(lost).shares.map((s) => s.share.q)).toEqual([3, 3]);
    expect(bruteForceOptimum(lost).objective).toEqual(exactOptimum(lost).objective);
  });

  it('eases a bound before it saves a move: violation outranks moves', () => {
    // RF 1: shards 1 and 2 are held on n0 (share 0.75, so 0..1 copies) and shard 0 sits there too.
    // Moving shard 0 to n1 (share 2.25) costs a move and takes a unit of violation off each node.
    const input: PlacementInput = {
      numShards: 3,
      replicationFactor: 1,
      nodes: [node('n0', 'r1'), node('n1', 'r1', 3)],
      current: map([['n0'], ['n0'], ['n0']]),
      held: new Set([1, 2]),
    };
    const brute = bruteForceOptimum(input);
    expect(brute.objective).toEqual({ placed: 1, violation: 2, moves: 1 });
    expect(exactOptimum(input).objective).toEqual(brute.objective);
    expect(exactOptimum(input).witness[0]).toEqual(['n1']);
  });

  it('agrees with issue 21 on its tiny cases', () => {
    // Four one-node racks at RF 2, `new` joins n0's rack: one move is enough.
    const addToRack: PlacementInput = {
      numShards: 3,
      replicationFactor: 2,
      nodes: ['n0', 'n1', 'n2', 'n3'].map((id, k) => node(id, `r${k}`)).concat(node('new', 'r0')),
      current: map([
        ['n0', 'n1'],
        ['n0', 'n1'],
        ['n2', 'n3'],
      ]),
    };
    expect(exactOptimum(addToRack).objective.moves).toBe(1);
    // Weighted: [[n0,n1],[n0,new],[n0,new]] is optimal (2 moves, spread 1.5) and, fed back, needs no move.
    const weighted = (current: string[][]): PlacementInput => ({
      numShards: 3,
      replicationFactor: 2,
      nodes: [node('n0', 'r0', 4), node('n1', 'r1', 1), node('new', 'r1', 4)],
      current: map(current),
    });
    const settled = [
      ['n0', 'n1'],
      ['n0', 'new'],
      ['n0', 'new'],
    ];
    expect(
      checkPlacement(
        weighted([
          ['n0', 'n1'],
          ['n0', 'n1'],
          ['n0', 'n1'],
        ]),
        map(settled),
      ).own,
    ).toMatchObject(
      exactOptimum(
        weighted([
          ['n0', 'n1'],
          ['n0', 'n1'],
          ['n0', 'n1'],
        ]),
      ).objective,
    );
    expect(exactOptimum(weighted(settled)).objective.moves).toBe(0);
    // Rack r1 lost at RF 1 with weights 3 | 3 | 1 | 1: n0 taking both shards spreads 10/9 ≈ 1.11.
    const lost: PlacementInput = {
      numShards: 2,
      replicationFactor: 1,
      nodes: [node('n0', 'r0', 3), node('n2', 'r2'), node('n3', 'r0')],
      current: map([['n0'], ['n1']]),
    };
    expect(exactOptimum(lost).minSpread).toBeCloseTo(10 / 9, 9);
  });
});

/** A tiny random input: 1–5 nodes in ≤ 3 racks or unracked, 2–4 shards, RF ≤ 2 (3 on ≤ 4 nodes). */
function tinyInput(rng: SeededRandom): PlacementInput {
  const count = rng.chance(0.2) ? 1 : rng.int(2, 5);
  const racks = ['r0', 'r1', 'r2'].slice(0, rng.int(1, 3));
  const weights = rng.pick([[1], [1, 2, 3], [1, 0.5, 1.5, 0.3, 2.5]]);
  const nodes = Array.from({ length: count }, (_, i) => {
    const id = `n${i}`;
    return node(id, rng.chance(0.2) ? `node:${id}` : rng.pick(racks), rng.pick(weights), rng.chance(0.2));
  });
  const numShards = rng.int(2, 4);
  const replicationFactor = count <= 4 ? rng.int(1, 3) : rng.int(1, 2);
  const pool = [...nodes.map((n) => n.id as string), 'gone'];
  // Sometimes every shard has a copy on one hot node and most are held: loads beyond the bounds.
  const hot = rng.chance(0.25) ? rng.pick(nodes).id : undefined;
  const current = Array.from({ length: numShards }, () => pool.filter((id) => id === hot || rng.chance(0.4)));
  const held = new Set([...Array(numShards).keys()].filter(() => rng.chance(hot ? 0.6 : 0.2)));
  return { numShards, replicationFactor, nodes, current: map(current), ...(held.size > 0 ? { held } : {}) };
}

describe('the checker against enumeration of every valid map', () => {
  it('finds the same optimum (placed, violation, moves) and narrowest spread on 1000 random tiny inputs', () => {
    const rng = new SeededRandom(21);
    let enumerated = 0;
    let spreadCases = 0;
    let violationCases = 0;
    let plainCases = 0;
    for (let round = 0; round < 1000; round++) {
      const input = tinyInput(rng);
      const brute = bruteForceOptimum(input);
      const exact = exactOptimum(input);
      const where = `case ${round}: ${JSON.stringify({ ...input, held: [...(input.held ?? [])] })}`;
      expect(exact.objective, where).toEqual(brute.objective);
      expect(close(exact.minSpread, brute.minSpread), `${where}: spread ${exact.minSpread} vs ${brute.minSpread}`).toBe(true);
      const witness = scorePlacement(input, exact.witness);
      expect(witness.problems, where).toEqual([]);
      expect(witness.score, where).toMatchObject(exact.objective);
      if (exact.spreadWitness !== undefined) {
        const narrow = scorePlacement(input, exact.spreadWitness);
        expect(narrow.problems, where).toEqual([]);
        expect(close(narrow.score.spread, exact.minSpread), where).toBe(true);
        spreadCases++;
      }
      enumerated += brute.maps;
      if (exact.objective.violation > 0) violationCases++;
      // The contract's promise: with no held shard and no absent node, every shard gets its c
      // copies and some map stays within every node's bounds.
      if (input.held === undefined && !input.nodes.some((n) => (n as ContractNode).absent)) {
        const copies = Math.min(input.replicationFactor, new Set(input.nodes.map((n) => n.group)).size);
        expect(brute.objective, where).toMatchObject({ placed: input.numShards * copies, violation: 0 });
        plainCases++;
      }
    }
    // The sample must be worth its name: many maps, the spread compared on most cases, and some
    // inputs (held copies piled on one node) where no map stays within the bounds.
    expect(enumerated).toBeGreaterThan(100_000);
    expect(spreadCases).toBeGreaterThan(500);
    expect(violationCases).toBeGreaterThan(10);
    expect(plainCases).toBeGreaterThan(100);
  });
});

describe('the judge of a strategy (test/support/strategy-vs-checker.ts)', () => {
  /** The checker's own optimal map as a strategy: what an exact strategy would answer. */
  const exactStrategy: PlacementStrategy = {
    name: 'exact',
    place: (input) => {
      const invalid = invalidInputReason(input);
      if (invalid) return err({ type: 'InvalidPlacementInput', message: invalid });
      const best = exactOptimum(input);
      return ok(best.spreadWitness ?? best.witness);
    },
  };

  it('passes an exact strategy on every step of random histories: the checks can all be met at once', () => {
    let steps = 0;
    for (let seed = 1; steps < 300; seed++) {
      const history = new RandomPlacementHistory(seed);
      if (history.numShards * history.shape.nodes.length > 1_000) continue;
      let previous: Placement = Array.from({ length: history.numShards }, () => []);
      for (let k = 0; k < 40; k++, steps++) {
        const step = k === 0 ? history.initial() : history.next();
        const { output, failures } = judgeStep(exactStrategy, step.input(previous), seed * 1000 + k);
        expect(failures, `seed ${seed} step ${k} (${step.label})`).toEqual([]);
        previous = output!;
      }
    }
  }, 60_000);

  it('flags a strategy whose map depends on the order of the nodes', () => {
    const firstListed: PlacementStrategy = { name: 'first-listed', place: (input) => ok(input.current.map(() => [input.nodes[0]!.id])) };
    const nodes = ['a', 'b', 'c', 'd', 'e', 'f'].map((id) => node(id, 'r0'));
    const { failures } = judgeStep(firstListed, { numShards: 4, replicationFactor: 1, nodes, current: map([[], [], [], []]) }, 3);
    expect(failures.map((f) => f.kind)).toContain('nondeterministic');
    expect(failures.map((f) => f.kind)).not.toContain('unstable');
  });

  it('flags a strategy that moves its own output when asked again', () => {
    const other = (id: string): string => (id === 'a' ? 'b' : 'a');
    const flipping: PlacementStrategy = { name: 'flipping', place: (input) => ok(input.current.map((ids) => [other(ids[0] ?? 'b')] as NodeId[])) };
    const { failures } = judgeStep(
      flipping,
      { numShards: 2, replicationFactor: 1, nodes: [node('a', 'r0'), node('b', 'r0')], current: map([['a'], ['b']]) },
      3,
    );
    expect(failures.map((f) => f.kind)).toEqual(['moves', 'unstable']);
  });
});
