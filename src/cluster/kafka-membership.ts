// The Membership port on Kafka's consumer-group protocol (docs/ARCHITECTURE.md §7), as Kafka Connect's workers
// use it: every node joins one group, puts who it is in its member metadata, and learns who else is
// in the group after each rebalance. Failure detection is the broker's session timeout; a member
// that may have been dropped fences itself. The group is one client library's (`client`):
// @platformatic/kafka by default, or kafkajs.
import type { Logger } from 'pino';
import { ShardherdError } from '../core/errors.js';
import type { Member } from '../core/shard-manager/protocol.js';
import { KafkaMembershipError } from './kafka-membership/errors.js';
import type { DescribedGroup, MembershipGroup } from './kafka-membership/group.js';
import { GroupDescriber } from './kafka-membership/group-describer.js';
import { KafkajsMembershipGroup } from './kafka-membership/kafkajs-group.js';
import { liveMembers, sameMembers } from './kafka-membership/live-members.js';
import { decodeMembers, memberUserData } from './kafka-membership/metadata.js';
import { PlatformaticMembershipGroup } from './kafka-membership/platformatic-group.js';
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
 * One node incarnation's membership in a Kafka consumer group (classic protocol).
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
  private readonly group: MembershipGroup;
  private pendingJoin: { resolve: (view: MembershipView) => void; reject: (error: Error) => void } | undefined;
  private lastJoinError: unknown;
  /** The member id of the last completed join; undefined until the first. */
  private memberId: string | undefined;
  private stopping: Promise<void> | undefined;
  private fencedBecause: string | undefined;

  constructor(options: KafkaMembershipOptions) {
    this.settings = kafkaMembershipSettings(options);
    const s = this.settings;
    this.groupId = `${s.topicPrefix}.members`;
    this.log = options.log;
    const connection = { brokers: s.brokers, clientId: s.clientId, log: options.log, connectionTimeoutMs: options.connectionTimeoutMs };
    this.group =
      s.client === 'kafkajs'
        ? new KafkajsMembershipGroup(connection, this.groupId, s, () => this.log)
        : new PlatformaticMembershipGroup(connection, this.groupId, s, () => this.log);
    this.watchdog = new LivenessWatchdog(s.sessionTimeoutMs, s.rebalanceTimeoutMs);
    this.describer = new GroupDescriber({
      describe: () => (this.group.started ? this.group.describe() : undefined),
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
   * left or fenced itself first; a `ShardherdError` `UNSUPPORTED_BROKER` naming the option `client`
   * when the broker is too old for @platformatic/kafka. A rejected handle is closed.
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
        // A broker too old for the client library: trying again cannot help, and the error names the option that does.
        e instanceof ShardherdError && e.code === 'UNSUPPORTED_BROKER'
          ? e
          : new KafkaMembershipError('JOIN_FAILED', `${request.node} could not join the group ${this.groupId}: ${e instanceof Error ? e.message : String(e)}`, {
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
    // One partition, never auto-created: the group needs a subscribed topic, and partition 0 is
    // what the leader gives the oldest member.
    const created = await this.group.ensureTopic(this.settings.replicationFactor);
    if (created) this.log.info({ event: 'membership.topic-created', topic: this.groupId }, `created the members topic ${this.groupId}`);
    if (!this.isActive()) return;
    this.watchdog.start(
      () => this.isActive(),
      (now, gap) => this.checkLiveness(now, gap),
    );
    // Resolves once the first join completed (or the consumer gave up); the view follows from the join.
    await this.group.join({
      joining: () => this.joining(),
      joined: (memberId, isLeader) => this.onGroupJoin(memberId, isLeader),
      responded: (api, durationMs) => this.watchdog.responded(api, durationMs),
      heartbeat: () => this.watchdog.heartbeat(),
      rebalancing: () => {
        if (!this.isActive()) return;
        this.watchdog.rebalanceNoticed();
        this.log.debug({ event: 'membership.rebalancing', memberId: this.memberId }, 'the group is rebalancing: rejoining');
      },
      crashed: (error, restart) => this.onCrash(error, restart),
    });
  }

  /** Called right before every JoinGroup: this member's metadata. Throwing here stops the join. */
  private joining(): Buffer {
    const now = performance.now();
    this.checkLiveness(now, 0);
    if (!this.isActive() || !this.self) {
      // A fenced or closed handle never comes back under the same incarnation.
      throw new KafkaMembershipError('FENCED', `membership handle of ${this.self?.node ?? '?'} is ${this.phase}: it does not rejoin`);
    }
    this.watchdog.joining(now);
    return memberUserData(this.self);
  }

  private onGroupJoin(memberId: string, isLeader: boolean): void {
    if (!this.isActive()) return;
    if (this.memberId !== undefined && memberId !== this.memberId) {
      // The client rejoins under a new member id only after the broker forgot the old one: the others
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
        this.log.warn({ err: error }, 'the membership consumer crashed while joining; the client library restarts it');
      }
      return;
    }
    // A crashed consumer has left the group (kafkajs leaves on crash; @platformatic/kafka stops
    // heartbeating) and would come back under a new member id.
    this.fence(`the consumer crashed${restart ? '' : ' for good'}: ${error.message}`);
  }

  // -------------------------------------------------------------- views

  private applyGroup(group: DescribedGroup): void {
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
  private failJoin(error: KafkaMembershipError | ShardherdError): void {
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
    try {
      await this.group.close();
    } catch (e) {
      this.log.warn({ err: e }, 'closing the membership consumer failed');
    }
  }
}
