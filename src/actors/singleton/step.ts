// The singleton's logic as a pure step (`Reducer`): recovery, the inbox, reports, membership and
// timers decide here what to read, decide, send, log and schedule; `shell.ts` does it. A decision
// of the core is an effect (`Decide`), performed by the shell in slices, and what followed it is a
// list of frames (`Frame`) carried by the effect and stepped when its answer (`Decided`) comes back.
import type { BusRecord } from '../../cluster/bus.js';
import type { MembershipView } from '../../cluster/membership.js';
import type { NodeId, SubscriberId } from '../../core/ids.js';
import type { NodeReportBody, ShardManagerInput } from '../../core/shard-manager/protocol.js';
import { type InboxMessage, parseInboxMessage, WIRE_FORMAT } from '../../protocol/wire.js';
import type { Reducer, Stepped } from '../reducer.js';
import type { SingletonEffect } from './effects.js';
import { allAnswered, departedSubscribers, recoveryData, reportKey, usableStamps } from './bookkeeping.js';
import type { ClusterState, Frame, SingletonState, StepMsg, TimerMsg } from './state.js';

/** Reports applied in one decision at most (each carries up to 500 events). */
export const MAX_REPORTS_PER_DECISION = 200;
/** Reports waiting to be applied at most; past it they are dropped unacknowledged. */
export const MAX_QUEUED_REPORTS = 10_000;
/**
 * After a decision on reports that took t ms, the next one waits REPORT_DECISION_GAP × t. A
 * decision costs about the map's size (persisting it, each node applying its changes): reports that
 * pour in (65 536 copies starting) then make a few large decisions instead of one per report that
 * came in meanwhile, and deciding takes at most a quarter of the process's time. A report that
 * comes alone is applied at once.
 */
export const REPORT_DECISION_GAP = 3;

type Draft = { -readonly [K in keyof SingletonState]: SingletonState[K] };

/** One step's work: a copy of the state (collections copied once, when first changed) and the effects so far. */
interface Work {
  readonly s: Draft;
  readonly out: SingletonEffect[];
  readonly now: number;
  readonly owned: Set<'reports' | 'reportOffsets' | 'answers'>;
}

const reportsOf = (w: Work): NodeReportBody[] => {
  if (!w.owned.has('reports')) {
    w.owned.add('reports');
    w.s.reports = [...w.s.reports];
  }
  return w.s.reports as NodeReportBody[];
};
const offsetsOf = (w: Work): Map<string, number> => {
  if (!w.owned.has('reportOffsets')) {
    w.owned.add('reportOffsets');
    w.s.reportOffsets = new Map(w.s.reportOffsets);
  }
  return w.s.reportOffsets as Map<string, number>;
};
const answersOf = (w: Work): Map<NodeId, ClusterState> => {
  if (!w.owned.has('answers')) {
    w.owned.add('answers');
    w.s.answers = new Map(w.s.answers);
  }
  return w.s.answers as Map<NodeId, ClusterState>;
};

const log = (w: Work, level: 'debug' | 'info' | 'warn' | 'error', fields: Record<string, unknown>, message: string): void => {
  w.out.push({ type: 'Log', level, fields, message });
};
const schedule = (w: Work, afterMs: number, msg: TimerMsg): void => {
  w.out.push({ type: 'Schedule', afterMs, msg });
};
const send = (w: Work, msg: TimerMsg): void => {
  w.out.push({ type: 'Send', msg });
};
/** Emits a decision; what follows it waits for its answer. Returns true: the step pauses there. */
const decide = (w: Work, input: ShardManagerInput, then: readonly Frame[]): true => {
  w.out.push({ type: 'Decide', input, then });
  return true;
};

export const singletonStep: Reducer<SingletonState, StepMsg, SingletonEffect> = (state, msg, now) => {
  if (state.phase === 'stopped') return { state, effects: [] };
  const w: Work = { s: { ...state }, out: [], now, owned: new Set() };
  handle(w, msg);
  return { state: w.s, effects: w.out } satisfies Stepped<SingletonState, SingletonEffect>;
};

