// The singleton's step alone: what it reads, decides, sends, logs, drops and schedules for each
// message, and what it does once a call (a store read, a decision, the source's check) answers,
// with no actors, timers, store or bus.
import { describe, expect, it } from 'vitest';
import type { BusRecord } from '../../src/cluster/bus.js';
import type { MembershipView } from '../../src/cluster/membership.js';
import type { DatasetConfig } from '../../src/core/dataset-config.js';
import type { Evidence } from '../../src/core/failure-detection/judge.js';
import { epoch, type Incarnation, type NodeId, replyTo, type SubscriberId } from '../../src/core/ids.js';
import type { Member, NodeReportBody } from '../../src/core/shard-manager/protocol.js';
import { ShardManager } from '../../src/core/shard-manager/shard-manager.js';
import type { ShardManagerState } from '../../src/core/shard-manager/step.js';
import type { ShardMapSnapshot } from '../../src/core/shard-map-snapshot.js';
import { appliedInbox, reportKey } from '../../src/actors/singleton/bookkeeping.js';
import type { SingletonEffect } from '../../src/actors/singleton/effects.js';
import { initialSingletonState, type SingletonState, type StepMsg, type Stored } from '../../src/actors/singleton/state.js';
import { MAX_QUEUED_REPORTS, singletonStep } from '../../src/actors/singleton/step.js';
import { config, ds1, ds2, emptyRecovery } from '../support/manager-harness.js';

const EPOCH = epoch(4);
const TIMEOUT = 2000;
const PUBLISH = 1000;
const manager = new ShardManager({});

function deepFreeze<T>(x: T): T {
  if (x && typeof x === 'object' && !Object.isFrozen(x)) {
    Object.freeze(x);
    for (const v of x instanceof Map ? x.values() : Object.values(x)) deepFreeze(v);
  }
  return x;
}

/** A Map's content, to see that a step left the one it was given as it was (a frozen Map can still be set). */
const entriesOf = (s: SingletonState) => ({ offsets: [...s.reportOffsets], answers: [...s.answers.keys()] });

/** Steps each message in turn on a frozen state, checking that none changed the state it was given. */
function run(state: SingletonState, msgs: readonly StepMsg[], now = 10_000): { state: SingletonState; effects: readonly SingletonEffect[] } {
  let out = { state, effects: [] as readonly SingletonEffect[] };
  for (const msg of msgs) {
    const given = deepFreeze(out.state);
    const before = entriesOf(given);
    out = singletonStep(given, msg, now);
    expect(entriesOf(given)).toEqual(before);
  }
  return out;
}

const member = (node: string, inc = 'i1'): Member => ({ node: node as NodeId, incarnation: inc as Incarnation }) as unknown as Member;
const view = (...members: Member[]): MembershipView => ({ generation: members.length, members });
const N1 = member('n1');
const N2 = member('n2');

const fresh = (leaseWaitMs = 0): SingletonState =>
  initialSingletonState(
    { epoch: EPOCH, requestId: 'recovery-4-n1', recoveryReplyTimeoutMs: TIMEOUT, publishIntervalMs: PUBLISH, leaseWaitMs },
    manager.initialState(),
  );

const stored = (over: Partial<Stored> = {}): Stored => ({
  datasets: [],
  maps: [],
  cooldowns: [],
  subscriptions: { subscriptions: [], watchers: [] },
  operations: manager.initialState().operations,
  applied: [],
  ...over,
});

let offset = 0;
const rec = (value: object): BusRecord => ({ topic: 'inbox', offset: ++offset, value: { format: 2, ...value } });
const takeover = (e: number = EPOCH) => rec({ kind: 'takeover', epoch: e });
const report = (m: Member, seq: number) => rec({ kind: 'report', node: m.node, incarnation: m.incarnation, seq, events: [] });
const answer = (m: Member, requestId = 'recovery-4-n1', maps: unknown[] = []) =>
  rec({ kind: 'cluster-state', requestId, epoch: EPOCH, node: m.node, incarnation: m.incarnation, maps, subscriptions: [], watchers: [], running: [] });
