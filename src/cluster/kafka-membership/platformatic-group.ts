// The membership's consumer group on @platformatic/kafka: one consumer that joins the group with
// the member's metadata (the library heartbeats on a timer of its own and rejoins when the group
// rebalances), and an admin client for the members topic and the group's description.
import type { Admin, Consumer, GroupAssignment } from '@platformatic/kafka';
import type { Logger } from 'pino';
import type { KafkaConnection } from '../kafka-client.js';
import { retryRetriable } from '../kafka-retry.js';
import { loadPlatformaticKafka, onlyExistingTopics, platformaticOptions, requireBrokerApis } from '../platformatic-kafka.js';
import { SharedAttempt } from '../shared-attempt.js';
import { platformaticMembershipAssigner } from './assigner.js';
import type { DescribedGroup, GroupHooks, MembershipGroup } from './group.js';
import { MEMBER_METADATA_FORMAT, MEMBERSHIP_PROTOCOL } from './metadata.js';
import type { KafkaMembershipSettings } from './settings.js';

/** How long `ensureTopic` waits for a new members topic to have a leader. */
const TOPIC_LEADER_MS = 10_000;
/** Every Kafka API the membership uses, asked of the broker at its first request. */
const MEMBERSHIP_APIS = ['Metadata', 'CreateTopics', 'FindCoordinator', 'JoinGroup', 'SyncGroup', 'Heartbeat', 'LeaveGroup', 'DescribeGroups'] as const;
/** The option a user changes for a broker too old for the library. */
const CLIENT_SETTING = 'the membership option client (kafka.client in a node config)';

export class PlatformaticMembershipGroup implements MembershipGroup {
  private readonly admin: SharedAttempt<Admin>;
  private consumer: Consumer | undefined;
  private closed = false;

  constructor(
    private readonly connection: KafkaConnection,
    private readonly groupId: string,
    private readonly settings: KafkaMembershipSettings,
    private readonly log: () => Logger,
  ) {
    this.admin = new SharedAttempt(async () => {
      const library = await loadPlatformaticKafka();
      const admin = new library.Admin(platformaticOptions(connection));
      try {
        // At the membership's first request: a broker too old for the library is named as such,
        // with the option that avoids it, not as a join the broker cannot read.
        await requireBrokerApis(admin, library, { apis: MEMBERSHIP_APIS, setting: CLIENT_SETTING, brokers: connection.brokers, clientId: connection.clientId });
      } catch (e) {
        await admin.close().catch(() => undefined);
        throw e;
      }
      return admin;
    });
  }

  async ensureTopic(replicationFactor: number): Promise<boolean> {
    const admin = await this.admin.get();
    if ((await retryRetriable(() => admin.listTopics({ includeInternals: false }))).includes(this.groupId) || this.closed) return false;
    let created = true;
    try {
      await admin.createTopics({ topics: [this.groupId], partitions: 1, replicas: replicationFactor });
    } catch (e) {
      // Another node created it meanwhile.
      if (!onlyExistingTopics(e)) throw e;
      created = false;
    }
    await this.leaderElected(admin);
    return created;
  }

  async join(hooks: GroupHooks): Promise<void> {
    const s = this.settings;
    const { Consumer } = await loadPlatformaticKafka();
    if (this.closed) return;
    /** When the current JoinGroup was about to be sent (monotonic): its SyncGroup's answer is no fresher. */
    let joiningAt: number | undefined;
    let heartbeatSentAt: number | undefined;
    let joinedOnce = false;
    const consumer: Consumer = new Consumer({
      ...platformaticOptions(this.connection),
      groupId: this.groupId,
      sessionTimeout: s.sessionTimeoutMs,
      rebalanceTimeout: s.rebalanceTimeoutMs,
      heartbeatInterval: s.heartbeatIntervalMs,
      protocols: [{ name: MEMBERSHIP_PROTOCOL, version: MEMBER_METADATA_FORMAT }],
      // Asked right before every JoinGroup: after the first, a join is a rejoin (the group rebalances).
      protocolsMetadata: () => {
        if (joinedOnce) hooks.rebalancing();
        const userData = hooks.joining();
        joiningAt = performance.now();
        return userData;
      },
      partitionAssigner: platformaticMembershipAssigner(this.groupId),
      autocommit: false,
      autocreateTopics: false,
    });
    this.consumer = consumer;
    // The member's subscription names the members topic: the leader assigns it.
    consumer.topics.track(this.groupId);
    consumer.on('consumer:heartbeat:start', () => (heartbeatSentAt = performance.now()));
    let heartbeatsFailing = false;
    consumer.on('consumer:heartbeat:end', () => {
      heartbeatsFailing = false;
      if (heartbeatSentAt !== undefined) hooks.responded('Heartbeat', performance.now() - heartbeatSentAt);
      hooks.heartbeat();
    });
    // Said once per run of failures: the library logs nothing of its own through the node's log.
    consumer.on('consumer:heartbeat:error', (event: { error?: unknown }) => {
      if (heartbeatsFailing) return;
      heartbeatsFailing = true;
      this.log().warn(
        { event: 'membership.heartbeat-failed', err: event.error },
        'a membership heartbeat failed (a broker or the group coordinator away?): the client retries until the session timeout',
      );
    });
    consumer.on('consumer:group:join', (event: { memberId: string; isLeader: boolean; assignments: GroupAssignment[] }) => {
      joinedOnce = true;
      if (joiningAt !== undefined) hooks.responded('SyncGroup', performance.now() - joiningAt);
      hooks.joined(event.memberId, event.isLeader);
    });
    // A rejoin that failed for good (or one the handle refused): the library stops heartbeating.
    consumer.on('error', (error: Error) => hooks.crashed(error, false));
    // A group coordinator still loading after a broker start, or one that moved: tried again.
    await retryRetriable(() => consumer.joinGroup({}));
  }

  async describe(): Promise<DescribedGroup> {
    const admin = await this.admin.get();
    const group = (await admin.describeGroups({ groups: [this.groupId] })).get(this.groupId);
    return {
      state: group?.state ?? 'Unknown',
      members: [...(group?.members.values() ?? [])].map((m) => ({
        memberId: m.id,
        clientId: m.clientId,
        userData:
          m.metadata === undefined
            ? undefined
            : typeof m.metadata.metadata === 'string'
              ? Buffer.from(m.metadata.metadata)
              : (m.metadata.metadata ?? Buffer.alloc(0)),
      })),
    };
  }

  async close(): Promise<void> {
    this.closed = true;
    const consumer = this.consumer;
    try {
      await consumer?.close();
    } catch (e) {
      // Leaving failed (a broker away): the broker drops the member after its session.
      this.log().warn({ err: e }, 'the membership consumer could not leave its group');
      await consumer?.close(true).catch(() => undefined);
    }
    const admin = this.admin.take();
    await (await admin?.catch(() => undefined))?.close();
  }

  get started(): boolean {
    return this.consumer !== undefined;
  }

  private async leaderElected(admin: Admin): Promise<void> {
    const deadline = performance.now() + TOPIC_LEADER_MS;
    while (!this.closed) {
      const leader = await admin
        .metadata({ topics: [this.groupId], forceUpdate: true })
        .then((m) => m.topics.get(this.groupId)?.partitions[0]?.leader ?? -1)
        .catch(() => -1);
      if (leader >= 0) return;
      if (performance.now() > deadline) throw new Error(`the members topic ${this.groupId} has no leader after ${TOPIC_LEADER_MS} ms`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}
