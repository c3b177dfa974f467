// Which members of the group make the view, and in what order: the newest incarnation of each
// node, oldest first.
import type { NodeId } from '../../core/ids.js';
import type { Member } from '../../core/shard-manager/protocol.js';

/** Oldest first: by join time, then node id and incarnation so every member orders ties alike. */
function compareMembers(a: Member, b: Member): number {
  if (a.joinedAt !== b.joinedAt) return a.joinedAt - b.joinedAt;
  if (a.node !== b.node) return a.node < b.node ? -1 : 1;
  return a.incarnation < b.incarnation ? -1 : a.incarnation > b.incarnation ? 1 : 0;
}

/**
 * The live members among the group's, oldest first. A node listed under two incarnations has
 * restarted while the broker still waits out the old one's session: only the newest incarnation
 * counts (a node restarts only once its old incarnation is gone), as the in-memory membership does.
 * The same incarnation under two member ids (the consumer rejoined before its old session ended)
 * counts once, with its first member id in the group's order.
 */
export function liveMembers<T extends { readonly member: Member }>(entries: readonly T[]): T[] {
  const newest = new Map<NodeId, T>();
  for (const entry of entries) {
    const seen = newest.get(entry.member.node);
    if (!seen || compareMembers(seen.member, entry.member) < 0) newest.set(entry.member.node, entry);
  }
  return [...newest.values()].sort((a, b) => compareMembers(a.member, b.member));
}

/** True when both lists hold the same members, in the same order. */
export function sameMembers(a: readonly Member[], b: readonly Member[]): boolean {
  return (
    a.length === b.length &&
    a.every((m, i) => {
      const o = b[i];
      return (
        o !== undefined &&
        m.node === o.node &&
        m.incarnation === o.incarnation &&
        m.joinedAt === o.joinedAt &&
        m.rack === o.rack &&
        m.address === o.address &&
        m.weight === o.weight &&
        m.detector === o.detector
      );
    })
  );
}