const subscribe = (subscriber: string) => rec({ kind: 'request', request: { type: 'Subscribe', subscriber, dataset: ds1, mapFormat: 4 } });
const setup = (c: DatasetConfig, to = 'r1') => rec({ kind: 'request', request: { type: 'SetupDataset', config: c, replyTo: to } });
const inbox = (...records: BusRecord[]): StepMsg => ({ type: 'Inbox', records });

/** Recovering over `members`, its store read and its takeover record not read yet. */
function recovering(members: Member[] = [N1, N2], s: Stored = stored()): SingletonState {
  return run(fresh(), [
    { type: 'Begin', groupView: view(...members), view: view(...members), heartbeat: false },
    { type: 'StoreRead', stored: s },
  ]).state;
}

/** The core recovered over `members`: what `Decided` for the recovery brings back. */
const recoveredCore = (members: Member[], subscriptions: RecoveryInput = {}): ShardManagerState =>
  manager.decide(manager.initialState(), { type: 'Recover', recovery: { ...emptyRecovery(EPOCH, members), ...subscriptions } }, 0).state;
type RecoveryInput = { watchers?: SubscriberId[] };

/** Active over N1 and N2, with its takeover record read back. */
function active(): SingletonState {
  const s = run(recovering(), [inbox(takeover(), answer(N1), answer(N2))]).state;
  return run(s, [{ type: 'Decided', core: recoveredCore([N1, N2]), acksSent: 0, acked: [], then: [{ k: 'recovered' }, { k: 'inbox' }] }]).state;
}

const ofType = <T extends SingletonEffect['type']>(effects: readonly SingletonEffect[], type: T) =>
  effects.filter((e): e is Extract<SingletonEffect, { type: T }> => e.type === type);
const decided = (effects: readonly SingletonEffect[]) => ofType(effects, 'Decide').map((e) => e.input.type);

