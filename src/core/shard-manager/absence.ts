// Lost nodes and the replacement delay (docs/PLACEMENT.md, "Lost nodes and the replacement delay").
// A `balanced` dataset does not re-create a lost node's copies while their shards are still served
// elsewhere: a process restart or a rolling deploy brings the node back within seconds, and moving
// its copies away and back costs two copies each. So its copies stay in the map, Down, kept for it
// (`ShardCopyDown`), and the node is absent: the strategy sees it with `absent: true` (it keeps
// what it holds, gets nothing new). Back under the same id within the dataset's
// `replacementDelayMs`, it restarts those copies and nothing moves; after it, or when a new node
// joins (read as its replacement), a round re-creates them. A copy whose shard has no other serving
// copy is not kept: availability first, it is placed again at once.
//
// `filodb-default` datasets are not concerned: FiloDB re-places a lost node's shards at once.
import type { DatasetRef, NodeId, ShardNum } from '../ids.js';
import { noticeTime } from '../iso-time.js';
import { count } from '../plural.js';
import { isServingCopy } from '../shard-record.js';
import { ShardEvents } from '../status.js';
import type { Member } from './protocol.js';
import type { Steps } from '../steps.js';
import type { Step } from './step.js';

/** Until when `node` is absent for the dataset `ref` (ms), or undefined when it is not. */
export function absentUntil(step: Step, ref: DatasetRef, node: NodeId): number | undefined {
  const absent = step.absent.get(node);
  const ds = step.dataset(ref);
  if (!absent || !ds || ds.config.strategy !== 'balanced') return undefined;
  const until = absent.since + ds.config.replacementDelayMs;
  return step.now < until ? until : undefined;
}

/** The departed members a `balanced` dataset still keeps copies for, by node id. */
export function absentMembers(step: Step, ref: DatasetRef): Member[] {
  return [...step.absent.values()]
    .filter((a) => absentUntil(step, ref, a.member.node) !== undefined)
    .map((a) => a.member)
    .sort((a, b) => (a.node < b.node ? -1 : a.node > b.node ? 1 : 0));
}

/** Whether any `balanced` dataset would keep copies for a lost node. */
function anyDelay(step: Step): boolean {
  return step.datasetRefs().some((ref) => {
    const { config } = step.dataset(ref)!;
    return config.strategy === 'balanced' && config.replacementDelayMs > 0;
  });
}

/**
 * A member left or stopped answering (`member` is its last record). For each `balanced` dataset
 * with a replacement delay, each of its copies whose shard is still served by a present member is
 * kept for it, marked Down; the others are dropped, so the round that follows re-places them.
 * `returning`: the node is already back (a restart seen as a new incarnation), so every copy is
 * kept: `nodeBack` restarts them in the same decision. A node being drained is not waited for: the
 * operator wanted its copies elsewhere.
 * `since`: when it left (a new singleton carrying on an absence its predecessor recorded).
 */
export function nodeLost(step: Step, member: Member, wasDraining: boolean, returning: boolean, since = step.now): void {
  const node = member.node;
  const waitFor = !wasDraining && anyDelay(step);
  if (waitFor) step.absent.set(node, { member, since });
  for (const ref of step.datasetRefs()) {
    const { config } = step.dataset(ref)!;
    if (config.strategy !== 'balanced') continue;
    step.membershipChanged.add(ref);
    const until = waitFor ? absentUntil(step, ref, node) : undefined;
    const mapper = () => step.dataset(ref)!.mapper;
    const members = new Set<string>(step.memberNodes());
    let kept = 0;
    let dropped = 0;
    for (const { shard, copy } of mapper().copiesForNode(node)) {
      const servedElsewhere = mapper()
        .recordForShard(shard)
        .assignments.some((a) => a.node !== node && isServingCopy(a) && members.has(a.node));
      // A Leaving copy was on its way out: its successor goes on without it.
      const keep = until !== undefined && (returning || (servedElsewhere && copy.placement !== 'Leaving'));
      if (keep) {
        if (copy.status.type !== 'Down') step.apply(ref, ShardEvents.copyDown(ref, shard, node));
        kept++;
      } else {
        step.apply(ref, ShardEvents.shardDown(ref, shard, node));
        if (!servedElsewhere) dropped++;
      }
    }
    if (until === undefined || returning) continue;
    // Its absence ends on time even when it held nothing (a node back within it is still back, not
    // a newcomer that ends the others' absences).
    step.schedule(until);
    // Nothing kept and nothing lost here: nothing to say.
    if (kept + dropped === 0) continue;
    step.notice({
      name: 'node.absent',
      level: 'warn',
      dataset: ref,
      node,
      message: `${ref}: ${node} is absent: ${count(kept, 'copy', 'copies')} kept for it until ${noticeTime(until)} (replacementDelayMs ${config.replacementDelayMs}); ${count(dropped, 'shard')} with no other serving copy re-placed now`,
    });
  }
}

/**
 * A member joined. If it is a node we keep copies for, it is back: its kept copies restart on it
 * (Assigned, then Recovery and Active as it catches up from its own checkpoints), nothing moves.
 * Otherwise it is a new node, taken as the replacement of every absent node (unless an operator
 * named it the replacement of another, `ReplaceNode`): their reservations end now, so the round that decides this join moves their copies once (to the newcomer where
 * the strategy wants them), instead of re-creating them later and rebalancing onto it again.
 */
