// The `balanced` strategy: the whole map from the copies that exist now, moving no more copies than
// the lower bound of placement-peers §3 and leaving no wider spread than its bound.
//
// 1. Targets: each node's share of the copies (node-targets.ts), the rounding remainder to the nodes
//    that hold the most, a group never over one copy per shard.
// 2. Keep: every node keeps its copies up to its target; it sheds the rest (shards shed by no other
//    node first, so one shard rarely loses two copies at once).
// 3. Place: each missing copy goes to the node furthest below its target in a group the shard does
//    not use yet (isolation is a hard rule, never traded for balance).
// 4. Repair: a copy with no such node left goes through the cheapest chain of hand-ons to a node
//    with room (free when it hands on copies placed in this decision), or takes a unit of target
//    from a node it cannot use to one it can; neither costs a move or widens the spread.
import type { NodeId } from '../ids.js';
import { err, ok, type Result } from '../result.js';
import { nodeTargets } from './node-targets.js';
import type { Placement, PlacementError, PlacementInput, PlacementNode, PlacementStrategy } from './placement-types.js';
import { CopyTable } from './copy-table.js';
import { SlotQueues } from './slot-queues.js';

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
    const invalid = validate(input);
    if (invalid) return err({ type: 'InvalidPlacementInput', message: invalid });
    if (input.nodes.length === 0) return ok(input.current.map(() => []));
    return ok(new Decision(input).run());
  }
}

function validate(input: PlacementInput): string | undefined {
  if (!Number.isInteger(input.numShards) || input.numShards < 0) return `numShards must be a non-negative integer, got ${input.numShards}`;
  if (!Number.isInteger(input.replicationFactor) || input.replicationFactor < 1) return `replicationFactor must be a positive integer, got ${input.replicationFactor}`;
  if (input.current.length !== input.numShards) return `current has ${input.current.length} shards, numShards is ${input.numShards}`;
  const ids = new Set<string>();
  for (const n of input.nodes) {
    if (ids.has(n.id)) return `node ${n.id} is listed twice`;
    ids.add(n.id);
    if (!(n.weight > 0) || !Number.isFinite(n.weight)) return `node ${n.id} has weight ${n.weight}; weights must be finite and above 0`;
  }
  return undefined;
}

/** One decision's working state; nodes and groups are indices in id order, so input order is irrelevant. */
class Decision {
  private readonly nodes: readonly PlacementNode[];
  private readonly groupOf: Int32Array;
  private readonly copies: number;
  /** Per shard, the node indices holding a copy in the result. */
  private readonly holders: CopyTable;
  private readonly load: Int32Array;
  /** Shard → the nodes it was shed from in this decision (for repairs that take the shed back). */
  private readonly shedFrom = new Map<number, number[]>();

  constructor(private readonly input: PlacementInput) {
    this.nodes = sortedById(input.nodes);
    const groups = [...new Set(this.nodes.map((n) => n.group))].sort();
    const groupIndex = new Map(groups.map((g, i) => [g, i]));
    this.groupOf = Int32Array.from(this.nodes, (n) => groupIndex.get(n.group)!);
    this.copies = Math.min(input.replicationFactor, groups.length);
    this.load = new Int32Array(this.nodes.length);
    this.holders = this.existingCopies();
  }

  run(): Placement {
    const { input, copies } = this;
    const held = input.held ?? new Set<number>();
    let total = 0;
    for (let s = 0; s < input.numShards; s++) total += held.has(s) ? this.holders.count(s) : copies;
    const targets = nodeTargets(
      this.nodes.map((n, i) => ({ group: this.groupOf[i]!, weight: n.weight, load: this.load[i]! })),
      total,
      this.groupCapacities(held),
    );
    this.shedAbove(targets, held);
    const queues = new SlotQueues(this.groupOf, targets, this.load);
    const placed = new Set<string>();
    const stuck: number[] = [];
    for (let s = 0; s < input.numShards; s++) {
      if (held.has(s)) continue;
      while (this.holders.count(s) < copies) {
        const node = queues.take(this.holders, s);
        if (node === undefined) {
          stuck.push(s);
          break;
        }
        this.holders.add(s, node);
        placed.add(copyKey(s, node));
      }
    }
    for (const s of stuck) this.repair(s, queues, placed, targets);
    return input.current.map((before, s) => this.asIds(s, before));
  }

  /** The input's own array when the shard is unchanged (most are): no copy. Ids come out sorted. */
  private asIds(shard: number, before: readonly NodeId[]): readonly NodeId[] {
    const n = this.holders.count(shard);
    if (n === before.length) {
      let same = true;
      for (let k = 0; same && k < n; k++) same = this.nodes[this.holders.at(shard, k)]!.id === before[k];
      if (same) return before;
    }
    const ids = new Array<NodeId>(n);
    for (let k = 0; k < n; k++) ids[k] = this.nodes[this.holders.at(shard, k)]!.id;
    return ids;
  }