describe('singleton step: the takeover', () => {
  it('logs the takeover and reads the store; in heartbeat mode it first waits out a predecessor’s grants', () => {
    const begin: StepMsg = { type: 'Begin', groupView: view(N1, N2), view: view(N1), heartbeat: true };
    const { state, effects } = run(fresh(900), [begin]);
    expect(effects).toEqual([
      { type: 'Schedule', afterMs: 900, msg: { type: 'PredecessorLeasesOver' } },
      { type: 'Log', level: 'info', fields: { event: 'singleton.takeover', epoch: EPOCH }, message: 'singleton lease taken: recovering' },
      { type: 'ReadStore' },
    ]);
    expect(state.view.members).toEqual([N1]);
    expect(state.predecessorLeasesOver).toBe(false);
    expect(run(fresh(), [{ ...begin, heartbeat: false }]).effects.map((e) => e.type)).toEqual(['Log', 'ReadStore']);
  });

  it('subscribes from the position read, commits it, then writes its takeover record before asking the guardians', () => {
    const s = recovering();
    expect(s.phase).toBe('recovering');
    expect(run(s, [{ type: 'InboxStartRead', startAt: 42 }]).effects).toEqual([
      { type: 'Subscribe', startAt: 42 },
      { type: 'CommitInboxStart', startAt: 42 },
      { type: 'Schedule', afterMs: TIMEOUT, msg: { type: 'RecoveryDeadline' } },
      { type: 'Send', msg: { type: 'WriteTakeoverRecord' } },
      { type: 'Send', msg: { type: 'AskGuardians' } },
    ]);
    expect(run(s, [{ type: 'InboxStartRead', startAt: undefined }]).effects.map((e) => e.type)).not.toContain('CommitInboxStart');
  });

  it('asks the guardians for maps newer than the stored ones it can use, again every quarter of the timeout, and no more once active', () => {
    const good = { dataset: ds1, numShards: 8, epoch: epoch(2), version: 5 } as unknown as ShardMapSnapshot;
    const older = { ...good, version: 3 } as ShardMapSnapshot;
    const otherShards = { dataset: ds2, numShards: 3, epoch: epoch(2), version: 9 } as unknown as ShardMapSnapshot;
    const s = recovering([N1], stored({ datasets: [config(ds1, 8, 1), config(ds2, 4, 1)], maps: [older, good, otherShards] }));
    const { effects } = run(s, [{ type: 'AskGuardians' }]);
    expect(effects).toEqual([
      {
        type: 'Produce',
        act: 'asking the guardians',
        what: 'cluster-state-request',
        topic: 'events',
        message: {
          format: 2,
          kind: 'cluster-state-request',
          epoch: EPOCH,
          requestId: 'recovery-4-n1',
          stored: [{ dataset: ds1, numShards: 8, epoch: 2, version: 5 }],
        },
      },
      { type: 'Schedule', afterMs: TIMEOUT / 4, msg: { type: 'AskGuardians' } },
    ]);
    expect(run(active(), [{ type: 'AskGuardians' }]).effects).toEqual([]);
  });

  it('writes its takeover record again on the timer until it reads it back, saying so', () => {
    const once = run(recovering(), [{ type: 'WriteTakeoverRecord' }]);
    expect(once.effects.map((e) => e.type)).toEqual(['Produce', 'Schedule']);
    const again = run(once.state, [{ type: 'WriteTakeoverRecord' }]).effects;
    expect(ofType(again, 'Log').map((e) => e.fields.event)).toEqual(['recovery.takeover-record-again']);
    const readBack = run(once.state, [inbox(takeover())]).state;
    expect(run(readBack, [{ type: 'WriteTakeoverRecord' }]).effects).toEqual([]);
  });
});

