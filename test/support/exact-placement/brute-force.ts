// The contract solved by enumeration, to check the flow checker on tiny inputs: every subset of the
// listed nodes for every shard, kept when the contract's hard rules accept it, every combination
// scored from scratch. Exponential; meant for a handful of shards and nodes.
import type { NodeId } from '../../../src/core/ids.js';
import type { PlacementInput } from '../../../src/core/placement/placement-types.js';
import { betterObjective, readContract, sameObjective, scaledLoad, shardProblems, withChosenBounds, type ContractView, type Objective } from './contract.js';

export interface BruteForceOptimum {
  readonly objective: Objective;
  /** Narrowest spread among the maps reaching `objective`; undefined when its violation is not 0. */
  readonly minSpread: number | undefined;
  /** How many valid maps were enumerated. */
  readonly maps: number;
}

interface Option {
  readonly loadOn: readonly number[];
  readonly placed: number;
  readonly moves: number;
}

export function bruteForceOptimum(input: PlacementInput, maxMaps = 2_000_000): BruteForceOptimum {
  // The bounds chosen by enumeration too: no flow in this checker of the flow checker.
  const view = withChosenBounds(readContract(input), (asIf) => enumerate(asIf, maxMaps).objective.violation === 0);
  return enumerate(view, maxMaps);
}

function enumerate(view: ContractView, maxMaps: number): BruteForceOptimum {
  const listed = [...view.groupOf.keys()].sort() as NodeId[];
  const options: Option[][] = [];
  for (let s = 0; s < view.numShards; s++) {
    const valid: Option[] = [];
    for (let mask = 0; mask < 1 << listed.length; mask++) {
      const ids = listed.filter((_, k) => mask & (1 << k));
      if (shardProblems(view, s, ids).length > 0) continue;
      const loadOn = ids.map((id) => view.presentIndex.get(id)).filter((i): i is number => i !== undefined);
      const created = ids.filter((id) => view.presentIndex.has(id) && !view.before[s]!.has(id)).length;
      valid.push({ loadOn, placed: view.held[s] ? 0 : loadOn.length, moves: view.held[s] ? 0 : created });
    }
    options.push(valid);
  }
  const combinations = options.reduce((n, o) => n * o.length, 1);
  if (combinations > maxMaps) throw new Error(`${combinations} maps: too many to enumerate`);

  const loads = new Array<number>(view.present.length).fill(0);
  let best: Objective | undefined;
  let minSpread: number | undefined;
  let maps = 0;
  const visit = (s: number, placed: number, moves: number): void => {
    if (s === view.numShards) {
      maps++;
      let violation = 0;
      loads.forEach((load, i) => {
        violation += Math.max(0, view.shares[i]!.lo - load) + Math.max(0, load - view.shares[i]!.hi);
      });
      const objective = { placed, violation, moves };
      const scaled = loads.map((load, i) => scaledLoad(view, i, load));
      const spread = scaled.length === 0 ? 0 : Math.max(...scaled) - Math.min(...scaled);
      if (best === undefined || betterObjective(objective, best)) {
        best = objective;
        minSpread = violation === 0 ? spread : undefined;
      } else if (sameObjective(objective, best) && minSpread !== undefined && spread < minSpread) {
        minSpread = spread;
      }
      return;
    }
    for (const option of options[s]!) {
      for (const i of option.loadOn) loads[i]!++;
      visit(s + 1, placed + option.placed, moves + option.moves);
      for (const i of option.loadOn) loads[i]!--;
    }
  };
  visit(0, 0, 0);
  if (best === undefined) throw new Error('no valid map at all');
  return { objective: best, minSpread, maps };
}