  /**
   * The copies that may stay: on a listed node, at most one per group and `copies` per shard (in
   * node order); a held shard keeps all its copies on listed nodes.
   */
  private existingCopies(): CopyTable {
    const index = new Map(this.nodes.map((n, i) => [n.id as string, i]));
    const { current, held } = this.input;
    const width = current.reduce((max, ids) => Math.max(max, ids.length), this.copies);
    const table = new CopyTable(current.length, width);
    current.forEach((ids, s) => {
      for (const id of ids) {
        const i = index.get(id);
        if (i !== undefined) table.add(s, i);
      }
      if (!held?.has(s)) table.keepOnePerGroup(s, this.groupOf, this.copies);
      for (let k = 0; k < table.count(s); k++) this.load[table.at(s, k)]!++;
    });
    return table;
  }

  /**
   * A group holds at most one copy of each shard, plus whatever more a held shard already has there
   * (a held shard is left as it is, even with two copies in one group).
   */
  private groupCapacities(held: ReadonlySet<number>): Int32Array {
    const capacity = new Int32Array(this.groupOf.reduce((max, g) => Math.max(max, g + 1), 0)).fill(this.input.numShards);
    for (const s of held) {
      if (s >= this.holders.shards) continue;
      const groups = this.groupsUsedBy(s);
      for (const g of new Set(groups)) capacity[g]! += groups.filter((x) => x === g).length - 1;
    }
    return capacity;
  }

  /** Every node above its target gives up its highest shards, preferring shards no one shed yet. */
  private shedAbove(targets: Int32Array, held: ReadonlySet<number>): void {
    const over: (number[] | undefined)[] = new Array(this.nodes.length);
    let anyOver = false;
    for (let i = 0; i < this.nodes.length; i++) {
      if (this.load[i]! <= targets[i]!) continue;
      over[i] = [];
      anyOver = true;
    }
    if (!anyOver) return;
    for (let s = this.holders.shards - 1; s >= 0; s--) {
      if (held.has(s)) continue;
      for (let k = 0; k < this.holders.count(s); k++) over[this.holders.at(s, k)]?.push(s);
    }
    const shedCount = new Uint8Array(this.holders.shards);
    for (const [node, shards] of over.entries()) {
      if (shards === undefined) continue;
      let excess = this.load[node]! - targets[node]!;
      for (let round = 0; excess > 0 && round <= this.copies; round++) {
        for (const s of shards) {
          if (excess === 0) break;
          if (shedCount[s] !== round) continue;
          this.holders.remove(s, node);
          this.shedFrom.set(s, [...(this.shedFrom.get(s) ?? []), node]);
          shedCount[s]!++;
          this.load[node]!--;
          excess--;
        }
      }
    }
  }

  private groupsUsedBy(shard: number): number[] {
    return this.holders.list(shard).map((i) => this.groupOf[i]!);
  }

  /**
   * `shard` still lacks copies and no node below target is in a group it may use. Look for the
   * cheapest chain: `shard` goes to a node it may use, which hands one of its shards on, and so on,
   * until a node with room. Handing on a copy placed in this decision is free, and putting `shard`
   * back on the node that shed it saves the move it would have cost, so a chain of cost ≤ 1 adds no
   * move. Otherwise a unit of target moves to a node the shard may use (same targets, same spread);
   * only then a costlier chain (extra moves, spread kept), and last the least loaded allowed node.
   */
  private repair(shard: number, queues: SlotQueues, placed: Set<string>, targets: Int32Array): void {
    while (this.holders.count(shard) < this.copies) {
      const used = new Set(this.groupsUsedBy(shard));
      const chain = this.cheapestChain(shard, used, queues, placed);
      if (chain && chain.cost <= 1) {
        this.applyChain(chain.hops, queues, placed);
        continue;
      }
      const retarget = this.findRetarget(used, queues, targets);
      if (retarget) {
        // The free node's last unit of room goes to a node below it that the shard may use.
        const { free, to } = retarget;
        targets[free]!--;
        targets[to]!++;
        queues.shrink(free);
        this.load[to]!++;
        this.holders.add(shard, to);
        placed.add(copyKey(shard, to));
        continue;
      }
      if (chain) {
        this.applyChain(chain.hops, queues, placed);
        continue;
      }
      const fallback = this.leastLoadedOutside(used, targets);
      if (fallback === undefined) return;
      this.holders.add(shard, fallback);
      this.load[fallback]!++;
      placed.add(copyKey(shard, fallback));
    }
  }