describe('singleton step: recovery', () => {
  it('drops every report read before its own takeover record, unacknowledged, and says how many when it reads the record', () => {
    const { state, effects } = run(recovering(), [inbox(report(N1, 1), takeover(epoch(3)), report(N2, 1), takeover())]);
    expect(state.reportsBeforeTakeover).toBe(2);
    expect(state.reportOffsets.size).toBe(0);
    expect(ofType(effects, 'Log').map((e) => [e.fields.event, e.fields.reports])).toEqual([['recovery.reports-before-takeover', 2]]);
  });

  it('holds a report read before its node answered, and drops it when the answer comes: the answer supersedes it', () => {
    const s = run(recovering([N1, N2]), [inbox(takeover(), report(N1, 7))]).state;
    expect(s.beforeAnswer.map((r) => r.seq)).toEqual([7]);
    const { state, effects } = run(s, [inbox(answer(N1))]);
    expect(state.beforeAnswer).toEqual([]);
    expect(state.reportOffsets.size).toBe(0);
    expect(ofType(effects, 'Log').map((e) => e.fields.event)).toEqual(['recovery.reports-superseded']);
    expect(decided(effects)).toEqual([]);
  });

  it('recovers as soon as every member answered, with their maps, and ignores answers to another singleton’s question', () => {
    const s = run(recovering([N1, N2]), [inbox(takeover(), answer(N1), answer(N2, 'recovery-3-n9'))]);
    expect(decided(s.effects)).toEqual([]);
    const { effects } = run(s.state, [inbox(answer(N2))]);
    const recover = ofType(effects, 'Decide')[0]!;
    expect(recover.input.type === 'Recover' && recover.input.recovery.running.map((r) => r.node)).toEqual(['n1', 'n2']);
    expect(recover.then).toEqual([{ k: 'recovered' }, { k: 'inbox' }]);
  });

  it('in heartbeat mode, a deadline that passes before a predecessor’s grants ran out waits for them', () => {
    const s = run(fresh(900), [
      { type: 'Begin', groupView: view(N1, N2), view: view(N1, N2), heartbeat: true },
      { type: 'StoreRead', stored: stored() },
      { type: 'RecoveryDeadline' },
    ]);
    expect(s.effects).toEqual([]);
    expect(run(s.state, [{ type: 'PredecessorLeasesOver' }]).effects).toEqual([{ type: 'Send', msg: { type: 'RecoveryDeadline' } }]);
    const { effects } = run(s.state, [{ type: 'PredecessorLeasesOver' }, { type: 'RecoveryDeadline' }]);
    expect(ofType(effects, 'Log')[0]!.fields).toEqual({ missing: ['n1', 'n2'] });
    expect(decided(effects)).toEqual(['Recover']);
  });

  it('once recovered: applies the reports of nodes that did not answer, terminates the subscribers of nodes gone, commits, and ticks', () => {
    const s = run(recovering([N1, N2]), [inbox(takeover(), answer(N1), report(N2, 3))]).state;
    const gone = 'n9@i9/maps' as SubscriberId;
    const core = recoveredCore([N1, N2], { watchers: [gone] });
    const first = run(s, [{ type: 'Decided', core, acksSent: 0, acked: [], then: [{ k: 'recovered' }] }], 10_500);
    expect(first.state.phase).toBe('active');
    expect(first.state.reports.map((r) => [r.node, r.seq])).toEqual([['n2', 3]]);
    expect(first.effects).toEqual([
      { type: 'Send', msg: { type: 'Reports' } },
      { type: 'Decide', input: { type: 'SubscriberTerminated', subscriber: gone }, then: [{ k: 'drop', ids: [] }, { k: 'recoveredTail' }] },
    ]);
    const { effects } = run(first.state, [{ type: 'Decided', core, acksSent: 0, acked: [], then: [{ k: 'drop', ids: [] }, { k: 'recoveredTail' }] }], 10_700);
    expect(effects).toEqual([
      { type: 'CommitInbox', lastOffset: first.state.lastOffset },
      { type: 'Recovered', recoveryMs: 700 },
      {
        type: 'Log',
        level: 'info',
        fields: { event: 'singleton.takeover', epoch: EPOCH, recoveryMs: 700, answered: 1, members: 2, guardianMaps: 0 },
        message: 'singleton active',
      },
      { type: 'Schedule', afterMs: PUBLISH, msg: { type: 'Tick' } },
    ]);
  });
});

