// Balancing measured load over a map that already meets the hard rules (docs/PLACEMENT.md, "The
// `load-aware` mode"): hot copies are first given a node each, then copies move (one at a time, two
// in a swap, or a move that only helps with the next one) while that lowers the load outside the
// band. Pure and deterministic: the same problem gives the same moves. Limits on the copies moved
// in all (`maxMoves`) and per node (`maxMovesPerNode`, node-move-budget.ts) keep to the best moves
// within them, and the report says when they held one back, for a later decision to go on.
//
// Why a local search and not the flow of the copy-count objective: a copy's load is a real number,
// so "every node within its band" is a bin-packing question (NP-hard), not a flow. Taking, each
// time, the move that lowers the load outside the band the most moves the largest copies that fit
// first, which is what keeps the number of moves low; test/unit/placement-load.test.ts measures it
// against an integer program solved exactly on thousands of small random inputs.
import type { Steps } from '../steps.js';
import { NodeMoveBudget } from './node-move-budget.js';

/** A map of node indices (0..nodes-1) as the balancer sees it. */
export interface LoadProblem {
  /** Per node: its weight (present nodes only take part; an absent node holds what it holds). */
  readonly weights: readonly number[];
  /** Per node: its isolation group's index. */
  readonly groups: readonly number[];
  /** Per node: away within its replacement delay (keeps its copies, takes none, has no band). */
  readonly absent: readonly boolean[];
  /** Per shard: the load of one copy (every copy of a shard carries all of it). */
  readonly loads: readonly number[];
  /** Per shard: the nodes holding its copies before the decision (what a move is counted against). */
  readonly current: readonly (readonly number[])[];
  /** Per shard: the nodes the balancing starts from (the hard rules met); changed in place. */
  readonly start: number[][];
  /** Per shard: true when it must not move (held in its cooldown). */
  readonly held: readonly boolean[];
  /** The band's half-width as a fraction of a node's share (0.05: within ±5 %). */
  readonly band: number;
  /**
   * The most copies the balancing may move against `current` (default: no limit; 0 moves none of
   * them, but still places copies that `start` adds anew, which costs nothing).
   */
  readonly maxMoves?: number;
  /**
   * The most copies any node may gain plus shed against `current` (default: no limit): a move,
   * swap, chain or hot copy's placement that would take a node past it is not made.
   */
  readonly maxMovesPerNode?: number;
}

/** What the balancer reports besides the map. */
export interface LoadBalanceReport {
  /** The load outside the band, summed over present nodes, before and after the moves (hot copies already placed). */
  readonly outsideBefore: number;
  readonly outsideAfter: number;
  /** Single moves, swaps (two copies) and chains taken. */
  readonly moves: number;
  readonly swaps: number;
  /** A move that does not help alone, then the move or swap it allows. */
  readonly chains: number;
  /** Shards whose copy alone is above a node's band: each copy is placed on a node of its own. */
  readonly hotShards: readonly number[];
  /** Per node (by index; absent nodes have share 0): its band and its load before and after. */
  readonly nodes: readonly NodeBand[];
  /**
   * Whether `maxMoves` or `maxMovesPerNode` held back a move that would have lowered the load
   * outside the band (or a hot copy's placement): a later decision has more to do.
   */
  readonly limited: boolean;
}

/** A node's share of the load, the band around it, and its load before and after the balancing. */
export interface NodeBand {
  readonly share: number;
  readonly lo: number;
  readonly hi: number;
  readonly before: number;
  readonly after: number;
  /** The hot shard it carries alone (its band is that copy's load), if any. */
  readonly hotShard?: number;
}

/** Moves taken between two steps (each one scan of a node's copies against every node). */
const MOVES_PER_STEP = 64;
/** A move must lower the load outside the band by more than this fraction of the total load. */
const RELATIVE_GAIN = 1e-9;
const NONE = -1;
/** The coolest nodes a copy off an overloaded node is tried on (besides where it was before). */
const DESTINATIONS_PER_MOVE = 16;
/** Candidates a decision may evaluate before it stops looking for chains. */
const CHAIN_BUDGET = 500_000;

/**
 * Lowers the load outside the band of `p.start` (in place) by moving copies among present nodes,
 * never of a held shard, never putting two copies of a shard in one group unless the move stays
 * within a group. Stops when no move, swap or chain (within its budget) lowers it.
 */
