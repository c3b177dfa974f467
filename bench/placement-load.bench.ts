/**
 * `npm run bench -- placement-load`: how evenly today's placement spreads measured load, the
 * baseline of load-aware placement (issue 37). Ingestion is not spread evenly over shards: each
 * shard gets a rate drawn from Zipf(1.1) over a random order of the shards (a few hot tenants,
 * a long tail), and every copy of a shard ingests all of its records. For each input, the
 * copy-count placement (`balanced`, from no copies) and a greedy load balancer in the style of
 * Cruise Control's (starting from that map, it moves the copy that most lowers the hottest node's
 * load that can be lowered, within the isolation rule, until none can) and the load-aware mode of
 * the balanced strategy (from that map too) are measured side by side: the hottest node's load over
 * its capacity-weighted share of the total, and the copies each moved.
 */
import { SeededRandom } from '../src/sim/random.js';
import { BalancedPlacementStrategy, LoadAwarePlacementStrategy, type Placement, type PlacementInput, type PlacementNode } from '../src/entries/core.js';
import { nodeId, type NodeId } from '../src/core/ids.js';
import { register, type Table } from './harness.js';
import { LoadWorld, zipfRates } from '../src/sim/load-world.js';

const ZIPF_EXPONENT = 1.1;
const SEEDS = [1, 2, 3, 4, 5];

interface LoadCase {
  readonly name: string;
  readonly shards: number;
  readonly replicationFactor: number;
  readonly nodes: readonly PlacementNode[];
}

const CASES: readonly LoadCase[] = [
  {
    name: '4096 shards × RF 2, 64 nodes in 4 racks',
    shards: 4096,
    replicationFactor: 2,
    nodes: Array.from({ length: 64 }, (_, i) => ({ id: nodeId(`n${String(i).padStart(2, '0')}`), group: `rack-${i % 4}`, weight: 1 })),
  },
  {
    name: '1024 shards × RF 3, 24 nodes of weights 1, 1.5 and 2 in 4 racks',
    shards: 1024,
    replicationFactor: 3,
    nodes: Array.from({ length: 24 }, (_, i) => ({ id: nodeId(`n${String(i).padStart(2, '0')}`), group: `rack-${i % 4}`, weight: [1, 1.5, 2][i % 3]! })),
  },
];

/** Each shard's rate: Zipf(1.1) by rank over a random order of the shards; the total is 1. */
const zipfRatesOf = (shards: number, random: SeededRandom): Float64Array => Float64Array.from(zipfRates(shards, ZIPF_EXPONENT, random));

/** Per node (in `nodes` order): its capacity-weighted share of the total load (every copy carries its shard's rate; the rates add up to 1). */
function sharesOf(nodes: readonly PlacementNode[], replicationFactor: number): Float64Array {
  const weight = nodes.reduce((sum, n) => sum + n.weight, 0);
  return Float64Array.from(nodes, (n) => (replicationFactor * n.weight) / weight);
}

/** Each node's index in `nodes`, by id. */
const indexOf = (nodes: readonly PlacementNode[]): Map<string, number> => new Map(nodes.map((n, i) => [n.id as string, i]));

/** Per node (in `nodes` order): its load over its capacity-weighted share of the total load. */
function relativeLoads(nodes: readonly PlacementNode[], placement: Placement, rates: Float64Array, replicationFactor: number): Float64Array {
  const index = indexOf(nodes);
  const share = sharesOf(nodes, replicationFactor);
  const load = new Float64Array(nodes.length);
  placement.forEach((copies, s) => copies.forEach((id) => (load[index.get(id)!]! += rates[s]!)));
  return load.map((l, i) => l / share[i]!);
}

/**
 * The greedy balancer: from the hottest node (by relative load) that has one, the move of one of
 * its copies to another node that lowers the larger of the two nodes' relative loads the most,
 * keeping a shard's copies in distinct racks; repeated until no node above its share has such a
 * move. Returns the map and the moves.
 */
