import { parseNodeId, isShardInRange, type DatasetRef, type ReplyTo, type ShardNum } from '../ids.js';
import { ShardEvents } from '../status.js';
import type { Steps } from '../steps.js';
import type { Step } from './step.js';

/** FiloDB's shard-list check: every shard in range and no duplicates; the list not empty. */
function invalidShards(shards: readonly number[], numShards: number): string | undefined {
  const valid = [...new Set(shards.filter((s) => isShardInRange(s, numShards)))];
  if (valid.length === 0 || valid.length !== shards.length) {
    return `Invalid shards found ${list(shards)}. Valid shards are ${list(valid)}`;
  }
  return undefined;
}

const list = (shards: readonly number[]): string => `[${shards.join(', ')}]`;

/**
 * `StopShards`: FiloDB's validations in order (dataset known; shards valid and distinct; every
 * shard owned), then `ShardDown` on each and `IngestionStopped`. Stopped shards stay unassigned
 * until a `StartShards` places them (FiloDB also re-places them at the next membership change:
 * shardherd keeps an operator's stop through drains, joins and failovers), so an operator can
 * move a shard in two steps.
 */
export function stopShards(step: Step, dataset: DatasetRef, shards: readonly number[], replyTo: ReplyTo): void {
  const ds = step.dataset(dataset);
  if (!ds) return step.reply(replyTo, { type: 'DatasetUnknown', dataset });
  const bad = invalidShards(shards, ds.config.numShards);
  if (bad) return step.reply(replyTo, { type: 'BadSchema', message: bad });
  if (shards.some((s) => ds.mapper.nodeForShard(s) === undefined)) {
    return step.reply(replyTo, { type: 'BadSchema', message: `Can not stop shards ${list(shards)} not assigned to any node` });
  }
  for (const s of shards) {
    for (const node of ds.mapper.nodesForShard(s)) step.apply(dataset, ShardEvents.shardDown(dataset, s as ShardNum, node));
    // Stopped marks a shard an operator holds back: no round places it until StartShards (see `Step.held`).
    step.apply(dataset, ShardEvents.ingestionStopped(dataset, s as ShardNum, step.dataset(dataset)!.mapper.recordForShard(s).lastNode!));
  }
  // Fewer copies to place: a `balanced` dataset's moves left waiting are planned again.
  step.setWaitingMoves(dataset, undefined);
  step.reply(replyTo, { type: 'Success' });
}

/**
 * `StartShards`: FiloDB's validations in order (dataset known; node well-formed and a member;
 * shards valid and distinct; none already on that node; none on another node), then an exact
 * capacity check (FiloDB only refuses when no room is left at all, so it over-fills nodes), then
 * `ShardAssignmentStarted` on each. An operator may start a shard that is inside its cooldown.
 */
export function* startShards(step: Step, dataset: DatasetRef, rawNode: string, shards: readonly number[], replyTo: ReplyTo): Steps<void> {
  const ds = step.dataset(dataset);
  if (!ds) return step.reply(replyTo, { type: 'DatasetUnknown', dataset });
  const parsed = parseNodeId(rawNode);
  if (!parsed.ok) return step.reply(replyTo, { type: 'BadData', message: parsed.error.message });
  const node = parsed.value;
  if (!step.member(node)) return step.reply(replyTo, { type: 'BadData', message: `${node} not found` });
  const bad = invalidShards(shards, ds.config.numShards);
  if (bad) return step.reply(replyTo, { type: 'BadSchema', message: bad });
  if (shards.some((s) => ds.mapper.nodeForShard(s) === node)) {
    return step.reply(replyTo, { type: 'BadSchema', message: `Can not reassign shards to same node: ${list(shards)}` });
  }
  if (shards.some((s) => ds.mapper.nodeForShard(s) !== undefined)) {
    return step.reply(replyTo, { type: 'BadSchema', message: `Can not start ${list(shards)} on ${node}. Please stop shards before starting` });
  }
  // FiloDB's capacity rule counts stopped shards as free (it would place them at the next change).
  const held = step.cooling(dataset);
  for (const s of shards) held.delete(s);
  const spec = { numShards: ds.config.numShards, minNumNodes: ds.config.minNumNodes, held };
  // FiloDB's capacity rule is its strategy's; a balanced dataset rebalances whatever an operator starts.
  const remaining = ds.config.strategy === 'balanced' ? Infinity : step.settings.strategy.remainingCapacity(node, spec, ds.mapper);
  if (shards.length > remaining) {
    return step.reply(replyTo, {
      type: 'BadSchema',
      message: `Capacity exceeded. Cannot allocate ${shards.length} more shards to ${node}: its remaining capacity is ${remaining}`,
    });
  }
  for (const s of shards) step.apply(dataset, ShardEvents.assignmentStarted(dataset, s as ShardNum, node));
  if (ds.config.strategy === 'balanced') yield* step.assignShards(dataset);
  step.reply(replyTo, { type: 'Success' });
}
