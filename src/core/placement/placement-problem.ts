// One placement decision as index arithmetic: nodes sorted by id (so input order never matters),
// groups numbered, each shard's current copies split into those on present nodes (candidates to
// keep) and those frozen on absent nodes, and each present node's bounds ⌊q⌋..⌈q⌉.
import type { NodeId } from '../ids.js';
import { fairShares } from './fair-shares.js';
import type { PlacementInput, PlacementNode } from './placement-types.js';

export class PlacementProblem {
  /** Nodes in id order; every index below is into this list. */
  readonly nodes: readonly PlacementNode[];
  readonly groupOf: Int32Array;
  readonly groupCount: number;
  readonly present: Uint8Array;
  /** Each node's weight, 0 for an absent node (it takes no part in the shares). */
  readonly presentWeight: Float64Array;
  readonly presentCount: number;
  /** Copies each non-held shard should have: min(RF, groups). */
  readonly copies: number;
  readonly shards: number;
  readonly held: ReadonlySet<number>;
  /**
   * Current copies on present nodes, shard by shard (`currentNode[currentStart[s] .. currentStart[s+1]]`,
   * ascending; several per group possible). Flat arrays: a decision over thousands of shards
   * allocates nothing per shard.
   */
  readonly currentStart: Int32Array;
  readonly currentNode: Int32Array;
  /** Whether a shard's input list was exactly its current copies, ascending (so it can be returned as is). */
  readonly inputExact: Uint8Array;
  /** Frozen copies on absent nodes of non-held shards (one per group at most), the same way. */
  readonly frozenStart: Int32Array;
  readonly frozenNode: Int32Array;
  /** Copies of held shards on each node (they stay, and count toward the node's load). */
  readonly heldLoad: Int32Array;
  /** Copies that present nodes hold after the decision if every shard gets its copies. */
  readonly presentTotal: number;
  readonly groupCapacity: Int32Array;
  readonly lo: Int32Array;
  readonly hi: Int32Array;
  /** Weighted load of a node = load × scale / weight: W/N over present nodes (1 when all weigh 1). */
  readonly scale: number;

  /**
   * `asIfAbsentPresent`: the bounds of the shares every node would have if the absent ones were
   * present (docs/PLACEMENT.md, "What exact means"; the strategy tries them first while nodes are
   * absent). Otherwise the shares over the present nodes.
   */
  constructor(
    readonly input: PlacementInput,
    options: { readonly asIfAbsentPresent?: boolean } = {},
  ) {
    this.nodes = sortedById(input.nodes);
    // Groups numbered by first appearance in id order: as independent of input order as a sort by name.
    const count = this.nodes.length;
    const groupIndex = new Map<string, number>();
    this.groupOf = new Int32Array(count);
    this.present = new Uint8Array(count);
    this.presentWeight = new Float64Array(count);
    let presentCount = 0;
    let presentWeight = 0;
    for (let i = 0; i < count; i++) {
      const n = this.nodes[i]!;
      let g = groupIndex.get(n.group);
      if (g === undefined) groupIndex.set(n.group, (g = groupIndex.size));
      this.groupOf[i] = g;
      if (n.absent) continue;
      this.present[i] = 1;
      this.presentWeight[i] = n.weight;
      presentCount++;
      presentWeight += n.weight;
    }
    this.groupCount = groupIndex.size;
    this.presentCount = presentCount;
    this.copies = Math.min(input.replicationFactor, this.groupCount);
    this.shards = input.numShards;
    this.held = input.held ?? new Set<number>();
    this.heldLoad = new Int32Array(this.nodes.length);
    const split = this.splitCopies();
    this.currentStart = split.currentStart;
    this.currentNode = split.currentNode;
    this.frozenStart = split.frozenStart;
    this.frozenNode = split.frozenNode;
    this.inputExact = split.inputExact;

    // Fair shares over present nodes: a group can take one more copy of each shard it has none of.
    this.groupCapacity = new Int32Array(this.groupCount);
    // A shard whose frozen copies fill its slots takes no copy anywhere; the others one per group
    // they have no frozen copy in.
    let total = 0;
    let open = 0;
    const frozenInGroup = new Int32Array(this.groupCount);
    for (let s = 0; s < this.shards; s++) {
      if (this.held.size > 0 && this.held.has(s)) continue;
      const frozen = this.frozenStart[s + 1]! - this.frozenStart[s]!;
      total += this.copies - frozen;
      if (frozen === this.copies) continue;
      open++;
      for (let k = this.frozenStart[s]!; k < this.frozenStart[s + 1]!; k++) frozenInGroup[this.groupOf[this.frozenNode[k]!]!]!++;
    }
    for (let g = 0; g < this.groupCount; g++) this.groupCapacity[g] = open - frozenInGroup[g]!;
    for (let i = 0; i < this.nodes.length; i++) {
      if (!this.present[i]) continue;
      total += this.heldLoad[i]!;
      this.groupCapacity[this.groupOf[i]!]! += this.heldLoad[i]!;
    }
    this.presentTotal = total;
    const shares = options.asIfAbsentPresent ? this.sharesAsIfAbsentPresent() : fairShares(this.groupOf, this.presentWeight, total, this.groupCapacity);
    this.lo = shares.lo;
    this.hi = shares.hi;
    this.scale = presentCount > 0 ? presentWeight / presentCount : 1;
  }

  /** Whether some listed node is absent. */
  get anyAbsent(): boolean {
    return this.presentCount < this.nodes.length;
  }

