// `DescribeCluster`: the singleton's whole picture for operators (HTTP routes, the status page, the
// CLI), including why each shard that lacks a copy has none — the question FiloDB leaves operators
// to answer by reading its strategy.
import type { DatasetRef, NodeId, ReplyTo } from '../ids.js';
import { checkIsolationFeasible } from '../placement/balanced-strategy.js';
import { noticeTime } from '../iso-time.js';
import { absentUntil } from './absence.js';
import type { DatasetDescription, ShardsWithoutCopies } from './protocol.js';
import type { ShardStatusType } from '../status.js';
import type { Step } from './step.js';

export function describeCluster(step: Step, replyTo: ReplyTo, only?: DatasetRef): void {
  const refs = step.datasetRefs().filter((ref) => only === undefined || ref === only);
  const datasets = refs.sort().map((ref) => describeDataset(step, ref));
  step.reply(replyTo, { type: 'ClusterDescription', epoch: step.epoch, members: step.members, datasets, operations: step.operations() });
}

function describeDataset(step: Step, ref: DatasetRef): DatasetDescription {
  const ds = step.dataset(ref)!;
  const cooldowns = [...ds.cooldowns]
    .filter(([, at]) => step.inCooldown(at))
    .map(([shard, reassignedAt]) => ({ shard, reassignedAt, endsAt: step.cooldownEnd(reassignedAt) }))
    .sort((a, b) => a.shard - b.shard);
  const stamp = { dataset: ref, numShards: ds.config.numShards, epoch: step.epoch, version: ds.mapper.version };
  const { mapper } = ds;
  // Counted here so that a summary (the datasets, the members) needs no map: a node that has not
  // applied a new map yet (65 536 shards take it a while) need not wait for it to answer.
  const counts: Partial<Record<ShardStatusType, number>> = {};
  for (let shard = 0; shard < mapper.numShards; shard++) {
    const status = mapper.statusForShard(shard).type;
    counts[status] = (counts[status] ?? 0) + 1;
  }
  const copies: Record<string, number> = {};
  for (const node of mapper.allNodes()) copies[node] = mapper.numShardsForNode(node);
  return { config: ds.config, stamp, cooldowns, missingCopies: groupByReason(shardsWithoutFullCopies(step, ref)), counts, copies };
}

/** One entry per (reason, copies): a dataset of 65 536 unassigned shards is one line, not 65 536. */
function groupByReason(shards: readonly ShardWithoutCopy[]): ShardsWithoutCopies[] {
  const groups = new Map<string, { shards: number[]; copies: number; reason: string }>();
  for (const s of shards) {
    const key = `${s.copies} ${s.reason}`;
    let g = groups.get(key);
    if (!g) groups.set(key, (g = { shards: [], copies: s.copies, reason: s.reason }));
    g.shards.push(s.shard);
  }
  return [...groups.values()];
}

/** One shard with fewer copies than its replication factor. */
export interface ShardWithoutCopy {
  readonly shard: number;
  readonly copies: number;
  readonly reason: string;
}

/** Every shard with fewer copies than its replication factor, with the reason a user can act on. */
export function shardsWithoutFullCopies(step: Step, ref: DatasetRef): ShardWithoutCopy[] {
  const ds = step.dataset(ref)!;
  const { config, mapper } = ds;
  const placeable = step.placeableMembers();
  const held = step.held(ref);
  const cooling = step.cooling(ref);
  const isolation =
    config.replicationFactor > 1
      ? checkIsolationFeasible(
          config.replicationFactor,
          placeable.map((m) => m.rack ?? `node:${m.node}`),
        )
      : undefined;
  const spec = { numShards: config.numShards, minNumNodes: config.minNumNodes, held };
  const roomLeft = config.strategy === 'filodb-default' && placeable.some((m) => step.settings.strategy.remainingCapacity(m.node, spec, mapper) > 0);
  const out: ShardWithoutCopy[] = [];
  for (let shard = 0; shard < config.numShards; shard++) {
    // A copy kept for an absent node is in the map but runs nowhere: not one of the shard's copies now.
    // Counted without copying the record: every DescribeCluster walks every shard of every dataset.
    const { assignments } = mapper.recordForShard(shard);
    let copies = 0;
    for (const a of assignments) if (a.status.type !== 'Down') copies++;
    if (copies >= config.replicationFactor) continue;
    const kept = assignments.filter((a) => a.status.type === 'Down');
    out.push({ shard, copies, reason: kept.length > 0 ? keptFor(kept.map((a) => a.node)) : reasonFor(shard) });
  }
  return out;

  function keptFor(nodes: readonly NodeId[]): string {
    const until = nodes.map((node) => `${node} until ${noticeTime(absentUntil(step, ref, node) ?? step.now)}`);
    return `a copy is kept for ${until.join(', ')}, away within the replacement delay (replacementDelayMs ${config.replacementDelayMs}): restarted if it comes back, re-created elsewhere after`;
  }

  function reasonFor(shard: number): string {
    const status = mapper.statusForShard(shard);
    if (placeable.length === 0) return step.members.length === 0 ? 'no node is a member' : 'every member is being drained';
    if (cooling.has(shard)) {
      const at = ds.cooldowns.get(shard)!;
      return `in its reassignment cooldown after an ingestion error: it may move again ${Math.ceil((step.cooldownEnd(at) - step.now) / 1000)} s from now`;
    }
    if (status.type === 'Stopped') return STOPPED_REASON;
    if (isolation && !isolation.ok) return isolation.error.message;
    if (config.strategy === 'balanced') return `a ${config.replicationFactor}-copy placement needs more members than the ${placeable.length} that take copies`;
    if (!roomLeft) {
      const cap = Math.ceil(config.numShards / config.minNumNodes);
      return `no node has room: each takes at most ceil(numShards / minNumNodes) = ${cap} shards and ${placeable.length} of minNumNodes ${config.minNumNodes} are members`;
    }
    return 'freed by a skipped reassignment: placed at the next membership change, or now by startshards';
  }
}

/** Why a shard an operator stopped has no copy (also said by a node from its own map). */
export const STOPPED_REASON = 'stopped by an operator (stopshards): it stays stopped through membership changes and failovers until startshards places it';
