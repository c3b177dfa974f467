// The Membership port on Kafka's consumer-group protocol (DESIGN.md §7), as Kafka Connect's workers
// use it: every node joins one group, puts who it is in its member metadata, and learns who else is
// in the group after each rebalance. Failure detection is the broker's session timeout; a member
// that may have been dropped fences itself.
import { AssignerProtocol, type Admin, type Consumer, type GroupDescription, type GroupMember, type GroupMemberAssignment, type PartitionAssigner } from 'kafkajs';
import type { Logger } from 'pino';
import { z } from 'zod';
import { parseIncarnation, parseNodeId, type Incarnation, type NodeId } from '../core/ids.js';
import { err, ok, type Result } from '../core/result.js';
import type { Member } from '../core/shard-manager/protocol.js';
import { createKafka, type KafkaConnection } from './kafka-client.js';
import { isMember, type JoinRequest, type Membership, type MembershipView } from './membership.js';

/** The group protocol (assigner) name every shardherd node of a cluster must share. */
export const MEMBERSHIP_PROTOCOL = 'shardherd-membership';

/** The format of the JSON a member puts in its metadata `userData`. */
export const MEMBER_METADATA_FORMAT = 1;

/** The connection (brokers, client id, log) and the group timings of the membership's consumer. */
export interface KafkaMembershipOptions extends KafkaConnection {
  /** The cluster name: the group and its one-partition topic are both `<topicPrefix>.members`. */
  readonly topicPrefix: string;
  /**
   * A member that has not heartbeated for this long is removed by the broker, and a handle that has
   * not had a heartbeat or join acknowledged for this long fences itself. Default 10000 ms. Must lie
   * within the broker's `group.min.session.timeout.ms` (default 6000) .. `group.max.session.timeout.ms`.
   */
  readonly sessionTimeoutMs?: number | undefined;
  /**
   * How often the handle heartbeats, and so how soon survivors notice a rebalance after a member
   * died. Default `sessionTimeoutMs / 10` (a fifth made failover take 1.2 × the session timeout
   * instead of 1.1 ×); must be below `sessionTimeoutMs`.
   */
  readonly heartbeatIntervalMs?: number | undefined;
  /**
   * How long a rebalance waits for every member to rejoin before it drops the ones that did not (a
   * paused process, say). Default `sessionTimeoutMs`.
   */
  readonly rebalanceTimeoutMs?: number | undefined;
  /** `join` rejects if the handle is not in a view by then (unreachable broker, say). Default 30000 ms. */
  readonly joinTimeoutMs?: number | undefined;
  /** Replication factor of the members topic when `join` creates it. Default 1. */
  readonly replicationFactor?: number | undefined;
  /** This node's rack, unless the join request names one. */
  readonly rack?: string | undefined;
  /** This node's address, unless the join request names one. */
  readonly address?: string | undefined;
}

/** The options with their defaults, checked. */
export interface KafkaMembershipSettings {
  readonly brokers: readonly string[];
  readonly clientId: string;
  readonly topicPrefix: string;
  readonly sessionTimeoutMs: number;
  readonly heartbeatIntervalMs: number;
  readonly rebalanceTimeoutMs: number;
  readonly joinTimeoutMs: number;
  readonly replicationFactor: number;
  readonly rack: string | undefined;
  readonly address: string | undefined;
}

function positiveMs(key: string, value: number): number {
  if (!(Number.isInteger(value) && value > 0)) throw new RangeError(`${key} must be a positive whole number of milliseconds, got ${value}`);
  return value;
}

