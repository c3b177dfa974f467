// What a membership member says about itself in its JoinGroup metadata (node id, incarnation,
// join time, rack, address), encoded as versioned JSON and read back refusing what is not ours.
import { AssignerProtocol } from 'kafkajs';
import { z } from 'zod';
import { parseIncarnation, parseNodeId, type Incarnation, type NodeId } from '../../core/ids.js';
import { err, ok, type Result } from '../../core/result.js';
import type { Member } from '../../core/shard-manager/protocol.js';

/** The group protocol (assigner) name every shardherd node of a cluster must share. */
export const MEMBERSHIP_PROTOCOL = 'shardherd-membership';

/** The format of the JSON a member puts in its metadata `userData`. */
export const MEMBER_METADATA_FORMAT = 1;

const memberMetadataSchema = z.object({
  format: z.literal(MEMBER_METADATA_FORMAT),
  node: z.custom<NodeId>((v) => parseNodeId(v).ok, 'not a node id'),
  incarnation: z.custom<Incarnation>((v) => parseIncarnation(v).ok, 'not an incarnation'),
  joinedAt: z.number().int().nonnegative(),
  rack: z.string().min(1).max(200).optional(),
  address: z.string().min(1).max(500).optional(),
  weight: z.number().positive().max(1_000_000).optional(),
  detector: z.string().min(1).max(300).optional(),
});

/** What a member says about itself in its JoinGroup metadata's `userData`: versioned JSON. */
export function memberUserData(member: Member): Buffer {
  return Buffer.from(
    JSON.stringify({
      format: MEMBER_METADATA_FORMAT,
      node: member.node,
      incarnation: member.incarnation,
      joinedAt: member.joinedAt,
      ...(member.rack === undefined ? {} : { rack: member.rack }),
      ...(member.address === undefined ? {} : { address: member.address }),
      ...(member.weight === undefined ? {} : { weight: member.weight }),
      ...(member.detector === undefined ? {} : { detector: member.detector }),
    }),
  );
}

/** A member's whole JoinGroup metadata (Kafka's consumer protocol, as kafkajs encodes it). */
export function encodeMemberMetadata(member: Member, topics: readonly string[]): Buffer {
  return AssignerProtocol.MemberMetadata.encode({ version: MEMBER_METADATA_FORMAT, topics: [...topics], userData: memberUserData(member) });
}

/** The `userData` of a member's JoinGroup metadata; undefined when it is not Kafka's consumer protocol. */
export function userDataOf(metadata: Buffer): Buffer | undefined {
  try {
    return AssignerProtocol.MemberMetadata.decode(metadata)?.userData ?? Buffer.alloc(0);
  } catch {
    return undefined;
  }
}

/** Reads a member's JoinGroup metadata; an error (as a value) for anything that is not ours. */
export function decodeMemberMetadata(metadata: Buffer): Result<Member, string> {
  const userData = userDataOf(metadata);
  return userData === undefined ? err('not consumer-protocol metadata') : decodeMemberUserData(userData);
}

/** Reads a member's metadata `userData`; an error (as a value) for anything that is not ours. */
export function decodeMemberUserData(userData: Buffer): Result<Member, string> {
  let json: unknown;
  try {
    json = JSON.parse(userData.toString('utf8'));
  } catch {
    return err(`userData is not JSON (${userData.length} bytes)`);
  }
  const parsed = memberMetadataSchema.safeParse(json);
  if (!parsed.success)
    return err(
      `userData is not shardherd member metadata format ${MEMBER_METADATA_FORMAT}: ${parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ')}`,
    );
  const { node, incarnation, joinedAt, rack, address, weight, detector } = parsed.data;
  return ok(
    Object.freeze({
      node,
      incarnation,
      joinedAt,
      ...(rack === undefined ? {} : { rack }),
      ...(address === undefined ? {} : { address }),
      ...(weight === undefined ? {} : { weight }),
      ...(detector === undefined ? {} : { detector }),
    }),
  );
}

/** The group members whose metadata is ours, decoded, in the group's order; `onForeign` hears of the others. */
export function decodeMembers<M extends { readonly memberId: string; readonly userData: Buffer | undefined }>(
  members: readonly M[],
  onForeign: (member: M, reason: string) => void = () => {},
): { memberId: string; member: Member }[] {
  const ours: { memberId: string; member: Member }[] = [];
  for (const m of members) {
    const decoded = m.userData === undefined ? err('not consumer-protocol metadata') : decodeMemberUserData(m.userData);
    if (decoded.ok) ours.push({ memberId: m.memberId, member: decoded.value });
    else onForeign(m, decoded.error);
  }
  return ours;
}
