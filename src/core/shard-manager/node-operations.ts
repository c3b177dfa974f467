// The operator's node operations, M3DB's add/remove/replace: each a singleton command with a typed
// reply, refused with nothing changed when it would break isolation, when the new node already
// serves, or when the others could not take the copies. Drains persist, so a new singleton carries
// them on; a drained node is told it may stop once it holds no copy.
import { parseNodeId, type DatasetRef, type NodeId, type ReplyTo } from '../ids.js';
import { count } from '../plural.js';
import { endAbsence } from './absence.js';
import { groupsOf, placementNode, rollBackMovesOff } from './planned-moves.js';
import type { Member, NodeOperationName, NodeOperationRefusal } from './protocol.js';
import type { Steps } from '../steps.js';
import type { Step } from './step.js';

function refuse(step: Step, replyTo: ReplyTo, operation: NodeOperationName, reason: NodeOperationRefusal, message: string): void {
  step.reply(replyTo, { type: 'NodeOperationRefused', operation, reason, message });
}

function parseNode(step: Step, raw: string, replyTo: ReplyTo, operation: NodeOperationName): NodeId | undefined {
  const parsed = parseNodeId(raw);
  if (parsed.ok) return parsed.value;
  refuse(step, replyTo, operation, 'bad-node', parsed.error.message);
  return undefined;
}

/** Copies `node` holds over every dataset. */
function copiesOn(step: Step, node: NodeId): number {
  return step.datasetRefs().reduce((n, ref) => n + step.dataset(ref)!.mapper.numShardsForNode(node), 0);
}

/** Why the members left after removing `leaving` could not hold every dataset's copies, if so. */
function cannotHold(step: Step, leaving: NodeId, joining?: Member): { reason: NodeOperationRefusal; message: string } | undefined {
  const rest = [...step.placeableMembers().filter((m) => m.node !== leaving), ...(joining ? [joining] : [])];
  for (const ref of step.datasetRefs()) {
    const { config, mapper } = step.dataset(ref)!;
    if (mapper.numShardsForNode(leaving) === 0) continue;
    if (rest.length === 0) return { reason: 'capacity', message: `${leaving} is the only member that can hold ${ref}` };
    if (config.strategy === 'balanced') {
      const groups = groupsOf(rest);
      if (config.replicationFactor > 1 && groups.length < Math.min(config.replicationFactor, groupsOf(step.placeableMembers()).length)) {
        return {
          reason: 'isolation',
          message: `${ref} keeps ${config.replicationFactor} copies in distinct racks; without ${leaving} the members span only ${groups.length}: ${groups.join(', ')}`,
        };
      }
      continue;
    }
    const cap = Math.ceil(config.numShards / config.minNumNodes);
    const room = rest.reduce((n, m) => n + Math.max(0, cap - mapper.numShardsForNode(m.node)), 0);
    if (room < mapper.numShardsForNode(leaving)) {
      return {
        reason: 'capacity',
        message: `${ref}: ${leaving} holds ${mapper.numShardsForNode(leaving)} shards but the other members have room for ${room} (at most ${cap} each)`,
      };
    }
  }
  return undefined;
}

/** Starts moving every copy off `node` (into `to` when it replaces it), then places the datasets. */
function* startDrain(step: Step, node: NodeId, to: NodeId | undefined): Steps<number> {
  step.draining.set(node, to);
  step.released.delete(node);
  const copies = copiesOn(step, node);
  for (const ref of step.datasetRefs()) yield* step.assignShards(ref);
  step.notice({
    name: 'node.draining',
    level: 'info',
    node,
    message: `${node} is being drained${to ? ` into ${to}` : ''}: ${count(copies, 'copy', 'copies')} to hand off`,
  });
  return copies;
}

/**
 * `RemoveNode`: drain. Of a node absent within its replacement delay (it is gone, its copies kept
 * for it): the operator knows it will not come back, so its copies are re-created now.
 */