function greedyBalance(
  nodes: readonly PlacementNode[],
  start: Placement,
  rates: Float64Array,
  replicationFactor: number,
): { placement: NodeId[][]; moves: number } {
  const placement = start.map((copies) => [...copies]);
  const rel = relativeLoads(nodes, start, rates, replicationFactor);
  const index = indexOf(nodes);
  const unit = sharesOf(nodes, replicationFactor);
  const copiesOf = nodes.map(() => [] as number[]);
  placement.forEach((copies, s) => copies.forEach((id) => copiesOf[index.get(id)!]!.push(s)));
  let moves = 0;
  /** The best move of one of `from`'s copies: the one that leaves the hotter of the two nodes coolest, if below `from` now. */
  const bestMoveOff = (from: number): { shard: number; to: number } | undefined => {
    let best: { shard: number; to: number; peak: number } | undefined;
    for (const s of copiesOf[from]!) {
      const racks = new Set(placement[s]!.filter((id) => id !== nodes[from]!.id).map((id) => nodes[index.get(id)!]!.group));
      for (let to = 0; to < nodes.length; to++) {
        if (to === from || placement[s]!.includes(nodes[to]!.id) || racks.has(nodes[to]!.group)) continue;
        const peak = Math.max(rel[from]! - rates[s]! / unit[from]!, rel[to]! + rates[s]! / unit[to]!);
        if (peak < rel[from]! - 1e-12 && (best === undefined || peak < best.peak)) best = { shard: s, to, peak };
      }
    }
    return best;
  };
  for (;;) {
    // The hottest node that has a move; a node whose hot shard keeps it above every other is passed over.
    const byLoad = nodes.map((_, i) => i).sort((a, b) => rel[b]! - rel[a]!);
    let from = -1;
    let move: { shard: number; to: number } | undefined;
    for (const i of byLoad) {
      if (rel[i]! <= 1) break;
      move = bestMoveOff(i);
      if (move !== undefined) {
        from = i;
        break;
      }
    }
    if (move === undefined) return { placement, moves };
    const { shard, to } = move;
    placement[shard] = placement[shard]!.map((id) => (id === nodes[from]!.id ? nodes[to]!.id : id));
    copiesOf[from] = copiesOf[from]!.filter((s) => s !== shard);
    copiesOf[to]!.push(shard);
    rel[from]! -= rates[shard]! / unit[from]!;
    rel[to]! += rates[shard]! / unit[to]!;
    moves += 1;
  }
}

/**
 * The hottest node among those that hold no hot shard (one whose rate alone exceeds the node's
 * share): what a target band can be asked of, since a node with a hot shard is above it whatever
 * else it holds.
 */
function maxWithoutHotShards(nodes: readonly PlacementNode[], placement: Placement, rates: Float64Array, replicationFactor: number): number {
  const rel = relativeLoads(nodes, placement, rates, replicationFactor);
  const share = sharesOf(nodes, replicationFactor);
  const index = indexOf(nodes);
  const holdsHot = new Uint8Array(nodes.length);
  placement.forEach((copies, s) =>
    copies.forEach((id) => {
      const i = index.get(id)!;
      if (rates[s]! > share[i]!) holdsHot[i] = 1;
    }),
  );
  return rel.reduce((m, r, i) => (holdsHot[i] ? m : Math.max(m, r)), 0);
}

/**
 * The hottest node among those holding none of `hot` (the shards the load-aware mode placed alone),
 * over the capacity-weighted mean of those nodes: the band the load-aware mode is asked to hold.
 */
function maxOverColdMean(nodes: readonly PlacementNode[], placement: Placement, rates: Float64Array, hot: ReadonlySet<number>): number {
  const index = indexOf(nodes);
  const load = new Float64Array(nodes.length);
  const holdsHot = new Uint8Array(nodes.length);
  placement.forEach((copies, s) =>
    copies.forEach((id) => {
      const i = index.get(id)!;
      load[i]! += rates[s]!;
      if (hot.has(s)) holdsHot[i] = 1;
    }),
  );
  const cold = nodes.map((_, i) => i).filter((i) => !holdsHot[i]);
  const perWeight = cold.reduce((sum, i) => sum + load[i]!, 0) / cold.reduce((sum, i) => sum + nodes[i]!.weight, 0);
  return cold.reduce((m, i) => Math.max(m, load[i]! / (perWeight * nodes[i]!.weight)), 0);
}