/** Applies the defaults and fails fast, naming the key, on a value that cannot work. */
export function kafkaMembershipSettings(options: KafkaMembershipOptions): KafkaMembershipSettings {
  if (options.brokers.length === 0) throw new RangeError('brokers must name at least one broker');
  if (!/^[A-Za-z0-9._-]{1,200}$/.test(options.topicPrefix)) {
    throw new RangeError(`topicPrefix must be 1 to 200 letters, digits, ".", "_" or "-", got ${JSON.stringify(options.topicPrefix)}`);
  }
  const sessionTimeoutMs = positiveMs('sessionTimeoutMs', options.sessionTimeoutMs ?? 10_000);
  const heartbeatIntervalMs = positiveMs('heartbeatIntervalMs', options.heartbeatIntervalMs ?? Math.max(1, Math.floor(sessionTimeoutMs / 10)));
  if (heartbeatIntervalMs >= sessionTimeoutMs) {
    throw new RangeError(`heartbeatIntervalMs (${heartbeatIntervalMs}) must be below sessionTimeoutMs (${sessionTimeoutMs})`);
  }
  const replicationFactor = options.replicationFactor ?? 1;
  if (!(Number.isInteger(replicationFactor) && replicationFactor >= 1)) throw new RangeError(`replicationFactor must be a whole number >= 1, got ${replicationFactor}`);
  return {
    brokers: [...options.brokers],
    clientId: options.clientId,
    topicPrefix: options.topicPrefix,
    sessionTimeoutMs,
    heartbeatIntervalMs,
    rebalanceTimeoutMs: positiveMs('rebalanceTimeoutMs', options.rebalanceTimeoutMs ?? sessionTimeoutMs),
    joinTimeoutMs: positiveMs('joinTimeoutMs', options.joinTimeoutMs ?? 30_000),
    replicationFactor,
    rack: options.rack,
    address: options.address,
  };
}

export type KafkaMembershipErrorCode =
  /** No view with this member within `joinTimeoutMs` (unreachable broker, say). Retriable with a new handle. */
  | 'JOIN_TIMEOUT'
  /** The consumer gave up while joining (kafkajs will not restart it). */
  | 'JOIN_FAILED'
  /** The handle fenced itself while joining. */
  | 'FENCED'
  /** `leave`/`close` came first, or `join` was called twice: a handle joins once. */
  | 'CLOSED';

/** Why `join` rejected, with the node it was for and the kafkajs error behind it as `cause`. */
export class KafkaMembershipError extends Error {
  readonly code: KafkaMembershipErrorCode;
  readonly retriable: boolean;
  readonly node: string | undefined;

  constructor(code: KafkaMembershipErrorCode, message: string, context: { readonly node?: string; readonly cause?: unknown; readonly retriable?: boolean } = {}) {
    super(message, context.cause === undefined ? undefined : { cause: context.cause });
    this.name = 'KafkaMembershipError';
    this.code = code;
    this.retriable = context.retriable ?? false;
    this.node = context.node;
  }
}

// ---------------------------------------------------------------- member metadata and views

const memberMetadataSchema = z.object({
  format: z.literal(MEMBER_METADATA_FORMAT),
  node: z.custom<NodeId>((v) => parseNodeId(v).ok, 'not a node id'),
  incarnation: z.custom<Incarnation>((v) => parseIncarnation(v).ok, 'not an incarnation'),
  joinedAt: z.number().int().nonnegative(),
  rack: z.string().min(1).max(200).optional(),
  address: z.string().min(1).max(500).optional(),
});

/** What a member says about itself in its JoinGroup metadata (`userData`, JSON). */
export function encodeMemberMetadata(member: Member, topics: readonly string[]): Buffer {
  const userData = Buffer.from(
    JSON.stringify({
      format: MEMBER_METADATA_FORMAT,
      node: member.node,
      incarnation: member.incarnation,
      joinedAt: member.joinedAt,
      ...(member.rack === undefined ? {} : { rack: member.rack }),
      ...(member.address === undefined ? {} : { address: member.address }),
    }),
  );
  return AssignerProtocol.MemberMetadata.encode({ version: MEMBER_METADATA_FORMAT, topics: [...topics], userData });
}

/** Reads a member's JoinGroup metadata; an error (as a value) for anything that is not ours. */
export function decodeMemberMetadata(metadata: Buffer): Result<Member, string> {
  let userData: Buffer;
  try {
    userData = AssignerProtocol.MemberMetadata.decode(metadata)?.userData ?? Buffer.alloc(0);
  } catch (e) {
    return err(`not consumer-protocol metadata: ${e instanceof Error ? e.message : String(e)}`);
  }
  let json: unknown;
  try {
    json = JSON.parse(userData.toString('utf8'));
  } catch {
    return err(`userData is not JSON (${userData.length} bytes)`);
  }
  const parsed = memberMetadataSchema.safeParse(json);
  if (!parsed.success) return err(`userData is not shardherd member metadata format ${MEMBER_METADATA_FORMAT}: ${parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ')}`);
  const { node, incarnation, joinedAt, rack, address } = parsed.data;
  return ok(Object.freeze({ node, incarnation, joinedAt, ...(rack === undefined ? {} : { rack }), ...(address === undefined ? {} : { address }) }));
}