describe('singleton step: the inbox', () => {
  it('decides on each request in order, going on with the records after a decision only once it is performed', () => {
    const s = active();
    const [a, b, c] = [subscribe('n1@i1/a'), report(N1, 1), subscribe('n2@i1/b')];
    const first = run(s, [inbox(a, b, c)]);
    expect(first.effects).toEqual([
      { type: 'HeardMapFormat', subscriber: 'n1@i1/a', mapFormat: 4 },
      { type: 'Decide', input: { type: 'Subscribe', subscriber: 'n1@i1/a', dataset: ds1, mapFormat: 4 }, then: [{ k: 'inbox' }] },
    ]);
    expect(first.state.lastOffset).toBe(a.offset);
    const second = run(first.state, [{ type: 'Decided', core: s.core, acksSent: 0, acked: [], then: [{ k: 'inbox' }] }]);
    expect(second.effects.map((e) => e.type)).toEqual(['Send', 'HeardMapFormat', 'Decide']);
    expect(second.state.lastOffset).toBe(c.offset);
    const third = run(second.state, [{ type: 'Decided', core: s.core, acksSent: 0, acked: [], then: [{ k: 'inbox' }] }]);
    expect(third.effects).toEqual([{ type: 'InboxDone' }]);
    expect(third.state.batch).toEqual([]);
  });

  it('asks the source about a new dataset first: refused, it replies BadData and goes on; accepted, it decides', () => {
    const c = config(ds1, 4, 1);
    const first = run(active(), [inbox(setup(c), subscribe('n1@i1/a'))]);
    const validate = ofType(first.effects, 'Validate')[0]!;
    expect(first.effects).toEqual([validate]);
    const refused = run(first.state, [{ type: 'Validated', request: validate.request, refusal: 'no such topic', then: validate.then }]);
    expect(refused.effects.slice(0, 2)).toEqual([
      {
        type: 'Log',
        level: 'warn',
        fields: { event: 'dataset.refused', dataset: ds1, reason: 'no such topic' },
        message: 'dataset refused: its source does not match',
      },
      {
        type: 'Produce',
        act: 'a reply',
        what: 'reply',
        topic: 'replies',
        message: { format: 2, kind: 'reply', epoch: EPOCH, to: replyTo('r1'), reply: { type: 'BadData', message: 'no such topic' } },
      },
    ]);
    expect(decided(refused.effects)).toEqual(['Subscribe']);
    const accepted = run(first.state, [{ type: 'Validated', request: validate.request, refusal: undefined, then: validate.then }]);
    expect(accepted.effects).toEqual([{ type: 'Decide', input: validate.request, then: [{ k: 'inbox' }] }]);
  });

  it('skips a malformed record, and answers an invalid setup with BadSchema, deciding nothing', () => {
    const bad = rec({ kind: 'nonsense' });
    const invalid = rec({ kind: 'request', request: { type: 'SetupDataset', config: { ref: 'x', numShards: -1 }, replyTo: 'r2' } });
    const { state, effects } = run(active(), [inbox(bad, invalid)]);
    expect(effects.map((e) => e.type)).toEqual(['Malformed', 'Produce', 'InboxDone']);
    expect(effects[0]).toMatchObject({ type: 'Malformed', record: bad });
    expect(effects[1]).toMatchObject({ act: 'a reply', topic: 'replies', message: { kind: 'reply', to: 'r2', reply: { type: 'BadSchema' } } });
    expect(state.lastOffset).toBe(invalid.offset);
  });
});

describe('singleton step: reports', () => {
  const body = (seq: number): NodeReportBody => ({ node: N1.node, incarnation: N1.incarnation, seq, events: [] });

  it('applies reports in lots of 200, and waits three times as long as a decision took before the next', () => {
    const s = { ...active(), reports: Array.from({ length: 250 }, (_, i) => body(i)) };
    const first = run(s, [{ type: 'Reports' }], 20_000);
    const decide = ofType(first.effects, 'Decide')[0]!;
    expect(decide.input.type === 'NodeReports' && decide.input.reports.length).toBe(200);
    expect(first.state.reports.length).toBe(50);
    const after = run(first.state, [{ type: 'Decided', core: s.core, acksSent: 0, acked: [], then: decide.then }], 20_040);
    expect(after.state.nextReportsAt).toBe(20_040 + 3 * 40);
    expect(after.effects).toEqual([{ type: 'Schedule', afterMs: 120, msg: { type: 'Reports' } }]);
  });

  it('applies a report at once when none waits, and drops what exceeds the queue unacknowledged', () => {
    const s = active();
    const one = run(s, [inbox(report(N1, 1))]);
    expect(one.effects).toEqual([{ type: 'Send', msg: { type: 'Reports' } }, { type: 'InboxDone' }]);
    const full = { ...s, reports: Array.from({ length: MAX_QUEUED_REPORTS }, (_, i) => body(i)), reportsAsked: true };
    const r = report(N2, 1);
    const dropped = run(full, [inbox(r)]);
    expect(dropped.effects).toEqual([{ type: 'ReportsDropped', queued: MAX_QUEUED_REPORTS }, { type: 'InboxDone' }]);
    expect(dropped.state.reportOffsets.has(reportKey(N2.node, N2.incarnation, 1))).toBe(false);
    expect(dropped.state.reports.length).toBe(MAX_QUEUED_REPORTS);
  });

  it('forgets the offsets of the reports a decision acknowledged, and counts its acks; the digest’s position is the first report waiting', () => {
    const s = run(active(), [inbox(report(N1, 1), report(N1, 2))]).state;
    const k1 = reportKey(N1.node, N1.incarnation, 1);
    expect(appliedInbox(s)).toBe(s.reportOffsets.get(k1));
    const after = run(s, [{ type: 'Decided', core: s.core, acksSent: 9, acked: [k1], then: [] }]).state;
    expect(after.acksSent).toBe(9);
    expect([...after.reportOffsets.keys()]).toEqual([reportKey(N1.node, N1.incarnation, 2)]);
    expect(appliedInbox({ ...s, reports: [] })).toBe(s.lastOffset + 1);
  });
});

