import { readdirSync, readFileSync } from 'node:fs';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { BalancedPlacementStrategy, checkIsolationFeasible } from '../../src/core/placement/balanced-strategy.js';
import { placementMetrics } from '../../src/core/placement/placement-metrics.js';
import type { Placement, PlacementInput, PlacementNode } from '../../src/core/placement/placement-types.js';
import { applyOperation, parseScenario, toNode, type ScenarioOperation } from '../../src/core/placement/scenario.js';
import type { NodeId } from '../../src/core/ids.js';

const strategy = new BalancedPlacementStrategy();

function place(input: PlacementInput): Placement {
  const r = strategy.place(input);
  if (!r.ok) throw new Error(r.error.message);
  return r.value;
}

const node = (id: string, group: string, weight = 1): PlacementNode => ({ id: id as NodeId, group, weight });
const pad = (i: number): string => String(i).padStart(3, '0');
const empty = (shards: number): Placement => Array.from({ length: shards }, () => []);

/** placement-peers §3's standard scenarios, built here so the tests need no file outside the project. */
const A = Array.from({ length: 32 }, (_, i) => node(`n${pad(i)}`, 'r0'));
const B = ['A', 'B', 'C'].flatMap((rack) => Array.from({ length: 100 }, (_, i) => node(`${rack.toLowerCase()}${pad(i)}`, `rack${rack}`)));
const C = Array.from({ length: 300 }, (_, i) => node(`n${pad(i)}`, 'r0'));

function step(shards: number, rf: number, nodes: readonly PlacementNode[], op: ScenarioOperation) {
  const before = place({ numShards: shards, replicationFactor: rf, nodes, current: empty(shards) });
  const after = applyOperation(nodes, op);
  const placement = place({ numShards: shards, replicationFactor: rf, nodes: after, current: before });
  return placementMetrics(before, placement, rf, after);
}

describe('BalancedPlacementStrategy on the standard scenarios (worked values of placement-peers §3)', () => {
  const cases: [string, number, number, PlacementNode[], ScenarioOperation, number, number][] = [
    ['A1 add one', 256, 1, A, { op: 'add', node: { id: 'n032', group: 'r0', weight: 1 } }, 7, 1],
    ['A2 remove one', 256, 1, A, { op: 'remove', id: 'n007' }, 8, 1],
    ['A3 replace one', 256, 1, A, { op: 'replace', old: 'n007', new: { id: 'n100', group: 'r0', weight: 1 } }, 8, 0],
    ['B1 add one to rack A', 4096, 3, B, { op: 'add', node: { id: 'a100', group: 'rackA', weight: 1 } }, 40, 1],
    ['B2 remove one from rack A', 4096, 3, B, { op: 'remove', id: 'a042' }, 41, 2],
    ['C1 add one', 4096, 1, C, { op: 'add', node: { id: 'n300', group: 'r0', weight: 1 } }, 13, 1],
    ['C2 remove one', 4096, 1, C, { op: 'remove', id: 'n123' }, 14, 1],
  ];
  it.each(cases)('%s: moves = LB_moves and spread = spread_LB, isolated, covered', (_name, shards, rf, nodes, op, lbMoves, lbSpread) => {
    const m = step(shards, rf, nodes, op);
    expect({ lbMoves: m.lbMoves, lbSpread: m.lbSpread }).toEqual({ lbMoves, lbSpread });
    expect({ moves: m.moves, spread: m.spread }).toEqual({ moves: lbMoves, spread: lbSpread });
    expect({ iso: m.isoViolations, dup: m.duplicates, uncovered: m.uncovered }).toEqual({ iso: 0, dup: 0, uncovered: 0 });
  });

  it('B0: the initial placement puts 96 nodes of each rack at 41 copies and 4 at 40', () => {
    const p = place({ numShards: 4096, replicationFactor: 3, nodes: B, current: empty(4096) });
    const loads = new Map<string, number>();
    for (const copies of p) for (const id of copies) loads.set(id, (loads.get(id) ?? 0) + 1);
    for (const rack of ['a', 'b', 'c']) {
      const counts = B.filter((n) => n.id.startsWith(rack)).map((n) => loads.get(n.id));
      expect(counts.filter((c) => c === 41)).toHaveLength(96);
      expect(counts.filter((c) => c === 40)).toHaveLength(4);
    }
  });

  it('a rolling replacement of every node moves each copy exactly once (LB = R)', () => {
    let nodes = A;
    let current = place({ numShards: 256, replicationFactor: 1, nodes, current: empty(256) });
    let moves = 0;
    for (let i = 0; i < 32; i++) {
      nodes = applyOperation(nodes, { op: 'replace', old: `n${pad(i)}`, new: { id: `m${pad(i)}`, group: 'r0', weight: 1 } });
      const next = place({ numShards: 256, replicationFactor: 1, nodes, current });
      const m = placementMetrics(current, next, 1, nodes);
      expect(m.spread).toBe(0);
      moves += m.moves;
      current = next;
    }
    expect(moves).toBe(256);
  });
});