/** Oldest first: by join time, then node id and incarnation so every member orders ties alike. */
function compareMembers(a: Member, b: Member): number {
  if (a.joinedAt !== b.joinedAt) return a.joinedAt - b.joinedAt;
  if (a.node !== b.node) return a.node < b.node ? -1 : 1;
  return a.incarnation < b.incarnation ? -1 : a.incarnation > b.incarnation ? 1 : 0;
}

/**
 * The live members among the group's, oldest first. A node listed under two incarnations has
 * restarted while the broker still waits out the old one's session: only the newest incarnation
 * counts (a node restarts only once its old incarnation is gone), as the in-memory membership does.
 * The same incarnation under two member ids (the consumer rejoined before its old session ended)
 * counts once, with its first member id in the group's order.
 */
export function liveMembers<T extends { readonly member: Member }>(entries: readonly T[]): T[] {
  const newest = new Map<NodeId, T>();
  for (const entry of entries) {
    const seen = newest.get(entry.member.node);
    if (!seen || compareMembers(seen.member, entry.member) < 0) newest.set(entry.member.node, entry);
  }
  return [...newest.values()].sort((a, b) => compareMembers(a.member, b.member));
}

function sameMembers(a: readonly Member[], b: readonly Member[]): boolean {
  return (
    a.length === b.length &&
    a.every((m, i) => {
      const o = b[i];
      return o !== undefined && m.node === o.node && m.incarnation === o.incarnation && m.joinedAt === o.joinedAt && m.rack === o.rack && m.address === o.address;
    })
  );
}

/**
 * The group leader's plan: partition 0 of the members topic to the oldest member (it is subscribed
 * by every member; the partition carries no data, so the assignment only makes the leader's choice
 * visible, in `describeGroups`), nothing to anyone else. Only subscribed topics are ever assigned.
 * Members whose metadata is not ours get nothing.
 */
export function planMembershipAssignment(members: readonly GroupMember[], topics: readonly string[], membersTopic: string): GroupMemberAssignment[] {
  const ours: { memberId: string; member: Member }[] = [];
  for (const m of members) {
    const decoded = decodeMemberMetadata(m.memberMetadata);
    if (decoded.ok) ours.push({ memberId: m.memberId, member: decoded.value });
  }
  const oldest = liveMembers(ours)[0]?.memberId;
  return members.map((m) => ({
    memberId: m.memberId,
    memberAssignment: AssignerProtocol.MemberAssignment.encode({
      version: MEMBER_METADATA_FORMAT,
      assignment: m.memberId === oldest && topics.includes(membersTopic) ? { [membersTopic]: [0] } : {},
      userData: Buffer.alloc(0),
    }),
  }));
}

// ---------------------------------------------------------------- the handle

type Phase = 'idle' | 'joining' | 'member' | 'fenced' | 'closed';

/** How many times a view refresh describes a group that is not Stable before it waits for the next join. */
const MAX_DESCRIBE_ATTEMPTS = 20;
/**
 * The longest a consumer with nothing to fetch sleeps between heartbeat checks (kafkajs heartbeats
 * from its fetch loop, so its fetch wait bounds the heartbeat cadence and how long `leave` waits
 * for the fetch in flight).
 */
const MAX_FETCH_WAIT_MS = 500;

const EMPTY_VIEW: MembershipView = Object.freeze({ generation: 0, members: Object.freeze([]) });

