// Issue 21: the balanced strategy against the exact checker (test/support/placement-checker.ts) on
// every input, not only the standard scenarios. Each decision must be valid, place as many copies
// as any valid map, violate the fair-share bounds no more than needed, move no more copies than
// needed, spread no wider than the narrowest optimal map, return its own output unchanged when asked
// again, and not depend on the order of nodes or copies.
//
// Random histories by default: SHARDHERD_PLACEMENT_STEPS (3200) steps over histories seeded from
// SHARDHERD_PLACEMENT_SEED (1) up. A failure names its seed; SHARDHERD_PLACEMENT_SEED=<seed> replays
// that history first.
import { describe, expect, it } from 'vitest';
import type { NodeId } from '../../src/core/ids.js';
import { BalancedPlacementStrategy } from '../../src/core/placement/balanced-strategy.js';
import type { Placement, PlacementInput } from '../../src/core/placement/placement-types.js';
import type { ContractNode } from '../support/exact-placement/contract.js';
import { invalidInputReason } from '../support/placement-checker.js';
import { describeNode, RandomPlacementHistory } from '../support/random-placement-steps.js';
import { judgeStep, type FailureKind, type StepFailure } from '../support/strategy-vs-checker.js';

const strategy = new BalancedPlacementStrategy();
const node = (id: string, group: string, weight = 1): ContractNode => ({ id: id as NodeId, group, weight });
const map = (shards: string[][]): Placement => shards.map((ids) => ids as NodeId[]);

/** The failures of one decision, with the decision's output (to ask again with). */
function judged(input: PlacementInput): { failures: readonly StepFailure[]; output: Placement | undefined } {
  return judgeStep(strategy, input, 1);
}

describe('issue 21: the known failures, fixed', () => {
  it('four one-node racks at RF 2, `new` joins n0’s rack: one move is enough', () => {
    const nodes = ['n0', 'n1', 'n2', 'n3'].map((id, k) => node(id, `r${k}`)).concat(node('new', 'r0'));
    const { failures } = judged({
      numShards: 3,
      replicationFactor: 2,
      nodes,
      current: map([
        ['n0', 'n1'],
        ['n0', 'n1'],
        ['n2', 'n3'],
      ]),
    });
    expect(failures).toEqual([]);
  });

  it('31 shards at RF 3 on racks of 2, 3 and 6 nodes, a rack of 6 added: 30 moves reach spread 2, and asked again nothing moves', () => {
    const racks = { r0: ['n0', 'n8'], r1: ['n1', 'n9', 'n10'], r2: ['n2', 'n3', 'n4', 'n5', 'n6', 'n7'], r3: ['a0', 'a1', 'a2', 'a3', 'a4', 'a5'] };
    const nodes = Object.entries(racks).flatMap(([rack, ids]) => ids.map((id) => node(id, rack)));
    // A balanced map of the first three racks (the one in the issue): shard 0, then six shards repeating.
    const cycle = [
      ['n0', 'n1', 'n2'],
      ['n10', 'n3', 'n8'],
      ['n0', 'n4', 'n9'],
      ['n1', 'n5', 'n8'],
      ['n0', 'n10', 'n6'],
      ['n7', 'n8', 'n9'],
    ];
    const before = map([cycle[0]!, ...Array.from({ length: 30 }, (_, s) => cycle[s % 6]!)]);
    const { failures } = judged({ numShards: 31, replicationFactor: 3, nodes, current: before });
    expect(failures).toEqual([]);
  });

  it('weighted 4 | 1 + 4 at RF 2: asked again with its own output, the strategy moves nothing', () => {
    const nodes = [node('n0', 'r0', 4), node('n1', 'r1', 1), node('new', 'r1', 4)];
    const { failures } = judged({
      numShards: 3,
      replicationFactor: 2,
      nodes,
      current: map([
        ['n0', 'n1'],
        ['n0', 'n1'],
        ['n0', 'n1'],
      ]),
    });
    expect(failures).toEqual([]);
  });

  it('rack r1 lost at RF 1 with weights 3 | 3 | 1 | 1: n0 takes the lost shard (spread 1.11, not 1.67)', () => {
    const nodes = [node('n0', 'r0', 3), node('n2', 'r2'), node('n3', 'r0')];
    const { failures } = judged({ numShards: 2, replicationFactor: 1, nodes, current: map([['n0'], ['n1']]) });
    expect(failures).toEqual([]);
  });
});