export function* removeNode(step: Step, raw: string, replyTo: ReplyTo): Steps<void> {
  const node = parseNode(step, raw, replyTo, 'remove');
  if (node === undefined) return;
  if (!step.member(node) && step.absent.has(node)) {
    const copies = yield* endAbsence(step, node);
    return step.reply(replyTo, {
      type: 'NodeOperationAccepted',
      operation: 'remove',
      node,
      moves: copies,
      pending: false,
      message: `${node} was absent: the ${count(copies, 'copy', 'copies')} kept for it are re-created on the members now`,
    });
  }
  if (!step.member(node)) return refuse(step, replyTo, 'remove', 'unknown-node', `${node} is not a member`);
  if (step.draining.has(node)) return refuse(step, replyTo, 'remove', 'conflict', `${node} is already being drained`);
  const why = cannotHold(step, node);
  if (why) return refuse(step, replyTo, 'remove', why.reason, why.message);
  const moves = yield* startDrain(step, node, undefined);
  step.reply(replyTo, {
    type: 'NodeOperationAccepted',
    operation: 'remove',
    node,
    moves,
    pending: false,
    message: `${node} is being drained: ${count(moves, 'copy', 'copies')} to hand off; it will be told when it may stop`,
  });
}

/** `ReplaceNode`: every copy of `old` handed to `new`, now or when `new` joins. */
export function* replaceNode(step: Step, rawOld: string, rawNew: string, replyTo: ReplyTo): Steps<void> {
  const old = parseNode(step, rawOld, replyTo, 'replace');
  if (old === undefined) return;
  const to = parseNode(step, rawNew, replyTo, 'replace');
  if (to === undefined) return;
  if (old === to) return refuse(step, replyTo, 'replace', 'bad-node', `a node cannot replace itself (${old})`);
  if (!step.member(old)) return refuse(step, replyTo, 'replace', 'unknown-node', `${old} is not a member`);
  if (step.draining.has(old) || step.pendingReplacements.has(to) || [...step.pendingReplacements.values()].includes(old)) {
    return refuse(step, replyTo, 'replace', 'conflict', `${old} or ${to} is already part of a drain or replacement`);
  }
  if (step.draining.has(to)) return refuse(step, replyTo, 'replace', 'conflict', `${to} is being drained`);
  const copies = copiesOn(step, to);
  if (copies > 0) return refuse(step, replyTo, 'replace', 'serving', `${to} already serves ${count(copies, 'copy', 'copies')}: a replacement must start empty`);
  const joined = step.member(to);
  if (!joined) {
    step.pendingReplacements.set(to, old);
    step.notice({ name: 'node.replacement-pending', level: 'info', node: old, message: `${old} will be replaced by ${to} when ${to} joins` });
    return step.reply(replyTo, {
      type: 'NodeOperationAccepted',
      operation: 'replace',
      node: old,
      moves: 0,
      pending: true,
      message: `${old} will be replaced by ${to} as soon as ${to} joins`,
    });
  }
  const why = isolationBroken(step, old, joined) ?? cannotHold(step, old, joined);
  if (why) return refuse(step, replyTo, 'replace', why.reason, why.message);
  const moves = yield* startDrain(step, old, to);
  step.reply(replyTo, {
    type: 'NodeOperationAccepted',
    operation: 'replace',
    node: old,
    moves,
    pending: false,
    message: `${old} is being replaced by ${to}: ${count(moves, 'copy', 'copies')} to hand off`,
  });
}

/** A replacement in another rack would put two replicas of a shard in one rack, or move more than `old`'s copies. */
function isolationBroken(step: Step, old: NodeId, joined: Member): { reason: NodeOperationRefusal; message: string } | undefined {
  const was = step.member(old)!;
  const replicated = step.datasetRefs().filter((ref) => step.dataset(ref)!.config.replicationFactor > 1);
  if (replicated.length === 0 || placementNode(was).group === placementNode(joined).group) return undefined;
  return {
    reason: 'isolation',
    message: `${joined.node} is in rack ${joined.rack ?? '(none)'} but ${old} is in rack ${was.rack ?? '(none)'}: replicas of ${replicated.join(', ')} must stay in distinct racks`,
  };
}

/** A member joined: a replacement waiting for it starts now (or is cancelled if it would break isolation). */
export function* startPendingReplacement(step: Step, member: Member): Steps<void> {
  const old = step.pendingReplacements.get(member.node);
  if (old === undefined) return;
  step.pendingReplacements.delete(member.node);
  const why = !step.member(old) ? { message: `${old} is no longer a member` } : (isolationBroken(step, old, member) ?? cannotHold(step, old, member));
  if (why) {
    step.notice({
      name: 'node.operation-cancelled',
      level: 'warn',
      node: old,
      message: `the replacement of ${old} by ${member.node} was cancelled: ${why.message}`,
    });
    return;
  }
  yield* startDrain(step, old, member.node);
}