/**
 * One node incarnation's membership in a Kafka consumer group (kafkajs, classic protocol).
 *
 * - `join` creates the one-partition topic `<topicPrefix>.members` if missing (never auto-created),
 *   joins the group `<topicPrefix>.members` with the `shardherd-membership` assigner, whose
 *   metadata carries this member's node id, incarnation, rack, address and `joinedAt` (the wall
 *   clock when `join` was called; it never changes for this handle), and resolves with the first
 *   view that contains this member.
 * - After every rebalance it describes the group and decodes every member's metadata: the view is
 *   the members ordered by `(joinedAt, node, incarnation)`, oldest first (see `liveMembers` for
 *   restarted nodes). Listeners hear a view only when the member list changed.
 * - The group leader gives the members topic's partition 0 to the oldest member, nothing to the others.
 * - Self-fencing: the handle announces a view without itself, then leaves the group for good, when
 *   no heartbeat or join was acknowledged within `sessionTimeoutMs` (measured on the monotonic
 *   clock from when the request was sent, checked every `sessionTimeoutMs / 4` and before every
 *   rejoin); when its own timer ran `sessionTimeoutMs` late (the process was stopped or starved: the
 *   broker may have dropped it meanwhile); when the consumer crashed; and when it rejoined under a
 *   new member id (the broker had dropped the old one). A handle never rejoins under the same
 *   incarnation: the node starts a new incarnation with a new handle.
 *
 * Gotchas: `generation` counts this handle's own view changes; it is not Kafka's generation id
 * (kafkajs does not expose it), so two handles may number the same view differently — compare
 * member lists. On a broker with the default `group.initial.rebalance.delay.ms` (3000) the first
 * member of an empty group waits that long before its first view. The group leader is whichever
 * member the broker picks: the oldest member (the singleton's host) is told by the view, not by
 * group leadership. `joinedAt` is each node's own wall clock: skewed clocks change who is oldest,
 * but every member orders the same metadata alike. A member the broker drops while its process
 * runs and heartbeats on time (its rebalance timeout ran out, the coordinator lost the group) is
 * noticed only when kafkajs has rejoined under a new member id: the others may then see this
 * incarnation again for one rebalance before it fences itself and leaves.
 */
export class KafkaMembership implements Membership {
  readonly settings: KafkaMembershipSettings;
  /** The group id and the members topic (the same name). */
  readonly groupId: string;
  private log: Logger;
  private phase: Phase = 'idle';
  private self: Member | undefined;
  private current: MembershipView = EMPTY_VIEW;
  private listeners: ((view: MembershipView) => void)[] = [];
  private readonly outbox: MembershipView[] = [];
  private delivering = false;
  private admin: Admin | undefined;
  private consumer: Consumer | undefined;
  private pendingJoin: { resolve: (view: MembershipView) => void; reject: (error: Error) => void } | undefined;
  private lastJoinError: unknown;
  /** The member id of the last completed join; undefined until the first. */
  private memberId: string | undefined;
  /** Monotonic time (ms) when the last heartbeat or sync the broker acknowledged was sent. */
  private aliveAt = 0;
  /** Monotonic send times of the last completed request of each group API, from kafkajs's request events. */
  private readonly sentAt = new Map<string, number>();
  /** True between a rebalance notice and the join that follows it. */
  private rebalancing = false;
  /** When the JoinGroup of the current rebalance started: the broker keeps a member that is waiting in it. */
  private joinStartedAt: number | undefined;
  private tickTimer: NodeJS.Timeout | undefined;
  private lastTick = 0;
  private refreshWanted = false;
  private refreshing = false;
  private stopping: Promise<void> | undefined;
  private fencedBecause: string | undefined;
  private readonly removeConsumerListeners: (() => void)[] = [];

  constructor(options: KafkaMembershipOptions) {
    this.settings = kafkaMembershipSettings(options);
    this.groupId = `${this.settings.topicPrefix}.members`;
    this.log = options.log;
  }