function handle(w: Work, msg: StepMsg): void {
  const s = w.s;
  switch (msg.type) {
    case 'Begin':
      return begin(w, msg);
    case 'StoreRead':
      s.stored = msg.stored;
      s.storedStamps = usableStamps(msg.stored.datasets, msg.stored.maps);
      s.phase = 'recovering';
      w.out.push({ type: 'ReadInboxStart' });
      return;
    case 'InboxStartRead':
      w.out.push({ type: 'Subscribe', startAt: msg.startAt });
      // This group holds the position from now on, even if this singleton dies before it applies anything.
      if (msg.startAt !== undefined) w.out.push({ type: 'CommitInboxStart', startAt: msg.startAt });
      schedule(w, s.config.recoveryReplyTimeoutMs, { type: 'RecoveryDeadline' });
      // Handed to the bus before the guardians are asked (an answer that still comes before it
      // is taken all the same: only reports are dropped before it).
      send(w, { type: 'WriteTakeoverRecord' });
      send(w, { type: 'AskGuardians' });
      return;
    case 'WriteTakeoverRecord':
      return writeTakeoverRecord(w);
    case 'AskGuardians':
      if (s.phase !== 'recovering') return;
      // Asked again on the timer whatever the bus does: a question lost or not sent is asked again.
      w.out.push({
        type: 'Produce',
        act: 'asking the guardians',
        what: 'cluster-state-request',
        topic: 'events',
        message: { format: WIRE_FORMAT, kind: 'cluster-state-request', epoch: s.config.epoch, requestId: s.config.requestId, stored: s.storedStamps },
      });
      schedule(w, Math.max(1, Math.floor(s.config.recoveryReplyTimeoutMs / 4)), { type: 'AskGuardians' });
      return;
    case 'PredecessorLeasesOver':
      s.predecessorLeasesOver = true;
      if (s.phase !== 'recovering') return;
      if (s.recoveryDeadlinePassed) send(w, { type: 'RecoveryDeadline' });
      else if (allAnswered(s)) finishRecovery(w, []);
      return;
    case 'RecoveryDeadline':
      return recoveryDeadline(w);
    case 'Inbox':
      s.batch = msg.records;
      resume(w, [{ k: 'inbox' }]);
      return;
    case 'Validated':
      return validated(w, msg);
    case 'Decided':
      return decided(w, msg);
    case 'Reports': {
      // A bounded lot per decision: a backlog is applied in slices, other messages in between.
      s.reportsAsked = false;
      const reports = s.reports.slice(0, MAX_REPORTS_PER_DECISION);
      s.reports = s.reports.slice(reports.length);
      const then: Frame[] = [{ k: 'reports', startedAt: w.now }];
      if (reports.length > 0) decide(w, { type: 'NodeReports', reports }, then);
      else resume(w, then);
      return;
    }
    case 'View':
      s.groupView = msg.groupView;
      return membershipChanged(w, msg.view, undefined);
    case 'Evicted':
      return evicted(w, msg);
    case 'Departed':
      log(
        w,
        'info',
        { event: 'detector.departure', member: msg.member.node, incarnation: msg.member.incarnation },
        `${msg.member.node} left the group and its lease has run out: its departure is applied`,
      );
      return membershipChanged(w, msg.view, undefined);
    case 'Tick':
      if (s.phase === 'active') w.out.push({ type: 'ReadLease' });
      return;
    case 'LeaseRead':
      if (msg.epoch !== s.config.epoch) {
        w.out.push({ type: 'StopSelf', reason: `lease lost: epoch ${msg.epoch ?? 'none'} holds it` });
        return;
      }
      w.out.push({ type: 'CommitInbox', lastOffset: s.lastOffset });
      decide(w, { type: 'PublishDigest' }, [{ k: 'emit', effects: [{ type: 'Schedule', afterMs: s.config.publishIntervalMs, msg: { type: 'Tick' } }] }]);
      return;
    case 'CheckCooldowns':
      if (s.phase === 'active') decide(w, { type: 'CheckCooldowns' }, []);
      return;
    case 'Stop':
      w.out.push({ type: 'StopSelf', reason: msg.reason });
      return;
    case 'Stopped':
      s.phase = 'stopped';
      s.batch = [];
      return;
  }
}

