// Planned moves: the `balanced` strategy's rounds, drains and replacements, and the handoff that
// makes them safe. A planned move never leaves a shard without a serving copy: the new copy is added
// (Initializing) and the old one marked Leaving; the old copy keeps ingesting and serving until the
// new one reports IngestionStarted, and only then is it removed (`ShardLeft`). A forced move (the
// copy's node died) is not planned: that copy is already gone.
import type { DatasetRef, NodeId, ShardNum } from '../ids.js';
import type { Placement, PlacementInput, PlacementNode } from '../placement/placement-types.js';
import { ok } from '../result.js';
import { isServingCopy } from '../shard-record.js';
import { ShardEvents } from '../status.js';
import { absentMembers, dropDepartedCopies } from './absence.js';
import type { Member } from './protocol.js';
import type { ShardMapper } from '../shard-mapper.js';
import type { Steps } from '../steps.js';
import { loadAwareTarget } from './load-balancing.js';
import type { Step } from './step.js';

/** How the strategy sees a member: its rack as isolation group (its own id when it has none). */
export function placementNode(m: Member): PlacementNode {
  return { id: m.node, group: m.rack ?? `node:${m.node}`, weight: m.weight ?? 1 };
}

/** Distinct isolation groups among members. */
export function groupsOf(members: readonly Member[]): string[] {
  return [...new Set(members.map((m) => placementNode(m).group))].sort();
}

/** Shards of a dataset with a planned move in flight (a Leaving copy). */
export function movesInFlight(step: Step, ref: DatasetRef): number {
  return step.dataset(ref)!.mapper.shardsWithLeavingCopy().length;
}

/**
 * Removes Leaving copies whose successors serve: while a shard has more serving Available copies
 * plus copies kept for absent nodes plus Leaving copies than it should have copies, its oldest
 * Leaving copy goes (`ShardLeft`). A Leaving copy is never removed while no Available copy serves.
 */
export function completeHandoffs(step: Step, ref: DatasetRef, desired: number): void {
  const mapper = () => step.dataset(ref)!.mapper;
  for (const s of mapper().shardsWithLeavingCopy()) {
    const copies = mapper().recordForShard(s).assignments;
    const leaving = copies.filter((a) => a.placement === 'Leaving');
    const available = copies.filter((a) => a.placement === 'Available' && isServingCopy(a)).length;
    if (available === 0) continue;
    // A copy kept for an absent node stays: it counts as one of the shard's copies.
    const kept = copies.filter((a) => a.placement !== 'Leaving' && a.status.type === 'Down').length;
    let excess = available + kept + leaving.length - desired;
    for (const copy of leaving) {
      if (excess <= 0) break;
      step.apply(ref, ShardEvents.left(ref, s as ShardNum, copy.node));
      step.notice({
        name: 'shard.handoff-completed',
        level: 'info',
        dataset: ref,
        shard: s,
        node: copy.node,
        message: `${ref}/${s} handed off: ${copy.node}'s copy removed, ${mapper().servingNodes(s).join(', ')} serve it`,
      });
      excess--;
    }
  }
}

/**
 * Moves one copy from `from` to `to` as a handoff: `to` gets a new copy (or takes back its own
 * Leaving one: a rollback), and `from` is marked Leaving; a replica of `from` that does not serve
 * yet is simply dropped (nothing is lost by dropping a copy that is still catching up). Not the
 * only copy of a single-copy shard: still catching up, it writes to the sink, and its node may go
 * on writing until it hears of the move; marked Leaving, the map names both writers until `to` has
 * caught up, as in any handoff (the simulator's I15 found it dropped: seed 3185).
 */
function handOff(step: Step, ref: DatasetRef, shard: ShardNum, from: NodeId, to: NodeId): void {
  addCopy(step, ref, shard, to);
  const ds = step.dataset(ref)!;
  const copy = ds.mapper.copyOnNode(shard, from);
  if (!copy) return;
  if (copy.placement === 'Initializing' && !isServingCopy(copy) && ds.config.replicationFactor > 1) {
    step.apply(ref, ShardEvents.left(ref, shard, from));
    step.notice({
      name: 'shard.handoff-cancelled',
      level: 'info',
      dataset: ref,
      shard,
      node: from,
      message: `${ref}/${shard}: ${from}'s copy, still catching up, was dropped for ${to}`,
    });
    return;
  }
  if (copy.placement !== 'Leaving') step.apply(ref, ShardEvents.leaving(ref, shard, from));
  step.notice({
    name: 'shard.handoff-started',
    level: 'info',
    dataset: ref,
    shard,
    node: from,
    message: `${ref}/${shard} moves from ${from} to ${to}; ${from} serves it until ${to} has caught up`,
  });
}