  /**
   * Joins the group and resolves with the first view that contains this member. A handle joins
   * once. Rejects with a `KafkaMembershipError`: `JOIN_TIMEOUT` if that takes longer than
   * `joinTimeoutMs`, `JOIN_FAILED` if the consumer gives up, `CLOSED`/`FENCED` if the handle
   * left or fenced itself first. A rejected handle is closed.
   */
  join(request: JoinRequest): Promise<MembershipView> {
    if (this.phase !== 'idle') {
      return Promise.reject(new KafkaMembershipError('CLOSED', `membership handle of ${request.node} already ${this.phase === 'closed' ? 'closed' : 'joined'}: a handle joins once`, { node: request.node }));
    }
    this.phase = 'joining';
    const rack = request.rack ?? this.settings.rack;
    const address = request.address ?? this.settings.address;
    this.self = Object.freeze({
      node: request.node,
      incarnation: request.incarnation,
      joinedAt: Date.now(),
      ...(rack === undefined ? {} : { rack }),
      ...(address === undefined ? {} : { address }),
    });
    this.log = this.log.child({ node: request.node, incarnation: request.incarnation });
    const joined = new Promise<MembershipView>((resolve, reject) => {
      this.pendingJoin = { resolve, reject };
    });
    const { joinTimeoutMs, brokers } = this.settings;
    const timer = setTimeout(() => {
      const cause = this.lastJoinError;
      const why = cause instanceof Error ? `: ${cause.message}` : '';
      this.failJoin(
        new KafkaMembershipError('JOIN_TIMEOUT', `${request.node} could not join the group ${this.groupId} at ${brokers.join(',')} within ${joinTimeoutMs} ms${why}`, {
          node: request.node,
          cause,
          retriable: true,
        }),
      );
    }, joinTimeoutMs);
    this.start().catch((e: unknown) => {
      this.failJoin(new KafkaMembershipError('JOIN_FAILED', `${request.node} could not join the group ${this.groupId}: ${e instanceof Error ? e.message : String(e)}`, { node: request.node, cause: e, retriable: true }));
    });
    return joined.finally(() => clearTimeout(timer));
  }

  /**
   * Leaves the group at once (LeaveGroup: the others see a view without this member after one
   * rebalance, not after the session timeout), announces a view without this member, and closes
   * the connections. Idempotent; never rejects. The handle hears no more views.
   */
  leave(): Promise<void> {
    if (this.phase !== 'closed') {
      const wasFenced = this.phase === 'fenced';
      this.phase = 'closed';
      this.stopTicks();
      this.failJoin(new KafkaMembershipError('CLOSED', `${this.self?.node ?? 'membership'} left before it was in a view`, this.self ? { node: this.self.node } : {}));
      if (!wasFenced && this.self) {
        this.log.info({ event: 'membership.left', memberId: this.memberId }, 'leaving the membership group');
        this.dropSelf();
      }
    }
    this.stopping ??= this.disconnect();
    return this.stopping;
  }

  /** `leave`, then forgets every listener: for teardown. */
  async close(): Promise<void> {
    await this.leave();
    this.listeners = [];
  }

  view(): MembershipView {
    return this.current;
  }

  onChange(listener: (view: MembershipView) => void): () => void {
    const wrapped = (view: MembershipView): void => listener(view);
    this.listeners.push(wrapped);
    return () => {
      this.listeners = this.listeners.filter((l) => l !== wrapped);
    };
  }

  /** Why this handle fenced itself (it is then out of the group for good); undefined if it did not. */
  get fenceReason(): string | undefined {
    return this.fencedBecause;
  }

  // -------------------------------------------------------------- joining

  private async start(): Promise<void> {
    const s = this.settings;
    const kafka = createKafka({ brokers: s.brokers, clientId: s.clientId, log: this.log });
    const admin = kafka.admin();
    this.admin = admin;
    try {
      await admin.connect();
      if (!this.isActive()) return;
      // One partition, never auto-created: the group needs a subscribed topic, and partition 0 is
      // what the leader gives the oldest member. Looked up first: kafkajs logs an existing topic's
      // creation as an error.
      const exists = (await admin.listTopics()).includes(this.groupId);
      if (!exists && this.isActive()) {
        const created = await admin.createTopics({
          topics: [{ topic: this.groupId, numPartitions: 1, replicationFactor: s.replicationFactor }],
          waitForLeaders: true,
        });
        if (created) this.log.info({ event: 'membership.topic-created', topic: this.groupId }, `created the members topic ${this.groupId}`);
      }
    } finally {
      this.admin = undefined;
      await admin.disconnect().catch((e: unknown) => this.log.debug({ err: e }, 'closing the admin client failed'));
    }
    if (!this.isActive()) return;

    const consumer = kafka.consumer({
      groupId: this.groupId,
      partitionAssigners: [this.assigner],
      sessionTimeout: s.sessionTimeoutMs,
      rebalanceTimeout: s.rebalanceTimeoutMs,
      heartbeatInterval: s.heartbeatIntervalMs,
      maxWaitTimeInMs: Math.min(s.heartbeatIntervalMs, MAX_FETCH_WAIT_MS),
      allowAutoTopicCreation: false,
    });
    this.consumer = consumer;
    this.listen(consumer);
    await consumer.connect();
    await consumer.subscribe({ topics: [this.groupId], fromBeginning: false });
    if (!this.isActive()) {
      await consumer.disconnect();
      return;
    }
    this.startTicks();
    // Resolves once the first join completed (or the consumer crashed); the view follows from GROUP_JOIN.
    await consumer.run({ autoCommit: false, eachBatch: async () => {} });
    // A leave that raced the first join stopped a runner that was not running yet: stop it again.
    if (!this.isActive()) await consumer.disconnect();
  }

