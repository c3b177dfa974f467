// The guardian's messages (those others send it, and the answers its shell steps back into it) and
// the effects its step returns for the shell to perform, in order. Plain data: a reply function in a
// message is carried through as it came.
import type { BusRecord } from '../../cluster/bus.js';
import type { MembershipView } from '../../cluster/membership.js';
import type { DropCause } from '../../cluster/failure-detector/messages.js';
import type { LeaseVerdict } from '../../cluster/failure-detector/succession.js';
import type { DatasetRef, Epoch, SubscriberId } from '../../core/ids.js';
import type { Result } from '../../core/result.js';
import type { RunningShard, RunningSummary, SubscriberMessage } from '../../core/shard-manager/protocol.js';
import type { ShardManagerState } from '../../core/shard-manager/step.js';
import type { MalformedRecord } from '../../protocol/wire.js';
import type { Request } from '../../protocol/wire.js';
import type { EventsRecord } from '../../protocol/wire-events.js';
import type { Lease } from '../../store/meta-store.js';

export type GuardianMsg =
  | { readonly type: 'Start' }
  | { readonly type: 'View'; readonly view: MembershipView }
  | { readonly type: 'Events'; readonly record: BusRecord }
  | { readonly type: 'Replies'; readonly record: BusRecord }
  | { readonly type: 'SingletonStopped'; readonly epoch: Epoch; readonly reason: string }
  | { readonly type: 'RetryCandidacy' }
  /** Heartbeat mode: look at the singleton lease again (§11.9). */
  | { readonly type: 'WatchLease' }
  /** A `SyncMaps` got no complete answer in time: what is still lacking is asked again. */
  | { readonly type: 'SyncTimeout' }
  | { readonly type: 'GetRunning'; readonly reply: (running: RunningShard[]) => void }
  | { readonly type: 'GetRunningSummary'; readonly listUpTo: number; readonly reply: (summary: RunningSummary) => void }
  | { readonly type: 'GetSingletonState'; readonly reply: (state: ShardManagerState | undefined) => void };

export type ClusterStateRequest = Extract<EventsRecord, { kind: 'cluster-state-request' }>;

/** Heartbeat mode: the lease as the shell's watch judged it (`ObserveLease`). */
export interface LeaseObservation {
  readonly lease: Lease | undefined;
  /** This node's place in line (0: next), undefined when it is not in it. */
  readonly place: number | undefined;
  readonly problem: Extract<DropCause, 'future-epoch' | 'holder-not-member'> | undefined;
  /** The newest epoch this node has seen, the events topic's and the leases'. */
  readonly knownEpoch: number;
  /** The look before this one saw another lease than the one before it. */
  readonly changedBefore: boolean;
  /** What the watch made of it; absent for a row of a future epoch, which is not watched. */
  readonly look?: {
    readonly verdict: LeaseVerdict;
    readonly clockWentBack: boolean;
    /** How long this node must still not stand (ms). */
    readonly backingOffMs: number;
    /** How long the lease was waited out for, this node's place included. */
    readonly waitedMs: number;
  };
}

/** What the step is given: the guardian's messages, a view with whether it lists this node, and the answers of its effects. */
export type GuardianInput =
  | Exclude<GuardianMsg, { type: 'View' }>
  | { readonly type: 'View'; readonly view: MembershipView; readonly member: boolean }
  | { readonly type: 'EventsRead'; readonly record: BusRecord; readonly parsed: Result<EventsRecord, MalformedRecord> }
  /** A local subscriber a message was for is gone. */
  | { readonly type: 'LocalGone'; readonly id: SubscriberId }
  | { readonly type: 'RunningRead'; readonly request: ClusterStateRequest; readonly running: readonly RunningShard[] }
  | { readonly type: 'LeaseRead'; readonly lease: Lease | undefined }
  | { readonly type: 'LeaseReadFailed'; readonly err: unknown }
  | { readonly type: 'LeaseObserved'; readonly observation: LeaseObservation }
  | { readonly type: 'StandLeaseRead'; readonly lease: Lease | undefined }
  | {
      readonly type: 'LeaseTaken';
      /** Undefined: another candidate took it first. */
      readonly lease: Lease | undefined;
      readonly current: Lease | undefined;
      /** Why the lease seen was taken over (heartbeat mode's watch); absent when read to stand. */
      readonly why: string | undefined;
      readonly takenAt: number | undefined;
    }
  | { readonly type: 'CandidacyFailed'; readonly err: unknown }
  /** The node stopped while it stood: no candidacy. */
  | { readonly type: 'CandidacyAbandoned' }
  | { readonly type: 'BackedOff'; readonly why: string; readonly ms: number };

