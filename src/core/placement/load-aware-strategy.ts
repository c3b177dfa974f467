// The `load-aware` mode of the balanced strategy (docs/PLACEMENT.md, "The `load-aware` mode"): the
// hard rules exactly as `balanced` meets them, then every present node's measured load within a
// band around its weighted share, moving as few copies as the search finds.
//
// The copy-count strategy decides which copies must exist (every copy the groups allow, isolation,
// absent and held shards); its moves made only to even out copy counts are taken back, since here
// load, not the number of copies, is what is evened out. Then load-balance.ts moves copies while
// a move lowers the load outside the band.
import type { NodeId } from '../ids.js';
import { err, ok, type Result } from '../result.js';
import { runWhole, type Steps } from '../steps.js';
import { BalancedPlacementStrategy } from './balanced-strategy.js';
import { balanceLoads, type LoadBalanceReport } from './load-balance.js';
import type { Placement, PlacementError, PlacementInput, PlacementNode, PlacementStrategy } from './placement-types.js';

/** The default band: every node's load within ±5 % of its weighted share. */
export const DEFAULT_LOAD_BAND = 0.05;

/** A placement input with each shard's measured load. */
export interface LoadAwareInput extends PlacementInput {
  /**
   * Per shard: the load one copy carries (records/s, bytes/s or any additive weight), finite and
   * at least 0; `undefined` when not measured (stale or missing reports): such a shard counts as
   * the mean of the measured ones, so unknown load falls back to counting copies, never to zero;
   * when nothing measured carries load (none measured, or all 0) every shard counts 1.
   */
  readonly loads: readonly (number | undefined)[];
  /**
   * The most copies the balancing may move (the copy-count strategy's re-created copies are not
   * counted: they replace lost ones, and are placed by load whatever the limit). Default: no limit;
   * 0: place lost copies only.
   */
  readonly maxMoves?: number;
  /**
   * The most copies any one node may gain plus shed against `current` (a copy that leaves it and
   * one it takes count one each), moves of hot copies included; a move, swap or chain that would
   * take a node past it is not made. Default: no limit. Copies the copy-count strategy re-creates
   * for lost ones count too, but are placed even past it (recovery does not wait): a node they take
   * past it only makes moves that lower its count. A positive integer.
   */
  readonly maxMovesPerNode?: number;
  /**
   * At most as many copies moved as the copy-count strategy moves for the same input (re-created
   * lost copies not counted), on top of `maxMoves`: what a round that a join, a drain or a lost copy
   * calls for may move, so that such a round never rebalances by load beyond the change (that is
   * the load round's, held back by its trigger band, `sustainMs` and limits).
   */
  readonly movesAsCopyCount?: boolean;
}

export interface LoadAwareDecision {
  readonly placement: Placement;
  readonly report: LoadBalanceReport;
  /** The nodes in the order of `report.nodes` (by id). */
  readonly nodeOrder: readonly NodeId[];
}

export class LoadAwarePlacementStrategy implements PlacementStrategy {
  readonly name = 'load-aware';
  private readonly copyCount = new BalancedPlacementStrategy();

  /** `band`: the half-width of every node's band as a fraction of its share (0 < band < 1). */
  constructor(readonly band: number = DEFAULT_LOAD_BAND) {
    if (!(band > 0 && band < 1)) throw new RangeError(`the load band must be above 0 and below 1 (0.05 is ±5 %), got ${band}`);
  }

  /** Without loads every shard counts alike: the copy-count map, its moves to even out counts kept back. */
  place(input: PlacementInput): Result<Placement, PlacementError> {
    const decided = this.decide({ ...input, loads: (input as Partial<LoadAwareInput>).loads ?? [] });
    return decided.ok ? ok(decided.value.placement) : decided;
  }

  *placeInSteps(input: PlacementInput): Steps<Result<Placement, PlacementError>> {
    const decided = yield* this.decideInSteps({ ...input, loads: (input as Partial<LoadAwareInput>).loads ?? [] });
    return decided.ok ? ok(decided.value.placement) : decided;
  }

  /** The map and what the balancing did (the load outside the band before and after, moves). */
  decide(input: LoadAwareInput): Result<LoadAwareDecision, PlacementError> {
    return runWhole(this.decideInSteps(input));
  }