export function nodeJoined(step: Step, member: Member, restarted: boolean): void {
  const node = member.node;
  for (const ref of step.datasetRefs()) if (step.dataset(ref)!.config.strategy === 'balanced') step.membershipChanged.add(ref);
  // Whatever the node was taken for, a member never keeps a copy that does not run.
  const copies = restartKeptCopies(step, node);
  const absent = step.absent.get(node);
  if (absent) {
    step.absent.delete(node);
    const message = restarted
      ? `${node} restarted (incarnation ${member.incarnation}): its ${count(copies, 'copy', 'copies')} stay and restart on it`
      : `${node} is back within its replacement delay (absent since ${noticeTime(absent.since)}): its ${count(copies, 'copy', 'copies')} stay and restart on it`;
    step.notice({ name: 'node.returned', level: 'info', node, message });
    return;
  }
  // A restart is the same node again, not a replacement for another; and a node an operator named
  // as another's replacement (`ReplaceNode`) replaces that one.
  if (restarted || step.pendingReplacements.has(node)) return;
  for (const gone of [...step.absent.values()]) {
    step.absent.delete(gone.member.node);
    const copies = step.datasetRefs().reduce((n, ref) => n + step.dataset(ref)!.mapper.numShardsForNode(gone.member.node), 0);
    step.notice({
      name: 'node.absence-ended',
      level: 'info',
      node: gone.member.node,
      message: `${node} joined while ${gone.member.node} was absent (since ${noticeTime(gone.since)}): it is taken as its replacement, and ${gone.member.node}'s ${count(copies, 'copy', 'copies')} are re-created now`,
    });
  }
}

/** Restarts the copies kept for `node` (Down) on it: Assigned, as any copy it is given. */
function restartKeptCopies(step: Step, node: NodeId): number {
  let copies = 0;
  for (const ref of step.datasetRefs()) {
    const mapper = () => step.dataset(ref)!.mapper;
    for (const { shard, copy } of mapper().copiesForNode(node)) {
      if (copy.status.type !== 'Down') continue;
      step.apply(ref, ShardEvents.assignmentStarted(ref, shard as ShardNum, node));
      copies++;
    }
  }
  return copies;
}

/**
 * At a timer: the absences whose replacement delay ended. Each dataset concerned gets a round (the
 * settle window merges the ends of several nodes lost together), which re-creates the copies; the
 * node is forgotten once no dataset waits for it any more.
 */
export function endAbsences(step: Step): void {
  for (const absent of [...step.absent.values()]) {
    const node = absent.member.node;
    let waiting = false;
    for (const ref of step.datasetRefs()) {
      const { config, mapper } = step.dataset(ref)!;
      if (config.strategy !== 'balanced') continue;
      const until = absentUntil(step, ref, node);
      if (until !== undefined) {
        waiting = true;
        // Checked again at the delay's end: this check may have come a moment early (see `endSettleWindows`).
        step.schedule(until);
        continue;
      }
      const copies = mapper.numShardsForNode(node);
      if (copies === 0) continue;
      step.membershipChanged.add(ref);
      step.notice({
        name: 'node.absence-ended',
        level: 'warn',
        dataset: ref,
        node,
        message: `${ref}: ${node} did not come back within its replacement delay (absent since ${noticeTime(absent.since)}, replacementDelayMs ${config.replacementDelayMs}): its ${count(copies, 'copy', 'copies')} are re-created elsewhere`,
      });
    }
    if (!waiting) step.absent.delete(node);
  }
}

/**
 * An operator removed an absent node (`RemoveNode`): it is not waited for any more, and every
 * `balanced` dataset re-creates its copies now (an operator's operation runs at once). Returns the
 * copies that were kept for it.
 */
export function* endAbsence(step: Step, node: NodeId): Steps<number> {
  const absent = step.absent.get(node);
  if (!absent) return 0;
  step.absent.delete(node);
  let copies = 0;
  for (const ref of step.datasetRefs()) {
    if (step.dataset(ref)!.config.strategy !== 'balanced') continue;
    copies += step.dataset(ref)!.mapper.numShardsForNode(node);
    yield* step.assignShards(ref);
  }
  step.notice({
    name: 'node.absence-ended',
    level: 'info',
    node,
    message: `${node}, absent since ${noticeTime(absent.since)}, was removed by an operator: its ${count(copies, 'copy', 'copies')} are re-created now`,
  });
  return copies;
}

/**
 * Copies on nodes that are neither members nor absent for the dataset any more (the delay ended,
 * or a join took the node as replaced): dropped before a round, which re-creates them.
 */
export function dropDepartedCopies(step: Step, ref: DatasetRef): void {
  const mapper = () => step.dataset(ref)!.mapper;
  const members = new Set<string>(step.memberNodes());
  for (const node of [...mapper().allNodes()]) {
    if (members.has(node) || absentUntil(step, ref, node) !== undefined) continue;
    for (const s of mapper().shardsForNode(node)) step.apply(ref, ShardEvents.shardDown(ref, s, node));
  }
}
