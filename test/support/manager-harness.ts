// A small driver for ShardManager.decide: keeps the state, the clock and join order, and reads
// effects the way the actor layer would (who got which message).
import { validateDatasetConfig, type DatasetConfig } from '../../src/core/dataset-config.js';
import { datasetRef, epoch, incarnation, nodeId, replyTo, subscriberId, type DatasetRef, type NodeId, type SubscriberId } from '../../src/core/ids.js';
import type { Effect, Member, RecoveryData, Reply, ShardManagerInput, SubscriberMessage } from '../../src/core/shard-manager/protocol.js';
import { ShardManager, type ShardManagerOptions } from '../../src/core/shard-manager/shard-manager.js';
import type { ShardManagerState } from '../../src/core/shard-manager/step.js';
import type { ShardMapper } from '../../src/core/shard-mapper.js';
import type { ShardEvent } from '../../src/core/status.js';

export const ds1 = datasetRef('ds1');
export const ds2 = datasetRef('ds2');
export const sub = subscriberId('sub');
export const HOUR = 60 * 60 * 1000;

let asked = 0;
/** A new reply address per request, as a real asker has: the singleton applies a request once per address. */
export const adminReplyTo = () => replyTo(`admin-${++asked}`);

export function config(ref: DatasetRef, numShards: number, minNumNodes: number): DatasetConfig {
  const r = validateDatasetConfig({ ref, numShards, minNumNodes, source: { type: 'synthetic' } });
  if (!r.ok) throw new Error(r.error.message);
  return r.value;
}

export const emptyRecovery = (e = 1, members: readonly Member[] = []): RecoveryData => ({
  epoch: epoch(e),
  datasets: [],
  maps: [],
  subscriptions: [],
  watchers: [],
  cooldowns: [],
  members,
  running: [],
});

export class Harness {
  readonly manager: ShardManager;
  state: ShardManagerState;
  now = 1_000_000;
  effects: readonly Effect[] = [];
  private joinClock = 0;
  private incarnations = new Map<string, number>();

  constructor(options: ShardManagerOptions = {}, recovery: RecoveryData = emptyRecovery()) {
    this.manager = new ShardManager(options);
    this.state = this.manager.initialState();
    this.run({ type: 'Recover', recovery });
  }

  run(input: ShardManagerInput): readonly Effect[] {
    const d = this.manager.decide(this.state, input, this.now);
    this.state = d.state;
    this.effects = d.effects;
    return d.effects;
  }

  /** A member with the next join time and its current incarnation. */
  memberFor(name: string): Member {
    const existing = this.state.members.find((m) => m.node === name);
    if (existing) return existing;
    return { node: nodeId(name), incarnation: incarnation(`${name}#${this.incarnations.get(name) ?? 1}`), joinedAt: ++this.joinClock };
  }

  addMember(name: string): readonly Effect[] {
    return this.run({ type: 'MemberUp', member: this.memberFor(name) });
  }

  /** Joins again with a new incarnation (a restart the membership noticed only as a new member). */
  restartMember(name: string): readonly Effect[] {
    this.incarnations.set(name, (this.incarnations.get(name) ?? 1) + 1);
    return this.run({
      type: 'MemberUp',
      member: { node: nodeId(name), incarnation: incarnation(`${name}#${this.incarnations.get(name)}`), joinedAt: ++this.joinClock },
    });
  }

  removeMember(name: string): readonly Effect[] {
    const m = this.state.members.find((x) => x.node === name);
    if (!m) throw new Error(`${name} is not a member`);
    return this.run({ type: 'MemberDown', node: m.node, incarnation: m.incarnation });
  }

  setup(ref: DatasetRef, numShards: number, minNumNodes: number): Reply | undefined {
    return replyOf(this.run({ type: 'SetupDataset', config: config(ref, numShards, minNumNodes), replyTo: adminReplyTo() }));
  }

  report(name: string, ...events: ShardEvent[]): readonly Effect[] {
    const m = this.state.members.find((x) => x.node === name);
    if (!m) throw new Error(`${name} is not a member`);
    return this.run({ type: 'NodeReport', node: m.node, incarnation: m.incarnation, seq: 1, events });
  }