export function* balanceLoads(p: LoadProblem): Steps<LoadBalanceReport> {
  const b = new Balancer(p);
  const outsideBefore = b.outside();
  let moves = 0;
  let swaps = 0;
  let chains = 0;
  // No move allowed and no copy placed anew (whose moves cost nothing): the bands and the loads only.
  const nothingFree = p.maxMoves === 0 && p.start.every((copies, s) => copies.every((i) => p.current[s]!.includes(i)));
  // The searches offer only what the budgets afford: a move the limits forbid leaves room for one they allow.
  for (let taken = 0; !nothingFree; taken++) {
    if (taken % MOVES_PER_STEP === MOVES_PER_STEP - 1) yield;
    const move = b.findMove();
    if (move !== undefined) {
      b.take(move);
      moves += 1;
      continue;
    }
    const swap = b.findSwap();
    if (swap !== undefined) {
      b.take(swap);
      swaps += 1;
      continue;
    }
    if (b.takeChain()) {
      chains += 1;
      continue;
    }
    break;
  }
  return { outsideBefore, outsideAfter: b.outside(), moves, swaps, chains, hotShards: b.hotShards(), nodes: b.bands(), limited: b.limited };
}

/** The load outside node i's band [lo, hi] when it carries `load`. */
function outsideOf(load: number, lo: number, hi: number): number {
  return load > hi ? load - hi : load < lo ? lo - load : 0;
}

/**
 * The best move or swap seen so far: the most gain, then the fewest copies moved against the
 * current map (−1 when a copy goes back), then the lowest peak (the higher of the two nodes' loads
 * over their shares afterwards). Plain fields: thousands of candidates per move allocate nothing.
 */
class Best {
  found = false;
  gain = 0;
  moved = 0;
  peak = 0;
  a = NONE;
  b = NONE;
  from = NONE;
  to = NONE;

  constructor(private readonly epsilon: number) {}

  offer(gain: number, moved: number, peak: number, a: number, b: number, from: number, to: number): void {
    if (this.found) {
      if (gain < this.gain - this.epsilon) return;
      if (gain <= this.gain + this.epsilon && (moved > this.moved || (moved === this.moved && peak >= this.peak - 1e-12))) return;
    }
    this.found = true;
    this.gain = gain;
    this.moved = moved;
    this.peak = peak;
    this.a = a;
    this.b = b;
    this.from = from;
    this.to = to;
  }
}

class Balancer {
  private readonly load: Float64Array;
  private readonly lo: Float64Array;
  private readonly hi: Float64Array;
  private readonly share: Float64Array;
  /** Per node: the shards it holds (present nodes only). */
  private readonly holds: Set<number>[];
  private readonly present: number[];
  private readonly epsilon: number;
  private readonly originally: Set<number>[];
  /** Candidates evaluated so far (bounds the search for chains). */
  private evaluations = 0;
  /** Copies moved against `current` so far, and the most allowed. */
  private movedSoFar = 0;
  private readonly maxMoves: number;
  /** Each node's load before any move. */
  private readonly initialLoad: Float64Array;
  /** Copies each node gained and shed so far, with `maxMovesPerNode`; undefined without it. */
  private readonly budget: NodeMoveBudget | undefined;
  /** Whether a limit held back a move that would have helped (see `LoadBalanceReport.limited`). */
  limited = false;

  constructor(private readonly p: LoadProblem) {
    const n = p.weights.length;
    this.load = new Float64Array(n);
    this.holds = Array.from({ length: n }, () => new Set<number>());
    this.present = [...Array(n).keys()].filter((i) => !p.absent[i]);
    p.start.forEach((copies, s) =>
      copies.forEach((i) => {
        if (p.absent[i]) return;
        this.load[i]! += p.loads[s]!;
        this.holds[i]!.add(s);
      }),
    );
    this.initialLoad = Float64Array.from(this.load);
    this.maxMoves = p.maxMoves ?? Infinity;
    const total = this.present.reduce((sum, i) => sum + this.load[i]!, 0);
    this.epsilon = Math.max(total * RELATIVE_GAIN, Number.MIN_VALUE);
    this.originally = p.current.map((copies) => new Set(copies));
    this.budget = p.maxMovesPerNode === undefined ? undefined : new NodeMoveBudget(this.originally, p.start, n, p.maxMovesPerNode);
    this.hotOn = new Int32Array(n).fill(NONE);
    const lambda = this.anchorHotCopies(total);
    this.share = new Float64Array(n);
    this.lo = new Float64Array(n);
    this.hi = new Float64Array(n);
    for (const i of this.present) {
      const hot = this.hotOn[i]!;
      // A node holding a hot copy carries that copy alone: its band is exactly that copy's load.
      const share = hot === NONE ? lambda * p.weights[i]! : p.loads[hot]!;
      this.share[i] = share;
      this.lo[i] = hot === NONE ? share * (1 - p.band) : share;
      this.hi[i] = hot === NONE ? share * (1 + p.band) : share;
    }
  }