/** Gives `node` a copy: its Leaving copy back, the first copy of an empty shard, or one more copy. */
function addCopy(step: Step, ref: DatasetRef, shard: ShardNum, node: NodeId): void {
  const mapper = step.dataset(ref)!.mapper;
  const mine = mapper.copyOnNode(shard, node);
  if (mine?.placement === 'Leaving') {
    step.apply(ref, ShardEvents.leavingCancelled(ref, shard, node));
    step.notice({
      name: 'shard.handoff-cancelled',
      level: 'info',
      dataset: ref,
      shard,
      node,
      message: `${ref}/${shard} stays on ${node}: its planned move was rolled back`,
    });
  } else if (mapper.recordForShard(shard).assignments.length === 0) {
    step.apply(ref, ShardEvents.assignmentStarted(ref, shard, node));
  } else {
    step.apply(ref, ShardEvents.copyAdded(ref, shard, node));
    step.notice({ name: 'shard.replica-added', level: 'debug', dataset: ref, shard, node, message: `${ref}/${shard}: a copy was added on ${node}` });
  }
}

/**
 * Rolls back the handoffs off `node` whose new copy has not caught up: its Leaving copies stay,
 * and those new copies are dropped (an operator took back a drain, or the replacement of `node` by
 * `into`). Moves already caught up finish.
 */
export function rollBackMovesOff(step: Step, ref: DatasetRef, node: NodeId, into?: NodeId): number {
  let rolledBack = 0;
  const mapper = () => step.dataset(ref)!.mapper;
  const groupOf = (n: NodeId) => {
    const m = step.member(n);
    return m ? placementNode(m).group : `node:${n}`;
  };
  for (const { shard, copy } of mapper().copiesForNode(node)) {
    if (copy.placement !== 'Leaving') continue;
    const copies = mapper().recordForShard(shard).assignments;
    const catchingUp = copies.filter((a) => a.placement === 'Initializing' && !isServingCopy(a));
    const besideIt = (a: { readonly node: NodeId }) => a.node !== node && groupOf(a.node) === groupOf(node);
    // The move's own new copy: the replacement's; else one catching up in `node`'s rack; else, if
    // no other copy is in that rack, any one catching up. Another copy catching up (one re-created
    // for a lost node) is not this move's: dropping it kept the move's copy, caught up in `node`'s
    // rack, beside the one taken back, two copies in one rack (sim seed 15579). Such a move finishes.
    const successor =
      into !== undefined ? catchingUp.find((a) => a.node === into) : (catchingUp.find(besideIt) ?? (copies.some(besideIt) ? undefined : catchingUp[0]));
    if (!successor) continue;
    step.apply(ref, ShardEvents.left(ref, shard, successor.node));
    addCopy(step, ref, shard, node);
    rolledBack++;
  }
  return rolledBack;
}

/**
 * Shards of a round's diff between two steps: about 2–5 ms of a cold process's work (a round runs
 * a few times per process, mostly before the optimizer has compiled it).
 */
const SHARDS_PER_STEP = 4096;

/** Who a round of a `balanced` dataset places on, and the copies per shard it aims at. */
function roundMembers(step: Step, ref: DatasetRef) {
  const placeable = step.placeableMembers();
  // Drained members hold copies only when nobody else can (nothing is lost over an operator's intent).
  const members = placeable.length > 0 ? placeable : step.members;
  const absent = absentMembers(step, ref);
  const desired = Math.min(step.dataset(ref)!.config.replicationFactor, groupsOf([...members, ...absent]).length);
  // Racks of every member, drained ones too: a copy leaving a drained node pairs with a new copy
  // in its own rack, so the moves a budget lets through never put two staying copies in one rack.
  const groupOf = new Map([...step.members, ...absent].map((m) => [m.node as string, placementNode(m).group]));
  return { placeable, members, absent, desired, groupOf };
}