  /** The assigner kafkajs calls at every JoinGroup (`protocol`) and, on the group leader, to assign. */
  private readonly assigner: PartitionAssigner = () => ({
    name: MEMBERSHIP_PROTOCOL,
    version: MEMBER_METADATA_FORMAT,
    protocol: ({ topics }) => this.protocol(topics),
    assign: ({ members, topics }) => Promise.resolve(planMembershipAssignment(members, topics, this.groupId)),
  });

  /** Called right before every JoinGroup request. Throwing here stops kafkajs from sending it. */
  private protocol(topics: string[]): { name: string; metadata: Buffer } {
    const now = performance.now();
    this.checkLiveness(now, 0);
    if (!this.isActive() || !this.self) {
      // A fenced or closed handle never comes back under the same incarnation.
      throw new KafkaMembershipError('FENCED', `membership handle of ${this.self?.node ?? '?'} is ${this.phase}: it does not rejoin`);
    }
    if (this.rebalancing) this.joinStartedAt = now;
    return { name: MEMBERSHIP_PROTOCOL, metadata: encodeMemberMetadata(this.self, topics) };
  }

  private listen(consumer: Consumer): void {
    const { HEARTBEAT, GROUP_JOIN, CRASH, REBALANCING, REQUEST } = consumer.events;
    this.removeConsumerListeners.push(
      consumer.on(REQUEST, (e) => {
        // Emitted when a response arrives, before kafkajs looks at it: remember when it was sent,
        // so a response that waited out a pause does not count as fresh.
        const { apiName, duration } = e.payload;
        if (apiName === 'Heartbeat' || apiName === 'SyncGroup') this.sentAt.set(apiName, performance.now() - duration);
      }),
      consumer.on(HEARTBEAT, () => {
        this.alive(this.sentAt.get('Heartbeat'));
      }),
      consumer.on(REBALANCING, () => {
        if (!this.isActive()) return;
        this.rebalancing = true;
        this.log.debug({ event: 'membership.rebalancing', memberId: this.memberId }, 'the group is rebalancing: rejoining');
      }),
      consumer.on(GROUP_JOIN, (e) => this.onGroupJoin(e.payload.memberId, e.payload.isLeader)),
      consumer.on(CRASH, (e) => this.onCrash(e.payload.error, e.payload.restart)),
    );
  }

  private alive(sentAt: number | undefined): void {
    const at = sentAt ?? performance.now();
    if (at > this.aliveAt) this.aliveAt = at;
  }

  private onGroupJoin(memberId: string, isLeader: boolean): void {
    if (!this.isActive()) return;
    if (this.memberId !== undefined && memberId !== this.memberId) {
      // kafkajs rejoins under a new member id only after the broker forgot the old one: the others
      // have seen this member go, so it must not carry on as if nothing happened.
      this.fence(`rejoined as a new member (${memberId}, was ${this.memberId}): the group had dropped this member`);
      return;
    }
    this.memberId = memberId;
    this.rebalancing = false;
    this.joinStartedAt = undefined;
    this.alive(this.sentAt.get('SyncGroup'));
    this.log.debug({ event: 'membership.group-join', memberId, isLeader }, 'joined the membership group');
    this.requestRefresh();
  }

