// What the guardian's step holds between two messages: plain data. The objects with a life of their
// own (the followed maps, the lease watch, the children, the timers' handles) are its shell's.
import type { MembershipView } from '../../cluster/membership.js';
import type { Epoch, Incarnation, NodeId, SubscriberId } from '../../core/ids.js';
import { hostPrefix } from '../../protocol/wire.js';

/** What does not change while the guardian runs: who it is and its settings. */
export interface GuardianConfig {
  readonly node: NodeId;
  readonly incarnation: Incarnation;
  /** This node's subscriber ids begin with it. */
  readonly hostPrefix: string;
  /** The guardian's own subscriber id: what the singleton tells the node itself. */
  readonly guardianId: SubscriberId;
  /** Heartbeat mode (a failure detector): the lease, not age, says who holds the singleton's role (§11.9). */
  readonly heartbeat: boolean;
  readonly retryInitialMs: number;
  readonly retryMaxMs: number;
  readonly heartbeatIntervalMs: number;
  readonly singletonLeaseMs: number;
}

export interface GuardianState {
  readonly config: GuardianConfig;
  readonly joined: boolean;
  readonly view: MembershipView | undefined;
  readonly maxEpoch: number;
  /** The newest singleton this node told which map format it reads. */
  readonly formatToldTo: number;
  /** This node's singleton, if it hosts one, and when it started (for the crash backoff). */
  readonly singleton: { readonly epoch: Epoch; readonly startedAt: number } | undefined;
  readonly candidacy: boolean;
  /** Failed attempts to take the lease in a row (the MetaStore is away): they back off. */
  readonly candidacyFailures: number;
  /**
   * Singletons of this node that crashed in a row: standing again after each backs off, up to
   * retryMaxMs. A singleton that ran retryMaxMs before it crashed starts the count over, so a
   * crash next week is not delayed by the crashes of today.
   */
  readonly singletonCrashes: number;
  /** Heartbeat mode: a next look at the lease is scheduled (its handle is the shell's). */
  readonly watchPending: boolean;
  /** The last failure to read the lease was logged; later ones of the same run are not. */
  readonly leaseReadFailing: boolean;
  /** The last lease row read was held by an incarnation the group does not list (counted once per renewal). */
  readonly holderNotMemberSeen: boolean;
}

export function guardianConfig(
  node: NodeId,
  incarnation: Incarnation,
  heartbeat: boolean,
  settings: { readonly retryInitialMs: number; readonly retryMaxMs: number; readonly heartbeatIntervalMs: number; readonly singletonLeaseMs: number },
): GuardianConfig {
  const prefix = hostPrefix(node, incarnation);
  return { node, incarnation, hostPrefix: prefix, guardianId: `${prefix}guardian` as SubscriberId, heartbeat, ...settings };
}

export function initialGuardianState(config: GuardianConfig): GuardianState {
  return {
    config,
    joined: false,
    view: undefined,
    maxEpoch: -1,
    formatToldTo: -1,
    singleton: undefined,
    candidacy: false,
    candidacyFailures: 0,
    singletonCrashes: 0,
    watchPending: false,
    leaseReadFailing: false,
    holderNotMemberSeen: false,
  };
}