/** An operation on the node's followed maps (the shell's `FollowedMaps`, whose ports do the rest). */
export type MapsOp =
  | { readonly kind: 'want'; readonly all?: boolean; readonly members?: boolean }
  | { readonly kind: 'changes'; readonly record: Extract<EventsRecord, { kind: 'map-changes' }> }
  | { readonly kind: 'snapshot'; readonly record: Extract<EventsRecord, { kind: 'map-snapshot' }> }
  | { readonly kind: 'members'; readonly record: Extract<EventsRecord, { kind: 'members' }> }
  | { readonly kind: 'members-change'; readonly record: Extract<EventsRecord, { kind: 'members-change' }> }
  | { readonly kind: 'digest'; readonly record: Extract<EventsRecord, { kind: 'digest' }> }
  | { readonly kind: 'gone'; readonly dataset: DatasetRef }
  | { readonly kind: 'syncFailed' };

export type LogLevel = 'debug' | 'info' | 'warn';

export type GuardianEffect =
  | { readonly type: 'Log'; readonly level: LogLevel; readonly fields: Readonly<Record<string, unknown>>; readonly msg: string }
  | { readonly type: 'Schedule'; readonly afterMs: number; readonly msg: GuardianMsg; readonly key?: 'watch' }
  | { readonly type: 'CancelTimer'; readonly key: 'watch' }
  /** A timer fired and its message was taken: its handle is spent. */
  | { readonly type: 'TimerFired'; readonly key: 'watch' | 'sync' }
  /** Reads an events record, in slices on a real process; answered by `EventsRead`. */
  | { readonly type: 'ReadEvents'; readonly record: BusRecord }
  | { readonly type: 'SkipMalformed'; readonly record: BusRecord; readonly reason: string }
  /** The singleton was heard from. */
  | { readonly type: 'Heard'; readonly at: number }
  /** Tells the singleton the newest map format this node reads. */
  | { readonly type: 'DeclareMapFormat' }
  | { readonly type: 'Maps'; readonly op: MapsOp }
  /** Delivers to a local subscriber; answered by `LocalGone` if it is not there. */
  | { readonly type: 'DeliverLocal'; readonly id: SubscriberId; readonly message: SubscriberMessage }
  /** A request to the singleton, awaited. */
  | { readonly type: 'Request'; readonly request: Request }
  /** Asks the coordinator what it runs; answered by `RunningRead`. */
  | { readonly type: 'ReadRunning'; readonly request: ClusterStateRequest }
  /** Answers a new singleton's `cluster-state-request` with this node's maps and what it runs. */
  | { readonly type: 'SendClusterState'; readonly request: ClusterStateRequest; readonly running: readonly RunningShard[] }
  | { readonly type: 'StopAll'; readonly reason: string }
  | { readonly type: 'ReporterDigest'; readonly epoch: Epoch; readonly inbox: number | undefined; readonly acksSent: number | undefined }
  | { readonly type: 'ReporterAck'; readonly seq: number }
  | { readonly type: 'ReporterAcknowledged'; readonly epoch: Epoch; readonly passed: number | undefined; readonly ordinal: number | undefined }
  | { readonly type: 'Released' }
  | { readonly type: 'Fenced'; readonly reason: string }
  | { readonly type: 'AskRunning'; readonly reply: (running: RunningShard[]) => void }
  | { readonly type: 'AskRunningSummary'; readonly listUpTo: number; readonly reply: (summary: RunningSummary) => void }
  | { readonly type: 'AskSingletonState'; readonly epoch: Epoch; readonly reply: (state: ShardManagerState | undefined) => void }
  | { readonly type: 'ReplyNoSingleton'; readonly reply: (state: ShardManagerState | undefined) => void }
  | { readonly type: 'SpawnSingleton'; readonly epoch: Epoch }
  | { readonly type: 'SingletonBegin'; readonly epoch: Epoch; readonly view: MembershipView; readonly takenAt: number | undefined }
  | { readonly type: 'SingletonView'; readonly epoch: Epoch; readonly view: MembershipView }
  /** Stops the singleton: at once through its role's flag, then by the message that makes it clean up. */
  | { readonly type: 'StopSingleton'; readonly epoch: Epoch; readonly reason: string }
  /** Heartbeat mode: reads the lease for the watch; answered by `LeaseRead` or `LeaseReadFailed`. */
  | { readonly type: 'ReadLease' }
  /** Heartbeat mode: the watch judges the lease read; answered by `LeaseObserved`. */
  | { readonly type: 'ObserveLease'; readonly lease: Lease | undefined }
  | { readonly type: 'ResetLeaseWatch' }
  /** Reads the lease to stand for it; answered by `StandLeaseRead`, `CandidacyFailed` or `CandidacyAbandoned`. */
  | { readonly type: 'ReadLeaseToStand' }
  /** Takes the lease by compare-and-set on `current` (and `renewal`); answered by `LeaseTaken`, `CandidacyFailed` or `CandidacyAbandoned`. */
  | { readonly type: 'TakeLease'; readonly current: Lease | undefined; readonly renewal: number | undefined; readonly why: string | undefined }
  /** Heartbeat mode: no standing for a while (its length is random); answered by `BackedOff`. */
  | { readonly type: 'BackOff'; readonly why: string }
  | { readonly type: 'Drop'; readonly cause: DropCause; readonly detail: string }
  | { readonly type: 'RetryCounted'; readonly what: string };