  startShards(ref: DatasetRef, node: string, shards: number[]): Reply | undefined {
    return replyOf(this.run({ type: 'StartShards', dataset: ref, node, shards, replyTo: adminReplyTo() }));
  }

  stopShards(ref: DatasetRef, shards: number[]): Reply | undefined {
    return replyOf(this.run({ type: 'StopShards', dataset: ref, shards, replyTo: adminReplyTo() }));
  }

  mapper(ref: DatasetRef): ShardMapper {
    const ds = this.state.datasets.get(ref);
    if (!ds) throw new Error(`no dataset ${ref}`);
    return ds.mapper;
  }

  /** Node → owned shards, for every member (members with none included). */
  shardsByNode(ref: DatasetRef): Record<string, number[]> {
    const m = this.mapper(ref);
    return Object.fromEntries(this.state.members.map((x) => [x.node, m.shardsForNode(x.node)]));
  }

  memberOrder(): string[] {
    return this.state.members.map((m) => m.node);
  }
}

export function replyOf(effects: readonly Effect[]): Reply | undefined {
  const replies = effects.filter((e) => e.type === 'Reply');
  if (replies.length > 1) throw new Error(`expected at most one reply, got ${replies.length}`);
  return replies[0]?.type === 'Reply' ? replies[0].reply : undefined;
}

/**
 * Every message a subscriber received, in order: the changes of a map as the stamped events its
 * node hands it, a whole map as a snapshot.
 */
export function messagesTo(effects: readonly Effect[], who: SubscriberId): SubscriberMessage[] {
  return effects.flatMap((e): SubscriberMessage[] => {
    if (!('to' in e) || !e.to.includes(who)) return [];
    if (e.type === 'Publish') return [e.message];
    if (e.type === 'PublishSnapshot') return [{ type: 'CurrentShardSnapshot', snapshot: e.snapshot }];
    if (e.type === 'PublishChanges') return e.events.map((event, i) => ({ type: 'StampedShardEvent', epoch: e.epoch, version: e.base.version + i + 1, event }));
    return [];
  });
}

/** The datasets whose map went out (changes or a whole map, to every node), in order. */
export function mapsPublished(effects: readonly Effect[]): DatasetRef[] {
  return effects.flatMap((e) => (e.type === 'PublishChanges' ? [e.dataset] : e.type === 'PublishSnapshot' ? [e.snapshot.dataset] : []));
}

/** Every change of a map published (to every node), in order. */
export function changesOf(effects: readonly Effect[]): Extract<Effect, { type: 'PublishChanges' }>[] {
  return effects.flatMap((e) => (e.type === 'PublishChanges' ? [e] : []));
}

/** Effects other than notices: what anybody outside the singleton would see. */
/**
 * The effects the FiloDB reference speaks of: not notices, timers, nor the node-operations record
 * (it is written at every change of the members, for a successor; `shard-manager-recovery.test.ts`
 * checks what it holds).
 */
export const visible = (effects: readonly Effect[]): Effect[] =>
  effects.filter((e) => e.type !== 'Notice' && e.type !== 'ScheduleCheck' && e.type !== 'PersistNodeOperations');

/** The member incarnations published whole, if they were (`PublishMembers`). */
export const membersPublished = (effects: readonly Effect[]): string[] | undefined => {
  const m = effects.find((e) => e.type === 'PublishMembers');
  return m?.type === 'PublishMembers' ? m.members.map((x) => x.node) : undefined;
};

/** How the members changed, if they did (`PublishMembersChange`): the nodes that joined and left. */
export const membersChange = (effects: readonly Effect[]): { joined: string[]; left: string[] } | undefined => {
  const m = effects.find((e) => e.type === 'PublishMembersChange');
  return m?.type === 'PublishMembersChange' ? { joined: m.joined.map((x) => x.node), left: m.left.map((x) => x.node) } : undefined;
};

export const noticesNamed = (effects: readonly Effect[], name: string): string[] =>
  effects.flatMap((e) => (e.type === 'Notice' && e.notice.name === name ? [e.notice.message] : []));

export const n = (name: string): NodeId => nodeId(name);