/**
 * A lower bound of the copies any map must move to give each copy of the `hot` shards a node alone:
 * that many distinct nodes each shed every other copy they held, so at least the copies of the
 * nodes holding the fewest (one each may be a hot copy already there). Isolation and weights only
 * raise it, so it is also a lower bound of the exact minimum of the load-aware objective.
 */
function movesToIsolate(before: Placement, nodes: readonly PlacementNode[], hot: ReadonlySet<number>, replicationFactor: number): number {
  const held = new Map<string, number>(nodes.map((n) => [n.id as string, 0]));
  for (const copies of before) for (const id of copies) held.set(id, (held.get(id) ?? 0) + 1);
  const fewest = [...held.values()].sort((a, b) => a - b).slice(0, hot.size * replicationFactor);
  return fewest.reduce((sum, c) => sum + Math.max(0, c - 1), 0);
}

/** Copies that `after` moved off a node that holds one of `hot`'s copies in `after` (the price of placing hot copies alone). */
function copiesLeavingHotNodes(before: Placement, after: Placement, hot: ReadonlySet<number>): number {
  const hotNodes = new Set<NodeId>();
  for (const s of hot) for (const id of after[s]!) hotNodes.add(id);
  return before.reduce((n, copies, s) => n + copies.filter((id) => hotNodes.has(id) && !after[s]!.includes(id)).length, 0);
}

