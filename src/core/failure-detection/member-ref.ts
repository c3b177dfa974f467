// A node incarnation as the failure detector names it, and what an observer saw of one.
import type { Incarnation, NodeId } from '../ids.js';

/** One node incarnation. */
export interface MemberRef {
  readonly node: NodeId;
  readonly incarnation: Incarnation;
}

/** Only the node and incarnation of a member record (a frame carries nothing else of it). */
export const memberRef = (m: MemberRef): MemberRef => ({ node: m.node, incarnation: m.incarnation });

export const sameMember = (a: MemberRef, b: MemberRef): boolean => a.node === b.node && a.incarnation === b.incarnation;
/** `node@incarnation`: a key for maps and logs. */
export const memberKey = (m: MemberRef): string => `${m.node}@${m.incarnation}`;

/** What an observer saw when it probed a node (§11.5). */
export type Vote = 'alive' | 'silent' | 'refused' | 'unsure';
export const VOTES = ['alive', 'silent', 'refused', 'unsure'] as const satisfies readonly Vote[];
