// Load-aware datasets (docs/PLACEMENT.md, "The `load-aware` mode"): the placement every round of
// such a dataset asks for, and the load round, the only one that moves copies because load changed,
// held back until a node has been outside the trigger band for `sustainMs`, within
// `maxMovesPerHour`, never for a shard moved for load within `shardCooldownMs`, never while moves
// are in flight; a round moves at most the dataset's `maxConcurrentMoves` copies and
// `maxConcurrentMovesPerNode` per node, and the rounds after it go on with what these limits cut
// short. The view it decides by comes from load-reports.ts; operators see and steer it through
// load-operator.ts.
import type { LoadBalanceConfig } from '../dataset-config.js';
import { LoadAwarePlacementStrategy, type LoadAwareDecision, type LoadAwareInput } from '../placement/load-aware-strategy.js';
import type { Placement, PlacementInput } from '../placement/placement-types.js';
import type { Steps } from '../steps.js';
import { balancedRound, movesInFlight, placementProblem } from './planned-moves.js';
import type { DatasetRef, NodeId } from '../ids.js';
import type { LoadMoveRecord, LoadVerdict } from './protocol.js';
import type { Step } from './step.js';
import { COMPLETE_VIEW, complete, type DatasetLoad, emptyLoad, freshView, type FreshView, nodeLoadRatios } from './load-view.js';

const HOUR_MS = 3_600_000;

/** A dataset's load state (an empty one before any report). */
export const loadOf = (step: Step, ref: DatasetRef): DatasetLoad => step.loads.get(ref) ?? emptyLoad(step.dataset(ref)!.config.numShards);

/** Runs the load round of every load-aware dataset that is due (after reports, and at its scheduled check). */
export function* checkLoads(step: Step): Steps<void> {
  for (const ref of step.datasetRefs()) {
    if (step.dataset(ref)!.config.loadBalance === undefined) continue;
    yield* deferredRound(step, ref);
    yield* loadRound(step, ref);
  }
}

/**
 * At recovery, before any round: each load-aware dataset takes back the moves for load its
 * predecessors made (what the hourly limit and the cooldowns count), and one recovered serving
 * waits `staleMs` for the nodes' reports (`awaitingReportsUntil`) before a round may place it by
 * copy counts.
 */
export function restoreLoads(step: Step, persisted: readonly LoadMoveRecord[]): void {
  for (const ref of step.datasetRefs()) {
    const { config, mapper } = step.dataset(ref)!;
    if (config.loadBalance === undefined) continue;
    const moved = persisted.filter((m) => m.dataset === ref && m.shard < config.numShards).map((m) => ({ shard: m.shard, at: m.at }));
    let serving = false;
    for (let s = 0; s < config.numShards && !serving; s++) serving = mapper.servingNodes(s).length > 0;
    if (!serving && moved.length === 0) continue;
    const until = step.now + config.loadBalance.staleMs;
    const awaitingMembers = step.placeableMembers().map((m) => m.node);
    step.loads.set(ref, { ...emptyLoad(config.numShards), moved, ...(serving ? { awaitingReportsUntil: until, awaitingMembers } : {}) });
    if (serving) step.schedule(until);
  }
}

const awaiting = (step: Step, load: DatasetLoad | undefined) => load?.awaitingReportsUntil !== undefined && step.now < load.awaitingReportsUntil;

/**
 * Ends the wait for reports once the view is complete or `staleMs` passed; if the members changed
 * meanwhile, runs the round their change called for (held back to lost copies while the view was
 * empty). Nothing else: balance itself is the load round's, with its limits.
 */
function* deferredRound(step: Step, ref: DatasetRef): Steps<void> {
  const load = step.loads.get(ref);
  if (load?.awaitingReportsUntil === undefined || (awaiting(step, load) && !complete(viewOf(step, ref)))) return;
  step.loads.set(ref, { ...load, awaitingReportsUntil: undefined, awaitingMembers: undefined });
  const members = step.placeableMembers().map((m) => m.node);
  const before = load.awaitingMembers ?? [];
  if (members.length !== before.length || members.some((n) => !before.includes(n))) yield* balancedRound(step, ref, step.held(ref));
}

