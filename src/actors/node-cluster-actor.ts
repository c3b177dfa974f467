// The singleton: wraps ShardManager.decide, feeds it the inbox, membership and timers, and carries
// out its effects in order (persist, then publish and send, then reply and acknowledge). It
// recovers before it acts (docs/ARCHITECTURE.md §6) and stops at once when a newer epoch fences it.
import type { BusRecord, BusSubscription } from '../cluster/bus.js';
import type { Cancel } from '../cluster/clock.js';
import type { MembershipView } from '../cluster/membership.js';
import type { DatasetConfig } from '../core/dataset-config.js';
import type { DatasetRef, Epoch, Incarnation, NodeId, ReplyTo, SubscriberId } from '../core/ids.js';
import {
  type AppliedRequest,
  type Effect,
  isReadRequest,
  isReadRequestType,
  type MapStamp,
  type Member,
  type NodeOperations,
  type NodeReportBody,
  type RecoveryData,
  type ShardManagerInput,
} from '../core/shard-manager/protocol.js';
import type { Evidence } from '../core/failure-detection/judge.js';
import type { SingletonMonitor } from '../cluster/failure-detector/singleton-monitor.js';
import { SingletonLeaseKeeper } from '../cluster/failure-detector/singleton-lease-keeper.js';
import { leaseWaitMs } from '../cluster/failure-detector/settings.js';
import { ShardManager } from '../core/shard-manager/shard-manager.js';
import type { ShardManagerState } from '../core/shard-manager/step.js';
import { compareStamps, type ShardMapSnapshot } from '../core/shard-map-snapshot.js';
import { FencedError, type StoredCooldown, type StoredSubscriptions } from '../store/meta-store.js';
import { type NodeEnv, skipMalformed, withRetry } from './node-env.js';
import { SingletonRole } from './singleton-role.js';
import { inboxGroup, inboxStart } from './inbox-group.js';
import type { ActorRef } from './runtime.js';
import { isPermanentBusFailure } from '../cluster/bus-failures.js';
import { limitedLog } from './log-limiter.js';
import { MapReaders } from './map-readers.js';
import { runInSlices, runWhole } from '../core/steps.js';
import { encodeRepliesMessage, hostOf, parseInboxMessage, WIRE_FORMAT, type EventsMessage, type InboxMessage, type RepliesMessage } from '../protocol/wire.js';
import { snapshotLabels } from '../protocol/wire-events.js';

export type ClusterMsg =
  /** `takenAt`: when the lease's compare-and-set was sent, on the detector's clock (heartbeat mode). */
  | { readonly type: 'Begin'; readonly view: MembershipView; readonly takenAt?: number }
  /** Heartbeat mode: every lease a predecessor may have granted has run out; recovery may end. */
  | { readonly type: 'PredecessorLeasesOver' }
  /** Handles the inbox records read since (`State.inboxQueue`), a bounded lot per message. */
  | { readonly type: 'Inbox' }
  | { readonly type: 'View'; readonly view: MembershipView }
  | { readonly type: 'Tick' }
  | { readonly type: 'CheckCooldowns' }
  | { readonly type: 'RecoveryDeadline' }
  /** Writes the takeover record into the inbox, and again until it is read back (a record can be lost on the bus). */
  | { readonly type: 'WriteTakeoverRecord' }
  /** Asks the guardians that have not answered yet, again: a question can be lost on the bus. */
  | { readonly type: 'AskGuardians' }
  /** Applies the reports read since the last one, in one decision. */
  | { readonly type: 'Reports' }
  /** The failure detector evicted a member (docs/ARCHITECTURE.md §11.5): its lease has run out. */
  | { readonly type: 'Evicted'; readonly member: Member; readonly evidence: Evidence }
  /** A member the group dropped may now reach the core: its lease has run out (§11.5). */
  | { readonly type: 'Departed'; readonly member: Member }
  | { readonly type: 'Stop'; readonly reason: string }
  /** The singleton's state as it is now (for operators and tests); undefined until recovered. */
  | { readonly type: 'GetState'; readonly reply: (state: ShardManagerState | undefined) => void };

type ClusterState = Extract<InboxMessage, { kind: 'cluster-state' }>;

interface State {
  phase: 'starting' | 'recovering' | 'active' | 'stopped';
  core: ShardManagerState;
  /**
   * The last decided state whose store writes are all done: read requests are answered from it at
   * once, as they arrive, without waiting behind a decision under way (`answerReadAtOnce`).
   * `core` runs ahead of it while a decision's writes are awaited: a read must not show what a
   * successor would not recover. Undefined until recovery has been performed.
   */
  readable: ShardManagerState | undefined;
  /** Which whole-map format each process reads: what a map is written in. */
  readonly mapReaders: MapReaders;
  /** The members the core counts: the group's, less evicted incarnations, with departures held until their lease ran out. */
  view: MembershipView;
  /** The group's view as the membership gave it. */
  groupView: MembershipView;
  /** The failure detector's monitor, in `heartbeat` mode. */
  monitor: SingletonMonitor<Member> | undefined;
  /** Heartbeat mode: renews this singleton's own lease (§11.9). */
  keeper: SingletonLeaseKeeper | undefined;
  /** Heartbeat mode: recovery does not end before a predecessor's node leases have surely run out (§11.7). */
  predecessorLeasesOver: boolean;
  /** The recovery deadline passed while those leases still ran: recovery ends as soon as they do. */
  recoveryDeadlinePassed: boolean;
  inbox: BusSubscription | undefined;
  /** Inbox records read and not handled yet, oldest first. */
  readonly inboxQueue: BusRecord[];
  /** The last inbox offset fed to the core; committed once applied. */
  lastOffset: number;
  /** Commits of the inbox position that failed in a row. */
  commitFailures: number;
  /** When the commit on its way started (the node's clock); undefined when none is. */
  committingSince: number | undefined;
  stored:
    | {
        datasets: DatasetConfig[];
        maps: ShardMapSnapshot[];
        cooldowns: StoredCooldown[];
        subscriptions: StoredSubscriptions;
        operations: NodeOperations;
        applied: AppliedRequest[];
      }
    | undefined;
  /** The stored maps recovery can use, as stamps: guardians send only maps newer than these. */
  storedStamps: MapStamp[];
  readonly answers: Map<NodeId, ClusterState>;
  takeoverAt: number;
  /**
   * Reports read from the inbox and not yet applied. Reports queue up when many nodes report at
   * once (a dataset set up on a thousand nodes, a node starting thousands of shards): applied
   * together, their changes go out as one record per dataset instead of one per report.
   */
  reports: NodeReportBody[];
  /** A `Reports` message is on its way (sent, or waiting for `nextReportsAt`). */
  reportsAsked: boolean;
  /** The next decision on reports waits until then (see `REPORT_DECISION_GAP`). */
  nextReportsAt: number;
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
  afterTakeoverRecord: boolean;
  /** How often this singleton wrote its takeover record. */
  takeoverRecordWrites: number;
  /** Reports dropped for being written before the takeover (logged once, when the record is read). */
  reportsBeforeTakeover: number;
  /**
   * While recovering: reports written after the takeover but read before their incarnation's
   * answer to the recovery. The answer, the node's own account given after them, supersedes them,
   * and they are dropped unacknowledged (what one carried that nobody applied, the node sends again
   * under a new number). Reports of nodes that never answer are applied after the recovery.
   */
  beforeAnswer: NodeReportBody[];
  /** `node@incarnation#seq` → the inbox offset of each report read and not acknowledged yet (its ack says it). */
  readonly reportOffsets: Map<string, number>;
  /** Acknowledgements sent so far (each numbered, and every digest says how many, see `AckGate`). */
  acksSent: number;
  readonly timers: Set<Cancel>;
  readonly checks: Set<number>;
}

