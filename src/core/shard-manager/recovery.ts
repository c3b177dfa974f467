import type { DatasetConfig } from '../dataset-config.js';
import { isShardInRange, type DatasetRef, type NodeId, type ShardNum } from '../ids.js';
import { compareStamps, type ShardMapSnapshot } from '../shard-map-snapshot.js';
import { ShardMapper } from '../shard-mapper.js';
import { type ShardEvent, ShardEvents, type ShardStatus } from '../status.js';
import { ShardSubscriptions } from '../subscriptions.js';
import type { RecoveryData, RunningShard } from './protocol.js';
import { absentUntil, nodeLost } from './absence.js';
import { restoreLoads } from './load-balancing.js';
import { scheduleHeldShards } from './reports.js';
import type { Steps } from '../steps.js';
import type { Step } from './step.js';

/**
 * A new singleton's first step (docs/ARCHITECTURE.md §6): datasets and cooldowns from the MetaStore; per
 * dataset the newest map among the MetaStore's and the guardians'; subscriptions merged; then
 * reconciled with membership and with what live nodes say they run; then one snapshot per dataset
 * under the new epoch. Never starts from nothing while any copy of a map exists.
 */
export function* recover(step: Step, data: RecoveryData): Steps<void> {
  const configs = uniqueConfigs(step, data.datasets);
  // Grouped by dataset once: every guardian may send a copy of every map (datasets × nodes of them).
  const maps = groupBy(data.maps, (m) => m.dataset);
  for (const config of configs) {
    restoreDataset(step, config, maps.get(config.ref) ?? [], data);
    yield; // a map of 65 536 × 3 takes tens of milliseconds to restore
  }
  // Before any round: a load-aware dataset's placement is not undone for want of figures yet.
  restoreLoads(step, data.operations?.loadMoves ?? []);
  const known = new Set(configs.map((c) => c.ref));
  for (const m of data.maps) {
    if (!known.has(m.dataset)) {
      step.notice({
        name: 'recovery.map-ignored',
        level: 'warn',
        dataset: m.dataset,
        message: `a map of ${m.dataset} was found but the MetaStore has no such dataset`,
      });
    }
  }

  let subs = ShardSubscriptions.of(
    data.subscriptions.filter((s) => known.has(s.dataset)),
    data.watchers,
  );
  for (const c of configs) subs = subs.addDataset(c.ref);
  step.subscriptions = step.subscriptions.union(subs);

  carryOnAbsences(step, data);
  const running = liveReports(step, data);
  const reporters = [...running.keys()];
  const reports = byDataset(running);
  for (const ref of step.datasetRefs()) yield* reconcile(step, ref, reporters, reports.get(ref) ?? new Map());
  scheduleHeldShards(step);
  if (step.subscriptions.watchers.size > 0) step.publishSubscriptions();
  step.notice({
    name: 'singleton.recovered',
    level: 'info',
    message: `singleton recovered at epoch ${step.epoch}: ${configs.length} datasets, ${step.members.length} members, ${data.running.length} nodes reported`,
  });
}

/**
 * The members the last singleton kept copies for (`balanced` datasets' replacement delay), and
 * those lost while no singleton ran (its own host, in a rolling restart: found in the members it
 * last counted): each is absent as if this singleton had seen it leave, since when its predecessor
 * recorded it, or now. Without this a new singleton re-created their copies at once and they moved
 * back when the nodes returned. A node that is a member again is back: its kept copies restart in
 * the reconcile that follows.
 */
function carryOnAbsences(step: Step, data: RecoveryData): void {
  const live = new Set<string>(step.memberNodes());
  const recorded = new Map((data.operations?.absent ?? []).map((a) => [a.member.node as string, a]));
  const lastMembers = new Map((data.operations?.members ?? []).map((m) => [m.node as string, m]));
  const holders = new Set<string>();
  for (const ref of step.datasetRefs()) for (const node of step.dataset(ref)!.mapper.allNodes()) holders.add(node);
  for (const node of [...new Set([...recorded.keys(), ...holders])].sort()) {
    if (live.has(node)) continue;
    const absence = recorded.get(node);
    const member = absence?.member ?? lastMembers.get(node);
    if (!member) continue; // a node no record describes: its copies are dropped and placed again
    nodeLost(step, member, step.draining.has(member.node), false, absence?.since ?? step.now);
  }
}

