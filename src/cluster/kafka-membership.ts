// The Membership port on Kafka's consumer-group protocol (docs/ARCHITECTURE.md §7), as Kafka Connect's workers
// use it: every node joins one group, puts who it is in its member metadata, and learns who else is
// in the group after each rebalance. Failure detection is the broker's session timeout; a member
// that may have been dropped fences itself.
import type { Admin, Consumer, GroupDescription } from 'kafkajs';
import type { Logger } from 'pino';
import type { Member } from '../core/shard-manager/protocol.js';
import { createKafka, createTopicsWithLeaders } from './kafka-client.js';
import { membershipAssigner } from './kafka-membership/assigner.js';
import { KafkaMembershipError } from './kafka-membership/errors.js';
import { GroupDescriber } from './kafka-membership/group-describer.js';
import { liveMembers, sameMembers } from './kafka-membership/live-members.js';
import { decodeMembers, encodeMemberMetadata, MEMBERSHIP_PROTOCOL } from './kafka-membership/metadata.js';
import { kafkaMembershipSettings, type KafkaMembershipOptions, type KafkaMembershipSettings } from './kafka-membership/settings.js';
import { ViewAnnouncer } from './kafka-membership/view-announcer.js';
import { LivenessWatchdog } from './kafka-membership/watchdog.js';
import { isMember, type JoinRequest, type Membership, type MembershipView } from './membership.js';

export { planMembershipAssignment } from './kafka-membership/assigner.js';
export { KafkaMembershipError, type KafkaMembershipErrorCode } from './kafka-membership/errors.js';
export { liveMembers } from './kafka-membership/live-members.js';
export { decodeMemberMetadata, encodeMemberMetadata } from './kafka-membership/metadata.js';
export type { KafkaMembershipOptions, KafkaMembershipSettings } from './kafka-membership/settings.js';

type Phase = 'idle' | 'joining' | 'member' | 'fenced' | 'closed';

/**
 * The longest a consumer with nothing to fetch sleeps between heartbeat checks (kafkajs heartbeats
 * from its fetch loop, so its fetch wait bounds the heartbeat cadence and how long `leave` waits
 * for the fetch in flight).
 */