export interface SingletonCallbacks {
  /** The singleton stopped (fenced, lost its lease, told to): the guardian forgets it. */
  readonly onStopped: (reason: string) => void;
}

class Fenced extends Error {}

/** A map this large makes a step yield to the event loop after storing or publishing it whole (`yieldAfterLarge`). */
const LARGE_MAP_SHARDS = 8192;

/** Reports applied in one decision at most (each carries up to 500 events). */
const MAX_REPORTS_PER_DECISION = 200;
/** Reports waiting to be applied at most; past it they are dropped unacknowledged. */
const MAX_QUEUED_REPORTS = 10_000;
/**
 * Inbox records handled in one message at most. The actor handles one message per turn of the
 * event loop: one message per record made a request wait a turn for every report read before it
 * (2.7 s behind the reports of 65 536 copies starting on a busy process).
 */
const INBOX_RECORDS_PER_MESSAGE = 256;
/**
 * After a decision on reports that took t ms, the next one waits REPORT_DECISION_GAP × t. A
 * decision costs about the map's size (persisting it, each node applying its changes): reports that
 * pour in (65 536 copies starting) then make a few large decisions instead of one per report that
 * came in meanwhile, and deciding takes at most a quarter of the process's time. A report that
 * comes alone is applied at once.
 */
const REPORT_DECISION_GAP = 3;

/**
 * The stamp of the newest stored map of each dataset whose config the store also holds with the
 * same shard count: the maps recovery will use. A map it would ignore is not listed, so guardians
 * send theirs and recovery sees every candidate it would have seen with full answers.
 */
/** A report as its acknowledgement names it. */
/** Whether each effect writes to the MetaStore (a record of every kind: the compiler asks about a new one). */
const WRITES_STORE: Readonly<Record<Effect['type'], boolean>> = {
  PersistDataset: true,
  DeleteDataset: true,
  PersistShardMap: true,
  PersistCooldown: true,
  PersistSubscriptions: true,
  PersistNodeOperations: true,
  PersistAppliedRequests: true,
  ReleaseNode: false,
  Publish: false,
  PublishChanges: false,
  PublishSnapshot: false,
  PublishMembers: false,
  PublishMembersChange: false,
  PublishDigest: false,
  FenceNode: false,
  Reply: false,
  AckReport: false,
  ScheduleCheck: false,
  Notice: false,
};

/** A cheap look at a raw inbox record, before it is parsed: a read request? */
function looksLikeRead(value: unknown): boolean {
  if (typeof value !== 'object' || value === null || (value as { kind?: unknown }).kind !== 'request') return false;
  const request = (value as { request?: unknown }).request;
  return typeof request === 'object' && request !== null && isReadRequestType(String((request as { type?: unknown }).type));
}

const reportKey = (node: NodeId, incarnation: Incarnation, seq: number): string => `${node}@${incarnation}#${seq}`;

function usableStamps(datasets: readonly DatasetConfig[], maps: readonly ShardMapSnapshot[]): MapStamp[] {
  const numShards = new Map(datasets.map((c) => [c.ref, c.numShards] as const));
  const newest = new Map<DatasetRef, ShardMapSnapshot>();
  for (const m of maps) {
    if (numShards.get(m.dataset) !== m.numShards) continue;
    const seen = newest.get(m.dataset);
    if (!seen || compareStamps(m, seen) > 0) newest.set(m.dataset, m);
  }
  return [...newest.values()].map((m) => ({ dataset: m.dataset, numShards: m.numShards, epoch: m.epoch, version: m.version }));
}

