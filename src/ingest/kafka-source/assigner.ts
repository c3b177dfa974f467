// The assigner of a dataset's consumer: its group's only member gets exactly the partitions of the
// shards open here (kafkajs has no assign()).
import { AssignerProtocol, type PartitionAssigner } from 'kafkajs';

/**
 * The group's assignment: exactly `partitions` of `topic`, to the member that is this consumer
 * (recognised by `token` in its metadata). Any other member (one whose leave failed) gets nothing.
 */
export function ownedPartitionsAssigner(topic: string, partitions: readonly number[], token: string): PartitionAssigner {
  const name = 'ShardherdOwnedPartitions';
  const version = 1;
  return () => ({
    name,
    version,
    async assign({ members }) {
      return members.map(({ memberId, memberMetadata }) => {
        const mine = AssignerProtocol.MemberMetadata.decode(memberMetadata)?.userData.toString('utf8') === token;
        return {
          memberId,
          memberAssignment: AssignerProtocol.MemberAssignment.encode({
            version,
            assignment: mine ? { [topic]: [...partitions] } : {},
            userData: Buffer.alloc(0),
          }),
        };
      });
    },
    protocol({ topics }) {
      return { name, metadata: AssignerProtocol.MemberMetadata.encode({ version, topics, userData: Buffer.from(token, 'utf8') }) };
    },
  });
}