const MAX_FETCH_WAIT_MS = 500;

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
  private readonly views = new ViewAnnouncer(() => this.log);
  private readonly watchdog: LivenessWatchdog;
  private readonly describer: GroupDescriber;
  private admin: Admin | undefined;
  private consumer: Consumer | undefined;
  private pendingJoin: { resolve: (view: MembershipView) => void; reject: (error: Error) => void } | undefined;
  private lastJoinError: unknown;
  /** The member id of the last completed join; undefined until the first. */
  private memberId: string | undefined;
  private stopping: Promise<void> | undefined;
  private fencedBecause: string | undefined;
  private readonly removeConsumerListeners: (() => void)[] = [];
  private readonly connectionTimeoutMs: number | undefined;

  constructor(options: KafkaMembershipOptions) {
    this.settings = kafkaMembershipSettings(options);
    this.connectionTimeoutMs = options.connectionTimeoutMs;
    this.groupId = `${this.settings.topicPrefix}.members`;
    this.log = options.log;
    this.watchdog = new LivenessWatchdog(this.settings.sessionTimeoutMs, this.settings.rebalanceTimeoutMs);
    this.describer = new GroupDescriber({
      consumer: () => this.consumer,
      active: () => this.isActive(),
      onStable: (group) => this.applyGroup(group),
      retryMs: this.settings.heartbeatIntervalMs,
      log: () => this.log,
    });
  }

  /**
   * Joins the group and resolves with the first view that contains this member. A handle joins
   * once. Rejects with a `KafkaMembershipError`: `JOIN_TIMEOUT` if that takes longer than
   * `joinTimeoutMs`, `JOIN_FAILED` if the consumer gives up, `CLOSED`/`FENCED` if the handle
   * left or fenced itself first. A rejected handle is closed.
   */
  join(request: JoinRequest): Promise<MembershipView> {
    if (this.phase !== 'idle') {
      return Promise.reject(
        new KafkaMembershipError(
          'CLOSED',
          `membership handle of ${request.node} already ${this.phase === 'closed' ? 'closed' : 'joined'}: a handle joins once`,
          { node: request.node },
        ),
      );
    }
    this.phase = 'joining';
    const rack = request.rack ?? this.settings.rack;
    const address = request.address ?? this.settings.address;
    const weight = request.weight ?? this.settings.weight;
    this.self = Object.freeze({
      node: request.node,
      incarnation: request.incarnation,
      joinedAt: Date.now(),
      ...(rack === undefined ? {} : { rack }),
      ...(address === undefined ? {} : { address }),
      ...(weight === undefined ? {} : { weight }),
      ...(request.detector === undefined ? {} : { detector: request.detector }),
    });
    this.log = this.log.child(
      this.log.bindings().node === request.node ? { incarnation: request.incarnation } : { node: request.node, incarnation: request.incarnation },
    );
    const joined = new Promise<MembershipView>((resolve, reject) => {
      this.pendingJoin = { resolve, reject };
    });
    const { joinTimeoutMs, brokers } = this.settings;
    const timer = setTimeout(() => {
      const cause = this.lastJoinError;
      const why = cause instanceof Error ? `: ${cause.message}` : '';
      this.failJoin(
        new KafkaMembershipError(
          'JOIN_TIMEOUT',
          `${request.node} could not join the group ${this.groupId} at ${brokers.join(',')} within ${joinTimeoutMs} ms${why}`,
          {
            node: request.node,
            cause,
            retriable: true,
          },
        ),
      );
    }, joinTimeoutMs);
    this.start().catch((e: unknown) => {
      this.failJoin(
        new KafkaMembershipError('JOIN_FAILED', `${request.node} could not join the group ${this.groupId}: ${e instanceof Error ? e.message : String(e)}`, {
          node: request.node,
          cause: e,
          retriable: true,
        }),
      );
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
      this.watchdog.stop();
      this.failJoin(
        new KafkaMembershipError('CLOSED', `${this.self?.node ?? 'membership'} left before it was in a view`, this.self ? { node: this.self.node } : {}),
      );
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
    this.views.forgetListeners();
  }

  view(): MembershipView {
    return this.views.view;
  }

  onChange(listener: (view: MembershipView) => void): () => void {
    return this.views.onChange(listener);
  }

  /**
   * For how much longer (ms) the broker surely keeps this member: until the last acknowledged
   * heartbeat's sending (monotonic) plus the session timeout. Undefined unless a member.
   */
  memberForMs(): number | undefined {
    if (this.phase !== 'member' || this.watchdog.acknowledgedSentAt === 0) return undefined;
    return this.watchdog.acknowledgedSentAt + this.settings.sessionTimeoutMs - performance.now();
  }

  /** Why this handle fenced itself (it is then out of the group for good); undefined if it did not. */
  get fenceReason(): string | undefined {
    return this.fencedBecause;
  }

  // -------------------------------------------------------------- joining

  private async start(): Promise<void> {
    const s = this.settings;
    const kafka = createKafka({ brokers: s.brokers, clientId: s.clientId, log: this.log, connectionTimeoutMs: this.connectionTimeoutMs });
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
        const created = await createTopicsWithLeaders(admin, [{ topic: this.groupId, numPartitions: 1, replicationFactor: s.replicationFactor }]);
        if (created) this.log.info({ event: 'membership.topic-created', topic: this.groupId }, `created the members topic ${this.groupId}`);
      }
    } finally {
      this.admin = undefined;
      await admin.disconnect().catch((e: unknown) => this.log.debug({ err: e }, 'closing the admin client failed'));
    }
    if (!this.isActive()) return;

    const consumer = kafka.consumer({
      groupId: this.groupId,
      partitionAssigners: [membershipAssigner(this.groupId, (topics) => this.protocol(topics))],
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
    this.watchdog.start(
      () => this.isActive(),
      (now, gap) => this.checkLiveness(now, gap),
    );
    // Resolves once the first join completed (or the consumer crashed); the view follows from GROUP_JOIN.
    await consumer.run({ autoCommit: false, eachBatch: async () => {} });
    // A leave that raced the first join stopped a runner that was not running yet: stop it again.
    if (!this.isActive()) await consumer.disconnect();
  }

  /** Called right before every JoinGroup request. Throwing here stops kafkajs from sending it. */
  private protocol(topics: string[]): { name: string; metadata: Buffer } {
    const now = performance.now();
    this.checkLiveness(now, 0);
    if (!this.isActive() || !this.self) {
      // A fenced or closed handle never comes back under the same incarnation.
      throw new KafkaMembershipError('FENCED', `membership handle of ${this.self?.node ?? '?'} is ${this.phase}: it does not rejoin`);
    }
    this.watchdog.joining(now);
    return { name: MEMBERSHIP_PROTOCOL, metadata: encodeMemberMetadata(this.self, topics) };
  }

  private listen(consumer: Consumer): void {
    const { HEARTBEAT, GROUP_JOIN, CRASH, REBALANCING, REQUEST } = consumer.events;
    this.removeConsumerListeners.push(
      consumer.on(REQUEST, (e) => this.watchdog.responded(e.payload.apiName, e.payload.duration)),
      consumer.on(HEARTBEAT, () => this.watchdog.heartbeat()),
      consumer.on(REBALANCING, () => {
        if (!this.isActive()) return;
        this.watchdog.rebalanceNoticed();
        this.log.debug({ event: 'membership.rebalancing', memberId: this.memberId }, 'the group is rebalancing: rejoining');
      }),
      consumer.on(GROUP_JOIN, (e) => this.onGroupJoin(e.payload.memberId, e.payload.isLeader)),
      consumer.on(CRASH, (e) => this.onCrash(e.payload.error, e.payload.restart)),
    );
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
    this.watchdog.joined();
    this.log.debug({ event: 'membership.group-join', memberId, isLeader }, 'joined the membership group');
    this.describer.request();
  }

  private onCrash(error: Error, restart: boolean): void {
    if (!this.isActive()) return;
    this.lastJoinError = error;
    if (this.memberId === undefined) {
      // Not in the group yet: kafkajs retries on its own (within joinTimeoutMs) unless it gave up.
      if (!restart) {
        const node = this.self?.node;
        this.failJoin(
          new KafkaMembershipError('JOIN_FAILED', `${node} could not join the group ${this.groupId}: ${error.message}`, {
            ...(node === undefined ? {} : { node }),
            cause: error,
          }),
        );
      } else {
        this.log.warn({ err: error }, 'the membership consumer crashed while joining; kafkajs restarts it');
      }
      return;
    }
    // A crashed consumer has left the group (kafkajs leaves on crash) and would come back under a new member id.
    this.fence(`the consumer crashed${restart ? '' : ' for good'}: ${error.message}`);
  }

  // -------------------------------------------------------------- views

  private applyGroup(group: GroupDescription): void {
    const ours = decodeMembers(group.members, (m, reason) =>
      this.log.warn(
        { event: 'membership.foreign-member', memberId: m.memberId, clientId: m.clientId, reason },
        'a member of the membership group is not a shardherd node of this format: ignored',
      ),
    );
    this.offer(liveMembers(ours).map((e) => e.member));
  }

  /** Announces `members` as a new view if they differ from the current one; fences on a view without this member. */
  private offer(members: readonly Member[]): void {
    if (sameMembers(members, this.views.view.members)) return;
    const view = this.views.announce(members);
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

  /** Announces the current view without this member, if it had it. */
  private dropSelf(): void {
    const self = this.self;
    const current = this.views.view;
    if (!self || !isMember(current, self.node, self.incarnation)) return;
    this.views.announce(current.members.filter((m) => !(m.node === self.node && m.incarnation === self.incarnation)));
  }

  // -------------------------------------------------------------- self-fencing

  /**
   * Fences this handle if the broker may have dropped it. Before the first join nobody counts it
   * as a member (`joinTimeoutMs` applies instead). `gap` is how long since the previous check ran.
   */
  private checkLiveness(now: number, gap: number): void {
    if (this.memberId === undefined || !this.isActive()) return;
    const reason = this.watchdog.overdue(now, gap);
    if (reason !== undefined) this.fence(reason);
  }

  /** Out of the group (or maybe out): announce a view without this member, then leave for good. */
  private fence(reason: string): void {
    if (!this.isActive()) return;
    this.phase = 'fenced';
    this.fencedBecause = reason;
    this.watchdog.stop();
    this.log.warn({ event: 'membership.fenced', memberId: this.memberId, reason }, `fenced: ${reason}`);
    this.failJoin(
      new KafkaMembershipError(
        'FENCED',
        `${this.self?.node ?? 'membership'} fenced itself while joining: ${reason}`,
        this.self ? { node: this.self.node } : {},
      ),
    );
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
      this.watchdog.stop();
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
