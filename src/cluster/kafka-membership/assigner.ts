// The group assigner of the membership: the leader gives the members topic's one partition to the
// oldest member, so that its choice shows in `describeGroups`; the others get nothing.
import { AssignerProtocol, type GroupMember, type GroupMemberAssignment, type PartitionAssigner } from 'kafkajs';
import { liveMembers } from './live-members.js';
import { decodeMembers, MEMBER_METADATA_FORMAT, MEMBERSHIP_PROTOCOL } from './metadata.js';

/**
 * The group leader's plan: partition 0 of the members topic to the oldest member (it is subscribed
 * by every member; the partition carries no data, so the assignment only makes the leader's choice
 * visible, in `describeGroups`), nothing to anyone else. Only subscribed topics are ever assigned.
 * Members whose metadata is not ours get nothing.
 */
export function planMembershipAssignment(members: readonly GroupMember[], topics: readonly string[], membersTopic: string): GroupMemberAssignment[] {
  const oldest = liveMembers(decodeMembers(members))[0]?.memberId;
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