function uniqueConfigs(step: Step, configs: readonly DatasetConfig[]): DatasetConfig[] {
  const seen = new Map<DatasetRef, DatasetConfig>();
  for (const c of configs) {
    if (seen.has(c.ref))
      step.notice({ name: 'recovery.map-ignored', level: 'warn', dataset: c.ref, message: `dataset ${c.ref} listed twice; the first config wins` });
    else seen.set(c.ref, c);
  }
  return [...seen.values()];
}

function groupBy<T, K>(items: readonly T[], key: (item: T) => K): Map<K, T[]> {
  const groups = new Map<K, T[]>();
  for (const item of items) {
    const k = key(item);
    const group = groups.get(k);
    if (group) group.push(item);
    else groups.set(k, [item]);
  }
  return groups;
}

function restoreDataset(step: Step, config: DatasetConfig, candidates: readonly ShardMapSnapshot[], data: RecoveryData): void {
  const ref = config.ref;
  let newest: ShardMapSnapshot | undefined;
  for (const m of candidates) {
    if (m.numShards !== config.numShards) {
      step.notice({
        name: 'recovery.map-ignored',
        level: 'warn',
        dataset: ref,
        message: `a map of ${ref} with ${m.numShards} shards was ignored: the dataset has ${config.numShards}`,
      });
      continue;
    }
    if (!newest || compareStamps(m, newest) > 0) newest = m;
  }
  const mapper = newest ? ShardMapper.fromSnapshot(newest) : new ShardMapper(config.numShards, ref);
  const cooldowns = new Map<number, number>();
  for (const c of data.cooldowns) if (c.dataset === ref && isShardInRange(c.shard, config.numShards)) cooldowns.set(c.shard, c.reassignedAt);
  step.createDataset(config, mapper, cooldowns, newest && { epoch: newest.epoch, version: newest.version });
  step.notice({
    name: 'recovery.map-chosen',
    level: 'info',
    dataset: ref,
    message: newest
      ? `${ref}: recovered the map at epoch ${newest.epoch} version ${newest.version}, the newest of ${candidates.length}`
      : `${ref}: no map found; starting from an empty one`,
  });
}

type LiveReports = Map<NodeId, readonly RunningShard[]>;

/** Reports from current members, oldest member first; a non-member that runs shards is fenced. */
function liveReports(step: Step, data: RecoveryData): LiveReports {
  const reports: LiveReports = new Map();
  for (const r of data.running) {
    const member = step.member(r.node);
    if (member && member.incarnation === r.incarnation) {
      reports.set(r.node, r.shards);
    } else if (r.shards.length > 0) {
      step.send({ type: 'FenceNode', node: r.node, incarnation: r.incarnation, reason: 'runs shards but is not a member' });
      step.notice({
        name: 'recovery.node-fenced',
        level: 'warn',
        node: r.node,
        message: `${r.node} (incarnation ${r.incarnation}) runs ${r.shards.length} shards but is not a member: told to stop them`,
      });
    }
  }
  const order = step.memberNodes();
  return new Map([...reports].sort(([a], [b]) => order.indexOf(a) - order.indexOf(b)));
}

/**
 * The live reports split by dataset, each keeping its nodes' order (oldest first) and each node's
 * order of shards: reconciling a dataset then reads only its own reports, not every node's whole list.
 */
function byDataset(running: LiveReports): Map<DatasetRef, LiveReports> {
  const out = new Map<DatasetRef, Map<NodeId, RunningShard[]>>();
  for (const [node, shards] of running) {
    for (const r of shards) {
      let nodes = out.get(r.dataset);
      if (!nodes) out.set(r.dataset, (nodes = new Map()));
      let list = nodes.get(node);
      if (!list) nodes.set(node, (list = []));
      list.push(r);
    }
  }
  return out;
}