  *decideInSteps(input: LoadAwareInput): Steps<Result<LoadAwareDecision, PlacementError>> {
    const loads = loadsOf(input);
    if (!loads.ok) return loads;
    const perNode = input.maxMovesPerNode;
    if (perNode !== undefined && !(Number.isInteger(perNode) && perNode >= 1)) {
      return err({ type: 'InvalidPlacementInput', message: `maxMovesPerNode is ${perNode}; it must be a positive integer (copies a node gains or sheds)` });
    }
    const base = yield* this.copyCount.placeInSteps(input);
    if (!base.ok) return base;
    yield;
    const nodes = [...input.nodes].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    const index = new Map(nodes.map((n, i) => [n.id as string, i]));
    const groupIndex = new Map<string, number>();
    const groups = nodes.map((n) => groupIndex.get(n.group) ?? (groupIndex.set(n.group, groupIndex.size), groupIndex.size - 1));
    const current = input.current.map((copies) => copies.flatMap((id) => (index.has(id) ? [index.get(id)!] : [])));
    const held = Array.from({ length: input.numShards }, (_, s) => input.held?.has(s) ?? false);
    const start = base.value.map((copies, s) =>
      takeBackCountMoves(
        copies.map((id) => index.get(id)!),
        current[s]!,
        nodes,
        groups,
        held[s]!,
      ),
    );
    const countMoves =
      input.movesAsCopyCount === true
        ? movesBetween(
            current,
            base.value.map((copies) => copies.map((id) => index.get(id)!)),
          )
        : Infinity;
    const maxMoves = Math.min(input.maxMoves ?? Infinity, countMoves);
    const report = yield* balanceLoads({
      weights: nodes.map((n) => n.weight),
      groups,
      absent: nodes.map((n) => n.absent === true),
      loads: loads.value,
      current,
      start,
      held,
      band: this.band,
      ...(maxMoves === Infinity ? {} : { maxMoves }),
      ...(perNode === undefined ? {} : { maxMovesPerNode: perNode }),
    });
    const placement = start.map((copies) => copies.map((i) => nodes[i]!.id).sort());
    return ok({ placement, report, nodeOrder: nodes.map((n) => n.id) });
  }
}

/** Copies `target` moves against `current`: per shard, new copies paired with copies dropped (a new copy that replaces a lost one is no move). */
function movesBetween(current: readonly (readonly number[])[], target: readonly (readonly number[])[]): number {
  let moves = 0;
  target.forEach((copies, s) => {
    const added = copies.filter((i) => !current[s]!.includes(i)).length;
    const dropped = current[s]!.filter((i) => !copies.includes(i)).length;
    moves += Math.min(added, dropped);
  });
  return moves;
}

/**
 * The copy-count map of one shard with each copy it moved only to even out counts put back: a copy
 * it dropped from a present node for a new one comes back in place of the new one when isolation
 * allows (a copy dropped because its group already had one, or because the shard needs fewer, stays
 * dropped: there is no new copy to pair it with, or the group check refuses it).
 */
function takeBackCountMoves(target: number[], current: readonly number[], nodes: readonly PlacementNode[], groups: readonly number[], held: boolean): number[] {
  if (held) return target;
  const copies = [...target];
  const added = copies.filter((i) => !current.includes(i));
  const dropped = current.filter((i) => !copies.includes(i) && nodes[i]!.absent !== true);
  for (const back of dropped) {
    // A new copy in the dropped one's group first, then any new copy whose group swap keeps isolation.
    const candidates = [...added.filter((i) => groups[i] === groups[back]), ...added.filter((i) => groups[i] !== groups[back])];
    const replace = candidates.find((i) => !copies.some((k) => k !== i && groups[k] === groups[back]));
    if (replace === undefined) continue;
    copies[copies.indexOf(replace)] = back;
    added.splice(added.indexOf(replace), 1);
  }
  return copies;
}

/** Each shard's load as the balancer counts it, or why the loads are refused. */
function loadsOf(input: LoadAwareInput): Result<number[], PlacementError> {
  const { loads, numShards } = input;
  if (loads.length !== 0 && loads.length !== numShards) {
    return err({ type: 'InvalidPlacementInput', message: `loads has ${loads.length} shards, numShards is ${numShards}` });
  }
  for (let s = 0; s < loads.length; s++) {
    const l = loads[s];
    if (l !== undefined && (typeof l !== 'number' || !Number.isFinite(l) || l < 0)) {
      return err({
        type: 'InvalidPlacementInput',
        message: `shard ${s} has load ${l}; a load must be a finite number of at least 0 (undefined when not measured)`,
      });
    }
  }
  return ok(countedLoads(loads, numShards));
}

/**
 * Each shard's load as it counts: an unmeasured one (undefined) as the mean of the measured ones,
 * so unknown load falls back to counting copies, never to zero; and every shard as 1 when nothing
 * measured carries load (none measured, or all idle): a dataset before its records flow is spread
 * by copy count, so that nodes that join it then get their share.
 */
export function countedLoads(loads: readonly (number | undefined)[], numShards: number): number[] {
  let sum = 0;
  let measured = 0;
  for (const l of loads) {
    if (l === undefined) continue;
    sum += l;
    measured += 1;
  }
  if (sum === 0) return new Array<number>(numShards).fill(1);
  const fallback = sum / measured;
  return Array.from({ length: numShards }, (_, s) => loads[s] ?? fallback);
}
