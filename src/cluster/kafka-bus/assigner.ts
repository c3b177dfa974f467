// The group assigner of bus subscriptions: of the subscriptions of one group to one topic, the one
// opened last gets the topic's one partition, so the newest subscription owns the log.
import { AssignerProtocol, type PartitionAssigner } from 'kafkajs';

/** Name of the group protocol of bus subscriptions; every member of a bus group speaks it. */
export const NEWEST_SUBSCRIPTION_OWNS = 'shardherd-newest-subscription-owns';
const ASSIGNER_VERSION = 1;

/** What a subscription tells its group when it joins (the member metadata's `userData`). */
interface MemberInfo {
  readonly format: 1;
  /** When the subscription was opened (ms, its process's clock). */
  readonly openedAt: number;
}

/**
 * The group assigner of bus subscriptions. For each topic, partition 0 goes to the member, among
 * those subscribed to that topic, whose subscription was opened last (ties to the smallest member
 * id); every other member gets nothing of it. The topics come from every member's metadata, not
 * only the leader's: one group may hold subscriptions to different topics (a node's events and
 * replies), and the leader is any one of them. A member whose metadata cannot be read gets nothing.
 */
export function newestSubscriptionOwns(openedAt: number): PartitionAssigner {
  return () => ({
    name: NEWEST_SUBSCRIPTION_OWNS,
    version: ASSIGNER_VERSION,
    async assign({ members }) {
      const infos = members.map((m) => ({ memberId: m.memberId, ...readMember(m.memberMetadata) }));
      const assignment = new Map<string, Record<string, number[]>>(members.map((m) => [m.memberId, {}]));
      for (const topic of new Set(infos.flatMap((i) => i.topics))) {
        const owner = infos
          .filter((i) => i.topics.includes(topic))
          .sort((a, b) => b.openedAt - a.openedAt || (a.memberId < b.memberId ? -1 : a.memberId > b.memberId ? 1 : 0))[0];
        if (owner) assignment.get(owner.memberId)![topic] = [0];
      }
      return members.map((m) => ({
        memberId: m.memberId,
        memberAssignment: AssignerProtocol.MemberAssignment.encode({
          version: ASSIGNER_VERSION,
          assignment: assignment.get(m.memberId) ?? {},
          userData: Buffer.alloc(0),
        }),
      }));
    },
    protocol({ topics }) {
      const info: MemberInfo = { format: 1, openedAt };
      return {
        name: NEWEST_SUBSCRIPTION_OWNS,
        metadata: AssignerProtocol.MemberMetadata.encode({ version: ASSIGNER_VERSION, topics, userData: Buffer.from(JSON.stringify(info)) }),
      };
    },
  });
}

function readMember(metadata: Buffer): { readonly openedAt: number; readonly topics: readonly string[] } {
  try {
    const decoded = AssignerProtocol.MemberMetadata.decode(metadata);
    const info = JSON.parse(decoded?.userData.toString('utf8') ?? '') as Partial<MemberInfo>;
    if (decoded && info.format === 1 && typeof info.openedAt === 'number' && Number.isFinite(info.openedAt)) {
      return { openedAt: info.openedAt, topics: decoded.topics };
    }
  } catch {
    // Not ours: below.
  }
  return { openedAt: -Infinity, topics: [] };
}