/** The dataset's load view now (see `freshView`). */
export function viewOf(step: Step, ref: DatasetRef): FreshView {
  const { config, mapper } = step.dataset(ref)!;
  return freshView(config, mapper, step.loads.get(ref), step.now);
}

/**
 * What a round of a load-aware dataset asks the strategy (any round: a join, a drain, a lost
 * copy), never to move more copies than the copy-count strategy would for the same change: by
 * load when the view is complete; else by copy counts (missing or stale figures count as
 * the same load, never as none), except while a new singleton awaits the nodes' first reports on a
 * dataset it recovered serving: then only lost copies are placed (an empty view must not even out
 * counts and undo the load's placement), and a change of members meanwhile has its round once the
 * view is complete (`deferredRound`).
 */
export function* loadAwareTarget(step: Step, ref: DatasetRef, problem: PlacementInput) {
  const config = step.dataset(ref)!.config.loadBalance!;
  const view = viewOf(step, ref);
  const strategy = new LoadAwarePlacementStrategy(config.band);
  const load = step.loads.get(ref);
  const held = !complete(view) && awaiting(step, load);
  // A change of members or a lost copy moves no more than it would by copy counts: balance is the load round's.
  const input: LoadAwareInput = complete(view)
    ? { ...problem, loads: view.loads, movesAsCopyCount: true }
    : held
      ? { ...problem, loads: view.loads, maxMoves: 0 }
      : { ...problem, loads: new Array<undefined>(problem.numShards).fill(undefined), movesAsCopyCount: true };
  return yield* strategy.placeInSteps(input);
}

export interface LoadPlan {
  readonly verdict: LoadVerdict;
  readonly message: string;
  readonly decision: LoadAwareDecision | undefined;
  readonly current: readonly (readonly NodeId[])[];
  readonly view: { measured: number; serving: number };
  readonly imbalancedSince: number | undefined;
  readonly movesLastHour: number;
}

/**
 * What a load round would do now, and whether it may: the decision (with at most the moves the
 * hour has left) and the verdict. Changes nothing.
 */