const median = (xs: readonly number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const maxOf = (xs: Float64Array): number => xs.reduce((m, x) => Math.max(m, x), 0);

function placementLoad(): Table {
  const rows: (string | number)[][] = [];
  for (const c of CASES) {
    const copyCount: number[] = [];
    const greedy: number[] = [];
    const greedyMoves: number[] = [];
    const copyCountCold: number[] = [];
    const greedyCold: number[] = [];
    const hottestShard: number[] = [];
    const loadAware: number[] = [];
    const loadAwareCold: number[] = [];
    const loadAwareMoves: number[] = [];
    const movedOffHot: number[] = [];
    const hotLowerBound: number[] = [];
    const loadAwareMs: number[] = [];
    const hotShards: number[] = [];
    for (const seed of SEEDS) {
      const rates = zipfRatesOf(c.shards, new SeededRandom(seed));
      const input: PlacementInput = {
        numShards: c.shards,
        replicationFactor: c.replicationFactor,
        nodes: c.nodes,
        current: Array.from({ length: c.shards }, () => []),
      };
      const placed = new BalancedPlacementStrategy().place(input);
      if (!placed.ok) throw new Error(placed.error.message);
      copyCount.push(maxOf(relativeLoads(c.nodes, placed.value, rates, c.replicationFactor)));
      copyCountCold.push(maxWithoutHotShards(c.nodes, placed.value, rates, c.replicationFactor));
      const balanced = greedyBalance(c.nodes, placed.value, rates, c.replicationFactor);
      greedy.push(maxOf(relativeLoads(c.nodes, balanced.placement, rates, c.replicationFactor)));
      greedyMoves.push(balanced.moves);
      greedyCold.push(maxWithoutHotShards(c.nodes, balanced.placement, rates, c.replicationFactor));
      const started = performance.now();
      const decided = new LoadAwarePlacementStrategy().decide({ ...input, current: placed.value, loads: [...rates] });
      loadAwareMs.push(performance.now() - started);
      if (!decided.ok) throw new Error(decided.error.message);
      const { placement, report } = decided.value;
      loadAware.push(maxOf(relativeLoads(c.nodes, placement, rates, c.replicationFactor)));
      loadAwareCold.push(maxOverColdMean(c.nodes, placement, rates, new Set(report.hotShards)));
      loadAwareMoves.push(placement.reduce((n, copies, s) => n + copies.filter((id) => !placed.value[s]!.includes(id)).length, 0));
      movedOffHot.push(copiesLeavingHotNodes(placed.value, placement, new Set(report.hotShards)));
      hotLowerBound.push(movesToIsolate(placed.value, c.nodes, new Set(report.hotShards), c.replicationFactor));
      hotShards.push(report.hotShards.length);
      // No placement does better than the hottest shard alone on the node of the largest share.
      hottestShard.push(Math.max(...rates) / Math.max(...sharesOf(c.nodes, c.replicationFactor)));
    }
    const f = (x: number) => x.toFixed(3);
    rows.push([
      c.name,
      f(median(copyCount)),
      f(Math.max(...copyCount)),
      f(median(copyCountCold)),
      f(median(greedy)),
      f(Math.max(...greedy)),
      f(median(greedyCold)),
      median(greedyMoves),
      f(median(loadAware)),
      f(median(loadAwareCold)),
      f(Math.max(...loadAwareCold)),
      median(loadAwareMoves),
      median(movedOffHot),
      `${median(hotLowerBound)} (× ${median(loadAwareMoves.map((m, i) => m / hotLowerBound[i]!)).toFixed(3)})`,
      median(hotShards),
      `${median(loadAwareMs).toFixed(1)} ms`,
      f(Math.max(1, median(hottestShard))),
    ]);
  }
  return {
    title: `Load balance of today's placement under Zipf(${ZIPF_EXPONENT}) shard rates (${SEEDS.length} seeds)`,
    columns: [
      'input',
      'copy-count: max load / share, median',
      'max',
      'copy-count, nodes without a hot shard: median',
      'greedy from it: median',
      'max',
      'greedy, nodes without a hot shard: median',
      'greedy: copies moved, median',
      'load-aware: max load / share, median',
      'load-aware, nodes without a hot copy: max load / their mean, median',
      'max',
      'load-aware: copies moved, median',
      'of which off the nodes of hot copies, median',
      'lower bound of any map placing those hot copies alone (load-aware over it), median',
      'hot shards placed alone, median',
      'load-aware: decision time, median',
      'lower bound (hottest shard), median',
    ],
    rows,
    notes: [
      "A node's share is the total load times its weight over the sum of weights; every copy of a shard carries the shard's whole rate.",
      'Copy-count: the `balanced` strategy from no copies (every node within one copy of its weighted share of copies).',
      'Greedy: from that map, the move of one copy off the hottest node that has one that lowers the hotter of the two nodes the most (racks kept distinct per shard), until no node above its share has one.',
      'Lower bound: whichever nodes take the hot copies alone must shed every other copy they held; at least the copies of the nodes holding fewest (minus the hot copy itself), so no map meeting the objective moves fewer (isolation and weights only add to it).',
      'Off the nodes of hot copies: copies moved away from a node that ends up holding a hot copy alone (what placing hot copies alone costs, which the greedy never pays: it leaves hot nodes carrying others).',
      'Lower bound: the hottest shard alone on the node of the largest share; no placement is below it (nor below 1).',
      'Nodes without a hot shard: the hottest node among those holding no shard whose rate alone exceeds their share (what a target band can be asked of).',
      "Load-aware: `LoadAwarePlacementStrategy` (band ±5 %) from the copy-count map, in this process (its first decision includes the JIT's warm-up). A hot shard's copies each go to a node of their own; the band is then asked of the other nodes around their own capacity-weighted mean.",
    ],
  };
}

/** The shard at `rank` (0: the hottest) by rate. */
const rankedShard = (rates: readonly number[], rank: number): number =>
  rates.map((r, s) => [r, s] as const).sort((a, b) => b[0] - a[0] || a[1] - b[1])[rank]![1];

/**
 * Rates that change, on the singleton's core with simulated time (src/sim/load-world.ts): 1024
 * shards × RF 2 on 16 nodes in 4 racks at Zipf(1.1) rates, placed and balanced; then one cold shard
 * (the 65th hottest) turns 20× hotter for 10 minutes and back, and, separately, a shard is 20× hotter every other
 * minute for an hour. Measured: when the nodes are back within the trigger band after each change,
 * the copies moved, and the most moved in any rolling hour against the limit.
 */
function changingRates(): Table {
  const MINUTE = 60_000;
  const loadBalance = { sustainMs: 3 * MINUTE, maxMovesPerHour: 64 };
  const rows: (string | number)[][] = [];
  const build = () => {
    const rates = zipfRates(1024, ZIPF_EXPONENT, new SeededRandom(7)).map((r) => r * 1_000_000);
    const w = new LoadWorld({ nodes: 16, racks: 4, shards: 1024, replicationFactor: 2, loadBalance, rates });
    // Balanced first, whatever it takes (the start is not what is measured).
    w.advance(6 * 60 * MINUTE);
    return { w, rates };
  };
  const maxPerHour = (w: LoadWorld, from: number) => {
    let most = 0;
    for (let t = from; t <= w.now; t += MINUTE) most = Math.max(most, w.copiesAddedInHourBefore(t));
    return most;
  };
  /** Minutes from `from` until the explanation says the round is at rest after acting (or undefined within `limitMs`). */
  const restAfter = (w: LoadWorld, from: number, limitMs: number): number | undefined => {
    // The first reports at the new rates come a window after the change.
    w.advance(10_000);
    for (;;) {
      const v = w.explain().verdict;
      if (v === 'balanced' || v === 'within-trigger' || v === 'no-gain') return (w.now - from) / MINUTE;
      if (w.now - from > limitMs) return undefined;
      w.advance(10_000);
    }
  };
  {
    const { w, rates } = build();
    const cold = rankedShard(rates, 64);
    const start = w.now;
    const moved0 = w.copiesAdded.length;
    w.rates = rates.map((r, s) => (s === cold ? r * 20 : r));
    const hot = restAfter(w, start, 120 * MINUTE);
    w.advance(Math.max(0, start + 10 * MINUTE - w.now));
    const movedHot = w.copiesAdded.length - moved0;
    w.rates = rates;
    const back = w.now;
    const cooled = restAfter(w, back, 180 * MINUTE);
    w.advance(120 * MINUTE);
    rows.push([
      'the 65th hottest shard 20× hotter for 10 minutes, then back',
      hot === undefined ? '> 120' : hot.toFixed(1),
      cooled === undefined ? '> 180' : cooled.toFixed(1),
      movedHot,
      w.copiesAdded.length - moved0,
      `${maxPerHour(w, start)} / ${loadBalance.maxMovesPerHour}`,
    ]);
  }
  {
    const { w, rates } = build();
    const shard = rankedShard(rates, 64);
    const start = w.now;
    const moved0 = w.copiesAdded.length;
    for (let minute = 0; minute < 60; minute++) {
      w.rates = minute % 2 === 0 ? rates.map((r, s) => (s === shard ? r * 20 : r)) : rates;
      w.advance(MINUTE);
    }
    w.rates = rates;
    w.advance(60 * MINUTE);
    rows.push([
      'the 65th hottest shard 20× hotter every other minute for an hour',
      '-',
      '-',
      '-',
      w.copiesAdded.length - moved0,
      `${maxPerHour(w, start)} / ${loadBalance.maxMovesPerHour}`,
    ]);
  }
  return {
    title: 'Rates that change: 1024 shards × RF 2 on 16 nodes in 4 racks, Zipf(1.1) rates, simulated time',
    columns: [
      'change',
      'at rest after it, minutes',
      'at rest after it cooled, minutes',
      'copies moved while hot',
      'copies moved in all',
      'most moved in a rolling hour / limit',
    ],
    rows,
    notes: [
      'The load round of the singleton (src/core/shard-manager/load-balancing.ts) on the core, nodes reporting every 10 s at the rates set, every copy caught up at once (src/sim/load-world.ts). sustainMs 3 minutes, triggerBand ±10 %, band ±5 %, maxMovesPerHour 64.',
      'At rest: the explanation says balanced, within the trigger band, or no move that helps.',
    ],
  };
}

register({ name: 'placement-load', run: placementLoad });
register({ name: 'placement-load-changes', run: changingRates });