describe("BalancedPlacementStrategy on the project's own scenarios (bench/scenarios/placement)", () => {
  const dir = new URL('../../bench/scenarios/placement/', import.meta.url);
  const files = readdirSync(dir).filter((f) => f.endsWith('.json'));
  it.each(files)('%s: every step at moves = LB_moves and spread = spread_LB', (file) => {
    const scenario = parseScenario(JSON.parse(readFileSync(new URL(file, dir), 'utf8')), file);
    let nodes = scenario.nodes.map(toNode);
    let current = place({ numShards: scenario.shards, replicationFactor: scenario.rf, nodes, current: empty(scenario.shards) });
    for (const op of scenario.ops) {
      nodes = applyOperation(nodes, op);
      const next = place({ numShards: scenario.shards, replicationFactor: scenario.rf, nodes, current });
      const m = placementMetrics(current, next, scenario.rf, nodes);
      expect({ op, moves: m.moves, spread: m.spread, iso: m.isoViolations, dup: m.duplicates, uncovered: m.uncovered }).toEqual({
        op,
        moves: m.lbMoves,
        spread: m.lbSpread,
        iso: 0,
        dup: 0,
        uncovered: 0,
      });
      current = next;
    }
  });
});

describe('BalancedPlacementStrategy: isolation and input errors', () => {
  it('refuses a replication factor above the number of racks with a typed error', () => {
    const r = checkIsolationFeasible(3, ['rackA', 'rackB', 'rackA']);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.error).toMatchObject({ type: 'IsolationImpossible', replicationFactor: 3, groups: ['rackA', 'rackB'] });
    expect(checkIsolationFeasible(2, ['rackA', 'rackB']).ok).toBe(true);
  });

  it('places min(RF, racks) copies when racks are lost at run time, never two in one rack', () => {
    const nodes = [node('x1', 'A'), node('x2', 'A'), node('y1', 'B')];
    const p = place({ numShards: 8, replicationFactor: 3, nodes, current: empty(8) });
    for (const copies of p) {
      expect(copies).toHaveLength(2);
      expect(copies.filter((id) => id.startsWith('x'))).toHaveLength(1);
    }
  });

  it('answers bad input with InvalidPlacementInput', () => {
    const bad = (input: Partial<PlacementInput>) =>
      strategy.place({ numShards: 2, replicationFactor: 1, nodes: [node('a', 'r')], current: [[], []], ...input });
    expect(bad({ current: [[]] })).toMatchObject({ ok: false, error: { type: 'InvalidPlacementInput' } });
    expect(bad({ nodes: [node('a', 'r'), node('a', 'r')] })).toMatchObject({ ok: false, error: { type: 'InvalidPlacementInput' } });
    expect(bad({ nodes: [node('a', 'r', 0)] })).toMatchObject({ ok: false, error: { type: 'InvalidPlacementInput' } });
    expect(bad({ replicationFactor: 0 })).toMatchObject({ ok: false, error: { type: 'InvalidPlacementInput' } });
  });

  it('gives a node of weight 2 twice the copies of a node of weight 1', () => {
    const p = place({ numShards: 30, replicationFactor: 1, nodes: [node('big', 'r', 2), node('s1', 'r'), node('s2', 'r')], current: empty(30) });
    const count = (id: string) => p.filter((c) => c.includes(id as NodeId)).length;
    expect(count('big')).toBe(15);
    expect([count('s1'), count('s2')].sort()).toEqual([7, 8]);
  });
});