  /**
   * Per node: the hot copy it carries alone (NONE for none). A copy is hot when its load alone is
   * above the band of every node free of hot copies (the heaviest's); it goes to the heaviest free
   * node that may take it, or stays where it is when its node is free and as heavy.
   */
  readonly hotOn: Int32Array;

  /** Hot copies found, for the report. */
  hotShards(): number[] {
    return [...new Set([...this.hotOn].filter((s) => s !== NONE))].sort((a, b) => a - b);
  }

  /**
   * Places each hot copy alone, the largest first (each one placed changes the share of the
   * others); returns the load per unit of weight of the nodes without one. Without this, a copy of
   * five shares' load would leave every other node far below its share and the band unreachable.
   */
  private anchorHotCopies(total: number): number {
    const { p } = this;
    let load = total;
    let weight = this.present.reduce((sum, i) => sum + p.weights[i]!, 0);
    const settled = new Set<number>();
    for (;;) {
      const lambda = weight > 0 ? load / weight : 0;
      const free = this.present.filter((j) => this.hotOn[j] === NONE);
      const heaviest = free.reduce((w, j) => Math.max(w, p.weights[j]!), 0);
      // The largest copy above every free node's band, not placed yet.
      let s = NONE;
      let from = NONE;
      for (const i of this.present) {
        for (const t of this.holds[i]!) {
          if (p.held[t] || this.hotOn[i] === t || settled.has(t * p.weights.length + i)) continue;
          if (!(p.loads[t]! > (1 + p.band) * lambda * heaviest)) continue;
          if (s === NONE || p.loads[t]! > p.loads[s]! || (p.loads[t] === p.loads[s] && (t < s || (t === s && i < from)))) [s, from] = [t, i];
        }
      }
      if (s === NONE) return lambda;
      settled.add(s * p.weights.length + from);
      const stays = this.hotOn[from] === NONE;
      const may = free.filter((j) => this.movable(s, from, j) && (!stays || p.weights[j]! > p.weights[from]!));
      // A node the limits leave no room on is passed over: at worst the copy stays where it is, as
      // when no node may take it (the map stays valid), and a later decision places it.
      const fitting = may.filter((j) => this.affords(this.movedBy(s, from, j)) && this.fits(s, from, j));
      if (fitting.length < may.length) this.limited = true;
      const to = fitting.sort((a, b) => p.weights[b]! - p.weights[a]! || this.load[a]! / p.weights[a]! - this.load[b]! / p.weights[b]! || a - b)[0];
      if (to === undefined && !stays) continue;
      const at = to ?? from;
      if (to !== undefined) this.apply(s, from, to);
      this.hotOn[at] = s;
      load -= p.loads[s]!;
      weight -= p.weights[at]!;
    }
  }

  /** The largest copy node i holds that passes `test` (lowest shard first among equal loads), or NONE. */
  private largestCopy(i: number, test: (s: number) => boolean): number {
    let best = NONE;
    for (const s of this.holds[i]!)
      if (test(s) && (best === NONE || this.p.loads[s]! > this.p.loads[best]! || (this.p.loads[s] === this.p.loads[best] && s < best))) best = s;
    return best;
  }

  /** Whether moving `moved` more copies keeps within `maxMoves`. */
  affords(moved: number): boolean {
    return this.movedSoFar + moved <= this.maxMoves;
  }

  /** Whether moving shard s's copy from `from` to `to` keeps both nodes within `maxMovesPerNode`. */
  private fits(s: number, from: number, to: number): boolean {
    return this.budget === undefined || this.budget.fitsMove(s, from, to);
  }

  /** Each node's band, with its load before the balancing and now. */
  bands(): NodeBand[] {
    const before = this.initialLoad;
    return Array.from(this.load, (after, i) => ({
      share: this.share[i]!,
      lo: this.lo[i]!,
      hi: this.hi[i]!,
      before: before[i]!,
      after,
      ...(this.hotOn[i] === NONE ? {} : { hotShard: this.hotOn[i]! }),
    }));
  }