export function* planLoadRound(step: Step, ref: DatasetRef, dryRun: boolean): Steps<LoadPlan> {
  const ds = step.dataset(ref)!;
  const lb = ds.config.loadBalance!;
  const load = loadOf(step, ref);
  const view = viewOf(step, ref);
  const movesLastHour = load.moved.filter((m) => step.now - m.at < HOUR_MS).length;
  // Shards moved for load within their cooldown, in a cooldown after errors, or stopped, stay.
  const held = step.held(ref);
  for (const m of load.moved) if (step.now - m.at < lb.shardCooldownMs) held.add(m.shard);
  const problem = placementProblem(step, ref, held);
  const current = problem.current;
  const base = { decision: undefined, current, view, imbalancedSince: load.imbalancedSince, movesLastHour };
  if (step.placeableMembers().length === 0) return { ...base, verdict: 'balanced', message: 'no member to place on' };
  const remaining = Math.max(0, lb.maxMovesPerHour - movesLastHour);
  const strategy = new LoadAwarePlacementStrategy(lb.band);
  const input = { ...problem, loads: view.loads };
  const perNode = { maxMovesPerNode: lb.maxConcurrentMovesPerNode };
  // The bands and the nodes outside them, without searching for moves: what most verdicts need.
  const banded = yield* strategy.decideInSteps({ ...input, ...perNode, maxMoves: 0 });
  if (!banded.ok) return { ...base, verdict: 'no-gain', message: `the strategy refused: ${banded.error.message}` };
  // A round its limits cut short goes on while a node is outside the band, not only the trigger
  // band: else the limits would leave nodes stopped between the two.
  const continuing = load.unfinished === true;
  const wait = sustainOf(lb, load);
  const outside = outsideBand(banded.value, continuing ? lb.band : lb.triggerBand);
  const since = load.imbalancedSince ?? step.now;
  const verdictOf = (verdict: LoadVerdict, message: string, imbalanced: boolean): Omit<LoadPlan, 'decision'> => ({
    ...base,
    imbalancedSince: imbalanced ? since : base.imbalancedSince,
    verdict,
    message,
  });
  const early = ((): Omit<LoadPlan, 'decision'> | undefined => {
    if (step.paused(ref)) return verdictOf('paused', 'moves for load are paused by an operator', false);
    if (!complete(view)) {
      const message = `${view.measured} of ${view.serving} served shards have a fresh load figure (${Math.ceil(COMPLETE_VIEW * 100)} % needed)`;
      return verdictOf('view-incomplete', message, false);
    }
    if (outside.length === 0) {
      return banded.value.report.outsideBefore === 0
        ? verdictOf('balanced', `every node is within ±${pct(lb.band)} of its share`, false)
        : verdictOf('within-trigger', `no node is outside ±${pct(lb.triggerBand)} of its share (the trigger band)`, false);
    }
    const inFlight = movesInFlight(step, ref) > 0 || step.movesWaiting(ref);
    const inFlightMessage = 'planned moves are still in flight; the next load round waits for them';
    // Going on, the clock starts once the moves are done: a copy that just caught up reports its backlog as its load.
    if (continuing && inFlight) return verdictOf('moves-in-flight', inFlightMessage, false);
    if (step.now - since < wait) {
      const band = continuing ? `the band (going on with a round its limits cut short)` : 'the trigger band';
      return verdictOf('waiting', `${outside.join(', ')} outside ${band} since ${since}; moves after ${wait} ms of it`, true);
    }
    if (inFlight) return verdictOf('moves-in-flight', inFlightMessage, true);
    if (remaining === 0)
      return verdictOf('hourly-limit', `${movesLastHour} copies moved for load in the last hour (maxMovesPerHour ${lb.maxMovesPerHour})`, true);
    if (load.noGainAt !== undefined && step.now - load.noGainAt < lb.sustainMs) {
      return verdictOf(
        'no-gain',
        `no move within the rules lowered the load outside the band at ${load.noGainAt}; searched again ${lb.sustainMs} ms after`,
        true,
      );
    }
    return undefined;
  })();
  if (early !== undefined && !dryRun) return { ...early, decision: banded.value };
  // A dry run shows the moves a round would make once it may: as many as an hour allows. The moves
  // of one round are the moves for load in flight at once (the next round waits for them).
  const maxMoves = Math.min(remaining > 0 ? remaining : lb.maxMovesPerHour, ds.config.maxConcurrentMoves);
  const decided = yield* strategy.decideInSteps({ ...input, ...perNode, maxMoves });
  if (!decided.ok) return { ...base, verdict: 'no-gain', message: `the strategy refused: ${decided.error.message}` };
  const decision = decided.value;
  if (early !== undefined) return { ...early, decision };
  const moved = movesOf(current, decision.placement).length;
  if (moved === 0 || !(decision.report.outsideAfter < decision.report.outsideBefore)) {
    return { ...verdictOf('no-gain', 'no move within the rules lowers the load outside the band', true), decision };
  }
  const why = `${outside.join(', ')} outside ±${pct(continuing ? lb.band : lb.triggerBand)} of its share since ${since}`;
  const more = continuing ? ', going on with a round its limits cut short' : '';
  return { ...verdictOf('would-move', `${why}${more}: ${moved} copies to move`, true), decision };
}

/**
 * How long a node must stay outside before a round moves copies: `sustainMs`; going on with a round
 * its limits cut short, only until the moved copies' figures are their load again (`staleMs`:
 * every figure counted then came after the ones they reported while catching up), at most `sustainMs`.
 */
function sustainOf(lb: LoadBalanceConfig, load: DatasetLoad): number {
  return load.unfinished === true ? Math.min(lb.sustainMs, lb.staleMs) : lb.sustainMs;
}

/** Nodes whose load (before the decision's moves) is outside `band` (the trigger band, or the band) around their share. */
function outsideBand(decision: LoadAwareDecision, band: number): NodeId[] {
  return decision.report.nodes.flatMap((n, i) => {
    if (n.share === 0) return [];
    const hot = n.hotShard !== undefined;
    const out = hot ? n.before > n.share * (1 + band) : n.before > n.share * (1 + band) || n.before < n.share * (1 - band);
    return out ? [decision.nodeOrder[i]!] : [];
  });
}

/**
 * Whether every present node is within the trigger band of its plain share (λ·w, λ the load per
 * unit of weight over all of them), with the figures as the load round counts them. Without hot
 * copies these are the bands the strategy uses; a hot copy puts its node outside them, and the
 * full plan then decides.
 */