// Random clusters: 1–4 racks, 1–12 nodes, 1–48 shards, RF 1–3, then one membership change.
const clusterArb = fc
  .record({
    racks: fc.integer({ min: 1, max: 4 }),
    nodes: fc.integer({ min: 1, max: 12 }),
    shards: fc.integer({ min: 1, max: 48 }),
    rf: fc.integer({ min: 1, max: 3 }),
    seed: fc.integer({ min: 0, max: 1_000_000 }),
    op: fc.constantFrom('add', 'remove', 'replace', 'noop'),
  })
  .map(({ racks, nodes, shards, rf, seed, op }) => {
    const list = Array.from({ length: nodes }, (_, i) => node(`n${pad((i * 7919 + seed) % 1000)}-${i}`, `rack${(i + seed) % racks}`));
    return { list, shards, rf, seed, op };
  });

function shuffled<T>(xs: readonly T[], seed: number): T[] {
  const out = [...xs];
  let x = seed + 1;
  for (let i = out.length - 1; i > 0; i--) {
    x = (x * 1103515245 + 12345) % 2147483648;
    const j = x % (i + 1);
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

describe('BalancedPlacementStrategy: properties', () => {
  it('after any one membership change: spread ≤ spread_LB, moves = LB_moves at RF 1 or RF = racks, isolated, covered', () => {
    fc.assert(
      fc.property(clusterArb, ({ list, shards, rf, seed, op }) => {
        const before = place({ numShards: shards, replicationFactor: rf, nodes: list, current: empty(shards) });
        const change: ScenarioOperation =
          op === 'add' || list.length === 1
            ? { op: 'add', node: { id: 'zz-new', group: `rack${seed % 5}`, weight: 1 } }
            : op === 'remove'
              ? { op: 'remove', id: list[seed % list.length]!.id }
              : op === 'replace'
                ? { op: 'replace', old: list[seed % list.length]!.id, new: 'zz-new' }
                : { op: 'noop' };
        const nodes = applyOperation(list, change);
        const after = place({ numShards: shards, replicationFactor: rf, nodes, current: before });
        const m = placementMetrics(before, after, rf, nodes);
        expect(m.spread).toBeLessThanOrEqual(m.lbSpread);
        // §3.3's bound is exact with RF 1 and with one copy per rack (racks are independent then).
        // Otherwise it is neither exact nor a lower bound: isolation can force a chain of moves it
        // does not see (3 single-node racks, RF 2, a fourth node removed), and it takes a rack whose
        // fair share exceeds one copy per shard to hold exactly one, where a balanced map may hold
        // none (1 shard, RF 3, racks of 2, 1, 1, 1 nodes: 0 moves are balanced, the bound says 1).
        // The exact minimum there is issue 21's; nothing about it is asserted here.
        const racks = new Set(nodes.map((n) => n.group)).size;
        if (rf === 1 || rf === racks) expect(m.moves).toBe(m.lbMoves);
        expect({ iso: m.isoViolations, dup: m.duplicates, uncovered: m.uncovered }).toEqual({ iso: 0, dup: 0, uncovered: 0 });
      }),
      { numRuns: 400 },
    );
  });

  it('is deterministic: any order of nodes and of copies gives the same map; asked again, it moves nothing', () => {
    fc.assert(
      fc.property(clusterArb, ({ list, shards, rf, seed }) => {
        // A messy current map: random copies, some on nodes that left.
        const current = Array.from({ length: shards }, (_, s) => shuffled([...list.map((n) => n.id), 'gone' as NodeId], seed + s).slice(0, (seed + s) % 4));
        const held = new Set(Array.from({ length: shards }, (_, s) => s).filter((s) => (s * 31 + seed) % 7 === 0));
        const a = place({ numShards: shards, replicationFactor: rf, nodes: list, current, held });
        const b = place({ numShards: shards, replicationFactor: rf, nodes: shuffled(list, seed), current: current.map((c, s) => shuffled(c, s)), held });
        expect(b).toEqual(a);
        const settled = place({ numShards: shards, replicationFactor: rf, nodes: list, current });
        expect(place({ numShards: shards, replicationFactor: rf, nodes: list, current: settled })).toEqual(settled);
        // Held shards keep their live copies and get none.
        const live = new Set<string>(list.map((n) => n.id));
        for (const s of held) expect(a[s]).toEqual([...new Set(current[s]!.filter((id) => live.has(id)))].sort());
      }),
      { numRuns: 300 },
    );
  });
});