/**
 * One round of a `balanced` dataset: finish handoffs, ask the strategy for the whole target map from
 * the copies that stay (Leaving ones are on their way out), then start what differs. Copies that
 * replace lost ones start at once; planned moves start at most `maxConcurrentMoves` at a time
 * (taking turns among their destinations: `fairMoves`) and the rest wait for a later round: each finished handoff runs one, and
 * so does each new copy catching up while moves wait (a move that only replaced a copy still
 * catching up leaves no handoff to finish).
 * Nodes absent within their replacement delay (`absence.ts`) go to the strategy with `absent: true`:
 * they keep their copies and get none; copies of nodes no longer waited for are dropped first, so
 * the strategy re-creates them. A round decides whatever membership change was pending, so it
 * closes the dataset's settle window. It yields between its passes over the shards (`decideInSteps`).
 * Returns the shards that got a new copy.
 */
export function* balancedRound(step: Step, ref: DatasetRef, held: ReadonlySet<number>, decided?: Placement): Steps<ShardNum[]> {
  const ds = step.dataset(ref)!;
  const { config } = ds;
  step.setRoundDue(ref, undefined);
  step.membershipChanged.delete(ref);
  // Until this round's moves are known (it may end early, placing nothing), the next catch-up runs a round.
  step.setWaitingMoves(ref, undefined);
  dropDepartedCopies(step, ref);
  const { members, absent, desired, groupOf } = roundMembers(step, ref);
  completeHandoffs(step, ref, desired);
  if (members.length === 0) return [];
  const mapper = () => step.dataset(ref)!.mapper;
  const problem = placementProblem(step, ref, held);
  const current = problem.current;
  yield;
  const { placement } = step.settings;
  const target =
    decided !== undefined
      ? ok(decided)
      : config.loadBalance !== undefined
        ? yield* loadAwareTarget(step, ref, problem)
        : placement.placeInSteps
          ? yield* placement.placeInSteps(problem)
          : placement.place(problem);
  if (!target.ok) {
    step.notice({
      name: 'shard.reassignment-skipped',
      level: 'warn',
      dataset: ref,
      message: `${ref}: the placement strategy refused: ${target.error.message}`,
    });
    return [];
  }
  const budget = config.maxConcurrentMoves - movesInFlight(step, ref);
  // An absent node runs nothing: a copy given to it would not serve until it came back.
  const away = new Set<string>(absent.map((m) => m.node));
  let refusedAway = 0;
  const placed: ShardNum[] = [];
  const moves: PlannedMove[] = [];
  const drops: NodeId[] = [];
  const added: NodeId[] = [];
  const dropped: NodeId[] = [];
  for (let s = 0; s < config.numShards; s++) {
    if (s % SHARDS_PER_STEP === SHARDS_PER_STEP - 1) yield;
    const shard = s as ShardNum;
    const want = target.value[s]!;
    const have = current[s]!;
    // Most shards keep their copies: the strategy hands back the very list it was given.
    if (want === have || sameNodes(want, have)) continue;
    // A shard's lists are a few nodes each: loops, not sets; indexed, into lists reused from shard
    // to shard. A round runs too seldom for the optimizer to remove iterators and short-lived
    // lists, and they made 34 MB of garbage a round at 65 536 × 3 (stalls in the collector).
    drops.length = 0;
    added.length = 0;
    dropped.length = 0;
    for (let i = 0; i < have.length; i++) if (!want.includes(have[i]!)) drops.push(have[i]!);
    for (let i = 0; i < want.length; i++) {
      const n = want[i]!;
      if (have.includes(n)) continue;
      if (away.has(n)) refusedAway++;
      else added.push(n);
    }
    // Planned moves wait for room in the budget (chosen below, fairly among their destinations).
    pairByGroup(shard, drops, added, groupOf, moves, dropped);
    // More copies wanted than held: a lost copy is re-created at once (not a planned move). Moves
    // are paired within a rack first, so this copy's rack is none that a waiting move still holds.
    for (let i = 0; i < added.length; i++) {
      const node = added[i]!;
      addCopy(step, ref, shard, node);
      placed.push(shard);
    }
    // Fewer wanted (the members span fewer racks than the replication factor): extra copies leave.
    for (let i = 0; i < dropped.length; i++) {
      const node = dropped[i]!;
      const copy = mapper().copyOnNode(shard, node);
      if (copy && copy.placement !== 'Leaving') step.apply(ref, ShardEvents.leaving(ref, shard, node));
    }
  }
  placed.push(...startMoves(step, ref, fairMoves(waitingMovesOf(moves), Math.max(0, budget), movesInFlightTo(step, ref), groupOf)));
  completeHandoffs(step, ref, desired);
  if (refusedAway > 0) {
    step.notice({
      name: 'shard.reassignment-skipped',
      level: 'warn',
      dataset: ref,
      message: `${ref}: the placement strategy gave ${refusedAway} new copies to absent nodes (${[...away].join(', ')}); they were not placed`,
    });
  }
  return placed;
}