export function spawnNodeClusterActor(env: NodeEnv, parent: ActorRef<unknown>, epoch: Epoch, callbacks: SingletonCallbacks): ActorRef<ClusterMsg> {
  const manager = new ShardManager({
    reassignmentCooldownMs: env.settings.reassignmentCooldownMs,
    maxMapBytes: env.settings.maxMapBytes,
    settleWindowMs: env.settings.settleWindowMs,
  });
  const log = env.log.child({ singleton: epoch });
  const requestId = `recovery-${epoch}-${env.node}`;
  const later = (s: State, ms: number, fn: () => void) => {
    const cancel = env.clock.schedule(ms, () => {
      s.timers.delete(cancel);
      fn();
    });
    s.timers.add(cancel);
  };

  /**
   * Whether this singleton may still act, and the stop when it may not. Read before every effect and
   * every store call; set synchronously by whatever decides the stop (the lease keeper's timer, the
   * guardian), never by a message, which would wait behind a store call that hangs (§11.9).
   */
  const role = env.singletonRole ?? new SingletonRole();
  /** The lease keeper, once started: its lease, counted on the local clock, must still run. */
  let keeper: SingletonLeaseKeeper | undefined;
  const stopReason = (): string | undefined => {
    const stopped = role.stoppedBecause(epoch);
    if (stopped !== undefined) return stopped;
    if (!role.acting(epoch)) return 'another singleton acts on this node';
    if (keeper && keeper.remainingMs() <= 0) return `the singleton lease ran out: not renewed within ${env.settings.failureDetector.singletonLeaseMs} ms`;
    return undefined;
  };
  /** Throws `Fenced` (the singleton stops) when it may not act any more. */
  const mustAct = (what: string) => {
    const reason = stopReason();
    if (reason !== undefined) throw new Fenced(`${reason} (before ${what})`);
  };
  /** `withRetry` that gives up as soon as the singleton may not act: no attempt starts after its stop. */
  const retrying = <T>(what: string, op: () => Promise<T>) =>
    withRetry(env, what, () => {
      mustAct(what);
      return op();
    });

  const produceEvents = (m: EventsMessage) => {
    // A whole map says what it is in its labels: a node that has it passes it over unread.
    const labels = m.kind === 'map-snapshot' ? snapshotLabels(m) : undefined;
    return env.bus.produce(env.topics.events, m, labels ? { labels } : {});
  };
  const produceReplies = (m: RepliesMessage) => env.bus.produce(env.topics.replies, encodeRepliesMessage(m));

  /** Runs one store write; a fencing error means another singleton took over. */
  const persist = async (what: string, op: () => Promise<void>) => {
    try {
      await retrying(what, op);
    } catch (e) {
      if (e instanceof FencedError) throw new Fenced(e.message);
      throw e;
    }
  };

  /**
   * Hands a record to the bus without waiting for it: a failure is logged and counted, never a
   * crash of the singleton (each record is repaired by design: see `perform`).
   */
  function sendLater(what: string, sending: Promise<unknown>): void {
    void sending.catch((e: unknown) => {
      if (!isPermanentBusFailure(e)) {
        log.warn({ event: 'bus.send-failed', err: e, what }, 'a record of the singleton was not sent; a resend, a sync or the digest repairs it');
      } else if (env.problems.note('bus.record-refused', what, `a ${what} record of the singleton cannot be sent: ${(e as Error).message}`)) {
        log.error(
          { event: 'bus.record-refused', err: e, what },
          'a record of the singleton can never be sent (too large for the bus): it is dropped, and this is said once per kind of record',
        );
      }
      env.telemetry.busError('produce');
    });
  }

  /**
   * Carries out one decision's effects. Its store writes are awaited, in order, before anything is
   * sent (a map is persisted before anyone hears of it). Its records (changes, snapshots, members,
   * digests, replies, acks) are handed to the bus, which appends them in call order, and not
   * awaited: the next message is handled while they are on their way, so slow appends (a broker
   * that answers late) never hold back the next decision or the digest. A record that fails for a
   * while is logged; nothing is lost for good by it, as every one is repaired by design (a node
   * that misses changes sees a gap or the next digest and asks, a node resends an unacknowledged
   * report, a requester asks again and a replayed request is answered as the first time). A record
   * the bus can never carry (too large for its limits) is an error, said once per kind of record
   * and counted, and shown on the node's /status: retrying it would never help.
   */
  /**
   * After an effect on a large map, the rest of the step waits for a turn of the event loop. With
   * the in-memory MetaStore and bus (the embedded mode) nothing in a step yields: deciding on a
   * 65 536-shard map, storing it, encoding and handing it to the bus, and the nodes decoding it were
   * one task of about 200 ms, and every request on the process waited behind it (issue 34). A real
   * store or bus yields at each call anyway; maps of simulated worlds are far smaller.
   */
  async function yieldAfterLarge(numShards: number): Promise<void> {
    if (numShards >= LARGE_MAP_SHARDS) await new Promise((resolve) => setImmediate(resolve));
  }

  async function perform(s: State, effects: readonly Effect[], before: ShardManagerState): Promise<void> {
    const configOf = (ref: DatasetRef): DatasetConfig => (s.core.datasets.get(ref) ?? before.datasets.get(ref))!.config;
    const queueEvent = (m: EventsMessage) => sendLater(m.kind, produceEvents(m));
    const queueReply = (m: RepliesMessage) => sendLater(m.kind, produceReplies(m));
    // Past its last store write, what the decision made is stored: reads may see it.
    const stored = effects.findLastIndex((e) => WRITES_STORE[e.type]);
    for (const [i, e] of effects.entries()) {
      // A singleton that lost its role meanwhile (a store call hung past its lease) does nothing more.
      mustAct(e.type);
      if (i > stored) makeReadable(s);
      switch (e.type) {
        case 'PersistDataset':
          await persist('writing a dataset', () => env.metaStore.putDataset(e.config, epoch));
          break;
        case 'DeleteDataset':
          await persist('deleting a dataset', () => env.metaStore.deleteDataset(e.dataset, epoch));
          break;
        case 'PersistShardMap':
          await persist('writing a shard map', () => env.metaStore.putShardMap(e.snapshot));
          await yieldAfterLarge(e.snapshot.numShards);
          break;
        case 'PersistSubscriptions':
          await persist('writing the subscriptions', () => env.metaStore.putSubscriptions({ subscriptions: e.subscriptions, watchers: e.watchers }, epoch));
          break;
        case 'PersistNodeOperations':
          await persist('writing the node operations', () => env.metaStore.putNodeOperations(e.operations, epoch));
          break;
        case 'PersistAppliedRequests':
          await persist('writing the applied requests', () => env.metaStore.putAppliedRequests(e.applied, epoch));
          break;
        case 'ReleaseNode':
          queueEvent({ format: WIRE_FORMAT, kind: 'release', epoch, node: e.node, incarnation: e.incarnation });
          break;
        case 'PersistCooldown':
          await persist('writing a cooldown', () => env.metaStore.putCooldown({ dataset: e.dataset, shard: e.shard, reassignedAt: e.reassignedAt }, epoch));
          break;
        case 'Publish':
          queueEvent({ format: WIRE_FORMAT, kind: 'publish', epoch, to: e.to, message: e.message });
          break;
        case 'PublishChanges':
          queueEvent({
            format: WIRE_FORMAT,
            kind: 'map-changes',
            epoch,
            dataset: e.dataset,
            numShards: e.numShards,
            base: e.base,
            changes: s.mapReaders.encodeChanges(e.events, e.to, s.view.members),
            members: e.members,
          });
          break;
        case 'PublishSnapshot': {
          const { dataset, numShards, version } = e.snapshot;
          // Packed in slices on a real process: a joiner's map of 65 536 × 3 was 100 ms and more of the singleton's loop.
          const encoding = s.mapReaders.encoding(e.snapshot, e.to, s.view.members);
          const snapshot = env.slicePause ? await runInSlices(encoding, env.slicePause) : runWhole(encoding);
          queueEvent({
            format: WIRE_FORMAT,
            kind: 'map-snapshot',
            epoch,
            dataset,
            numShards,
            version,
            to: e.to,
            config: configOf(dataset),
            snapshot,
            members: e.members,
          });
          await yieldAfterLarge(numShards);
          break;
        }
        case 'PublishMembers':
          queueEvent({ format: WIRE_FORMAT, kind: 'members', epoch, version: e.version, members: e.members });
          break;
        case 'PublishMembersChange':
          queueEvent({ format: WIRE_FORMAT, kind: 'members-change', epoch, version: e.version, joined: e.joined, left: e.left });
          break;
        case 'PublishDigest':
          queueEvent({
            format: WIRE_FORMAT,
            kind: 'digest',
            epoch,
            members: e.members,
            maps: e.maps.map(({ dataset, numShards, version }) => ({ dataset, numShards, version })),
            inbox: appliedInbox(s),
            acksSent: s.acksSent,
          });
          break;
        case 'FenceNode':
          queueEvent({ format: WIRE_FORMAT, kind: 'fence', epoch, node: e.node, incarnation: e.incarnation, reason: e.reason });
          break;
        case 'Reply':
          queueReply(replyRecord(e));
          break;
        case 'AckReport':
          {
            const key = reportKey(e.node, e.incarnation, e.seq);
            const inbox = s.reportOffsets.get(key);
            s.reportOffsets.delete(key);
            queueReply({
              format: WIRE_FORMAT,
              kind: 'ack',
              epoch,
              node: e.node,
              incarnation: e.incarnation,
              seq: e.seq,
              ...(inbox === undefined ? {} : { inbox }),
              ordinal: ++s.acksSent,
            });
          }
          break;
        case 'ScheduleCheck':
          if (!s.checks.has(e.at)) {
            s.checks.add(e.at);
            later(s, Math.max(0, e.at - env.clock.now()), () => {
              s.checks.delete(e.at);
              env.runtime.send(self, { type: 'CheckCooldowns' });
            });
          }
          break;
        case 'Notice': {
          // The notice's node is who it is about; the logger's own `node` field is who logs it.
          const { name, level, message, node, ...fields } = e.notice;
          env.telemetry.notice(name, e.notice.dataset, e.notice.lot?.count ?? 1);
          const member = node === undefined ? {} : { member: node };
          if (name !== 'report.rejected') {
            log[level]({ event: name, ...fields, ...member }, message);
            break;
          }
          // A flood of refused reports (a node acting on an old map, replays) is one line per
          // member and 10 s, and one more counting the others; each is counted in the metrics.
          limitedLog(log, env.clock, `${name} ${node ?? ''}`, (more) =>
            more === 0
              ? log[level]({ event: name, ...fields, ...member }, message)
              : log[level]({ event: name, ...member, refused: more }, `${more} more report event(s) of ${node ?? 'a node'} refused in the last 10 s`),
          );
          break;
        }
      }
    }
    makeReadable(s);
  }

  /** What the singleton decided is stored: its reads and the node's /status may show it. */
  function makeReadable(s: State): void {
    if (s.readable === s.core) return;
    s.readable = s.core;
    role.show(epoch, s.core);
  }

  function replyRecord(e: Extract<Effect, { type: 'Reply' }>): RepliesMessage {
    // An operator looking at the cluster sees what failed for good on the singleton's node.
    const reply = e.reply.type === 'ClusterDescription' ? { ...e.reply, problems: env.problems.list() } : e.reply;
    return { format: WIRE_FORMAT, kind: 'reply', epoch, to: e.to, reply };
  }

  /**
   * Answers a read request (a map, the datasets, the node operations, the cluster's description)
   * as soon as the bus hands it over, from the last state whose writes are done: a read waited
   * behind the decision under way, seconds for a 65 536-shard setup, and every operator route with
   * it (issue 34). A read sees every change acknowledged before it was sent (a change is answered
   * only after its state is readable); it may not see a change still being decided, which has
   * answered nobody yet. Not taken from the inbox's order, it is not part of the position
   * committed: a replay after a failover answers it again, which is harmless.
   */
  function answerReadAtOnce(s: State, record: BusRecord): boolean {
    if (s.phase !== 'active' || s.readable === undefined || !looksLikeRead(record.value) || stopReason() !== undefined) return false;
    const parsed = parseInboxMessage(record.value);
    if (!parsed.ok || parsed.value.kind !== 'request' || !isReadRequest(parsed.value.request)) return false;
    for (const e of manager.answer(s.readable, parsed.value.request, env.clock.now())) {
      if (e.type === 'Reply') sendLater('reply', produceReplies(replyRecord(e)));
    }
    return true;
  }

  /**
   * One decision, in slices on a real process (a join wave's round at 65 536 × 3 is 100–250 ms of
   * work): the event loop gets its turns meanwhile, for the node's own copies, its heartbeats and
   * its HTTP routes. This actor's mailbox waits, so nothing else decides on the same state.
   */
  async function decide(s: State, input: ShardManagerInput): Promise<void> {
    mustAct(input.type);
    const before = s.core;
    const steps = manager.decideInSteps(before, input, env.clock.now());
    const d = env.slicePause ? await runInSlices(steps, env.slicePause) : runWhole(steps);
    // The role may have been lost while the decision was being made: nothing of it is performed.
    mustAct(input.type);
    s.core = d.state;
    await perform(s, d.effects, before);
  }

  /**
   * Commits the inbox up to what was applied. Only right after recovery and after each lease check
   * (every publish interval), never per message: a replaced singleton that resumes must not move
   * the group's position past records the new one has not applied. Replaying a few records after a
   * failover is harmless (reports are idempotent, requests are answered again).
   */
  function commit(s: State): void {
    mustAct('committing the inbox');
    if (!s.inbox || s.lastOffset < 0) return;
    // Not awaited: a commit that hangs (seen for two minutes after a broker was frozen and came
    // back) must not hold the mailbox, and a failed one costs a longer replay after a failover,
    // nothing else: the next tick commits again. Crashing on it (a Kafka rebalance answers "the
    // coordinator is not aware of this member" until the consumer has rejoined) made the
    // singleton crash-loop. One at a time, unless the one on its way has hung for two ticks.
    const now = env.clock.now();
    if (s.committingSince !== undefined && now - s.committingSince < 2 * env.settings.publishIntervalMs) return;
    const offset = s.lastOffset + 1;
    const since = now;
    s.committingSince = since;
    s.inbox
      .commit(offset)
      .then(
        () => {
          if (s.commitFailures > 0)
            log.info(
              { event: 'inbox.commit-recovered', failures: s.commitFailures },
              `the inbox position is committed again, after ${s.commitFailures} failed commit(s)`,
            );
          s.commitFailures = 0;
        },
        (e: unknown) => {
          s.commitFailures += 1;
          const fields = { event: 'inbox.commit-failed', err: e, failures: s.commitFailures, offset };
          if (s.commitFailures === 1) log.warn(fields, 'committing the inbox position failed: the singleton goes on and commits again at its next tick');
          else log.debug(fields, 'committing the inbox position failed again');
        },
      )
      .finally(() => {
        if (s.committingSince === since) s.committingSince = undefined;
      });
  }

  /**
   * Subscribers hosted by a node incarnation that is no longer a member are gone with it (nact has
   * no remote deathwatch): after every membership change, and after recovery, which may inherit
   * the subscriptions of nodes that died with the old singleton.
   */
  async function dropSubscribersOfDepartedNodes(s: State): Promise<void> {
    const members = new Set(s.view.members.map((m) => `${m.node}@${m.incarnation}`));
    const all = new Set<SubscriberId>([...s.core.subscriptions.watcherList(), ...s.core.subscriptions.toList().flatMap((x) => x.subscribers)]);
    for (const id of all) {
      const host = hostOf(id);
      if (host && !members.has(`${host.node}@${host.incarnation}`)) await decide(s, { type: 'SubscriberTerminated', subscriber: id });
    }
  }

  async function finishRecovery(s: State): Promise<void> {
    const answers = [...s.answers.values()];
    const data: RecoveryData = {
      epoch,
      datasets: s.stored!.datasets,
      maps: [...s.stored!.maps, ...answers.flatMap((a) => a.maps)],
      subscriptions: [...s.stored!.subscriptions.subscriptions, ...answers.flatMap((a) => a.subscriptions)],
      watchers: [...s.stored!.subscriptions.watchers, ...answers.flatMap((a) => a.watchers)],
      cooldowns: s.stored!.cooldowns,
      operations: s.stored!.operations,
      applied: s.stored!.applied,
      members: s.view.members,
      running: answers.map((a) => ({ node: a.node, incarnation: a.incarnation, shards: a.running })),
    };
    await decide(s, { type: 'Recover', recovery: data });
    s.phase = 'active';
    // Reports of nodes that did not answer in time: applied now, as any report.
    queueReports(s, s.beforeAnswer.splice(0));
    await dropSubscribersOfDepartedNodes(s);
    commit(s);
    // guardianMaps: maps the guardians had newer than the MetaStore's (or of datasets it lacks); normally 0.
    const guardianMaps = answers.reduce((n, a) => n + a.maps.length, 0);
    const recoveryMs = env.clock.now() - s.takeoverAt;
    env.telemetry.singletonRecovered(recoveryMs);
    log.info({ event: 'singleton.takeover', epoch, recoveryMs, answered: answers.length, members: s.view.members.length, guardianMaps }, 'singleton active');
    later(s, env.settings.publishIntervalMs, () => env.runtime.send(self, { type: 'Tick' }));
  }

  /**
   * The inbox offset before which every report was applied or dropped: the first report still
   * waiting (to be applied, or for its node's answer to the recovery), else past the last record read.
   */
  function appliedInbox(s: State): number {
    let first = s.lastOffset + 1;
    for (const r of [s.reports[0], s.beforeAnswer[0]]) {
      const offset = r && s.reportOffsets.get(reportKey(r.node, r.incarnation, r.seq));
      if (offset !== undefined) first = Math.min(first, offset);
    }
    return first;
  }

  /** Queues reports to apply together, and asks for them to be applied if none were queued. */
  function queueReports(s: State, reports: readonly NodeReportBody[]): void {
    if (reports.length === 0) return;
    // Bounded: past it a report is dropped unacknowledged (its node sends it again), so a flood
    // of reports cannot grow the singleton's memory without end.
    const room = MAX_QUEUED_REPORTS - s.reports.length;
    if (room < reports.length) {
      for (let i = Math.max(0, room); i < reports.length; i++) {
        limitedLog(log, env.clock, 'reports.dropped', (more) =>
          log.warn(
            { event: 'reports.dropped', reports: more || 1, queued: s.reports.length },
            `${more || 1} report(s) dropped unacknowledged: ${MAX_QUEUED_REPORTS} wait to be applied already; their nodes send them again`,
          ),
        );
      }
      for (const r of reports.slice(Math.max(0, room))) s.reportOffsets.delete(reportKey(r.node, r.incarnation, r.seq));
      reports = reports.slice(0, Math.max(0, room));
      if (reports.length === 0) return;
    }
    s.reports.push(...reports);
    askToApplyReports(s);
  }

  function askToApplyReports(s: State): void {
    if (s.reportsAsked) return;
    s.reportsAsked = true;
    const wait = s.nextReportsAt - env.clock.now();
    if (wait <= 0) env.runtime.send(self, { type: 'Reports' });
    else later(s, wait, () => env.runtime.send(self, { type: 'Reports' }));
  }

  function allAnswered(s: State): boolean {
    return s.predecessorLeasesOver && s.view.members.every((m) => s.answers.get(m.node)?.incarnation === m.incarnation);
  }

  async function onInbox(s: State, record: BusRecord): Promise<void> {
    s.lastOffset = record.offset;
    const parsed = parseInboxMessage(record.value);
    if (!parsed.ok) {
      skipMalformed({ log, telemetry: env.telemetry }, record, parsed.error.reason);
      return;
    }
    const m = parsed.value;
    if (m.kind === 'invalid-setup') {
      mustAct('a reply');
      sendLater('reply', produceReplies({ format: WIRE_FORMAT, kind: 'reply', epoch, to: m.replyTo, reply: { type: 'BadSchema', message: m.message } }));
    } else if (m.kind === 'takeover') {
      if (m.epoch !== epoch) return; // a predecessor's: what follows it is still from before this takeover
      s.afterTakeoverRecord = true;
      if (s.reportsBeforeTakeover > 0) {
        log.info(
          { event: 'recovery.reports-before-takeover', reports: s.reportsBeforeTakeover },
          `${s.reportsBeforeTakeover} report(s) written before this singleton took over were dropped: a predecessor applied them, or their nodes send their events again`,
        );
      }
      return;
    } else if (m.kind === 'cluster-state') {
      if (s.phase === 'recovering' && m.requestId === requestId) {
        s.answers.set(m.node, m);
        s.mapReaders.heardFromNode(m.node, m.incarnation, m.mapFormat);
        const kept = s.beforeAnswer.filter((r) => r.node !== m.node || r.incarnation !== m.incarnation);
        for (const r of s.beforeAnswer) if (!kept.includes(r)) s.reportOffsets.delete(reportKey(r.node, r.incarnation, r.seq));
        const superseded = s.beforeAnswer.length - kept.length;
        s.beforeAnswer = kept;
        if (superseded > 0) {
          log.info(
            { event: 'recovery.reports-superseded', member: m.node, reports: superseded },
            `${superseded} report(s) of ${m.node} read before its answer to the recovery were dropped: its answer gives its state after them`,
          );
        }
        if (allAnswered(s)) await finishRecovery(s);
      }
      return; // answers are not inputs: committing them is the recovery's job
    } else if (
      m.kind === 'request' &&
      m.request.type === 'SetupDataset' &&
      !s.core.datasets.has(m.request.config.ref) &&
      !(await sourceAccepts(m.request.config, m.request.replyTo))
    ) {
      return;
    } else {
      if (m.kind === 'report') {
        if (!s.afterTakeoverRecord) {
          s.reportsBeforeTakeover++;
          return;
        }
        const report = { node: m.node, incarnation: m.incarnation, seq: m.seq, events: m.events };
        s.reportOffsets.set(reportKey(m.node, m.incarnation, m.seq), record.offset);
        if (s.phase === 'recovering' && s.answers.get(m.node)?.incarnation !== m.incarnation) {
          s.beforeAnswer.push(report);
          return;
        }
        queueReports(s, [report]);
        return;
      }
      if (m.request.type === 'SyncMaps' || m.request.type === 'Subscribe') s.mapReaders.heard(m.request.subscriber, m.request.mapFormat);
      await decide(s, m.request);
    }
  }

  /**
   * A new dataset must be readable before it is accepted: with Kafka, its topic must exist with
   * exactly numShards partitions. A refusal is a `BadData` reply saying why; nothing is stored.
   * A dataset that exists already is not checked: the core answers it exists, or conflicts,
   * without its source. Checking it asked the broker for every setup request a new singleton
   * replays from the inbox after a failover, and a broker that was frozen and came back can leave
   * such a request hanging for minutes, the singleton answering nothing meanwhile (the
   * broker-faults test saw it: no singleton for two minutes after a SIGSTOP and SIGCONT).
   */
  async function sourceAccepts(config: DatasetConfig, replyTo: ReplyTo): Promise<boolean> {
    if (!env.source.validate) return true;
    try {
      await env.source.validate(config);
      return true;
    } catch (e) {
      const message = e instanceof Error ? e.message : String(e);
      log.warn({ event: 'dataset.refused', dataset: config.ref, reason: message }, 'dataset refused: its source does not match');
      mustAct('a reply');
      sendLater('reply', produceReplies({ format: WIRE_FORMAT, kind: 'reply', epoch, to: replyTo, reply: { type: 'BadData', message } }));
      return false;
    }
  }

  /** The members the core counts, from the group's view and the detector's verdicts. */
  function effectiveView(s: State): MembershipView {
    return s.monitor ? { generation: s.groupView.generation, members: s.monitor.effective(s.groupView.members) } : s.groupView;
  }

  /** A member left the core's view by the detector's doing (an eviction, a departure let through). */
  async function detectorChanged(s: State, input: ShardManagerInput | undefined): Promise<void> {
    s.view = effectiveView(s);
    if (s.phase === 'recovering') {
      if (allAnswered(s)) await finishRecovery(s);
      return;
    }
    if (s.phase !== 'active') return;
    await decide(s, input ?? { type: 'MembershipView', members: s.view.members });
    await dropSubscribersOfDepartedNodes(s);
  }

  /**
   * What stops at once, without the actor: the role's flag, grants and judging, the timers, and the
   * guardian is told (it may watch for a successor again). Called on the keeper's timer while the
   * actor may be blocked; `stopSelf` does it too, and the rest.
   */
  let stopReported = false;
  function stopNow(s: State, reason: string): void {
    role.stop(epoch, reason);
    s.monitor?.stop();
    s.keeper?.stop();
    for (const cancel of s.timers) cancel();
    s.timers.clear();
    if (!stopReported) {
      stopReported = true;
      log.warn({ event: 'singleton.stopped', reason }, 'singleton stopped');
      callbacks.onStopped(reason);
    }
  }

  async function stopSelf(s: State, reason: string): Promise<void> {
    if (s.phase === 'stopped') return;
    s.phase = 'stopped';
    stopNow(s, reason);
    await s.inbox?.close().catch(() => undefined);
    env.runtime.stop(self);
  }

  const initialState: State = {
    phase: 'starting',
    core: manager.initialState(),
    readable: undefined,
    mapReaders: new MapReaders(),
    view: { generation: 0, members: [] },
    groupView: { generation: 0, members: [] },
    monitor: undefined,
    keeper: undefined,
    predecessorLeasesOver: true,
    recoveryDeadlinePassed: false,
    inbox: undefined,
    inboxQueue: [],
    lastOffset: -1,
    commitFailures: 0,
    committingSince: undefined,
    stored: undefined,
    storedStamps: [],
    answers: new Map(),
    takeoverAt: 0,
    reports: [],
    reportsAsked: false,
    nextReportsAt: -Infinity,
    afterTakeoverRecord: false,
    takeoverRecordWrites: 0,
    reportsBeforeTakeover: 0,
    beforeAnswer: [],
    reportOffsets: new Map(),
    acksSent: 0,
    timers: new Set(),
    checks: new Set(),
  };

  const self: ActorRef<ClusterMsg> = env.runtime.spawn<State, ClusterMsg>(
    parent,
    `singleton-${epoch}`,
    async (s, msg, ctx) => {
      if (s.phase === 'stopped') return s;
      try {
        switch (msg.type) {
          case 'Begin': {
            s.takeoverAt = env.clock.now();
            role.begin(epoch, (reason) => {
              stopNow(s, reason);
              env.runtime.send(ctx.self, { type: 'Stop', reason });
            });
            s.groupView = msg.view;
            const detector = env.detector;
            if (detector) {
              keeper = new SingletonLeaseKeeper({
                store: env.lease,
                epoch,
                settings: env.settings.failureDetector,
                clock: detector.clock,
                log,
                takenAt: msg.takenAt ?? detector.clock.now(),
                hearsMajority: () => s.monitor?.hearsMajority() ?? true,
                // On the keeper's timer, not through the mailbox: the actor may be blocked on the store.
                onLost: (reason) => {
                  stopNow(s, reason);
                  env.runtime.send(ctx.self, { type: 'Stop', reason });
                },
              });
              const k = keeper;
              s.keeper = k;
              s.monitor = detector.hostSingleton(msg.view.members, {
                epoch,
                leaseForMs: () => k.remainingMs(),
                onEvict: (member, evidence) => env.runtime.send(ctx.self, { type: 'Evicted', member, evidence }),
                onDepart: (member) => env.runtime.send(ctx.self, { type: 'Departed', member }),
              });
              k.start();
              // A predecessor's grants may still run (it cannot be asked): nothing moves before they end.
              s.predecessorLeasesOver = false;
              later(s, leaseWaitMs(env.settings.failureDetector), () => env.runtime.send(ctx.self, { type: 'PredecessorLeasesOver' }));
            }
            s.view = effectiveView(s);
            log.info({ event: 'singleton.takeover', epoch }, 'singleton lease taken: recovering');
            s.stored = {
              datasets: await retrying('reading datasets', () => env.metaStore.datasets()),
              maps: await retrying('reading shard maps', () => env.metaStore.shardMaps()),
              cooldowns: await retrying('reading cooldowns', () => env.metaStore.cooldowns()),
              subscriptions: await retrying('reading subscriptions', () => env.metaStore.subscriptions()),
              operations: await retrying('reading node operations', () => env.metaStore.nodeOperations()),
              applied: await retrying('reading the applied requests', () => env.metaStore.appliedRequests()),
            };
            s.storedStamps = usableStamps(s.stored.datasets, s.stored.maps);
            s.phase = 'recovering';
            const inbox = env.topics.inbox;
            const startAt = await retrying('reading the inbox position', () => inboxStart(env.bus, inbox, epoch));
            s.inbox = await env.bus.subscribe(
              inbox,
              inboxGroup(inbox, epoch),
              (record) => {
                if (answerReadAtOnce(s, record)) return;
                if (s.inboxQueue.push(record) === 1) env.runtime.send(ctx.self, { type: 'Inbox' });
              },
              {
                start: 'earliest',
                ...(startAt === undefined ? {} : { startAt }),
                onError: (e, r) => log.error({ err: e, offset: r.offset }, 'inbox record not handled'),
              },
            );
            // This group holds the position from now on, even if this singleton dies before it applies anything.
            if (startAt !== undefined) await retrying('committing the inbox position', () => s.inbox!.commit(startAt));
            later(s, env.settings.recoveryReplyTimeoutMs, () => env.runtime.send(ctx.self, { type: 'RecoveryDeadline' }));
            // Handed to the bus before the guardians are asked (an answer that still comes before it
            // is taken all the same: only reports are dropped before it).
            env.runtime.send(ctx.self, { type: 'WriteTakeoverRecord' });
            env.runtime.send(ctx.self, { type: 'AskGuardians' });
            return s;
          }
          case 'WriteTakeoverRecord':
            if (s.afterTakeoverRecord) return s;
            if (s.takeoverRecordWrites > 0)
              log.warn(
                { event: 'recovery.takeover-record-again', writes: s.takeoverRecordWrites },
                `the takeover record was not read back within ${env.settings.recoveryReplyTimeoutMs} ms: written again (no report is applied before it is read)`,
              );
            // Not awaited: a produce that hangs (a broker frozen, then back) must not hold the mailbox,
            // the recovery's deadline among it. Written again on the timer until read back.
            mustAct('writing the takeover record');
            sendLater('takeover', env.bus.produce(env.topics.inbox, { format: WIRE_FORMAT, kind: 'takeover', epoch } satisfies InboxMessage));
            s.takeoverRecordWrites++;
            later(s, env.settings.recoveryReplyTimeoutMs, () => env.runtime.send(ctx.self, { type: 'WriteTakeoverRecord' }));
            return s;
          case 'AskGuardians':
            if (s.phase !== 'recovering') return s;
            mustAct('asking the guardians');
            // Asked again on the timer whatever the bus does: a question lost or not sent is asked again.
            sendLater('cluster-state-request', produceEvents({ format: WIRE_FORMAT, kind: 'cluster-state-request', epoch, requestId, stored: s.storedStamps }));
            later(s, Math.max(1, Math.floor(env.settings.recoveryReplyTimeoutMs / 4)), () => env.runtime.send(ctx.self, { type: 'AskGuardians' }));
            return s;
          case 'PredecessorLeasesOver':
            s.predecessorLeasesOver = true;
            if (s.phase !== 'recovering') return s;
            if (s.recoveryDeadlinePassed) env.runtime.send(ctx.self, { type: 'RecoveryDeadline' });
            else if (allAnswered(s)) await finishRecovery(s);
            return s;
          case 'RecoveryDeadline':
            if (s.phase === 'recovering' && !s.predecessorLeasesOver) {
              s.recoveryDeadlinePassed = true;
              return s;
            }
            if (s.phase === 'recovering') {
              const missing = s.view.members.filter((m) => !s.answers.has(m.node)).map((m) => m.node);
              log.warn({ missing }, 'recovery goes on without the guardians that did not answer in time');
              await finishRecovery(s);
            }
            return s;
          case 'Inbox': {
            const records = s.inboxQueue.splice(0, INBOX_RECORDS_PER_MESSAGE);
            for (const record of records) {
              await onInbox(s, record);
              // Stopped by one of them (a lost lease): the rest is a successor's.
              if ((s.phase as State['phase']) === 'stopped') return s;
            }
            if (s.inboxQueue.length > 0) env.runtime.send(ctx.self, { type: 'Inbox' });
            return s;
          }
          case 'Reports': {
            // A bounded lot per decision: a backlog is applied in slices, other messages in between.
            s.reportsAsked = false;
            const reports = s.reports.splice(0, MAX_REPORTS_PER_DECISION);
            const startedAt = env.clock.now();
            if (reports.length > 0) await decide(s, { type: 'NodeReports', reports });
            const now = env.clock.now();
            s.nextReportsAt = now + REPORT_DECISION_GAP * (now - startedAt);
            if (s.reports.length > 0) askToApplyReports(s);
            return s;
          }
          case 'View': {
            s.groupView = msg.view;
            s.monitor?.view(msg.view.members);
            s.view = effectiveView(s);
            if (s.phase === 'recovering') {
              if (allAnswered(s)) await finishRecovery(s);
              return s;
            }
            if (s.phase !== 'active') return s;
            // The effective members: an evicted incarnation the group still lists must not come back.
            await decide(s, { type: 'MembershipView', members: s.view.members });
            await dropSubscribersOfDepartedNodes(s);
            return s;
          }
          case 'Tick': {
            if (s.phase !== 'active') return s;
            const lease = await retrying('reading the lease', () => env.lease.readLease());
            if (lease?.epoch !== epoch) {
              await stopSelf(s, `lease lost: epoch ${lease?.epoch ?? 'none'} holds it`);
              return s;
            }
            commit(s);
            await decide(s, { type: 'PublishDigest' });
            later(s, env.settings.publishIntervalMs, () => env.runtime.send(ctx.self, { type: 'Tick' }));
            return s;
          }
          case 'CheckCooldowns':
            if (s.phase === 'active') await decide(s, { type: 'CheckCooldowns' });
            return s;
          case 'Evicted': {
            const { member, evidence } = msg;
            env.telemetry.detectorEvicted();
            log.warn(
              {
                event: 'detector.evicted',
                member: member.node,
                incarnation: member.incarnation,
                silentMs: evidence.silentMs,
                refused: evidence.refused,
                neededMs: evidence.neededMs,
                quorum: evidence.quorum,
                votes: evidence.votes,
              },
              `${member.node} was evicted by the failure detector: silent for ${Math.round(evidence.silentMs)} ms${evidence.refused ? ' and its endpoint refused probes' : ''}, and its lease has run out`,
            );
            await detectorChanged(s, { type: 'MemberDown', node: member.node, incarnation: member.incarnation });
            return s;
          }
          case 'Departed':
            log.info(
              { event: 'detector.departure', member: msg.member.node, incarnation: msg.member.incarnation },
              `${msg.member.node} left the group and its lease has run out: its departure is applied`,
            );
            await detectorChanged(s, undefined);
            return s;
          case 'Stop':
            await stopSelf(s, msg.reason);
            return s;
          case 'GetState':
            msg.reply(s.phase === 'active' ? s.core : undefined);
            return s;
        }
      } catch (e) {
        if (e instanceof Fenced) {
          await stopSelf(s, e.message);
          return s;
        }
        throw e;
      }
    },
    {
      initialState,
      onCrash: 'stop',
      afterStop: (s) => {
        if (s.phase !== 'stopped') {
          role.stop(epoch, 'crashed');
          s.monitor?.stop();
          s.keeper?.stop();
          for (const cancel of s.timers) cancel();
          void s.inbox?.close().catch(() => undefined);
          // A singleton that already stopped by its own clock told the guardian then: once is enough.
          if (!stopReported) {
            stopReported = true;
            callbacks.onStopped('crashed');
          }
        }
      },
    },
  );
  return self;
}