  outside(): number {
    return this.present.reduce((sum, i) => sum + outsideOf(this.load[i]!, this.lo[i]!, this.hi[i]!), 0);
  }

  /**
   * The best single move of the node furthest outside its band that has one (a copy off a node
   * above its band, or onto a node below it), if any.
   */
  findMove(): Best | undefined {
    for (const i of this.byDistanceOutside()) {
      const best = new Best(this.epsilon);
      if (this.load[i]! > this.hi[i]!) {
        const coolest = this.coolest();
        for (const s of this.sheddable(i)) {
          for (const j of coolest) if (this.movable(s, i, j)) this.considerMove(best, s, i, j);
          // Where the copy was before: going back costs no move.
          for (const j of this.p.current[s]!) if (!coolest.includes(j) && this.movable(s, i, j)) this.considerMove(best, s, i, j);
        }
      } else {
        for (const j of this.present) if (j !== i) for (const s of this.holds[j]!) if (this.movable(s, j, i)) this.considerMove(best, s, j, i);
      }
      if (best.found) return best;
    }
    return undefined;
  }

  /**
   * The best swap of a copy on the node furthest outside its band that has one with a copy on
   * another node (a big copy for a smaller one), if any.
   */
  findSwap(): Best | undefined {
    for (const i of this.byDistanceOutside()) {
      const best = new Best(this.epsilon);
      for (const j of this.present) {
        if (j === i) continue;
        for (const a of this.holds[i]!) {
          if (!this.movable(a, i, j)) continue;
          for (const b of this.holds[j]!) {
            if (b === a || this.holds[i]!.has(b) || !this.movable(b, j, i)) continue;
            this.evaluations += 1;
            const d = this.p.loads[a]! - this.p.loads[b]!;
            const gain = this.delta(i, -d) + this.delta(j, d);
            if (gain <= this.epsilon) continue;
            if (this.budget !== undefined && !this.budget.fitsSwap(a, b, i, j)) {
              this.limited = true;
              continue;
            }
            const moved = this.movedBy(a, i, j) + this.movedBy(b, j, i);
            if (!this.affords(moved)) {
              this.limited = true;
              continue;
            }
            best.offer(gain, moved, Math.max((this.load[i]! - d) / this.share[i]!, (this.load[j]! + d) / this.share[j]!), a, b, i, j);
          }
        }
      }
      if (best.found) return best;
    }
    return undefined;
  }

  /**
   * A move that does not help alone followed by the move or swap it makes possible, together
   * lowering the load outside the band (7 for 6 + 2 across three nodes needs it), for the node
   * furthest outside its band that has one. Searched within a budget of evaluations per decision:
   * thorough on small maps, and a large map at its end state does not pay for it unbounded.
   */
  takeChain(): boolean {
    for (const i of this.byDistanceOutside()) {
      const firsts: [number, number, number][] = [];
      if (this.load[i]! > this.hi[i]!) {
        for (const s of this.sheddable(i)) for (const j of this.present) if (this.movable(s, i, j) && this.fits(s, i, j)) firsts.push([s, i, j]);
      } else {
        for (const j of this.present) if (j !== i) for (const s of this.holds[j]!) if (this.movable(s, j, i) && this.fits(s, j, i)) firsts.push([s, j, i]);
      }
      let best: { gain: number; first: [number, number, number]; then: Best } | undefined;
      for (const first of firsts) {
        if (this.evaluations > CHAIN_BUDGET) return false;
        const [s, from, to] = first;
        const l = this.p.loads[s]!;
        const g1 = this.delta(from, -l) + this.delta(to, l);
        // What a limit holds back after a first move that is not taken says nothing of this decision.
        const limited = this.limited;
        this.apply(s, from, to);
        const move = this.findMove();
        const swap = this.findSwap();
        const then = move === undefined || (swap !== undefined && swap.gain > move.gain + this.epsilon) ? swap : move;
        this.apply(s, to, from);
        this.limited = limited;
        if (then === undefined || g1 + then.gain <= this.epsilon) continue;
        if (!this.affords(this.movedBy(s, from, to) + then.moved)) {
          this.limited = true;
          continue;
        }
        if (best === undefined || g1 + then.gain > best.gain + this.epsilon) best = { gain: g1 + then.gain, first, then };
      }
      if (best !== undefined) {
        this.apply(...best.first);
        this.take(best.then);
        return true;
      }
    }
    return false;
  }

