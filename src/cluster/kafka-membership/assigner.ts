// The group assigner of the membership: the leader gives the members topic's one partition to the
// oldest member, so that its choice shows in `describeGroups`; the others get nothing. One rule,
// in the shape each client library takes.
import type { ExtendedGroupProtocolSubscription, GroupPartitionsAssigner } from '@platformatic/kafka';
import { AssignerProtocol, type GroupMember, type GroupMemberAssignment, type PartitionAssigner } from 'kafkajs';
import { liveMembers } from './live-members.js';
import { decodeMembers, MEMBER_METADATA_FORMAT, MEMBERSHIP_PROTOCOL, userDataOf } from './metadata.js';

/** The member the partition goes to: the oldest of those whose metadata is ours (undefined if none is). */
function oldestMemberId(members: readonly { readonly memberId: string; readonly userData: Buffer | undefined }[]): string | undefined {
  return liveMembers(decodeMembers(members))[0]?.memberId;
}

/**
 * The group leader's plan: partition 0 of the members topic to the oldest member (it is subscribed
 * by every member; the partition carries no data, so the assignment only makes the leader's choice
 * visible, in `describeGroups`), nothing to anyone else. Only subscribed topics are ever assigned.
 * Members whose metadata is not ours get nothing.
 */
export function planMembershipAssignment(members: readonly GroupMember[], topics: readonly string[], membersTopic: string): GroupMemberAssignment[] {
  const oldest = oldestMemberId(members.map((m) => ({ memberId: m.memberId, userData: userDataOf(m.memberMetadata) })));
  return members.map((m) => ({
    memberId: m.memberId,
    memberAssignment: AssignerProtocol.MemberAssignment.encode({
      version: MEMBER_METADATA_FORMAT,
      assignment: m.memberId === oldest && topics.includes(membersTopic) ? { [membersTopic]: [0] } : {},
      userData: Buffer.alloc(0),
    }),
  }));
}

/**
 * The assigner kafkajs calls at every JoinGroup (`protocol`, which says what this member puts in
 * its metadata) and, on the group leader, to assign (`planMembershipAssignment`).
 */
export function membershipAssigner(membersTopic: string, protocol: (topics: string[]) => { name: string; metadata: Buffer }): PartitionAssigner {
  return () => ({
    name: MEMBERSHIP_PROTOCOL,
    version: MEMBER_METADATA_FORMAT,
    protocol: ({ topics }) => protocol(topics),
    assign: ({ members, topics }) => Promise.resolve(planMembershipAssignment(members, topics, membersTopic)),
  });
}

/** The same plan for a @platformatic/kafka group leader (the library decodes the members' metadata). */
export function platformaticMembershipAssigner(membersTopic: string): GroupPartitionsAssigner {
  return (_current, members: Map<string, ExtendedGroupProtocolSubscription>, topics) => {
    const all = [...members.values()];
    const oldest = oldestMemberId(
      all.map((m) => ({ memberId: m.memberId, userData: typeof m.metadata === 'string' ? Buffer.from(m.metadata) : (m.metadata ?? undefined) })),
    );
    return all.map((m) => ({
      memberId: m.memberId,
      assignments: new Map(m.memberId === oldest && topics.has(membersTopic) ? [[membersTopic, { topic: membersTopic, partitions: [0] }]] : []),
    }));
  };
}