  /**
   * Every node's share as if the absent ones were present: each non-held shard's c copies to share
   * by weight over every node, each group holding one copy of each at most, held copies where they
   * are (`heldLoad` counts them on absent nodes too). The absent nodes' own shares are not used:
   * their load is what they hold.
   */
  private sharesAsIfAbsentPresent(): { readonly lo: Int32Array; readonly hi: Int32Array } {
    const count = this.nodes.length;
    const weight = new Float64Array(count);
    for (let i = 0; i < count; i++) weight[i] = this.nodes[i]!.weight;
    let open = 0;
    for (let s = 0; s < this.shards; s++) if (!(this.held.size > 0 && this.held.has(s))) open++;
    const capacity = new Int32Array(this.groupCount).fill(open);
    let total = open * this.copies;
    for (let i = 0; i < count; i++) {
      total += this.heldLoad[i]!;
      capacity[this.groupOf[i]!]! += this.heldLoad[i]!;
    }
    return fairShares(this.groupOf, weight, total, capacity);
  }

  /**
   * The ids of shard s's decided copies (`nodes[from .. from+count]`, ascending): the input's own
   * array when they are its current copies unchanged, as most are (no allocation, no compare of ids).
   */
  idsOf(s: number, nodes: Int32Array, from: number, count: number): readonly NodeId[] {
    if (this.inputExact[s]) {
      const start = this.currentStart[s]!;
      let same = count === this.currentStart[s + 1]! - start && this.frozenStart[s + 1] === this.frozenStart[s];
      for (let k = 0; same && k < count; k++) same = nodes[from + k] === this.currentNode[start + k];
      if (same) return this.input.current[s]!;
    }
    const ids = new Array<NodeId>(count);
    for (let k = 0; k < count; k++) ids[k] = this.nodes[nodes[from + k]!]!.id;
    return ids;
  }

  /** A node's load as the weighted spread counts it. */
  weighted(node: number, load: number): number {
    return (load * this.scale) / this.nodes[node]!.weight;
  }

  /** Whether every present node of each group has the same weight (the group's loads weigh alike). */
  uniformWeightPerGroup(): boolean {
    const weightOf = new Float64Array(this.groupCount).fill(NaN);
    for (let i = 0; i < this.nodes.length; i++) {
      if (!this.present[i]) continue;
      const g = this.groupOf[i]!;
      if (Number.isNaN(weightOf[g]!)) weightOf[g] = this.nodes[i]!.weight;
      else if (weightOf[g] !== this.nodes[i]!.weight) return false;
    }
    return true;
  }

  /**
   * Resolves each shard's copies to node indices: copies on unlisted nodes are gone; a held shard's
   * copies all stay (counted in `heldLoad`); a non-held shard's copies on absent nodes are frozen,
   * one per group and `copies` at most (lowest ids first).
   */
  private splitCopies(): { currentStart: Int32Array; currentNode: Int32Array; frozenStart: Int32Array; frozenNode: Int32Array; inputExact: Uint8Array } {
    const index = new Map<string, number>();
    this.nodes.forEach((n, i) => index.set(n.id, i));
    const currentStart = new Int32Array(this.shards + 1);
    const frozenStart = new Int32Array(this.shards + 1);
    let size = 0;
    for (let s = 0; s < this.shards; s++) size += this.input.current[s]!.length;
    const currentNode = new Int32Array(size);
    const frozen: number[] = [];
    const inputExact = new Uint8Array(this.shards);
    const servedGroups: number[] = [];
    const anyHeld = this.held.size > 0;
    let at = 0;
    for (let s = 0; s < this.shards; s++) {
      currentStart[s] = at;
      frozenStart[s] = frozen.length;
      const first = at;
      const ids = this.input.current[s]!;
      let exact = 1;
      for (const id of ids) {
        const i = index.get(id);
        if (i === undefined) {
          exact = 0;
          continue;
        }
        if (at > first && currentNode[at - 1]! >= i) exact = 0;
        // Insertion keeps the copies ascending and drops a node listed twice.
        let k = at;
        while (k > first && currentNode[k - 1]! > i) k--;
        if (k > first && currentNode[k - 1] === i) continue;
        for (let j = at; j > k; j--) currentNode[j] = currentNode[j - 1]!;
        currentNode[k] = i;
        at++;
      }
      inputExact[s] = exact;
      if (anyHeld && this.held.has(s)) {
        for (let k = first; k < at; k++) this.heldLoad[currentNode[k]!]!++;
        continue;
      }
      if (this.presentCount === this.nodes.length) continue;
      inputExact[s] = 0;
      // Copies on absent nodes leave the list of candidates and become frozen, except in a group
      // where a present node holds a copy (the copy that serves is the one to keep).
      servedGroups.length = 0;
      for (let k = first; k < at; k++) if (this.present[currentNode[k]!]) servedGroups.push(this.groupOf[currentNode[k]!]!);
      let kept = first;
      for (let k = first; k < at; k++) {
        const i = currentNode[k]!;
        if (this.present[i]) {
          currentNode[kept++] = i;
          continue;
        }
        let clash = frozen.length - frozenStart[s]! >= this.copies || servedGroups.includes(this.groupOf[i]!);
        for (let f = frozenStart[s]!; !clash && f < frozen.length; f++) clash = this.groupOf[frozen[f]!] === this.groupOf[i];
        if (!clash) frozen.push(i);
      }
      at = kept;
    }
    currentStart[this.shards] = at;
    frozenStart[this.shards] = frozen.length;
    return { currentStart, currentNode, frozenStart, frozenNode: Int32Array.from(frozen), inputExact };
  }
}

/** Nodes in id order; the input is often sorted already, which costs one pass to see. */
function sortedById(nodes: readonly PlacementNode[]): readonly PlacementNode[] {
  let sorted = true;
  for (let i = 1; sorted && i < nodes.length; i++) sorted = nodes[i - 1]!.id < nodes[i]!.id;
  return sorted ? nodes : [...nodes].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
}