  /** Applies a move or a swap. */
  take(best: Best): void {
    this.apply(best.a, best.from, best.to);
    if (best.b !== NONE) this.apply(best.b, best.to, best.from);
  }

  private considerMove(best: Best, s: number, from: number, to: number): void {
    this.evaluations += 1;
    const l = this.p.loads[s]!;
    const gain = this.delta(from, -l) + this.delta(to, l);
    if (gain <= this.epsilon) return;
    const moved = this.movedBy(s, from, to);
    if (!this.fits(s, from, to) || !this.affords(moved)) {
      this.limited = true;
      return;
    }
    best.offer(gain, moved, Math.max((this.load[from]! - l) / this.share[from]!, (this.load[to]! + l) / this.share[to]!), s, NONE, from, to);
  }

  /**
   * The copies of an overloaded node worth trying to move: all of them, except on a node that
   * carries a hot copy, where every other copy must go anyway and the largest goes first (one
   * copy's search instead of a hundred, the order in which longest-first packing takes them).
   */
  private sheddable(i: number): Iterable<number> {
    if (this.hotOn[i] === NONE) return this.holds[i]!;
    const movable = [...this.holds[i]!].filter((s) => s !== this.hotOn[i] && !this.p.held[s]);
    if (movable.length === 0) return movable;
    const largest = movable.reduce((a, b) => (this.p.loads[b]! > this.p.loads[a]! || (this.p.loads[b] === this.p.loads[a] && b < a) ? b : a));
    return [largest];
  }

  /**
   * The nodes with the most room, by load over share, hot-copy nodes left out: where a copy off an
   * overloaded node can go. Looking at a few of them, not all, keeps a move's search short (a copy
   * of a node above its band gains most on the node furthest below its own).
   */
  private coolest(): number[] {
    let free = this.present.filter((j) => this.hotOn[j] === NONE);
    if (this.budget !== undefined) {
      // A node at its per-node limit takes no new copy (a copy going back where it was is tried apart).
      const roomy = free.filter((j) => this.budget!.hasRoom(j));
      if (roomy.length < free.length) this.limited = true;
      free = roomy;
    }
    const rel = (j: number) => this.load[j]! / this.share[j]!;
    return free.sort((a, b) => rel(a) - rel(b) || a - b).slice(0, DESTINATIONS_PER_MOVE);
  }

  /** Present nodes outside their band, furthest first (ties by index: deterministic). */
  private byDistanceOutside(): number[] {
    const out = this.present.filter((i) => outsideOf(this.load[i]!, this.lo[i]!, this.hi[i]!) > this.epsilon);
    const d = (i: number) => outsideOf(this.load[i]!, this.lo[i]!, this.hi[i]!) / this.share[i]!;
    return out.sort((a, b) => d(b) - d(a) || a - b);
  }

  /** Whether shard s's copy may go from `from` to `to`: not held, `to` present and without a copy, and isolation kept. */
  private movable(s: number, from: number, to: number): boolean {
    if (from === to || this.p.held[s] || this.hotOn[from] === s || this.p.absent[to] || this.holds[to]!.has(s)) return false;
    const g = this.p.groups[to]!;
    if (g === this.p.groups[from]) return true;
    return !this.p.start[s]!.some((k) => k !== from && this.p.groups[k] === g);
  }

  /** How much node i's load outside its band falls when its load changes by `change`. */
  private delta(i: number, change: number): number {
    const l = this.load[i]!;
    return outsideOf(l, this.lo[i]!, this.hi[i]!) - outsideOf(l + change, this.lo[i]!, this.hi[i]!);
  }

  /** +1 when a copy that was there before leaves for a node that did not hold it, −1 when it comes back. */
  private movedBy(s: number, from: number, to: number): number {
    const was = this.originally[s]!;
    return (was.has(to) ? -1 : 0) + (was.has(from) ? 1 : 0);
  }

  private apply(s: number, from: number, to: number): void {
    this.movedSoFar += this.movedBy(s, from, to);
    this.budget?.apply(s, from, to);
    const l = this.p.loads[s]!;
    this.load[from]! -= l;
    this.load[to]! += l;
    this.holds[from]!.delete(s);
    this.holds[to]!.add(s);
    const copies = this.p.start[s]!;
    copies[copies.indexOf(from)] = to;
  }
}