/**
 * What a round of a `balanced` dataset asks its strategy: the members (drained ones only when no
 * other can hold copies) and the absent nodes, each shard's copies that stay (not Leaving), and the
 * shards held (`held`, and shards an operator stopped: no copy, Stopped, as in FiloDB until
 * StartShards). Changes nothing.
 */
export function placementProblem(
  step: Step,
  ref: DatasetRef,
  held: ReadonlySet<number>,
): PlacementInput & { readonly current: NodeId[][]; readonly held: Set<number> } {
  const { config, mapper } = step.dataset(ref)!;
  const { members, absent } = roundMembers(step, ref);
  const current = stayingCopies(mapper);
  const hold = new Set(held);
  for (let s = 0; s < config.numShards; s++) if (current[s]!.length === 0 && mapper.statusForShard(s).type === 'Stopped') hold.add(s);
  const nodes = [...members.map(placementNode), ...absent.map((m) => ({ ...placementNode(m), absent: true }))];
  return { numShards: config.numShards, replicationFactor: config.replicationFactor, nodes, current, held: hold };
}

/** Each shard's copies that stay (not Leaving), as the strategy reads them. */
function stayingCopies(mapper: ShardMapper): NodeId[][] {
  const current = new Array<NodeId[]>(mapper.numShards);
  for (let s = 0; s < mapper.numShards; s++) {
    const copies = mapper.recordForShard(s).assignments;
    let staying = 0;
    for (let i = 0; i < copies.length; i++) if (copies[i]!.placement !== 'Leaving') staying++;
    // Sized at once: a list grown by push holds room for 17.
    const nodes = new Array<NodeId>(staying);
    for (let i = 0, k = 0; i < copies.length; i++) if (copies[i]!.placement !== 'Leaving') nodes[k++] = copies[i]!.node;
    current[s] = nodes;
  }
  return current;
}