/** `AddNode`: undoes a drain or a pending replacement, so the node takes copies again. */
export function* addNode(step: Step, raw: string, replyTo: ReplyTo): Steps<void> {
  const node = parseNode(step, raw, replyTo, 'add');
  if (node === undefined) return;
  const pending = [...step.pendingReplacements].find(([to, old]) => to === node || old === node);
  if (pending) step.pendingReplacements.delete(pending[0]);
  if (step.draining.has(node)) {
    const into = step.draining.get(node);
    step.draining.delete(node);
    step.released.delete(node);
    let moves = 0;
    let kept = 0;
    for (const ref of step.datasetRefs()) {
      kept += rollBackMovesOff(step, ref, node, into);
      moves += yield* copiesGivenTo(step, ref, node);
    }
    step.notice({ name: 'node.operation-cancelled', level: 'info', node, message: `${node} is no longer drained: it takes copies again` });
    return step.reply(replyTo, {
      type: 'NodeOperationAccepted',
      operation: 'add',
      node,
      moves,
      pending: false,
      message: `${node} takes copies again: ${count(kept, 'handoff')} rolled back (it keeps those copies), ${count(moves, 'copy', 'copies')} move to it now (more as moves finish, maxConcurrentMoves at a time)`,
    });
  }
  if (!step.member(node)) {
    if (pending)
      return step.reply(replyTo, {
        type: 'NodeOperationAccepted',
        operation: 'add',
        node,
        moves: 0,
        pending: false,
        message: `the pending replacement with ${node} was cancelled`,
      });
    return refuse(step, replyTo, 'add', 'unknown-node', `${node} is not a member: start it and it joins by itself`);
  }
  // A member that holds less than its share (a drain that finished, then was undone) gets its
  // copies in this decision, and the answer says how many: not a round some seconds later.
  let moves = 0;
  for (const ref of step.datasetRefs()) if (step.dataset(ref)!.config.strategy === 'balanced') moves += yield* copiesGivenTo(step, ref, node);
  step.reply(replyTo, {
    type: 'NodeOperationAccepted',
    operation: 'add',
    node,
    moves,
    pending: false,
    message: `${node} is a member and takes copies: ${count(moves, 'copy', 'copies')} move to it now`,
  });
}

/** Runs the dataset's round now; the copies it started on `node`. */
function* copiesGivenTo(step: Step, ref: DatasetRef, node: NodeId): Steps<number> {
  return (yield* step.assignShards(ref)).filter((shard) => step.dataset(ref)!.mapper.copyOnNode(shard, node)?.placement === 'Initializing').length;
}

/** A member left: it is no longer drained or waited for. */
export function forgetNode(step: Step, node: NodeId): void {
  step.draining.delete(node);
  step.released.delete(node);
  for (const [to, old] of step.pendingReplacements) if (old === node) step.pendingReplacements.delete(to);
  // A replacement that died: the old node stays drained, into whichever members have room.
  for (const [old, to] of step.draining) if (to === node) step.draining.set(old, undefined);
}

/** Drained members that hold nothing any more are told, once, that they may stop. */
export function releaseDrainedNodes(step: Step): void {
  for (const node of step.draining.keys()) {
    const member = step.member(node);
    if (copiesOn(step, node) > 0) {
      step.released.delete(node); // it had to take copies back: told again once it is empty
      continue;
    }
    if (!member || step.released.has(node)) continue;
    step.released.add(node);
    step.send({ type: 'ReleaseNode', node, incarnation: member.incarnation });
    step.notice({ name: 'node.drained', level: 'info', node, message: `${node} holds no copy any more: it may stop` });
  }
}

/** `GetNodeOperations`: what is in flight and what each member still holds. */
export function nodeOperationsState(step: Step, replyTo: ReplyTo): void {
  const copies = step.members.map((m) => {
    let total = 0;
    let leaving = 0;
    for (const ref of step.datasetRefs()) {
      for (const { copy } of step.dataset(ref)!.mapper.copiesForNode(m.node)) {
        total++;
        if (copy.placement === 'Leaving') leaving++;
      }
    }
    return { node: m.node, copies: total, leaving };
  });
  step.reply(replyTo, { type: 'NodeOperationsState', operations: step.operations(), copies });
}
