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

/** What a member says about itself in its JoinGroup metadata (`userData`, JSON). */
export function encodeMemberMetadata(member: Member, topics: readonly string[]): Buffer {
  const userData = Buffer.from(
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
  return AssignerProtocol.MemberMetadata.encode({ version: MEMBER_METADATA_FORMAT, topics: [...topics], userData });
}

/** Reads a member's JoinGroup metadata; an error (as a value) for anything that is not ours. */
export function decodeMemberMetadata(metadata: Buffer): Result<Member, string> {
  let userData: Buffer;
  try {
    userData = AssignerProtocol.MemberMetadata.decode(metadata)?.userData ?? Buffer.alloc(0);
  } catch (e) {
    return err(`not consumer-protocol metadata: ${e instanceof Error ? e.message : String(e)}`);
  }
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
export function decodeMembers<M extends { readonly memberId: string; readonly memberMetadata: Buffer }>(
  members: readonly M[],
  onForeign: (member: M, reason: string) => void = () => {},
): { memberId: string; member: Member }[] {
  const ours: { memberId: string; member: Member }[] = [];
  for (const m of members) {
    const decoded = decodeMemberMetadata(m.memberMetadata);
    if (decoded.ok) ours.push({ memberId: m.memberId, member: decoded.value });
    else onForeign(m, decoded.error);
  }
  return ours;
}
