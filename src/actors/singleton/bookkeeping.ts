// Pure helpers of the singleton's step and shell: what recovery uses, which reports the inbox
// position covers, which subscribers left with their nodes. Same rules as `step.ts` (no I/O).
import type { MembershipView } from '../../cluster/membership.js';
import type { DatasetConfig } from '../../core/dataset-config.js';
import type { DatasetRef, Incarnation, NodeId, SubscriberId } from '../../core/ids.js';
import { type Effect, isReadRequestType, type MapStamp, type RecoveryData } from '../../core/shard-manager/protocol.js';
import type { ShardManagerState } from '../../core/shard-manager/step.js';
import { compareStamps, type ShardMapSnapshot } from '../../core/shard-map-snapshot.js';
import { hostOf } from '../../protocol/wire.js';
import type { SingletonState } from './state.js';

/** A report as its acknowledgement names it. */
export const reportKey = (node: NodeId, incarnation: Incarnation, seq: number): string => `${node}@${incarnation}#${seq}`;

/**
 * The stamp of the newest stored map of each dataset whose config the store also holds with the
 * same shard count: the maps recovery will use. A map it would ignore is not listed, so guardians
 * send theirs and recovery sees every candidate it would have seen with full answers.
 */
export function usableStamps(datasets: readonly DatasetConfig[], maps: readonly ShardMapSnapshot[]): MapStamp[] {
  const numShards = new Map(datasets.map((c) => [c.ref, c.numShards] as const));
  const newest = new Map<DatasetRef, ShardMapSnapshot>();
  for (const m of maps) {
    if (numShards.get(m.dataset) !== m.numShards) continue;
    const seen = newest.get(m.dataset);
    if (!seen || compareStamps(m, seen) > 0) newest.set(m.dataset, m);
  }
  return [...newest.values()].map((m) => ({ dataset: m.dataset, numShards: m.numShards, epoch: m.epoch, version: m.version }));
}

/**
 * The inbox offset before which every report was applied or dropped: the first report still
 * waiting (to be applied, or for its node's answer to the recovery), else past the last record read.
 * `acked`: reports acknowledged since `s` was stepped (their offsets are gone).
 */
export function appliedInbox(s: SingletonState, acked: ReadonlySet<string> = new Set()): number {
  let first = s.lastOffset + 1;
  for (const r of [s.reports[0], s.beforeAnswer[0]]) {
    const key = r && reportKey(r.node, r.incarnation, r.seq);
    const offset = key === undefined || acked.has(key) ? undefined : s.reportOffsets.get(key);
    if (offset !== undefined) first = Math.min(first, offset);
  }
  return first;
}

/** Whether recovery may end: every member's incarnation answered, and no predecessor's grant may still run. */
export function allAnswered(s: SingletonState): boolean {
  return s.predecessorLeasesOver && s.view.members.every((m) => s.answers.get(m.node)?.incarnation === m.incarnation);
}

/** What recovery decides on: the stored state and the guardians' answers. */
export function recoveryData(s: SingletonState): RecoveryData {
  const answers = [...s.answers.values()];
  const stored = s.stored!;
  return {
    epoch: s.config.epoch,
    datasets: stored.datasets,
    maps: [...stored.maps, ...answers.flatMap((a) => a.maps)],
    subscriptions: [...stored.subscriptions.subscriptions, ...answers.flatMap((a) => a.subscriptions)],
    watchers: [...stored.subscriptions.watchers, ...answers.flatMap((a) => a.watchers)],
    cooldowns: stored.cooldowns,
    operations: stored.operations,
    applied: stored.applied,
    members: s.view.members,
    running: answers.map((a) => ({ node: a.node, incarnation: a.incarnation, shards: a.running })),
  };
}

/**
 * Subscribers hosted by a node incarnation that is no longer a member are gone with it (nact has
 * no remote deathwatch): after every membership change, and after recovery, which may inherit
 * the subscriptions of nodes that died with the old singleton.
 */
export function departedSubscribers(core: ShardManagerState, view: MembershipView): SubscriberId[] {
  const members = new Set(view.members.map((m) => `${m.node}@${m.incarnation}`));
  const all = new Set<SubscriberId>([...core.subscriptions.watcherList(), ...core.subscriptions.toList().flatMap((x) => x.subscribers)]);
  return [...all].filter((id) => {
    const host = hostOf(id);
    return host !== undefined && !members.has(`${host.node}@${host.incarnation}`);
  });
}

/** A cheap look at a raw inbox record, before it is parsed: a read request? */
export function looksLikeRead(value: unknown): boolean {
  if (typeof value !== 'object' || value === null || (value as { kind?: unknown }).kind !== 'request') return false;
  const request = (value as { request?: unknown }).request;
  return typeof request === 'object' && request !== null && isReadRequestType(String((request as { type?: unknown }).type));
}

/** Whether each effect writes to the MetaStore (a record of every kind: the compiler asks about a new one). */
const WRITES_STORE: Readonly<Record<Effect['type'], boolean>> = {
  PersistDataset: true,
  DeleteDataset: true,
  PersistShardMap: true,
  PersistCooldown: true,
  PersistSubscriptions: true,
  PersistNodeOperations: true,
  PersistAppliedRequests: true,
  ReleaseNode: false,
  Publish: false,
  PublishChanges: false,
  PublishSnapshot: false,
  PublishMembers: false,
  PublishMembersChange: false,
  PublishDigest: false,
  FenceNode: false,
  Reply: false,
  AckReport: false,
  ScheduleCheck: false,
  Notice: false,
};

/**
 * Where a decision's state becomes readable: before the effect of this index (once the singleton
 * still acts for it), past the decision's last store write; and, whatever it is, after its last effect.
 */
export const readableFrom = (effects: readonly Effect[]): number => effects.findLastIndex((e) => WRITES_STORE[e.type]) + 1;
