// The invariants of docs/ARCHITECTURE.md §9 that the simulator judges from what it read of the
// cluster, as pure functions: each takes what it needs and returns what is broken, in a fixed order
// (the checker, `invariants.ts`, reads the cluster and records what these return).
import { DefaultShardAssignmentStrategy } from '../core/assignment-strategy.js';
import type { DatasetRef, NodeId } from '../core/ids.js';
import { compareStamps, type ShardMapSnapshot } from '../core/shard-map-snapshot.js';
import { ShardMapper } from '../core/shard-mapper.js';
import type { ShardherdNode } from '../actors/node-process.js';
import type { CountingSink } from '../ingest/counting-sink.js';
import type { StoredCooldown } from '../store/meta-store.js';
import { balanceViolation } from './balance-check.js';
import { isolationViolations, keptCopyViolations } from './placement-checks.js';
import type { Invariant } from './report.js';
import { BALANCED_DATASETS, COOLDOWN_MS, DATASETS, FILODB_DATASETS, KEPT_BOUND_MS, RATE, type PreCrash, type TrackedSubscriber } from './world.js';

export interface Broken {
  readonly invariant: Invariant;
  readonly message: string;
}

/** A cooldown counts as running this much past its end, for I2 (drift and the singleton's check latency). */
const COOLDOWN_END_MARGIN_MS = 500;

type SingletonState = NonNullable<Awaited<ReturnType<ShardherdNode['singletonState']>>>;

/** I8: replicas of a shard in distinct racks (as far as the live racks allow), never two on one node. */
export function rackViolations(maps: ReadonlyMap<DatasetRef, ShardMapper>, placeable: readonly string[], rackOf: ReadonlyMap<string, string>): string[] {
  const racksLive = new Set(placeable.map((node) => rackOf.get(node)!)).size;
  const out: string[] = [];
  for (const d of BALANCED_DATASETS) {
    const map = maps.get(d.ref as DatasetRef);
    if (!map) continue;
    for (const v of isolationViolations(map, (node) => rackOf.get(node) ?? node, racksLive)) out.push(`${d.ref}: ${v}`);
  }
  return out;
}

/** I6: a subscriber's map never goes back (each subscriber's last stamp moves on to its current one). */
export function subscribersGoingBack(subscribers: readonly TrackedSubscriber[]): string[] {
  const out: string[] = [];
  for (const t of subscribers) {
    const stamp = { epoch: t.sub.epoch, version: t.sub.version };
    if (compareStamps(stamp, t.last) < 0) out.push(`${t.sub.id} went back from ${JSON.stringify(t.last)} to ${JSON.stringify(stamp)}`);
    t.last = stamp;
  }
  return out;
}

/** I6: nothing newer than the lease's epoch is persisted. */
export function mapsAheadOfLease(maps: Iterable<ShardMapSnapshot>, leaseEpoch: number | undefined): string[] {
  const out: string[] = [];
  for (const m of maps) {
    if (leaseEpoch !== undefined && m.epoch > leaseEpoch) out.push(`a map of ${m.dataset} at epoch ${m.epoch} is newer than the lease's ${leaseEpoch}`);
  }
  return out;
}

export interface FailoverView {
  /** What the MetaStore held before the crash, and after the takeover. */
  readonly pre: PreCrash;
  readonly after: ReadonlyMap<DatasetRef, ShardMapSnapshot>;
  /** The new singleton's state, if one answered. */
  readonly state: Pick<SingletonState, 'subscriptions'> | undefined;
  readonly subscribers: readonly TrackedSubscriber[];
  /** The members now (node, incarnation). */
  readonly members: readonly { readonly node: string; readonly incarnation: string }[];
  /** Whether the detector took out this `node@incarnation`. */
  readonly wasRemoved: (key: string) => boolean;
  /** Shards whose moves the faults explain (poisoned, or their sink failing). */
  readonly exempt: (ref: DatasetRef, shard: number) => boolean;
}

