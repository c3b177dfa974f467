// The `balanced` strategy: the whole map from the copies that exist now, at the exact optimum of
// docs/PLACEMENT.md ("What exact means"): every copy the isolation groups allow, every node within
// ⌊q⌋..⌈q⌉ of its weighted, water-filled share, the fewest copies moved, and among those maps the
// least weighted spread. Given its own output it moves nothing (that map is the only one with no move).
//
// The common case (RF = groups, nothing absent or held) is decided group by group in linear time
// (group-fill.ts); everything else goes through one min-cost flow (flow-placement.ts), then the
// spread search (spread-search.ts) when weights or capped groups leave a choice of spread.
import type { NodeId } from '../ids.js';
import { err, ok, type Result } from '../result.js';
import { runWhole, type Steps } from '../steps.js';
import type { CopyTable } from './copy-table.js';
import { placeByFlow } from './flow-placement.js';
import { fillGroups } from './group-fill.js';
import { outcomeOf } from './placement-outcome.js';
import { PlacementProblem } from './placement-problem.js';
import type { Placement, PlacementError, PlacementInput, PlacementStrategy } from './placement-types.js';
import { narrowSpread } from './spread-search.js';

/** Refuses a replication factor the isolation groups cannot hold (M3 refuses it too). */
export function checkIsolationFeasible(replicationFactor: number, groups: readonly string[]): Result<void, PlacementError> {
  const distinct = [...new Set(groups)].sort();
  if (replicationFactor <= distinct.length) return ok(undefined);
  return err({
    type: 'IsolationImpossible',
    replicationFactor,
    groups: distinct,
    message: `replication factor ${replicationFactor} needs ${replicationFactor} isolation groups, only ${distinct.length} (${distinct.join(', ') || 'none'}) have members`,
  });
}

export class BalancedPlacementStrategy implements PlacementStrategy {
  readonly name = 'balanced';

  place(input: PlacementInput): Result<Placement, PlacementError> {
    return runWhole(this.placeInSteps(input));
  }

  /** `place` with a step between its phases, each a pass over the shards (10–40 ms at 65 536 × 3 in a cold process). */
  *placeInSteps(input: PlacementInput): Steps<Result<Placement, PlacementError>> {
    const invalid = validate(input);
    if (invalid) return err({ type: 'InvalidPlacementInput', message: invalid });
    if (input.nodes.length === 0) return ok(input.current.map(() => []));
    const { problem, table } = yield* decide(input);
    yield;
    const out = new Array<readonly NodeId[]>(input.numShards);
    for (let s = 0; s < input.numShards; s++) out[s] = problem.idsOf(s, table.nodes, s * table.width, table.count(s));
    return ok(out);
  }
}

/**
 * While nodes are absent, the bounds of the shares as if they were present come first: the map that
 * was at the optimum before an absence meets them, so an absence alone moves nothing. When no map
 * placing every copy it can meets them (copies the absent nodes held had to be placed again), the
 * shares over the present nodes decide, as without absences.
 */
function* decide(input: PlacementInput): Steps<{ problem: PlacementProblem; table: CopyTable }> {
  const problem = new PlacementProblem(input);
  yield;
  if (problem.anyAbsent) {
    const asIf = new PlacementProblem(input, { asIfAbsentPresent: true });
    const table = placeByFlow(asIf);
    if (outcomeOf(asIf, table).violation === 0) return { problem: asIf, table: narrowSpread(asIf, table) };
  }
  return { problem, table: fillGroups(problem) ?? narrowSpread(problem, placeByFlow(problem)) };
}

function validate(input: PlacementInput): string | undefined {
  if (!Number.isInteger(input.numShards) || input.numShards < 0) return `numShards must be a non-negative integer, got ${input.numShards}`;
  if (!Number.isInteger(input.replicationFactor) || input.replicationFactor < 1)
    return `replicationFactor must be a positive integer, got ${input.replicationFactor}`;
  if (input.current.length !== input.numShards) return `current has ${input.current.length} shards, numShards is ${input.numShards}`;
  const ids = new Set<string>();
  for (const n of input.nodes) {
    if (ids.has(n.id)) return `node ${n.id} is listed twice`;
    ids.add(n.id);
    if (typeof n.weight !== 'number' || !(n.weight > 0) || !Number.isFinite(n.weight))
      return `node ${n.id} has weight ${n.weight}; weights must be finite and above 0`;
    if (typeof n.group !== 'string' || n.group === '') return `node ${n.id} has no isolation group (a member without a rack is its own group: node:<id>)`;
  }
  return undefined;
}