function withinTrigger(step: Step, ref: DatasetRef): boolean {
  const { config, mapper } = step.dataset(ref)!;
  const view = viewOf(step, ref);
  if (!complete(view)) return true;
  const band = config.loadBalance!.triggerBand;
  for (const ratio of nodeLoadRatios(config, mapper, view, step.placeableMembers()).values()) if (ratio > 1 + band || ratio < 1 - band) return false;
  return true;
}

const pct = (f: number) => `${Math.round(f * 1000) / 10} %`;

/** The load round of one dataset: keeps the imbalance clock, and moves copies when the plan may. */
function* loadRound(step: Step, ref: DatasetRef): Steps<void> {
  const load = loadOf(step, ref);
  // The common case, a dataset at rest, costs a pass over its copies, not a decision of the strategy.
  if (load.imbalancedSince === undefined && load.unfinished !== true && withinTrigger(step, ref)) return;
  const plan = yield* planLoadRound(step, ref, false);
  const lb = step.dataset(ref)!.config.loadBalance!;
  const atRest = plan.verdict === 'balanced' || plan.verdict === 'within-trigger' || plan.verdict === 'paused';
  const since = atRest ? undefined : plan.imbalancedSince;
  // A search that found nothing is not run again before sustainMs has passed (not at every window).
  const noGainAt = plan.verdict !== 'no-gain' ? undefined : load.noGainAt !== undefined && step.now - load.noGainAt < lb.sustainMs ? load.noGainAt : step.now;
  if (noGainAt !== load.noGainAt) step.loads.set(ref, { ...loadOf(step, ref), noGainAt });
  // At rest, paused, or nothing more that helps: what a round cut short left is done with.
  if (load.unfinished === true && (atRest || plan.verdict === 'no-gain')) step.loads.set(ref, { ...loadOf(step, ref), unfinished: undefined });
  if (since !== load.imbalancedSince) {
    if (since !== undefined && load.imbalancedSince === undefined) {
      step.notice({ name: 'load.imbalanced', level: 'info', dataset: ref, message: `${ref}: ${plan.message}` });
    }
    step.loads.set(ref, { ...loadOf(step, ref), imbalancedSince: since });
  }
  if (plan.verdict === 'waiting' && since !== undefined) step.schedule(since + sustainOf(lb, load));
  if (plan.verdict === 'hourly-limit') {
    const oldest = load.moved.filter((m) => step.now - m.at < HOUR_MS).reduce((t, m) => Math.min(t, m.at), step.now);
    step.schedule(oldest + HOUR_MS);
  }
  if (plan.verdict !== 'would-move' || plan.decision === undefined) return;
  const moves = movesOf(plan.current, plan.decision.placement);
  step.notice({
    name: 'load.moves-planned',
    level: 'info',
    dataset: ref,
    message: `${ref}: ${plan.message} (load outside the band ${plan.decision.report.outsideBefore.toPrecision(4)} → ${plan.decision.report.outsideAfter.toPrecision(4)})`,
  });
  const kept = loadOf(step, ref).moved.filter((m) => step.now - m.at < Math.max(HOUR_MS, lb.shardCooldownMs));
  const { report } = plan.decision;
  step.loads.set(ref, {
    ...loadOf(step, ref),
    imbalancedSince: undefined,
    moved: [...kept, ...moves.map((m) => ({ shard: m.shard, at: step.now }))],
    unfinished: report.limited && report.outsideAfter > 0 ? true : undefined,
  });
  yield* balancedRound(step, ref, step.held(ref), plan.decision.placement);
}

/** The copies `target` adds per shard, paired with the copies it drops there (a drop without an add is no move). */
export function movesOf(current: readonly (readonly NodeId[])[], target: Placement): { shard: number; from: NodeId | undefined; to: NodeId }[] {
  const moves: { shard: number; from: NodeId | undefined; to: NodeId }[] = [];
  target.forEach((copies, shard) => {
    const dropped = current[shard]!.filter((n) => !copies.includes(n));
    copies.filter((n) => !current[shard]!.includes(n)).forEach((to, k) => moves.push({ shard, from: dropped[k], to }));
  });
  return moves;
}
