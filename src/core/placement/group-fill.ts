// The common case decided without a flow: every shard wants one copy in every group (RF = groups),
// no node is absent, no shard is held, each group's nodes weigh alike, and no shard has two
// current copies in one group. Then the groups are independent, and in each the most copies are
// kept when the ⌈q⌉ loads go first to the nodes holding more than ⌊q⌋ (each such node keeps one
// more copy than at ⌊q⌋; every other choice keeps fewer). Which nodes get them cannot change the
// spread: the group's nodes weigh alike, so its set of weighted loads is the same either way.
import { CopyTable } from './copy-table.js';
import type { PlacementProblem } from './placement-problem.js';

/** The decided copies, or undefined when the problem is not of this shape. */
export function fillGroups(problem: PlacementProblem): CopyTable | undefined {
  const { shards, groupCount: groups, groupOf, currentStart, currentNode } = problem;
  if (problem.copies !== groups || problem.presentCount !== problem.nodes.length || hasHeldShard(problem) || !problem.uniformWeightPerGroup()) return undefined;
  // slot[s * groups + g]: the node holding shard s's copy in group g, or −1.
  const slot = new Int32Array(shards * groups).fill(-1);
  const load = new Int32Array(problem.nodes.length);
  for (let s = 0; s < shards; s++) {
    for (let k = currentStart[s]!; k < currentStart[s + 1]!; k++) {
      const i = currentNode[k]!;
      const at = s * groups + groupOf[i]!;
      if (slot[at] !== -1) return undefined;
      slot[at] = i;
      load[i]!++;
    }
  }
  const target = targets(problem, load);
  shedExcess(problem, slot, load, target);
  placeMissing(problem, slot, load, target);
  const table = new CopyTable(shards, groups);
  for (let s = 0; s < shards; s++) table.setRow(s, slot, s * groups, groups);
  return table;
}

function hasHeldShard(problem: PlacementProblem): boolean {
  for (const s of problem.held) if (s >= 0 && s < problem.shards) return true;
  return false;
}

/** ⌊q⌋ for all, then each group's remaining ⌈q⌉ loads to nodes above ⌊q⌋ first (lowest index first). */
function targets(problem: PlacementProblem, load: Int32Array): Int32Array {
  const { lo, hi, groupOf, shards } = problem;
  const target = Int32Array.from(lo);
  const ceilings = new Int32Array(problem.groupCount).fill(shards);
  for (let i = 0; i < target.length; i++) ceilings[groupOf[i]!]! -= lo[i]!;
  for (const above of [true, false]) {
    for (let i = 0; i < target.length; i++) {
      const g = groupOf[i]!;
      if (ceilings[g]! <= 0 || target[i]! === hi[i]! || load[i]! > lo[i]! !== above) continue;
      target[i] = hi[i]!;
      ceilings[g]!--;
    }
  }
  return target;
}

/**
 * Nodes above target drop their highest shards, first those that lose no other copy in this
 * decision, so a shard rarely has two copies moving at once.
 */
function shedExcess(problem: PlacementProblem, slot: Int32Array, load: Int32Array, target: Int32Array): void {
  const excess = new Int32Array(load.length);
  let any = 0;
  for (let i = 0; i < load.length; i++) any += excess[i] = Math.max(0, load[i]! - target[i]!);
  if (any === 0) return;
  const groups = problem.groupCount;
  const shed = new Uint8Array(problem.shards);
  for (const alone of [true, false]) {
    for (let s = problem.shards - 1; s >= 0 && any > 0; s--) {
      for (let g = 0; g < groups; g++) {
        const i = slot[s * groups + g]!;
        if (i < 0 || excess[i] === 0 || (alone && shed[s])) continue;
        slot[s * groups + g] = -1;
        excess[i]!--;
        load[i]!--;
        any--;
        shed[s] = 1;
      }
    }
  }
}

/** Each empty slot goes to the group's next node with room, lowest shard first. */
function placeMissing(problem: PlacementProblem, slot: Int32Array, load: Int32Array, target: Int32Array): void {
  const groups = problem.groupCount;
  const members: number[][] = Array.from({ length: groups }, () => []);
  for (let i = 0; i < load.length; i++) if (load[i]! < target[i]!) members[problem.groupOf[i]!]!.push(i);
  const cursor = new Int32Array(groups);
  for (let s = 0; s < problem.shards; s++) {
    for (let g = 0; g < groups; g++) {
      if (slot[s * groups + g] !== -1) continue;
      const list = members[g]!;
      while (load[list[cursor[g]!]!]! >= target[list[cursor[g]!]!]!) cursor[g]!++;
      const i = list[cursor[g]!]!;
      slot[s * groups + g] = i;
      load[i]!++;
    }
  }
}