/** Whether two lists of a shard's copies name the same nodes (a few each: a loop beats a set). */
function sameNodes(a: readonly NodeId[], b: readonly NodeId[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (!b.includes(a[i]!)) return false;
  return true;
}

export interface PlannedMove {
  readonly shard: ShardNum;
  readonly from: NodeId;
  readonly to: NodeId;
}

/**
 * Planned moves waiting for the budget: per destination, its moves lowest shard first, and how
 * many of them have started. Never changed: a step that starts some makes a new one that shares
 * the queues, so keeping 98 304 moves of a join wave costs a step what it starts, not the plan.
 */
export interface WaitingMoves {
  readonly queues: ReadonlyMap<string, readonly PlannedMove[]>;
  readonly started: ReadonlyMap<string, number>;
  /** Moves still waiting, over all destinations. */
  readonly count: number;
}

/** The moves of a round (in shard order) as queues per destination, none started. */
export function waitingMovesOf(moves: readonly PlannedMove[]): WaitingMoves {
  const queues = new Map<string, PlannedMove[]>();
  for (const m of moves) {
    const queue = queues.get(m.to);
    if (queue) queue.push(m);
    else queues.set(m.to, [m]);
  }
  return { queues, started: new Map([...queues.keys()].map((n) => [n, 0])), count: moves.length };
}

/** The moves still waiting, in destination then shard order (for tests and logs). */
export function listWaitingMoves(waiting: WaitingMoves): PlannedMove[] {
  return [...waiting.queues].flatMap(([n, queue]) => queue.slice(waiting.started.get(n) ?? 0));
}

/** Starts the moves `fairMoves` chose and keeps the rest waiting. */
function startMoves(step: Step, ref: DatasetRef, choice: { readonly started: readonly PlannedMove[]; readonly rest: WaitingMoves }): ShardNum[] {
  for (const m of choice.started) handOff(step, ref, m.shard, m.from, m.to);
  step.setWaitingMoves(ref, choice.rest);
  return choice.started.map((m) => m.shard);
}

/**
 * What a finished handoff, or a budget freed, asks of a `balanced` dataset: finish the handoffs,
 * then start the next of the moves its last round left waiting. The strategy is not asked for the
 * whole map again: with nothing else changed (any other change runs a round of its own) it would
 * answer with the same moves, and at 65 536 × 3 one answer costs about 100 ms, asked once per copy
 * catching up while a join's moves go 16 at a time (quadratic: issue 34). A move about to start
 * that is no longer possible (its copy gone or leaving, its destination not a placeable member or
 * given a copy, a staying copy in its rack) means something changed that the plan did not see: a
 * whole round then plans again. With no plan (no round since this singleton took over) a round runs too.
 */
export function* continueMoves(step: Step, ref: DatasetRef): Steps<ShardNum[]> {
  const ds = step.dataset(ref)!;
  const waiting = ds.waitingMoves;
  if (waiting === undefined) return yield* step.assignShards(ref);
  const { placeable, desired, groupOf } = roundMembers(step, ref);
  completeHandoffs(step, ref, desired);
  if (waiting.count === 0) return [];
  const budget = Math.max(0, ds.config.maxConcurrentMoves - movesInFlight(step, ref));
  const choice = fairMoves(waiting, budget, movesInFlightTo(step, ref), groupOf);
  const destinations = new Set<string>(placeable.map((m) => m.node));
  if (!choice.started.every((m) => stillPossible(step.dataset(ref)!.mapper, m, destinations, groupOf))) return yield* step.assignShards(ref);
  const placed = startMoves(step, ref, choice);
  completeHandoffs(step, ref, desired);
  return placed;
}

/** Whether a waiting move can still start as its round planned it. */
function stillPossible(mapper: ShardMapper, m: PlannedMove, destinations: ReadonlySet<string>, groupOf: ReadonlyMap<string, string>): boolean {
  if (!destinations.has(m.to)) return false;
  const copies = mapper.recordForShard(m.shard).assignments;
  const from = copies.find((a) => a.node === m.from);
  if (from === undefined || from.placement === 'Leaving' || copies.some((a) => a.node === m.to)) return false;
  const rack = groupOf.get(m.to);
  return !copies.some((a) => a.node !== m.from && a.placement !== 'Leaving' && groupOf.get(a.node) === rack);
}

/** New copies still catching up of shards with a planned move in flight, per node: its moves in flight. */
function movesInFlightTo(step: Step, ref: DatasetRef): Map<string, number> {
  const mapper = step.dataset(ref)!.mapper;
  const inFlight = new Map<string, number>();
  for (const s of mapper.shardsWithLeavingCopy()) {
    const copies = mapper.recordForShard(s).assignments;
    for (const a of copies) if (a.placement === 'Initializing') inFlight.set(a.node, (inFlight.get(a.node) ?? 0) + 1);
  }
  return inFlight;
}

/**
 * Which of the planned moves start now, at most `budget`: each time, a move to the rack, then the
 * node, with the fewest moves in flight (ties: the one with the most moves still to make, then the
 * lower rack and node), its lowest shard first. Lowest shards first over all moves gave the whole budget to the new nodes whose shards
 * came first in the target map, round after round: a join of three nodes at 16 384 × 3 left one new
 * node empty for minutes while the other two filled (issue 34). Every destination now gets its turn,
 * and the moves of one round are the same whatever their order in the map.
 */
export function fairMoves(
  waiting: WaitingMoves,
  budget: number,
  inFlight: ReadonlyMap<string, number>,
  groupOf: ReadonlyMap<string, string>,
): { started: PlannedMove[]; rest: WaitingMoves } {
  const next = new Map(waiting.started);
  const queue = (n: string) => waiting.queues.get(n)!;
  const nodeLoad = new Map<string, number>([...waiting.queues.keys()].map((n) => [n, inFlight.get(n) ?? 0]));
  const rackOf = (n: string) => groupOf.get(n) ?? `node:${n}`;
  const rackLoad = new Map<string, number>();
  for (const [n, k] of inFlight) rackLoad.set(rackOf(n), (rackLoad.get(rackOf(n)) ?? 0) + k);
  const left = (n: string) => queue(n).length - next.get(n)!;
  // Fewer moves in flight to its rack, then to itself, then more moves still to make (so that the
  // destinations finish together, not one by one), then the lower rack and node.
  const before = (a: string, b: string): boolean => {
    const keys = (n: string) => [rackLoad.get(rackOf(n)) ?? 0, nodeLoad.get(n)!, -left(n)] as const;
    const [ka, kb] = [keys(a), keys(b)];
    for (let i = 0; i < ka.length; i++) if (ka[i] !== kb[i]) return ka[i]! < kb[i]!;
    return rackOf(a) !== rackOf(b) ? rackOf(a) < rackOf(b) : a < b;
  };
  const started: PlannedMove[] = [];
  while (started.length < budget) {
    let best: string | undefined;
    for (const n of waiting.queues.keys()) {
      if (left(n) <= 0) continue;
      if (best === undefined || before(n, best)) best = n;
    }
    if (best === undefined) break;
    const i = next.get(best)!;
    next.set(best, i + 1);
    started.push(queue(best)[i]!);
    nodeLoad.set(best, nodeLoad.get(best)! + 1);
    rackLoad.set(rackOf(best), (rackLoad.get(rackOf(best)) ?? 0) + 1);
  }
  return { started, rest: { queues: waiting.queues, started: next, count: waiting.count - started.length } };
}

/**
 * Pairs each copy of `shard` that leaves (`drops`) with a new copy (`adds`) in the same rack where
 * there is one, then with any, as planned moves (pushed to `moves`). The new copies left over stay
 * in `adds` (they replace lost ones); the leaving copies left over go to `dropped` (they just leave).
 */
function pairByGroup(
  shard: ShardNum,
  drops: readonly NodeId[],
  adds: NodeId[],
  groupOf: ReadonlyMap<string, string>,
  moves: PlannedMove[],
  dropped: NodeId[],
): void {
  for (let i = 0; i < drops.length; i++) {
    const from = drops[i]!;
    let k = 0;
    while (k < adds.length && groupOf.get(adds[k]!) !== groupOf.get(from)) k++;
    if (k < adds.length) moves.push({ shard, from, to: takeAt(adds, k) });
    else dropped.push(from);
  }
  // No new copy in its rack: paired with any, in order; a leaving copy with none left just leaves.
  let left = 0;
  for (let i = 0; i < dropped.length; i++) {
    if (adds.length > 0) moves.push({ shard, from: dropped[i]!, to: takeAt(adds, 0) });
    else dropped[left++] = dropped[i]!;
  }
  dropped.length = left;
}

/** Removes and returns `list[k]` (no list allocated for it, as `splice` does). */
function takeAt<T>(list: T[], k: number): T {
  const taken = list[k]!;
  list.copyWithin(k, k + 1);
  list.length--;
  return taken;
}

/**
 * The planned moves of a `filodb-default` dataset: each copy on a drained node is handed to its
 * replacement, or else to the newest member with room under FiloDB's cap `ceil(numShards /
 * minNumNodes)`, at most `maxConcurrentMoves` at a time.
 */
export function startDrainMoves(step: Step, ref: DatasetRef): void {
  if (step.draining.size === 0) return;
  const { config } = step.dataset(ref)!;
  const mapper = () => step.dataset(ref)!.mapper;
  const cap = Math.ceil(config.numShards / config.minNumNodes);
  let budget = config.maxConcurrentMoves - movesInFlight(step, ref);
  const newestFirst = step
    .placeableMembers()
    .map((m) => m.node)
    .reverse();
  for (const [node, replacement] of [...step.draining].sort(([a], [b]) => (a < b ? -1 : 1))) {
    const candidates = replacement !== undefined && step.member(replacement) ? [replacement] : newestFirst;
    for (const { shard, copy } of mapper().copiesForNode(node)) {
      // A Leaving copy whose successor died is already a move in flight: it gets a new successor
      // whatever the budget, or it would wait forever.
      const orphan =
        copy.placement === 'Leaving' &&
        mapper()
          .recordForShard(shard)
          .assignments.every((a) => a.placement === 'Leaving');
      if (copy.placement === 'Leaving' && !orphan) continue;
      if (!orphan && budget <= 0) continue;
      // Its last new copy failed (a poison record): the next try waits for the shard's cooldown,
      // or the move would be made and fail again at once, for ever. This copy serves meanwhile.
      const failedAt = step.dataset(ref)!.cooldowns.get(shard);
      if (failedAt !== undefined && step.inCooldown(failedAt)) {
        step.schedule(step.cooldownEnd(failedAt));
        continue;
      }
      const to = candidates.find((n) => mapper().numShardsForNode(n) < cap && !mapper().copyOnNode(shard, n));
      if (to === undefined) {
        step.notice({
          name: 'shard.reassignment-skipped',
          level: 'info',
          dataset: ref,
          shard,
          node,
          message: `${ref}/${shard} cannot leave drained ${node} yet: no other member has room under the cap of ${cap} shards`,
        });
        break;
      }
      handOff(step, ref, shard, node, to);
      if (!orphan) budget--;
    }
  }
}