  /** 0-1 breadth-first search over nodes; a hop moves shard `moved` from `from` to `to`. */
  private cheapestChain(shard: number, used: ReadonlySet<number>, queues: SlotQueues, placed: ReadonlySet<string>): { cost: number; hops: Hop[] } | undefined {
    const n = this.nodes.length;
    const byNode: number[][] = Array.from({ length: n }, () => []);
    for (let s = 0; s < this.holders.shards; s++) {
      if (!this.input.held?.has(s)) for (const i of this.holders.list(s)) byNode[i]!.push(s);
    }
    const room = new Set(queues.remainingNodes());
    const cost = new Float64Array(n).fill(Infinity);
    const via: (Hop | undefined)[] = new Array(n);
    const deque: number[] = [];
    const shedFrom = this.shedFrom.get(shard) ?? [];
    for (let w = 0; w < n; w++) {
      if (used.has(this.groupOf[w]!)) continue;
      cost[w] = shedFrom.includes(w) ? 0 : 1;
      via[w] = { moved: shard, from: -1, to: w };
      if (cost[w] === 0) deque.unshift(w);
      else deque.push(w);
    }
    const done = new Uint8Array(n);
    let best: number | undefined;
    while (deque.length > 0) {
      const w = deque.shift()!;
      if (done[w]) continue;
      done[w] = 1;
      if (room.has(w)) {
        best = w;
        break;
      }
      for (const t of byNode[w]!) {
        if (t === via[w]!.moved) continue;
        const step = placed.has(copyKey(t, w)) ? 0 : 1;
        for (let x = 0; x < n; x++) {
          if (done[x] || x === w || this.holders.usesGroup(t, this.groupOf[x]!, this.groupOf, w)) continue;
          if (cost[w]! + step >= cost[x]!) continue;
          cost[x] = cost[w]! + step;
          via[x] = { moved: t, from: w, to: x };
          if (step === 0) deque.unshift(x);
          else deque.push(x);
        }
      }
    }
    if (best === undefined) return undefined;
    const hops: Hop[] = [];
    for (let hop = via[best]; hop; hop = hop.from < 0 ? undefined : via[hop.from]) hops.unshift(hop);
    return { cost: cost[best]!, hops };
  }

  private applyChain(hops: readonly Hop[], queues: SlotQueues, placed: Set<string>): void {
    for (const { moved, from, to } of hops) {
      if (from < 0) {
        this.holders.add(moved, to);
        this.shedFrom.set(moved, (this.shedFrom.get(moved) ?? []).filter((i) => i !== to));
      } else {
        this.holders.remove(moved, from);
        this.holders.add(moved, to);
        placed.delete(copyKey(moved, from));
      }
      placed.add(copyKey(moved, to));
    }
    // Every node on the chain gave one copy and took one, except the last, which had room.
    queues.consume(hops[hops.length - 1]!.to);
  }

  /**
   * A free node and a full node outside the shard's groups with a lower target: moving one unit of
   * target between them keeps the multiset of targets, hence the spread and the number of moves.
   */
  private findRetarget(used: ReadonlySet<number>, queues: SlotQueues, targets: Int32Array): { free: number; to: number } | undefined {
    for (const free of queues.remainingNodes()) {
      let to: number | undefined;
      for (let i = 0; i < this.nodes.length; i++) {
        if (used.has(this.groupOf[i]!) || targets[i]! >= targets[free]! || this.load[i]! < targets[i]!) continue;
        if (to === undefined || targets[i]! < targets[to]!) to = i;
      }
      if (to !== undefined) return { free, to };
    }
    return undefined;
  }

  private leastLoadedOutside(used: ReadonlySet<number>, targets: Int32Array): number | undefined {
    let best: number | undefined;
    for (let i = 0; i < this.nodes.length; i++) {
      if (used.has(this.groupOf[i]!)) continue;
      if (best === undefined || this.load[i]! - targets[i]! < this.load[best]! - targets[best]!) best = i;
    }
    return best;
  }
}

/** One hand-on of a repair chain; `from` −1 is the stuck shard's own new copy. */
interface Hop {
  readonly moved: number;
  readonly from: number;
  readonly to: number;
}

const copyKey = (shard: number, node: number): string => `${shard}:${node}`;

/** Nodes in id order; the input is often sorted already, which costs one pass to see. */
function sortedById(nodes: readonly PlacementNode[]): readonly PlacementNode[] {
  let sorted = true;
  for (let i = 1; sorted && i < nodes.length; i++) sorted = nodes[i - 1]!.id < nodes[i]!.id;
  return sorted ? nodes : [...nodes].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
}