  private onCrash(error: Error, restart: boolean): void {
    if (!this.isActive()) return;
    this.lastJoinError = error;
    if (this.memberId === undefined) {
      // Not in the group yet: kafkajs retries on its own (within joinTimeoutMs) unless it gave up.
      if (!restart) {
        const node = this.self?.node;
        this.failJoin(new KafkaMembershipError('JOIN_FAILED', `${node} could not join the group ${this.groupId}: ${error.message}`, { ...(node === undefined ? {} : { node }), cause: error }));
      } else {
        this.log.warn({ err: error }, 'the membership consumer crashed while joining; kafkajs restarts it');
      }
      return;
    }
    // A crashed consumer has left the group (kafkajs leaves on crash) and would come back under a new member id.
    this.fence(`the consumer crashed${restart ? '' : ' for good'}: ${error.message}`);
  }

  // -------------------------------------------------------------- views

  private requestRefresh(): void {
    this.refreshWanted = true;
    if (!this.refreshing) void this.refreshLoop();
  }

  /**
   * Describes the group until it is Stable and turns the description into a view. One describe at
   * a time; a join that completes meanwhile makes the result stale, so it is described again.
   */
  private async refreshLoop(): Promise<void> {
    this.refreshing = true;
    let attempts = 0;
    try {
      while (this.refreshWanted && this.isActive()) {
        this.refreshWanted = false;
        const consumer = this.consumer;
        if (!consumer) return;
        let group: GroupDescription | undefined;
        try {
          group = await consumer.describeGroup();
        } catch (e) {
          this.log.debug({ err: e }, 'describing the membership group failed');
        }
        if (!this.isActive()) return;
        if (this.refreshWanted) continue;
        if (group?.state === 'Stable') {
          attempts = 0;
          this.applyGroup(group);
          continue;
        }
        // Rebalancing again (or unreachable): the next join brings a new refresh; until then, look again.
        attempts += 1;
        if (attempts >= MAX_DESCRIBE_ATTEMPTS) {
          this.log.warn({ state: group?.state }, `the membership group was not Stable after ${attempts} looks; waiting for the next rebalance`);
          return;
        }
        await new Promise((resolve) => setTimeout(resolve, this.settings.heartbeatIntervalMs));
        this.refreshWanted = true;
      }
    } finally {
      this.refreshing = false;
    }
  }

  private applyGroup(group: GroupDescription): void {
    const ours: { memberId: string; member: Member }[] = [];
    for (const m of group.members) {
      const decoded = decodeMemberMetadata(m.memberMetadata);
      if (decoded.ok) ours.push({ memberId: m.memberId, member: decoded.value });
      else this.log.warn({ event: 'membership.foreign-member', memberId: m.memberId, clientId: m.clientId, reason: decoded.error }, 'a member of the membership group is not a shardherd node of this format: ignored');
    }
    this.offer(liveMembers(ours).map((e) => e.member));
  }

  /** Announces `members` as a new view if they differ from the current one; fences on a view without this member. */
  private offer(members: readonly Member[]): void {
    if (sameMembers(members, this.current.members)) return;
    const view = this.announce(members);
    const self = this.self;
    if (!self) return;
    const inView = isMember(view, self.node, self.incarnation);
    if (inView && this.phase === 'joining') {
      this.phase = 'member';
      this.log.info({ event: 'membership.joined', memberId: this.memberId, members: view.members.length }, 'in the membership view');
      const pending = this.pendingJoin;
      this.pendingJoin = undefined;
      pending?.resolve(view);
    } else if (!inView && this.phase === 'member') {
      this.fence('the group no longer lists this member');
    }
  }

  /**
   * Makes `members` the current view and tells every listener. A view made by a listener (one that
   * calls `leave`, say) is queued until the current one reached every listener, so each listener
   * hears views in generation order.
   */
  private announce(members: readonly Member[]): MembershipView {
    const view: MembershipView = Object.freeze({ generation: this.current.generation + 1, members: Object.freeze([...members]) });
    this.current = view;
    this.log.debug({ event: 'membership.view', generation: view.generation, members: view.members.map((m) => `${m.node}@${m.incarnation}`) }, 'membership view');
    this.outbox.push(view);
    if (this.delivering) return view;
    this.delivering = true;
    try {
      for (let next = this.outbox.shift(); next; next = this.outbox.shift()) {
        for (const listener of this.listeners.slice()) {
          try {
            listener(next);
          } catch (e) {
            this.log.error({ err: e, generation: next.generation }, 'a membership listener threw');
          }
        }
      }
    } finally {
      this.delivering = false;
    }
    return view;
  }