describe('bad input is refused with InvalidPlacementInput, never placed', () => {
  const good: PlacementInput = { numShards: 2, replicationFactor: 2, nodes: [node('a', 'r0'), node('b', 'r1')], current: map([['a'], []]) };
  const cases: [string, Partial<PlacementInput>][] = [
    ['weight 0', { nodes: [node('a', 'r0', 0), node('b', 'r1')] }],
    ['negative weight', { nodes: [node('a', 'r0', -1), node('b', 'r1')] }],
    ['NaN weight', { nodes: [node('a', 'r0', Number.NaN), node('b', 'r1')] }],
    ['infinite weight', { nodes: [node('a', 'r0', Number.POSITIVE_INFINITY), node('b', 'r1')] }],
    ['a node listed twice', { nodes: [node('a', 'r0'), node('a', 'r1')] }],
    ['current shorter than numShards', { current: map([['a']]) }],
    ['replication factor 0', { replicationFactor: 0 }],
    ['replication factor 1.5', { replicationFactor: 1.5 }],
  ];
  it.each(cases)('%s', (_name, change) => {
    const input = { ...good, ...change };
    expect(invalidInputReason(input)).toBeDefined();
    expect(strategy.place(input)).toMatchObject({ ok: false, error: { type: 'InvalidPlacementInput' } });
  });

  it('the same input with valid values is placed', () => {
    expect(invalidInputReason(good)).toBeUndefined();
    expect(strategy.place(good).ok).toBe(true);
  });
});

// ---- Random histories -------------------------------------------------------------------------

const totalSteps = positiveInteger('SHARDHERD_PLACEMENT_STEPS', 3200);
const firstSeed = positiveInteger('SHARDHERD_PLACEMENT_SEED', 1);

/** Long histories on small clusters, short ones on large: most steps small, a few large. */
function stepsFor(history: RandomPlacementHistory): number {
  const size = history.numShards * history.shape.nodes.length;
  return size <= 1_000 ? 60 : size <= 6_000 ? 30 : 12;
}

const histories: { seed: number; steps: number; title: string }[] = [];
for (let seed = firstSeed, planned = 0; planned < totalSteps; seed++) {
  const history = new RandomPlacementHistory(seed);
  const steps = Math.min(stepsFor(history), totalSteps - planned);
  const { numShards, replicationFactor, nodes } = history.shape;
  histories.push({
    seed,
    steps,
    title: `seed ${seed}: ${steps} steps from ${numShards} shards, RF ${replicationFactor}, ${nodes.length} nodes in ${new Set(nodes.map((n) => n.group)).size} groups`,
  });
  planned += steps;
}

describe(`issue 21: ${totalSteps} random steps against the exact checker`, () => {
  for (const { seed, steps, title } of histories)
    it(
      title,
      () => {
        const history = new RandomPlacementHistory(seed);
        let previous: Placement = Array.from({ length: history.numShards }, () => []);
        const found: { step: number; label: string; input: PlacementInput; failure: StepFailure }[] = [];
        for (let k = 0; k < steps; k++) {
          const step = k === 0 ? history.initial() : history.next();
          const input = step.input(previous);
          const { output, failures } = judgeStep(strategy, input, seed * 100_000 + k);
          for (const failure of failures) found.push({ step: k, label: step.label, input, failure });
          if (output === undefined) break;
          previous = output;
        }
        if (found.length === 0) return;
        const counts = new Map<FailureKind, number>();
        for (const f of found) counts.set(f.failure.kind, (counts.get(f.failure.kind) ?? 0) + 1);
        const firstOfEach = [...counts.keys()].map((kind) => found.find((f) => f.failure.kind === kind)!);
        const report = [
          `seed ${seed} (replay: SHARDHERD_PLACEMENT_SEED=${seed}): ${[...counts].map(([kind, n]) => `${kind} ×${n}`).join(', ')}`,
          ...firstOfEach.map((f) => `  step ${f.step} (${f.label}) ${f.failure.kind}: ${f.failure.detail}\n    ${describeInput(f.input)}`),
        ].join('\n');
        expect.fail(report);
        // The checker's flow is deliberately unaggregated, and steps with absent nodes solve it twice.
      },
      60_000,
    );
});

/** Enough to rebuild a small failing input by hand; sizes only for a large one. */
function describeInput(input: PlacementInput): string {
  const nodes = (input.nodes as readonly ContractNode[]).map(describeNode).join(' ');
  const held = input.held && input.held.size > 0 ? `; held ${[...input.held].join(',')}` : '';
  const head = `${input.numShards} shards, RF ${input.replicationFactor}${held}; nodes ${nodes}`;
  return input.numShards <= 32 && input.nodes.length <= 8 ? `${head}; current ${JSON.stringify(input.current)}` : head;
}

function positiveInteger(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 1) throw new Error(`${name} must be a positive integer, got ${raw}`);
  return value;
}
