// The group assigner of bus subscriptions: of the subscriptions of one group to one topic, the one
// opened last gets the topic's one partition, so the newest subscription owns the log. The rule is
// one pure function; each client library gets it in the shape it takes. Both speak Kafka's consumer
// protocol with the same protocol name and user data, so subscriptions on either library may share
// a group (a rolling switch of the client library).
import { AssignerProtocol, type PartitionAssigner } from 'kafkajs';
import type { ExtendedGroupProtocolSubscription, GroupPartitionsAssigner, GroupProtocolSubscription } from '@platformatic/kafka';

/** Name of the group protocol of bus subscriptions; every member of a bus group speaks it. */
export const NEWEST_SUBSCRIPTION_OWNS = 'shardherd-newest-subscription-owns';
const ASSIGNER_VERSION = 1;

/** What a subscription tells its group when it joins (the member metadata's `userData`). */
interface MemberInfo {
  readonly format: 1;
  /** When the subscription was opened (ms, its process's clock). */
  readonly openedAt: number;
}

/** A member of a bus group as the assigner sees it: its topics and its user data, still encoded. */
export interface BusGroupMember {
  readonly memberId: string;
  readonly topics: readonly string[];
  readonly userData: Buffer | null | undefined;
}

/**
 * The assignment of a bus group. For each topic, partition 0 goes to the member, among those
 * subscribed to that topic, whose subscription was opened last (ties to the smallest member id);
 * every other member gets nothing of it. The topics come from every member's metadata, not only
 * the leader's: one group may hold subscriptions to different topics (a node's events and
 * replies), and the leader is any one of them. A member whose user data cannot be read gets nothing.
 * Returns each member's topics (each with partition 0), members without one included.
 */
export function planNewestOwns(members: readonly BusGroupMember[]): Map<string, string[]> {
  const infos = members.map((m) => ({ memberId: m.memberId, topics: m.topics, openedAt: openedAtOf(m.userData) }));
  const assignment = new Map<string, string[]>(members.map((m) => [m.memberId, []]));
  for (const topic of new Set(infos.flatMap((i) => (i.openedAt === undefined ? [] : i.topics)))) {
    const owner = infos
      .filter((i) => i.openedAt !== undefined && i.topics.includes(topic))
      .sort((a, b) => b.openedAt! - a.openedAt! || (a.memberId < b.memberId ? -1 : a.memberId > b.memberId ? 1 : 0))[0];
    if (owner) assignment.get(owner.memberId)!.push(topic);
  }
  return assignment;
}

/** The user data a subscription opened at `openedAt` joins with. */
export function memberUserData(openedAt: number): Buffer {
  const info: MemberInfo = { format: 1, openedAt };
  return Buffer.from(JSON.stringify(info));
}

function openedAtOf(userData: Buffer | null | undefined): number | undefined {
  try {
    const info = JSON.parse(userData?.toString('utf8') ?? '') as Partial<MemberInfo>;
    if (info.format === 1 && typeof info.openedAt === 'number' && Number.isFinite(info.openedAt)) return info.openedAt;
  } catch {
    // Not ours: below.
  }
  return undefined;
}

/** The assigner for a kafkajs consumer whose subscription was opened at `openedAt`. */
export function newestSubscriptionOwns(openedAt: number): PartitionAssigner {
  return () => ({
    name: NEWEST_SUBSCRIPTION_OWNS,
    version: ASSIGNER_VERSION,
    async assign({ members }) {
      const plan = planNewestOwns(
        members.map((m) => {
          const decoded = decodeMemberMetadata(m.memberMetadata);
          return { memberId: m.memberId, topics: decoded?.topics ?? [], userData: decoded?.userData };
        }),
      );
      return members.map((m) => ({
        memberId: m.memberId,
        memberAssignment: AssignerProtocol.MemberAssignment.encode({
          version: ASSIGNER_VERSION,
          assignment: Object.fromEntries((plan.get(m.memberId) ?? []).map((topic) => [topic, [0]])),
          userData: Buffer.alloc(0),
        }),
      }));
    },
    protocol({ topics }) {
      return {
        name: NEWEST_SUBSCRIPTION_OWNS,
        metadata: AssignerProtocol.MemberMetadata.encode({ version: ASSIGNER_VERSION, topics, userData: memberUserData(openedAt) }),
      };
    },
  });
}

function decodeMemberMetadata(metadata: Buffer): { topics: string[]; userData: Buffer } | undefined {
  try {
    return AssignerProtocol.MemberMetadata.decode(metadata) ?? undefined;
  } catch {
    return undefined;
  }
}

/** The protocol a @platformatic/kafka consumer whose subscription was opened at `openedAt` joins with. */
export function newestOwnsProtocol(openedAt: number): GroupProtocolSubscription {
  return { name: NEWEST_SUBSCRIPTION_OWNS, version: ASSIGNER_VERSION, metadata: memberUserData(openedAt) };
}

/** The assigner of a @platformatic/kafka consumer (the library decodes the members' metadata). */
export const newestOwnsAssigner: GroupPartitionsAssigner = (_current, members: Map<string, ExtendedGroupProtocolSubscription>) => {
  const plan = planNewestOwns(
    [...members.values()].map((m) => ({
      memberId: m.memberId,
      topics: m.topics ?? [],
      userData: typeof m.metadata === 'string' ? Buffer.from(m.metadata) : m.metadata,
    })),
  );
  return [...plan].map(([memberId, topics]) => ({
    memberId,
    assignments: new Map(topics.map((topic) => [topic, { topic, partitions: [0] }])),
  }));
};
