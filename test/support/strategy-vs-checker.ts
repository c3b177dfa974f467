// Judges one decision of a placement strategy against the exact checker: every way it falls short
// of the contract (validity, optimum of placed/violation/moves, narrowest spread, stability,
// determinism), each a named kind so a run can count them.
import type { Placement, PlacementInput, PlacementStrategy } from '../../src/core/placement/placement-types.js';
import { SeededRandom } from '../../src/sim/random.js';
import { betterObjective, checkPlacement, sameObjective, scorePlacement, type ProblemKind } from './placement-checker.js';

export type FailureKind = 'error' | `invalid:${ProblemKind}` | 'placed' | 'violation' | 'moves' | 'spread' | 'unstable' | 'nondeterministic' | 'checker';

export interface StepFailure {
  readonly kind: FailureKind;
  readonly detail: string;
}

export interface JudgedStep {
  /** The strategy's map, to feed to the next step; undefined when it refused the input. */
  readonly output: Placement | undefined;
  readonly failures: readonly StepFailure[];
}

const SPREAD_TOLERANCE = 1e-9;

export function judgeStep(strategy: PlacementStrategy, input: PlacementInput, shuffleSeed: number): JudgedStep {
  const result = strategy.place(input);
  if (!result.ok) return { output: undefined, failures: [{ kind: 'error', detail: `${result.error.type}: ${result.error.message}` }] };
  const output = result.value;
  const failures: StepFailure[] = [];
  const fail = (kind: FailureKind, detail: string): void => void failures.push({ kind, detail });

  const { problems, own, exact } = checkPlacement(input, output);
  for (const kind of new Set(problems.map((p) => p.kind)))
    fail(
      `invalid:${kind}`,
      problems
        .filter((p) => p.kind === kind)
        .slice(0, 3)
        .map((p) => p.detail)
        .join('; '),
    );

  // The checker's own claims, checked on its witnesses: a bug there must not pass for the strategy's.
  const witness = scorePlacement(input, exact.witness);
  if (witness.problems.length > 0 || !sameObjective(witness.score, exact.objective))
    fail('checker', `witness ${JSON.stringify(exact.witness)} does not reach ${JSON.stringify(exact.objective)}`);
  if (problems.length === 0 && betterObjective(own, exact.objective)) fail('checker', `the output beats the "optimum" ${JSON.stringify(exact.objective)}`);
  if (exact.spreadWitness !== undefined && exact.minSpread !== undefined) {
    const narrow = scorePlacement(input, exact.spreadWitness);
    if (narrow.problems.length > 0 || !sameObjective(narrow.score, exact.objective) || Math.abs(narrow.score.spread - exact.minSpread) > SPREAD_TOLERANCE)
      fail('checker', `spread witness does not reach spread ${exact.minSpread}`);
  }

  // The contract's promise: without held shards or absent nodes every shard gets c copies within the bounds.
  const plain = (input.held?.size ?? 0) === 0 && !input.nodes.some((n) => (n as { absent?: boolean }).absent === true);
  if (plain && exact.objective.violation > 0)
    fail('checker', `no held shard, no absent node, yet no map within the bounds (violation ${exact.objective.violation})`);

  const opt = exact.objective;
  if (own.placed < opt.placed) fail('placed', `${own.placed} copies placed, ${opt.placed} possible`);
  else if (own.placed === opt.placed && own.violation > opt.violation) fail('violation', `bound violation ${own.violation}, ${opt.violation} possible`);
  else if (own.placed === opt.placed && own.violation === opt.violation && own.moves > opt.moves) fail('moves', `${own.moves} moves, ${opt.moves} enough`);
  if (problems.length === 0 && sameObjective(own, opt) && exact.minSpread !== undefined) {
    if (own.spread > exact.minSpread + SPREAD_TOLERANCE)
      fail('spread', `spread ${round(own.spread)}, ${round(exact.minSpread)} reachable at the same moves (e.g. ${JSON.stringify(exact.spreadWitness)})`);
    if (own.spread < exact.minSpread - SPREAD_TOLERANCE) fail('checker', `the output's spread ${own.spread} is below the "minimum" ${exact.minSpread}`);
  }

  const again = strategy.place({ ...input, current: output });
  if (!again.ok) fail('unstable', `placing its own output again fails: ${again.error.message}`);
  else if (!sameMap(again.value, output)) fail('unstable', `placing its own output again changes ${describeDifference(output, again.value)}`);

  const rng = new SeededRandom(shuffleSeed);
  const shuffledInput: PlacementInput = { ...input, nodes: shuffled(rng, input.nodes), current: input.current.map((ids) => shuffled(rng, ids)) };
  const reordered = strategy.place(shuffledInput);
  if (!reordered.ok) fail('nondeterministic', `the same input in another order fails: ${reordered.error.message}`);
  else if (!sameMap(reordered.value, output))
    fail('nondeterministic', `the same input in another order changes ${describeDifference(output, reordered.value)}`);

  return { output, failures };
}

export function sameMap(a: Placement, b: Placement): boolean {
  return a.length === b.length && a.every((ids, s) => ids.length === b[s]!.length && ids.every((id, k) => id === b[s]![k]));
}

function describeDifference(a: Placement, b: Placement): string {
  const changed = a.flatMap((ids, s) => (sameMap([ids], [b[s] ?? []]) ? [] : [`shard ${s} [${ids.join(',')}]→[${(b[s] ?? []).join(',')}]`]));
  return `${changed.length} shards: ${changed.slice(0, 3).join('; ')}${changed.length > 3 ? '; …' : ''}`;
}

function shuffled<T>(rng: SeededRandom, items: readonly T[]): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = rng.int(0, i);
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

const round = (x: number): string => (Math.round(x * 1000) / 1000).toString();