function begin(w: Work, msg: Extract<StepMsg, { type: 'Begin' }>): void {
  const s = w.s;
  s.takeoverAt = w.now;
  s.groupView = msg.groupView;
  if (msg.heartbeat) {
    // A predecessor's grants may still run (it cannot be asked): nothing moves before they end.
    s.predecessorLeasesOver = false;
    schedule(w, s.config.leaseWaitMs, { type: 'PredecessorLeasesOver' });
  }
  s.view = msg.view;
  log(w, 'info', { event: 'singleton.takeover', epoch: s.config.epoch }, 'singleton lease taken: recovering');
  w.out.push({ type: 'ReadStore' });
}

function writeTakeoverRecord(w: Work): void {
  const s = w.s;
  if (s.afterTakeoverRecord) return;
  if (s.takeoverRecordWrites > 0)
    log(
      w,
      'warn',
      { event: 'recovery.takeover-record-again', writes: s.takeoverRecordWrites },
      `the takeover record was not read back within ${s.config.recoveryReplyTimeoutMs} ms: written again (no report is applied before it is read)`,
    );
  // Not awaited: a produce that hangs (a broker frozen, then back) must not hold the mailbox,
  // the recovery's deadline among it. Written again on the timer until read back.
  w.out.push({
    type: 'Produce',
    act: 'writing the takeover record',
    what: 'takeover',
    topic: 'inbox',
    message: { format: WIRE_FORMAT, kind: 'takeover', epoch: s.config.epoch },
  });
  s.takeoverRecordWrites++;
  schedule(w, s.config.recoveryReplyTimeoutMs, { type: 'WriteTakeoverRecord' });
}

function recoveryDeadline(w: Work): void {
  const s = w.s;
  if (s.phase === 'recovering' && !s.predecessorLeasesOver) {
    s.recoveryDeadlinePassed = true;
    return;
  }
  if (s.phase !== 'recovering') return;
  const missing = s.view.members.filter((m) => !s.answers.has(m.node)).map((m) => m.node);
  log(w, 'warn', { missing }, 'recovery goes on without the guardians that did not answer in time');
  finishRecovery(w, []);
}

