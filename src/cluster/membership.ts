import type { Incarnation, NodeId } from '../core/ids.js';
import type { Member } from '../core/shard-manager/protocol.js';

/** The live members as the membership service sees them, oldest first, with a generation that grows on every change. */
export interface MembershipView {
  readonly generation: number;
  readonly members: readonly Member[];
}

/** What a node says about itself when it joins. The service stamps `joinedAt`. */
export interface JoinRequest {
  readonly node: NodeId;
  readonly incarnation: Incarnation;
  readonly rack?: string;
  readonly address?: string;
  /** Relative capacity for the `balanced` strategy (default 1). */
  readonly weight?: number;
  /** Its failure detector endpoint, in `heartbeat` mode (docs/ARCHITECTURE.md §11.2). */
  readonly detector?: string;
}

/**
 * One node's handle on the cluster membership (a Kafka consumer group in production, an
 * in-memory service in embedded mode). Failure detection is the service's: a member that stops
 * heartbeating is removed after the session timeout, and every handle hears the new view.
 *
 * Gotchas: a node can learn that it is no longer a member (its view lacks it) while it still runs:
 * it must stop everything it does as a member (self-fencing) and join again with a new incarnation.
 */
export interface Membership {
  /** Joins and keeps heartbeating until `leave` (or the process dies). Resolves once the node is in a view. */
  join(self: JoinRequest): Promise<MembershipView>;
  /** Leaves at once: the others see the new view without waiting for the session timeout. */
  leave(): Promise<void>;
  /** The latest view this handle knows. */
  view(): MembershipView;
  /** Called with every new view, in generation order. Returns an unsubscribe function. */
  onChange(listener: (view: MembershipView) => void): () => void;
  /**
   * For how much longer (ms) this member is surely still in the group: until its last acknowledged
   * heartbeat's sending plus the session timeout; undefined when not a member. A duration, so that
   * whoever reads it needs no shared clock. A singleton grants no lease past it (docs/ARCHITECTURE.md §11.9).
   */
  memberForMs?(): number | undefined;
}

/** The oldest member: where the singleton runs. */
export function oldestMember(view: MembershipView): Member | undefined {
  return view.members[0];
}

/** Each view's members by node, made once per view: every node of a process asks of the same view. */
const membersByNode = new WeakMap<MembershipView, ReadonlyMap<NodeId, Incarnation>>();

/** True when `node` with `incarnation` is in the view. */
export function isMember(view: MembershipView, node: NodeId, incarnation: Incarnation): boolean {
  let byNode = membersByNode.get(view);
  if (!byNode) membersByNode.set(view, (byNode = new Map(view.members.map((m) => [m.node, m.incarnation]))));
  return byNode.get(node) === incarnation;
}
