// The membership's consumer group on kafkajs: an admin client for the members topic, then one
// consumer subscribed to it whose assigner carries the member's metadata.
import { AssignerProtocol, type Consumer, type Kafka } from 'kafkajs';
import type { Logger } from 'pino';
import { createKafka, createTopicsWithLeaders, type KafkaConnection } from '../kafka-client.js';
import { membershipAssigner } from './assigner.js';
import type { DescribedGroup, GroupHooks, MembershipGroup } from './group.js';
import { MEMBER_METADATA_FORMAT, MEMBERSHIP_PROTOCOL, userDataOf } from './metadata.js';
import type { KafkaMembershipSettings } from './settings.js';

/**
 * The longest a consumer with nothing to fetch sleeps between heartbeat checks (kafkajs heartbeats
 * from its fetch loop, so its fetch wait bounds the heartbeat cadence and how long `leave` waits
 * for the fetch in flight).
 */
const MAX_FETCH_WAIT_MS = 500;

export class KafkajsMembershipGroup implements MembershipGroup {
  private readonly kafka: Kafka;
  private consumer: Consumer | undefined;
  private readonly removeListeners: (() => void)[] = [];
  private closed = false;

  constructor(
    connection: KafkaConnection,
    private readonly groupId: string,
    private readonly settings: KafkaMembershipSettings,
    private readonly log: () => Logger,
  ) {
    this.kafka = createKafka(connection);
  }

  async ensureTopic(replicationFactor: number): Promise<boolean> {
    const admin = this.kafka.admin();
    try {
      await admin.connect();
      // Looked up first: kafkajs logs an existing topic's creation as an error.
      if ((await admin.listTopics()).includes(this.groupId) || this.closed) return false;
      return await createTopicsWithLeaders(admin, [{ topic: this.groupId, numPartitions: 1, replicationFactor }]);
    } finally {
      await admin.disconnect().catch((e: unknown) => this.log().debug({ err: e }, 'closing the admin client failed'));
    }
  }

  async join(hooks: GroupHooks): Promise<void> {
    if (this.closed) return;
    const s = this.settings;
    const consumer = this.kafka.consumer({
      groupId: this.groupId,
      partitionAssigners: [
        membershipAssigner(this.groupId, (topics) => ({
          name: MEMBERSHIP_PROTOCOL,
          metadata: AssignerProtocol.MemberMetadata.encode({ version: MEMBER_METADATA_FORMAT, topics, userData: hooks.joining() }),
        })),
      ],
      sessionTimeout: s.sessionTimeoutMs,
      rebalanceTimeout: s.rebalanceTimeoutMs,
      heartbeatInterval: s.heartbeatIntervalMs,
      maxWaitTimeInMs: Math.min(s.heartbeatIntervalMs, MAX_FETCH_WAIT_MS),
      allowAutoTopicCreation: false,
    });
    this.consumer = consumer;
    const { HEARTBEAT, GROUP_JOIN, CRASH, REBALANCING, REQUEST } = consumer.events;
    this.removeListeners.push(
      // kafkajs emits REQUEST before it looks at the answer.
      consumer.on(REQUEST, (e) => hooks.responded(e.payload.apiName, e.payload.duration)),
      consumer.on(HEARTBEAT, () => hooks.heartbeat()),
      consumer.on(REBALANCING, () => hooks.rebalancing()),
      consumer.on(GROUP_JOIN, (e) => hooks.joined(e.payload.memberId, e.payload.isLeader)),
      consumer.on(CRASH, (e) => hooks.crashed(e.payload.error, e.payload.restart)),
    );
    await consumer.connect();
    await consumer.subscribe({ topics: [this.groupId], fromBeginning: false });
    if (this.closed) return;
    // Resolves once the first join completed (or the consumer crashed).
    await consumer.run({ autoCommit: false, eachBatch: async () => {} });
    // A close that raced the first join stopped a runner that was not running yet: stop it again.
    if (this.closed) await consumer.disconnect();
  }

  async describe(): Promise<DescribedGroup> {
    const group = await this.consumer!.describeGroup();
    return {
      state: group.state,
      members: group.members.map((m) => ({ memberId: m.memberId, clientId: m.clientId, userData: userDataOf(m.memberMetadata) })),
    };
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const remove of this.removeListeners.splice(0)) remove();
    await this.consumer?.disconnect();
  }

  get started(): boolean {
    return this.consumer !== undefined;
  }
}