function evicted(w: Work, msg: Extract<StepMsg, { type: 'Evicted' }>): void {
  const { member, evidence } = msg;
  w.out.push({ type: 'CountEviction' });
  log(
    w,
    'warn',
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
  membershipChanged(w, msg.view, { type: 'MemberDown', node: member.node, incarnation: member.incarnation });
}

/** The members the core counts changed (the group's view, or the detector's doing): `input` says how, else the whole view. */
function membershipChanged(w: Work, view: MembershipView, input: ShardManagerInput | undefined): void {
  const s = w.s;
  s.view = view;
  if (s.phase === 'recovering') {
    if (allAnswered(s)) finishRecovery(w, []);
    return;
  }
  if (s.phase !== 'active') return;
  // The effective members: an evicted incarnation the group still lists must not come back.
  decide(w, input ?? { type: 'MembershipView', members: s.view.members }, [{ k: 'departed' }]);
}

function finishRecovery(w: Work, then: readonly Frame[]): true {
  return decide(w, { type: 'Recover', recovery: recoveryData(w.s) }, [{ k: 'recovered' }, ...then]);
}

function decided(w: Work, msg: Extract<StepMsg, { type: 'Decided' }>): void {
  w.s.core = msg.core;
  w.s.acksSent = msg.acksSent;
  if (msg.acked.length > 0) {
    const offsets = offsetsOf(w);
    for (const key of msg.acked) offsets.delete(key);
  }
  resume(w, msg.then);
}

/** A frame paused the step (it decided, or asked the source; what follows went with that call), or the frames to run next. */
type Next = true | readonly Frame[];

/** Runs `frames` in order until one decides (or validates): the rest goes with that call. Returns whether it paused. */
function resume(w: Work, frames: readonly Frame[]): boolean {
  let next: Next = frames;
  while (next !== true && next.length > 0) next = runFrame(w, next[0]!, next.slice(1));
  return next === true;
}

function runFrame(w: Work, frame: Frame, rest: readonly Frame[]): Next {
  const s = w.s;
  switch (frame.k) {
    case 'inbox':
      return inboxBatch(w, rest);
    case 'recovered':
      s.phase = 'active';
      // Reports of nodes that did not answer in time: applied now, as any report.
      queueReports(w, s.beforeAnswer);
      s.beforeAnswer = [];
      return dropSubscribers(w, departedSubscribers(s.core, s.view), [{ k: 'recoveredTail' }, ...rest]);
    case 'recoveredTail':
      recoveredTail(w);
      return rest;
    case 'departed':
      return dropSubscribers(w, departedSubscribers(s.core, s.view), rest);
    case 'drop':
      return dropSubscribers(w, frame.ids, rest);
    case 'reports':
      s.nextReportsAt = w.now + REPORT_DECISION_GAP * (w.now - frame.startedAt);
      if (s.reports.length > 0) askToApplyReports(w);
      return rest;
    case 'emit':
      w.out.push(...frame.effects);
      return rest;
  }
}

function dropSubscribers(w: Work, ids: readonly SubscriberId[], then: readonly Frame[]): Next {
  if (ids.length === 0) return then;
  return decide(w, { type: 'SubscriberTerminated', subscriber: ids[0]! }, [{ k: 'drop', ids: ids.slice(1) }, ...then]);
}

function recoveredTail(w: Work): void {
  const s = w.s;
  w.out.push({ type: 'CommitInbox', lastOffset: s.lastOffset });
  const answers = [...s.answers.values()];
  // guardianMaps: maps the guardians had newer than the MetaStore's (or of datasets it lacks); normally 0.
  const guardianMaps = answers.reduce((n, a) => n + a.maps.length, 0);
  const recoveryMs = w.now - s.takeoverAt;
  w.out.push({ type: 'Recovered', recoveryMs });
  log(
    w,
    'info',
    { event: 'singleton.takeover', epoch: s.config.epoch, recoveryMs, answered: answers.length, members: s.view.members.length, guardianMaps },
    'singleton active',
  );
  schedule(w, s.config.publishIntervalMs, { type: 'Tick' });
}

/** Queues reports to apply together, and asks for them to be applied if none were queued. */
function queueReports(w: Work, reports: readonly NodeReportBody[]): void {
  if (reports.length === 0) return;
  const s = w.s;
  // Bounded: past it a report is dropped unacknowledged (its node sends it again), so a flood
  // of reports cannot grow the singleton's memory without end.
  const room = MAX_QUEUED_REPORTS - s.reports.length;
  if (room < reports.length) {
    for (let i = Math.max(0, room); i < reports.length; i++) w.out.push({ type: 'ReportsDropped', queued: s.reports.length });
    for (const r of reports.slice(Math.max(0, room))) offsetsOf(w).delete(reportKey(r.node, r.incarnation, r.seq));
    reports = reports.slice(0, Math.max(0, room));
    if (reports.length === 0) return;
  }
  reportsOf(w).push(...reports);
  askToApplyReports(w);
}

function askToApplyReports(w: Work): void {
  const s = w.s;
  if (s.reportsAsked) return;
  s.reportsAsked = true;
  const wait = s.nextReportsAt - w.now;
  if (wait <= 0) send(w, { type: 'Reports' });
  else schedule(w, wait, { type: 'Reports' });
}

/** Handles the records of the batch in order; one that decides (or asks the source) pauses it. */
function inboxBatch(w: Work, rest: readonly Frame[]): Next {
  const records = w.s.batch;
  const then: Frame[] = [{ k: 'inbox' }, ...rest];
  for (let i = 0; i < records.length; i++) {
    if (onInbox(w, records[i]!, then)) {
      w.s.batch = records.slice(i + 1);
      return true;
    }
  }
  w.s.batch = [];
  w.out.push({ type: 'InboxDone' });
  // The load figures of the whole batch in one decision: a window's reports of every node arrive together.
  const loads = w.s.loadReports;
  if (loads.length === 0) return rest;
  w.s.loadReports = [];
  return decide(w, { type: 'LoadReports', reports: loads }, rest);
}

/** One inbox record; returns whether it paused the batch (a decision, a source's check). */
function onInbox(w: Work, record: BusRecord, then: readonly Frame[]): boolean {
  const s = w.s;
  s.lastOffset = record.offset;
  const parsed = parseInboxMessage(record.value);
  if (!parsed.ok) {
    w.out.push({ type: 'Malformed', record, reason: parsed.error.reason });
    return false;
  }
  const m = parsed.value;
  switch (m.kind) {
    case 'invalid-setup':
      w.out.push({
        type: 'Produce',
        act: 'a reply',
        what: 'reply',
        topic: 'replies',
        message: { format: WIRE_FORMAT, kind: 'reply', epoch: s.config.epoch, to: m.replyTo, reply: { type: 'BadSchema', message: m.message } },
      });
      return false;
    case 'takeover':
      if (m.epoch !== s.config.epoch) return false; // a predecessor's: what follows it is still from before this takeover
      s.afterTakeoverRecord = true;
      if (s.reportsBeforeTakeover > 0) {
        log(
          w,
          'info',
          { event: 'recovery.reports-before-takeover', reports: s.reportsBeforeTakeover },
          `${s.reportsBeforeTakeover} report(s) written before this singleton took over were dropped: a predecessor applied them, or their nodes send their events again`,
        );
      }
      return false;
    case 'cluster-state':
      // Answers are not inputs: committing them is the recovery's job.
      return onAnswer(w, m, then);
    case 'report':
      onReport(w, record, m);
      return false;
    case 'loads':
      // Figures of a window: before recovery ends (or before this takeover) they are stale by the time they would count.
      if (s.phase === 'active' && s.afterTakeoverRecord) s.loadReports = [...s.loadReports, m.report];
      return false;
    case 'request':
      if (m.request.type === 'SetupDataset' && !s.core.datasets.has(m.request.config.ref)) {
        w.out.push({ type: 'Validate', request: m.request, then });
        return true;
      }
      if (m.request.type === 'SyncMaps' || m.request.type === 'Subscribe')
        w.out.push({ type: 'HeardMapFormat', subscriber: m.request.subscriber, mapFormat: m.request.mapFormat });
      return decide(w, m.request, then);
  }
}

function onAnswer(w: Work, m: ClusterState, then: readonly Frame[]): boolean {
  const s = w.s;
  if (s.phase !== 'recovering' || m.requestId !== s.config.requestId) return false;
  answersOf(w).set(m.node, m);
  w.out.push({ type: 'HeardNodeMapFormat', node: m.node, incarnation: m.incarnation, mapFormat: m.mapFormat });
  const kept = s.beforeAnswer.filter((r) => r.node !== m.node || r.incarnation !== m.incarnation);
  for (const r of s.beforeAnswer) if (!kept.includes(r)) offsetsOf(w).delete(reportKey(r.node, r.incarnation, r.seq));
  const superseded = s.beforeAnswer.length - kept.length;
  s.beforeAnswer = kept;
  if (superseded > 0) {
    log(
      w,
      'info',
      { event: 'recovery.reports-superseded', member: m.node, reports: superseded },
      `${superseded} report(s) of ${m.node} read before its answer to the recovery were dropped: its answer gives its state after them`,
    );
  }
  return allAnswered(s) ? finishRecovery(w, then) : false;
}

function onReport(w: Work, record: BusRecord, m: Extract<InboxMessage, { kind: 'report' }>): void {
  const s = w.s;
  if (!s.afterTakeoverRecord) {
    s.reportsBeforeTakeover++;
    return;
  }
  const report = { node: m.node, incarnation: m.incarnation, seq: m.seq, events: m.events };
  offsetsOf(w).set(reportKey(m.node, m.incarnation, m.seq), record.offset);
  if (s.phase === 'recovering' && s.answers.get(m.node)?.incarnation !== m.incarnation) {
    s.beforeAnswer = [...s.beforeAnswer, report];
    return;
  }
  queueReports(w, [report]);
}

function validated(w: Work, msg: Extract<StepMsg, { type: 'Validated' }>): void {
  const s = w.s;
  const { request, refusal } = msg;
  if (refusal === undefined) {
    decide(w, request, msg.then);
    return;
  }
  log(w, 'warn', { event: 'dataset.refused', dataset: request.config.ref, reason: refusal }, 'dataset refused: its source does not match');
  w.out.push({
    type: 'Produce',
    act: 'a reply',
    what: 'reply',
    topic: 'replies',
    message: { format: WIRE_FORMAT, kind: 'reply', epoch: s.config.epoch, to: request.replyTo, reply: { type: 'BadData', message: refusal } },
  });
  resume(w, msg.then);
}
