// The singleton's state as plain data, and the messages its step takes. What has a life of its own
// (the inbox subscription and the records it buffers, the failure detector's monitor and lease
// keeper, timers, the role flag, the state reads are answered from) is the shell's (`shell.ts`).
import type { BusRecord } from '../../cluster/bus.js';
import type { MembershipView } from '../../cluster/membership.js';
import type { DatasetConfig } from '../../core/dataset-config.js';
import type { Evidence } from '../../core/failure-detection/judge.js';
import type { Epoch, NodeId, SubscriberId } from '../../core/ids.js';
import type { AppliedRequest, LoadReport, MapStamp, Member, NodeOperations, NodeReportBody, ShardManagerInput } from '../../core/shard-manager/protocol.js';
import type { ShardManagerState } from '../../core/shard-manager/step.js';
import type { ShardMapSnapshot } from '../../core/shard-map-snapshot.js';
import type { InboxMessage } from '../../protocol/wire.js';
import type { StoredCooldown, StoredSubscriptions } from '../../store/meta-store.js';
import type { SingletonEffect } from './effects.js';

export type ClusterState = Extract<InboxMessage, { kind: 'cluster-state' }>;
export type SetupRequest = Extract<ShardManagerInput, { type: 'SetupDataset' }>;

/** What the MetaStore held at the takeover: what recovery starts from. */
export interface Stored {
  readonly datasets: DatasetConfig[];
  readonly maps: ShardMapSnapshot[];
  readonly cooldowns: StoredCooldown[];
  readonly subscriptions: StoredSubscriptions;
  readonly operations: NodeOperations;
  readonly applied: AppliedRequest[];
}

/** What the step needs of the settings, fixed for a singleton's life. */
export interface SingletonConfig {
  readonly epoch: Epoch;
  /** The id of this singleton's question to the guardians; answers to another are not its. */
  readonly requestId: string;
  readonly recoveryReplyTimeoutMs: number;
  readonly publishIntervalMs: number;
  /** Heartbeat mode: how long a predecessor's grants may still run after the takeover. */
  readonly leaseWaitMs: number;
}

export interface SingletonState {
  readonly config: SingletonConfig;
  readonly phase: 'starting' | 'recovering' | 'active' | 'stopped';
  readonly core: ShardManagerState;
  /** The members the core counts: the group's, less evicted incarnations, with departures held until their lease ran out. */
  readonly view: MembershipView;
  /** The group's view as the membership gave it. */
  readonly groupView: MembershipView;
  /** Heartbeat mode: recovery does not end before a predecessor's node leases have surely run out (§11.7). */
  readonly predecessorLeasesOver: boolean;
  /** The recovery deadline passed while those leases still ran: recovery ends as soon as they do. */
  readonly recoveryDeadlinePassed: boolean;
  /** The records of the `Inbox` message being handled and not handled yet (a decision or a validation is under way). */
  readonly batch: readonly BusRecord[];
  /** The last inbox offset fed to the core; committed once applied. */
  readonly lastOffset: number;
  readonly stored: Stored | undefined;
  /** The stored maps recovery can use, as stamps: guardians send only maps newer than these. */
  readonly storedStamps: readonly MapStamp[];
  readonly answers: ReadonlyMap<NodeId, ClusterState>;
  readonly takeoverAt: number;
  /**
   * Reports read from the inbox and not yet applied. Reports queue up when many nodes report at
   * once (a dataset set up on a thousand nodes, a node starting thousands of shards): applied
   * together, their changes go out as one record per dataset instead of one per report.
   */
  readonly reports: readonly NodeReportBody[];
  /** Load reports read from the inbox batch being handled, decided together at its end. */
  readonly loadReports: readonly LoadReport[];
  /** A `Reports` message is on its way (sent, or waiting for `nextReportsAt`). */
  readonly reportsAsked: boolean;
  /** The next decision on reports waits until then (see `REPORT_DECISION_GAP`). */
  readonly nextReportsAt: number;
  /**
   * Whether this singleton has read its own takeover record back from the inbox. The inbox replays
   * what the last singleton read but had not committed, so a report written before the takeover
   * may be old, already applied, and wrong now (a copy's `IngestionStarted` of a run long over).
   * Such a report was either applied and persisted by a predecessor (its writes are fenced by
   * epoch, so only before this takeover), or never acknowledged, and then its node sends its
   * events again under a new number. So every report before the takeover record is dropped,
   * unacknowledged, whether its node answers the recovery or not (sim seeds 9250, 13878: a dead
   * node's replayed report made a copy Active and removed the Leaving copy that served).
   */
  readonly afterTakeoverRecord: boolean;
  /** How often this singleton wrote its takeover record. */
  readonly takeoverRecordWrites: number;
  /** Reports dropped for being written before the takeover (logged once, when the record is read). */
  readonly reportsBeforeTakeover: number;
  /**
   * While recovering: reports written after the takeover but read before their incarnation's
   * answer to the recovery. The answer, the node's own account given after them, supersedes them,
   * and they are dropped unacknowledged (what one carried that nobody applied, the node sends again
   * under a new number). Reports of nodes that never answer are applied after the recovery.
   */
  readonly beforeAnswer: readonly NodeReportBody[];
  /** `node@incarnation#seq` → the inbox offset of each report read and not acknowledged yet (its ack says it). */
  readonly reportOffsets: ReadonlyMap<string, number>;
  /** Acknowledgements sent so far (each numbered, and every digest says how many, see `AckGate`). */
  readonly acksSent: number;
}