describe('singleton step: membership, ticks and stops', () => {
  it('a view while active decides on the effective members, then terminates the subscribers of departed nodes', () => {
    const { effects } = run(active(), [{ type: 'View', groupView: view(N1, N2), view: view(N1) }]);
    expect(effects).toEqual([{ type: 'Decide', input: { type: 'MembershipView', members: [N1] }, then: [{ k: 'departed' }] }]);
  });

  it('an eviction is counted, logged with its evidence, and decided as the member down', () => {
    const evidence: Evidence = { silentMs: 1234.4, refused: true, neededMs: 1000, quorum: 2, votes: [] };
    const { effects } = run(active(), [{ type: 'Evicted', member: N2, evidence, view: view(N1) }]);
    expect(effects[0]).toEqual({ type: 'CountEviction' });
    expect((effects[1] as Extract<SingletonEffect, { type: 'Log' }>).message).toBe(
      'n2 was evicted by the failure detector: silent for 1234 ms and its endpoint refused probes, and its lease has run out',
    );
    expect(effects[2]).toEqual({ type: 'Decide', input: { type: 'MemberDown', node: 'n2', incarnation: 'i1' }, then: [{ k: 'departed' }] });
  });

  it('a tick reads the lease: another epoch holds it and it stops; else it commits, publishes the digest, then ticks again', () => {
    const s = active();
    expect(run(s, [{ type: 'Tick' }]).effects).toEqual([{ type: 'ReadLease' }]);
    expect(run(s, [{ type: 'LeaseRead', epoch: epoch(5) }]).effects).toEqual([{ type: 'StopSelf', reason: 'lease lost: epoch 5 holds it' }]);
    expect(run(s, [{ type: 'LeaseRead', epoch: undefined }]).effects).toEqual([{ type: 'StopSelf', reason: 'lease lost: epoch none holds it' }]);
    const ok = run(s, [{ type: 'LeaseRead', epoch: EPOCH }]);
    expect(ok.effects.map((e) => e.type)).toEqual(['CommitInbox', 'Decide']);
    const next = run(ok.state, [{ type: 'Decided', core: s.core, acksSent: 0, acked: [], then: ofType(ok.effects, 'Decide')[0]!.then }]);
    expect(next.effects).toEqual([{ type: 'Schedule', afterMs: PUBLISH, msg: { type: 'Tick' } }]);
    expect(run(recovering(), [{ type: 'Tick' }]).effects).toEqual([]);
  });

  it('once stopped it does nothing more', () => {
    const stopped = run(active(), [{ type: 'Stop', reason: 'told to' }]);
    expect(stopped.effects).toEqual([{ type: 'StopSelf', reason: 'told to' }]);
    const after = run(stopped.state, [{ type: 'Stopped' }]).state;
    expect(after.phase).toBe('stopped');
    expect(run(after, [inbox(subscribe('n1@i1/a')), { type: 'Tick' }, { type: 'CheckCooldowns' }]).effects).toEqual([]);
  });
});