/** I4: a failover loses no dataset, subscription or assignment of a live owner. */
export function failoverLosses(f: FailoverView): string[] {
  const { pre, after, state } = f;
  const out: string[] = [];
  // Every subscription the old singleton had, of a subscriber that is still alive, survives. (With
  // the detector the new singleton may rightly evict the subscriber's node, cut off meanwhile:
  // its incarnation, and the subscriber with it, is gone.)
  for (const t of f.subscribers) {
    if (t.node.node === pre.node || !state || !pre.subscriptions.has(`${t.sub.id} ${t.sub.dataset}`)) continue;
    if (f.wasRemoved(`${t.node.node}@${pre.members.get(t.node.node)}`)) continue;
    if (!state.subscriptions.isSubscribed(t.sub.id, t.sub.dataset)) out.push(`the subscription of ${t.sub.id} to ${t.sub.dataset} was lost in the failover`);
  }
  for (const [ref, before] of pre.maps) {
    const now = after.get(ref);
    if (!now) {
      out.push(`dataset ${ref} lost in the failover`);
      continue;
    }
    // A balanced dataset may rebalance after a failover (members changed meanwhile): its
    // placement is checked by I7–I9; FiloDB's datasets never move a shard off a live owner.
    if (!FILODB_DATASETS.some((d) => d.ref === ref)) continue;
    const b = ShardMapper.fromSnapshot(before);
    const a = ShardMapper.fromSnapshot(now);
    // Owners that are still the same live member (same incarnation) must keep their shards.
    // (An incarnation the detector took out is gone for the singleton, whatever the group says.)
    const alive = new Set(f.members.filter((m) => pre.members.get(m.node) === m.incarnation && !f.wasRemoved(`${m.node}@${m.incarnation}`)).map((m) => m.node));
    for (let s = 0; s < b.numShards; s++) {
      const owner = b.nodeForShard(s);
      const planned = pre.draining.has(owner ?? '') || b.recordForShard(s).assignments.length > 1;
      if (owner && owner !== pre.node && alive.has(owner) && !planned && !f.exempt(ref, s) && a.nodeForShard(s) !== owner) {
        out.push(`${ref}/${s} was on ${owner}, which is still alive, and is now on ${a.nodeForShard(s) ?? 'nobody'}`);
      }
    }
  }
  return out;
}

export interface RestView {
  readonly now: number;
  readonly maps: ReadonlyMap<DatasetRef, ShardMapSnapshot>;
  /** The members, and those of them a shard may be placed on (not draining), with their racks. */
  readonly members: readonly NodeId[];
  readonly placeable: readonly { node: string; rack: string }[];
  readonly cooldowns: readonly StoredCooldown[];
  /** When each lost node's replacement delay can have started. */
  readonly delayStarts: ReadonlyMap<string, number | undefined>;
  /** The subscribers whose maps must equal the singleton's (none while the bus is lossy). */
  readonly subscribers: readonly TrackedSubscriber[];
}