/** The event that makes a map say a node is running a shard in `status`, if it is a running status. */
function runningEvent(ref: DatasetRef, shard: ShardNum, node: NodeId, status: ShardStatus): ShardEvent | undefined {
  switch (status.type) {
    case 'Active':
      return ShardEvents.ingestionStarted(ref, shard, node);
    case 'Recovery':
      return ShardEvents.recoveryInProgress(ref, shard, node, status.progressPct);
    case 'Assigned':
      return ShardEvents.assignmentStarted(ref, shard, node);
    default:
      return undefined;
  }
}

/**
 * `reporters`: every live node that answered, oldest first, whether it runs a shard of this
 * dataset or not; `running`: what those nodes run of this dataset.
 */
function* reconcile(step: Step, ref: DatasetRef, reporters: readonly NodeId[], running: LiveReports): Steps<void> {
  const live = new Set(step.memberNodes());
  const numShards = step.dataset(ref)!.config.numShards;
  const mapper = () => step.dataset(ref)!.mapper;

  // Copies on nodes that are gone: those copies are down (then placed again below), unless they
  // are kept for an absent node (see `carryOnAbsences`).
  for (const s of mapper().assignedShards()) {
    for (const node of mapper().nodesForShard(s))
      if (!live.has(node) && absentUntil(step, ref, node) === undefined) step.apply(ref, ShardEvents.shardDown(ref, s, node));
  }

  const held = step.held(ref);
  const config = step.dataset(ref)!.config;
  const reportedBy = new Set<string>();
  for (const node of reporters) {
    for (const r of running.get(node) ?? []) {
      if (!isShardInRange(r.shard, numShards)) continue;
      const shard = r.shard as ShardNum;
      const event = runningEvent(ref, shard, node, r.status);
      if (!event) continue;
      const holders = mapper().nodesForShard(shard);
      const spec = { numShards, minNumNodes: config.minNumNodes, held };
      const room = config.strategy === 'balanced' || step.settings.strategy.remainingCapacity(node, spec, mapper()) > 0;
      if (holders.includes(node)) {
        reportedBy.add(`${shard}/${node}`);
        step.apply(ref, event); // the node's own account of its copy wins over a stale map
      } else if (holders.length === 0 && !held.has(shard) && room) {
        reportedBy.add(`${shard}/${node}`);
        step.apply(ref, event);
        step.notice({
          name: 'recovery.shard-adopted',
          level: 'info',
          dataset: ref,
          shard,
          node,
          message: `${ref}/${shard} had no owner in the recovered map but ${node} runs it: it keeps it`,
        });
      } else {
        step.notice({
          name: 'recovery.stray-shard',
          level: 'warn',
          dataset: ref,
          shard,
          node,
          message: `${node} runs ${ref}/${shard} but the map gives it to ${holders.join(', ') || 'nobody'}: it will stop it`,
        });
      }
    }
  }

  // A copy the map shows running on a node that says it is not: it will be (re)started there.
  // Copies listed in one pass over the map, not one pass per node (restarting keeps the copy's placement).
  // A copy kept Down for a node that was lost and is a member again (it came back while the last
  // singleton died, or the map was persisted before its return): restarted, as its return would have.
  const answered = new Set(reporters);
  for (const s of mapper().assignedShards()) {
    for (const copy of mapper().recordForShard(s).assignments) {
      const status = copy.status.type;
      const restart = answered.has(copy.node) && (status === 'Active' || status === 'Recovery') && !reportedBy.has(`${s}/${copy.node}`);
      if (restart || (status === 'Down' && live.has(copy.node))) step.apply(ref, ShardEvents.assignmentStarted(ref, s, copy.node));
    }
  }
  yield;
  yield* step.assignShards(ref);
}