export function initialSingletonState(config: SingletonConfig, core: ShardManagerState): SingletonState {
  return {
    config,
    phase: 'starting',
    core,
    view: { generation: 0, members: [] },
    groupView: { generation: 0, members: [] },
    predecessorLeasesOver: true,
    recoveryDeadlinePassed: false,
    batch: [],
    lastOffset: -1,
    stored: undefined,
    storedStamps: [],
    answers: new Map(),
    takeoverAt: 0,
    reports: [],
    loadReports: [],
    reportsAsked: false,
    nextReportsAt: -Infinity,
    afterTakeoverRecord: false,
    takeoverRecordWrites: 0,
    reportsBeforeTakeover: 0,
    beforeAnswer: [],
    reportOffsets: new Map(),
    acksSent: 0,
  };
}

/**
 * What follows a decision (or a source's validation), as the code after an `await` did: run in
 * order once the decision's effects are performed, each frame possibly deciding again (and then the
 * frames after it wait for that decision in turn).
 */
export type Frame =
  /** Goes on with the records of the `Inbox` message (`batch`). */
  | { readonly k: 'inbox' }
  /** The recovery's decision is performed: the singleton is active. */
  | { readonly k: 'recovered' }
  /** The end of the recovery: the position committed, the recovery logged, the first tick. */
  | { readonly k: 'recoveredTail' }
  /** The subscribers of departed nodes, after a membership decision. */
  | { readonly k: 'departed' }
  /** These subscribers are terminated, one decision each. */
  | { readonly k: 'drop'; readonly ids: readonly SubscriberId[] }
  /** A decision on reports begun at `startedAt` is done: the next waits in proportion. */
  | { readonly k: 'reports'; readonly startedAt: number }
  | { readonly k: 'emit'; readonly effects: readonly SingletonEffect[] };

/** Messages the singleton sends itself, by timer or at once. */
export type TimerMsg =
  | { readonly type: 'PredecessorLeasesOver' }
  | { readonly type: 'RecoveryDeadline' }
  | { readonly type: 'WriteTakeoverRecord' }
  | { readonly type: 'AskGuardians' }
  | { readonly type: 'Reports' }
  | { readonly type: 'Tick' };

/** What the step takes: the actor's messages as the shell hands them over, and the answers of its calls. */
export type StepMsg =
  | TimerMsg
  /** The shell started the role (and, in heartbeat mode, the lease keeper and monitor); `view` is the effective one. */
  | { readonly type: 'Begin'; readonly groupView: MembershipView; readonly view: MembershipView; readonly heartbeat: boolean }
  | { readonly type: 'StoreRead'; readonly stored: Stored }
  | { readonly type: 'InboxStartRead'; readonly startAt: number | undefined }
  /** Up to `INBOX_RECORDS_PER_MESSAGE` records the subscription buffered, oldest first. */
  | { readonly type: 'Inbox'; readonly records: readonly BusRecord[] }
  /** The source's check of a new dataset: `refusal` says why it does not match. */
  | { readonly type: 'Validated'; readonly request: SetupRequest; readonly refusal: string | undefined; readonly then: readonly Frame[] }
  /**
   * A decision, its effects performed: the core's next state, and the acknowledgement bookkeeping
   * its `AckReport`s moved (the ack count, the reports acknowledged).
   */
  | {
      readonly type: 'Decided';
      readonly core: ShardManagerState;
      readonly acksSent: number;
      readonly acked: readonly string[];
      readonly then: readonly Frame[];
    }
  | { readonly type: 'View'; readonly groupView: MembershipView; readonly view: MembershipView }
  | { readonly type: 'CheckCooldowns' }
  | { readonly type: 'LeaseRead'; readonly epoch: Epoch | undefined }
  | { readonly type: 'Evicted'; readonly member: Member; readonly evidence: Evidence; readonly view: MembershipView }
  | { readonly type: 'Departed'; readonly member: Member; readonly view: MembershipView }
  | { readonly type: 'Stop'; readonly reason: string }
  /** The shell stopped the singleton: nothing more is done. */
  | { readonly type: 'Stopped' };