/** The invariants of a cluster at rest: I2 (owners live, no free shard beside room, kept copies), I9 (spread), I3 (subscribers agree), I4 (no map lost). */
export function atRestViolations(r: RestView): Broken[] {
  const out: Broken[] = [];
  const members = new Set<string>(r.members);
  const strategy = new DefaultShardAssignmentStrategy();
  for (const d of DATASETS) {
    const snap = r.maps.get(d.ref as DatasetRef);
    if (!snap) {
      out.push({ invariant: 'I4', message: `no map of ${d.ref} in the MetaStore` });
      continue;
    }
    const m = ShardMapper.fromSnapshot(snap);
    // I2: owners are live members (or, for a balanced dataset, lost nodes whose copies are kept
    // for them within their replacement delay), and no live member has room for a free shard
    // (errored ones wait by design).
    let kept = false;
    if ('strategy' in d) {
      const k = keptCopyViolations(
        m,
        (node) => members.has(node),
        (node) => r.delayStarts.get(node),
        r.now,
        d.replacementDelayMs,
        KEPT_BOUND_MS,
      );
      for (const v of k.violations) out.push({ invariant: 'I2', message: `${d.ref}: ${v}` });
      kept = k.kept;
    } else {
      for (const owner of m.allNodes()) if (!members.has(owner)) out.push({ invariant: 'I2', message: `${d.ref}: ${owner} owns shards but is not a member` });
    }
    if ('strategy' in d && !kept) {
      // I2 and I9 for a balanced dataset: every shard has its copies, spread at its lower bound
      // (once no copy is kept for a lost node: until then the map waits for it, by design).
      // (The singleton's clock drifts from the sim's, and its check runs a moment after the end.)
      const cooling = new Set(
        r.cooldowns.filter((c) => c.dataset === d.ref && c.reassignedAt + COOLDOWN_MS + COOLDOWN_END_MARGIN_MS > r.now).map((c) => c.shard),
      );
      const problem = balanceViolation(m, r.placeable, d.replicationFactor, cooling);
      if (problem) out.push({ invariant: problem.invariant, message: `${d.ref}: ${problem.message}` });
    }
    const free = 'strategy' in d ? [] : m.unassignedShards().filter((s) => m.statusForShard(s).type !== 'Error');
    if (free.length > 0) {
      const errored = new Set(m.unassignedShards().filter((s) => m.statusForShard(s).type === 'Error'));
      for (const member of r.members) {
        const room = strategy.remainingCapacity(member, { numShards: d.numShards, minNumNodes: d.minNumNodes, held: errored }, m);
        if (room > 0) out.push({ invariant: 'I2', message: `${d.ref}: shards ${free.join(',')} are free while ${member} has room for ${room}` });
      }
    }
    // I3: every subscriber's map equals the singleton's — once the bus stopped losing and
    // delaying records too (while it does, a subscriber may be one publish interval behind).
    for (const t of r.subscribers) {
      if (t.sub.dataset !== d.ref) continue;
      if (!t.sub.map || !t.sub.map.equals(m) || t.sub.epoch !== snap.epoch) {
        out.push({
          invariant: 'I3',
          message: `${t.sub.id} has ${t.sub.map ? `epoch ${t.sub.epoch} v${t.sub.version}` : 'no map'}, the singleton epoch ${snap.epoch} v${snap.version}`,
        });
      }
    }
  }
  return out;
}

/** I5: every record produced until `horizon` was ingested at least once (a poisoned shard's up to its poison record). */
export function uningested(sink: CountingSink, poison: ReadonlyMap<string, number>, horizon: number): string[] {
  const produced = Math.floor((horizon * RATE) / 1000);
  const out: string[] = [];
  for (const d of DATASETS) {
    for (let s = 0; s < d.numShards; s++) {
      const tally = sink.tally(d.ref, s);
      const poisoned = poison.get(`${d.ref}/${s}`);
      const expected = poisoned === undefined ? produced : Math.min(produced, poisoned);
      if (tally.covered < expected) out.push(`${d.ref}/${s}: record ${tally.covered} was produced but never ingested (${expected} produced)`);
    }
  }
  return out;
}

/** Whether some shard has lost a copy to a failure and waits for its cooldown to end. */
export function waitingForCooldown(
  maps: ReadonlyMap<DatasetRef, ShardMapSnapshot>,
  cooldowns: readonly StoredCooldown[],
  now: number,
  poison: ReadonlyMap<string, number>,
  sink: CountingSink,
): boolean {
  return cooldowns.some((c) => {
    // A poisoned shard that reached its poison record fails after every cooldown, for ever: nothing
    // to wait for (one that has not, a sink failure before it, still is: seed 9670).
    const poisonedAt = poison.get(`${c.dataset}/${c.shard}`);
    if (c.reassignedAt + COOLDOWN_MS <= now || (poisonedAt !== undefined && sink.tally(c.dataset, c.shard).covered >= poisonedAt)) return false;
    const snap = maps.get(c.dataset);
    if (!snap) return false;
    const m = ShardMapper.fromSnapshot(snap);
    const d = DATASETS.find((x) => x.ref === c.dataset)!;
    return m.recordForShard(c.shard).assignments.length < ('replicationFactor' in d ? d.replicationFactor : 1);
  });
}