  /** Announces the current view without this member, if it had it. */
  private dropSelf(): void {
    const self = this.self;
    if (!self || !isMember(this.current, self.node, self.incarnation)) return;
    this.announce(this.current.members.filter((m) => !(m.node === self.node && m.incarnation === self.incarnation)));
  }

  // -------------------------------------------------------------- self-fencing

  private startTicks(): void {
    const every = Math.max(10, Math.floor(this.settings.sessionTimeoutMs / 4));
    this.lastTick = performance.now();
    const tick = (): void => {
      this.tickTimer = undefined;
      if (!this.isActive()) return;
      const now = performance.now();
      const gap = now - this.lastTick;
      this.lastTick = now;
      this.checkLiveness(now, gap);
      if (this.isActive()) this.tickTimer = setTimeout(tick, every);
    };
    this.tickTimer = setTimeout(tick, every);
  }

  private stopTicks(): void {
    if (this.tickTimer) clearTimeout(this.tickTimer);
    this.tickTimer = undefined;
  }

  /**
   * Fences this handle if the broker may have dropped it. Before the first join nobody counts it
   * as a member (`joinTimeoutMs` applies instead). `gap` is how long since the previous check ran.
   */
  private checkLiveness(now: number, gap: number): void {
    if (this.memberId === undefined || !this.isActive()) return;
    const { sessionTimeoutMs, rebalanceTimeoutMs } = this.settings;
    if (gap >= sessionTimeoutMs) {
      this.fence(`this process did not run for ${Math.round(gap)} ms (stopped or starved), longer than the ${sessionTimeoutMs} ms session timeout`);
      return;
    }
    // A member waiting in a JoinGroup is kept by the broker until the rebalance completes (at most
    // rebalanceTimeoutMs), and then has a session timeout to sync.
    const joinGrace = this.joinStartedAt === undefined ? 0 : this.joinStartedAt + rebalanceTimeoutMs + sessionTimeoutMs;
    const deadline = Math.max(this.aliveAt + sessionTimeoutMs, joinGrace);
    if (now > deadline) {
      this.fence(`no heartbeat or join acknowledged for ${Math.round(now - this.aliveAt)} ms (session timeout ${sessionTimeoutMs} ms)`);
    }
  }

  /** Out of the group (or maybe out): announce a view without this member, then leave for good. */
  private fence(reason: string): void {
    if (!this.isActive()) return;
    this.phase = 'fenced';
    this.fencedBecause = reason;
    this.stopTicks();
    this.log.warn({ event: 'membership.fenced', memberId: this.memberId, reason }, `fenced: ${reason}`);
    this.failJoin(new KafkaMembershipError('FENCED', `${this.self?.node ?? 'membership'} fenced itself while joining: ${reason}`, this.self ? { node: this.self.node } : {}));
    this.dropSelf();
    // Leave (if the broker still lists it) so the others see it go at once.
    this.stopping ??= this.disconnect();
  }

  // -------------------------------------------------------------- teardown

  private isActive(): boolean {
    return this.phase === 'joining' || this.phase === 'member';
  }

  /** Rejects a pending `join` and stops the handle (the join failed or was overtaken). */
  private failJoin(error: KafkaMembershipError): void {
    const pending = this.pendingJoin;
    if (!pending) return;
    this.pendingJoin = undefined;
    if (this.isActive()) {
      this.phase = 'closed';
      this.stopTicks();
      this.log.warn({ event: 'membership.join-failed', code: error.code, err: error.cause }, error.message);
      this.stopping ??= this.disconnect();
    }
    pending.reject(error);
  }

  private async disconnect(): Promise<void> {
    for (const remove of this.removeConsumerListeners.splice(0)) remove();
    const consumer = this.consumer;
    const admin = this.admin;
    try {
      await Promise.all([consumer?.disconnect(), admin?.disconnect()]);
    } catch (e) {
      this.log.warn({ err: e }, 'closing the membership consumer failed');
    }
  }
}
