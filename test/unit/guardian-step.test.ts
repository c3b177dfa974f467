// The guardian's step alone: what a node sends, stores, drops, replies and schedules for each
// message, with no actors, timers or bus.
import { describe, expect, it } from 'vitest';
import type { BusRecord } from '../../src/cluster/bus.js';
import type { MembershipView } from '../../src/cluster/membership.js';
import type { Epoch, Incarnation, NodeId, SubscriberId } from '../../src/core/ids.js';
import type { Member } from '../../src/core/shard-manager/protocol.js';
import type { EventsRecord } from '../../src/protocol/wire-events.js';
import type { Lease } from '../../src/store/meta-store.js';
import type { GuardianEffect, GuardianInput, LeaseObservation } from '../../src/actors/guardian/effects.js';
import { guardianConfig, initialGuardianState, type GuardianState } from '../../src/actors/guardian/state.js';
import { guardianStep } from '../../src/actors/guardian/step.js';

const NODE = 'n1' as NodeId;
const INC = 'i1' as Incarnation;
const SETTINGS = { retryInitialMs: 100, retryMaxMs: 1000, heartbeatIntervalMs: 50, singletonLeaseMs: 400 };

function deepFreeze<T>(x: T): T {
  if (x && typeof x === 'object' && !Object.isFrozen(x)) {
    Object.freeze(x);
    for (const v of Object.values(x)) deepFreeze(v);
  }
  return x;
}

const fresh = (heartbeat = false): GuardianState => initialGuardianState(guardianConfig(NODE, INC, heartbeat, SETTINGS));

/** Steps each message in turn on a frozen state; the effects of the last step. */
function run(state: GuardianState, msgs: readonly GuardianInput[], now = 1000): { state: GuardianState; effects: readonly GuardianEffect[] } {
  let out = { state, effects: [] as readonly GuardianEffect[] };
  for (const msg of msgs) out = guardianStep(deepFreeze(out.state), msg, now);
  return out;
}

const member = (node: string, incarnation: string): Member =>
  ({ node: node as NodeId, incarnation: incarnation as Incarnation, joinedAt: 0 }) as unknown as Member;
const view = (...members: Member[]): MembershipView => ({ generation: members.length, members });
const SELF = member(NODE, INC);
const OTHER = member('n0', 'i0');
const record: BusRecord = { topic: 'events', offset: 7, value: {} };
const read = (value: { readonly kind: EventsRecord['kind']; readonly epoch: number; readonly [field: string]: unknown }): GuardianInput => ({
  type: 'EventsRead',
  record,
  parsed: { ok: true, value: value as unknown as EventsRecord },
});
const replies = (value: object): GuardianInput => ({ type: 'Replies', record: { topic: 'replies', offset: 3, value: { format: 2, ...value } } });
const lease = (epoch: number, node = 'n0', incarnation = 'i0', renewal = 4): Lease =>
  ({ epoch: epoch as Epoch, node: node as NodeId, incarnation: incarnation as Incarnation, renewal }) as Lease;
const observed = (o: Partial<LeaseObservation>): GuardianInput => ({
  type: 'LeaseObserved',
  observation: { lease: undefined, place: 0, problem: undefined, knownEpoch: 3, changedBefore: false, ...o },
});

/** A member node that has joined (non-heartbeat: it is not the oldest). */
const joined = (heartbeat = false): GuardianState => ({ ...fresh(heartbeat), joined: true, view: view(OTHER, SELF) });

describe('guardian step: the events topic', () => {
  it('asks for every map and the members at start', () => {
    expect(run(fresh(), [{ type: 'Start' }]).effects).toEqual([{ type: 'Maps', op: { kind: 'want', all: true, members: true } }]);
  });

  it('has its shell read a record, and skips a malformed one', () => {
    expect(run(fresh(), [{ type: 'Events', record }]).effects).toEqual([{ type: 'ReadEvents', record }]);
    const bad = run(fresh(), [{ type: 'EventsRead', record, parsed: { ok: false, error: { reason: 'no epoch' } } }]);
    expect(bad.effects).toEqual([{ type: 'SkipMalformed', record, reason: 'no epoch' }]);
  });

  it('tells each new singleton once which map format it reads, and hears it on every record', () => {
    const first = run(fresh(), [read({ kind: 'members', epoch: 2, version: 1, members: [] })], 500);
    expect(first.state.maxEpoch).toBe(2);
    expect(first.effects.map((e) => e.type)).toEqual(['DeclareMapFormat', 'Heard', 'Maps']);
    expect(first.effects[1]).toEqual({ type: 'Heard', at: 500 });
    const again = run(first.state, [read({ kind: 'members', epoch: 2, version: 2, members: [] })]);
    expect(again.effects.map((e) => e.type)).toEqual(['Heard', 'Maps']);
  });

  it('ignores what a replaced singleton writes (I6)', () => {
    const s = { ...fresh(), maxEpoch: 5, formatToldTo: 5 };
    const out = run(s, [read({ kind: 'fence', epoch: 4, node: NODE, incarnation: INC, reason: 'x' })]);
    expect(out.state).toBe(s);
    expect(out.effects).toEqual([
      { type: 'Log', level: 'debug', fields: { epoch: 4, current: 5, kind: 'fence' }, msg: 'record from a replaced singleton ignored' },
    ]);
  });

  it('stops everything it runs when fenced, and leaves when released, only for itself', () => {
    const s = { ...fresh(), maxEpoch: 1, formatToldTo: 1 };
    expect(run(s, [read({ kind: 'fence', epoch: 1, node: NODE, incarnation: INC, reason: 'late report' })]).effects).toContainEqual({
      type: 'StopAll',
      reason: 'fenced by the singleton: late report',
    });
    expect(run(s, [read({ kind: 'fence', epoch: 1, node: NODE, incarnation: 'old' as Incarnation, reason: 'x' })]).effects).toEqual([
      { type: 'Heard', at: 1000 },
    ]);
    expect(run(s, [read({ kind: 'release', epoch: 1, node: NODE, incarnation: INC })]).effects).toContainEqual({ type: 'Released' });
    expect(run(s, [read({ kind: 'release', epoch: 1, node: 'n2' as NodeId, incarnation: INC })]).effects).not.toContainEqual({ type: 'Released' });
  });

  it('tells the reporter of a digest before the maps check it', () => {
    const digest = { kind: 'digest', epoch: 1, inbox: 40, acksSent: 3, maps: [], members: 1 } as const;
    const effects = run({ ...fresh(), maxEpoch: 1, formatToldTo: 1 }, [read(digest)]).effects;
    expect(effects).toEqual([
      { type: 'Heard', at: 1000 },
      { type: 'ReporterDigest', epoch: 1, inbox: 40, acksSent: 3 },
      { type: 'Maps', op: { kind: 'digest', record: digest } },
    ]);
  });

  it('delivers a publish to its local subscribers, forgets a removed dataset, and reports a subscriber gone', () => {
    const message = { type: 'DatasetRemoved', dataset: 'd' };
    const to = ['n1@i1/guardian', 'n1@i1/sub-a', 'n2@i9/sub-b'] as SubscriberId[];
    const effects = run({ ...fresh(), maxEpoch: 1, formatToldTo: 1 }, [read({ kind: 'publish', epoch: 1, to, message } as never)]).effects;
    expect(effects).toEqual([
      { type: 'Heard', at: 1000 },
      { type: 'Maps', op: { kind: 'gone', dataset: 'd' } },
      { type: 'DeliverLocal', id: 'n1@i1/sub-a', message },
      // Every node forgets a removed dataset, told by name or not.
      { type: 'Maps', op: { kind: 'gone', dataset: 'd' } },
    ]);
    expect(run(fresh(), [{ type: 'LocalGone', id: 'n1@i1/sub-a' as SubscriberId }]).effects).toEqual([
      { type: 'Request', request: { type: 'SubscriberTerminated', subscriber: 'n1@i1/sub-a' } },
    ]);
  });

  it("answers a new singleton's request for the cluster state with what the coordinator runs", () => {
    const request = { kind: 'cluster-state-request', epoch: 3, requestId: 'r1' } as const;
    expect(run(fresh(), [read(request)]).effects).toContainEqual({ type: 'ReadRunning', request });
    expect(run(fresh(), [{ type: 'RunningRead', request: request as never, running: [] }]).effects).toEqual([
      { type: 'SendClusterState', request, running: [] },
    ]);
  });

  it('asks again for what is lacking when a sync times out', () => {
    expect(run(fresh(), [{ type: 'SyncTimeout' }]).effects).toEqual([
      { type: 'TimerFired', key: 'sync' },
      { type: 'Maps', op: { kind: 'syncFailed' } },
    ]);
  });
});

describe('guardian step: the replies topic', () => {
  const s = { ...fresh(), maxEpoch: 2 };

  it("routes an acknowledgement of this node's report to its reporter, and every one to the reporter's count", () => {
    const mine = run(s, [replies({ kind: 'ack', epoch: 2, node: NODE, incarnation: INC, seq: 9, inbox: 41, ordinal: 5 })]);
    expect(mine.effects).toEqual([
      { type: 'Heard', at: 1000 },
      { type: 'ReporterAck', seq: 9 },
      { type: 'ReporterAcknowledged', epoch: 2, passed: 42, ordinal: 5 },
    ]);
    const theirs = run(s, [replies({ kind: 'ack', epoch: 2, node: 'n2', incarnation: INC, seq: 9 })]);
    expect(theirs.effects).toEqual([
      { type: 'Heard', at: 1000 },
      { type: 'ReporterAcknowledged', epoch: 2, passed: undefined, ordinal: undefined },
    ]);
  });

  it("ignores a replaced singleton's replies, leaves replies to requests to the lane, skips malformed ones", () => {
    expect(run(s, [replies({ kind: 'ack', epoch: 1, node: NODE, incarnation: INC, seq: 9 })]).effects).toEqual([]);
    expect(run(s, [replies({ kind: 'reply', epoch: 2, to: 'x', reply: { type: 'Ok' } })]).effects).toEqual([{ type: 'Heard', at: 1000 }]);
    expect(run(s, [replies({ kind: 'ack' })]).effects).toEqual([
      { type: 'SkipMalformed', record: { topic: 'replies', offset: 3, value: { format: 2, kind: 'ack' } }, reason: 'no epoch' },
    ]);
  });
});

describe('guardian step: hosting the singleton by age', () => {
  it('stands when it is the oldest member, and starts the singleton at the epoch it took', () => {
    const v = view(SELF, OTHER);
    const standing = run(fresh(), [{ type: 'View', view: v, member: true }]);
    expect(standing.effects).toEqual([{ type: 'ReadLeaseToStand' }]);
    expect(standing.state).toMatchObject({ joined: true, candidacy: true });
    const cas = run(standing.state, [{ type: 'StandLeaseRead', lease: lease(3) }]);
    expect(cas.effects).toEqual([{ type: 'TakeLease', current: lease(3), renewal: undefined, why: undefined }]);
    const won = run(cas.state, [{ type: 'LeaseTaken', lease: lease(4, NODE, INC), current: lease(3), why: undefined, takenAt: undefined }], 1234);
    expect(won.effects).toEqual([
      { type: 'SpawnSingleton', epoch: 4 },
      { type: 'SingletonBegin', epoch: 4, view: v, takenAt: undefined },
    ]);
    expect(won.state).toMatchObject({ singleton: { epoch: 4, startedAt: 1234 }, candidacy: false, candidacyFailures: 0 });
    // A newer view goes to it; one where another is oldest stops it.
    expect(run(won.state, [{ type: 'View', view: v, member: true }]).effects).toEqual([{ type: 'SingletonView', epoch: 4, view: v }]);
    expect(run(won.state, [{ type: 'View', view: view(OTHER, SELF), member: true }]).effects).toEqual([
      { type: 'StopSingleton', epoch: 4, reason: 'n0 is now the oldest member' },
    ]);
  });

  it('tries again, with backoff and no singleton, when the singleton it won could not be made', () => {
    const standing = run(fresh(), [{ type: 'View', view: view(SELF, OTHER), member: true }]);
    const won = run(standing.state, [{ type: 'LeaseTaken', lease: lease(4, NODE, INC), current: lease(3), why: undefined, takenAt: undefined }]);
    const failed = run(won.state, [{ type: 'CandidacyFailed', err: new Error('no spawn') }]);
    expect(failed.state).toMatchObject({ singleton: undefined, candidacy: false, candidacyFailures: 1 });
    expect(failed.effects).toContainEqual({ type: 'RetryCounted', what: 'taking the singleton lease' });
  });

  it('does not stand when another member is older, nor twice at once', () => {
    expect(run(fresh(), [{ type: 'View', view: view(OTHER, SELF), member: true }]).effects).toEqual([]);
    const standing = run(fresh(), [{ type: 'View', view: view(SELF), member: true }]).state;
    expect(run(standing, [{ type: 'RetryCandidacy' }]).effects).toEqual([]);
  });

  it('tries again after a lost race, and backs off doubling while the store fails', () => {
    const standing = run(fresh(), [{ type: 'View', view: view(SELF), member: true }]).state;
    const lost = run(standing, [{ type: 'LeaseTaken', lease: undefined, current: lease(3), why: undefined, takenAt: undefined }]);
    expect(lost.effects).toEqual([
      { type: 'Log', level: 'info', fields: { current: 3 }, msg: 'another candidate took the singleton lease first; trying again' },
      { type: 'Schedule', afterMs: 100, msg: { type: 'RetryCandidacy' } },
    ]);
    expect(lost.state.candidacy).toBe(false);
    let s = standing;
    const waits: number[] = [];
    for (let i = 0; i < 6; i++) {
      const failed = run(s, [{ type: 'CandidacyFailed', err: 'store away' }, { type: 'RetryCandidacy' }]);
      const scheduled = run(s, [{ type: 'CandidacyFailed', err: 'store away' }]).effects.find((e) => e.type === 'Schedule');
      waits.push((scheduled as { afterMs: number }).afterMs);
      expect(failed.effects).toEqual([{ type: 'ReadLeaseToStand' }]);
      s = failed.state;
    }
    expect(waits).toEqual([100, 200, 400, 800, 1000, 1000]);
    const failed = run(standing, [{ type: 'CandidacyFailed', err: 'store away' }]).effects;
    expect(failed.slice(0, 2)).toEqual([
      {
        type: 'Log',
        level: 'warn',
        fields: { event: 'retry', what: 'taking the singleton lease', err: 'store away', attempt: 1, retryInMs: 100 },
        msg: 'could not take the singleton lease; trying again',
      },
      { type: 'RetryCounted', what: 'taking the singleton lease' },
    ]);
  });

  it('stands again after a crash, later after each crash in a row, at once again after a long run', () => {
    const hosting = { ...fresh(), joined: true, view: view(SELF), singleton: { epoch: 4 as Epoch, startedAt: 0 } };
    const crashed = run(hosting, [{ type: 'SingletonStopped', epoch: 4 as Epoch, reason: 'crashed' }], 10);
    expect(crashed.effects).toEqual([
      {
        type: 'Log',
        level: 'warn',
        fields: { event: 'singleton.stopped', reason: 'crashed', epoch: 4, ranMs: 10, retryInMs: 100 },
        msg: 'the singleton crashed; standing again',
      },
      { type: 'Schedule', afterMs: 100, msg: { type: 'RetryCandidacy' } },
    ]);
    expect(crashed.state.singleton).toBeUndefined();
    const again = run({ ...hosting, singletonCrashes: 2 }, [{ type: 'SingletonStopped', epoch: 4 as Epoch, reason: 'crashed' }], 10);
    expect(again.effects[1]).toEqual({ type: 'Schedule', afterMs: 400, msg: { type: 'RetryCandidacy' } });
    const afterLongRun = run({ ...hosting, singletonCrashes: 2 }, [{ type: 'SingletonStopped', epoch: 4 as Epoch, reason: 'crashed' }], 5000);
    expect(afterLongRun.effects[1]).toEqual({ type: 'Schedule', afterMs: 100, msg: { type: 'RetryCandidacy' } });
    // A stop it asked for is not retried; an older singleton's stop changes nothing.
    expect(run(hosting, [{ type: 'SingletonStopped', epoch: 4 as Epoch, reason: 'n0 is now the oldest member' }]).effects).toEqual([]);
    const old = run(hosting, [{ type: 'SingletonStopped', epoch: 3 as Epoch, reason: 'crashed' }]);
    expect(old.state).toBe(hosting);
  });

  it('stops acting as a member once the group no longer lists it, and only once it had joined', () => {
    const hosting = { ...fresh(), joined: true, view: view(SELF), singleton: { epoch: 4 as Epoch, startedAt: 0 } };
    expect(run(hosting, [{ type: 'View', view: view(OTHER), member: false }]).effects).toEqual([
      { type: 'StopSingleton', epoch: 4, reason: 'this node is no longer a member' },
      { type: 'StopAll', reason: 'this node is no longer a member' },
      { type: 'Fenced', reason: 'no longer a member of the cluster' },
    ]);
    expect(run(fresh(), [{ type: 'View', view: view(OTHER), member: false }]).effects).toEqual([]);
  });
});

describe('guardian step: reads of its state', () => {
  const reply = () => undefined;
  it('answers no singleton state when it hosts none, and asks its singleton or coordinator otherwise', () => {
    expect(run(fresh(), [{ type: 'GetSingletonState', reply }]).effects).toEqual([{ type: 'ReplyNoSingleton', reply }]);
    const hosting = { ...fresh(), singleton: { epoch: 4 as Epoch, startedAt: 0 } };
    expect(run(hosting, [{ type: 'GetSingletonState', reply }]).effects).toEqual([{ type: 'AskSingletonState', epoch: 4, reply }]);
    expect(run(fresh(), [{ type: 'GetRunning', reply }]).effects).toEqual([{ type: 'AskRunning', reply }]);
    expect(run(fresh(), [{ type: 'GetRunningSummary', listUpTo: 5, reply }]).effects).toEqual([{ type: 'AskRunningSummary', listUpTo: 5, reply }]);
  });
});

describe('guardian step: heartbeat mode, the lease watch', () => {
  const watchNow = { type: 'Schedule', afterMs: 0, msg: { type: 'WatchLease' }, key: 'watch' };

  it('looks at the lease at once when it joins; an earlier look already due stays, a look now replaces a later one', () => {
    const first = run(fresh(true), [{ type: 'View', view: view(OTHER, SELF), member: true }]);
    expect(first.effects).toEqual([watchNow]);
    expect(first.state.watchPending).toBe(true);
    expect(run(first.state, [{ type: 'View', view: view(OTHER, SELF), member: true }]).effects).toEqual([{ type: 'CancelTimer', key: 'watch' }, watchNow]);
    // A failed read asks for a look a heartbeat later: one is pending already, so none is added.
    expect(run(first.state, [{ type: 'LeaseReadFailed', err: 'x' }]).effects).toEqual([
      {
        type: 'Log',
        level: 'warn',
        fields: { event: 'retry', what: 'reading the singleton lease', err: 'x' },
        msg: 'could not read the singleton lease; looking again',
      },
    ]);
  });

  it('reads the lease on each look while it hosts nothing, and logs a failing read once per run', () => {
    const s = { ...joined(true), watchPending: true };
    const look = run(s, [{ type: 'WatchLease' }]);
    expect(look.effects).toEqual([{ type: 'TimerFired', key: 'watch' }, { type: 'ReadLease' }]);
    const failed = run(look.state, [{ type: 'LeaseReadFailed', err: 'x' }]);
    expect(failed.effects.map((e) => e.type)).toEqual(['Log', 'Schedule']);
    expect(failed.effects[1]).toEqual({ type: 'Schedule', afterMs: 50, msg: { type: 'WatchLease' }, key: 'watch' });
    const again = run(failed.state, [{ type: 'WatchLease' }, { type: 'LeaseReadFailed', err: 'x' }]);
    expect(again.effects.map((e) => e.type)).toEqual(['Schedule']);
    const ok = run(again.state, [{ type: 'WatchLease' }, { type: 'LeaseRead', lease: lease(3) }]);
    expect(ok.effects).toEqual([{ type: 'ObserveLease', lease: lease(3) }]);
    expect(ok.state.leaseReadFailing).toBe(false);
    const hosting = { ...s, singleton: { epoch: 4 as Epoch, startedAt: 0 } };
    expect(run(hosting, [{ type: 'WatchLease' }]).effects).toEqual([{ type: 'TimerFired', key: 'watch' }]);
  });

  it('the next in line stands on a lease never taken, and takes over one that ran out', () => {
    const s = joined(true);
    const free = run(s, [observed({ place: 0, look: { verdict: { kind: 'free' }, clockWentBack: false, backingOffMs: 0, waitedMs: 480 } })]);
    expect(free.effects).toEqual([{ type: 'TakeLease', current: undefined, renewal: undefined, why: 'no lease yet' }]);
    const gone = lease(3);
    const expired = run(s, [
      observed({ lease: gone, place: 1, look: { verdict: { kind: 'expired', lease: gone }, clockWentBack: false, backingOffMs: 0, waitedMs: 680 } }),
    ]);
    expect(expired.effects).toEqual([{ type: 'TakeLease', current: gone, renewal: 4, why: 'its lease was not renewed for 680 ms' }]);
    const won = run(expired.state, [
      { type: 'LeaseTaken', lease: lease(4, NODE, INC), current: gone, why: 'its lease was not renewed for 680 ms', takenAt: 77 },
    ]);
    expect(won.effects).toEqual([
      {
        type: 'Log',
        level: 'info',
        fields: { event: 'singleton.succession', epoch: 4, predecessor: 'n0@i0', predecessorEpoch: 3, why: 'its lease was not renewed for 680 ms' },
        msg: 'took the singleton lease from n0: its lease was not renewed for 680 ms',
      },
      { type: 'SpawnSingleton', epoch: 4 },
      { type: 'SingletonBegin', epoch: 4, view: s.view, takenAt: 77 },
    ]);
  });

  it('waits on a lease held, the next in line every heartbeat, the others every half lease, and not while backing off', () => {
    const s = joined(true);
    const held = { verdict: { kind: 'held', lease: lease(3) }, clockWentBack: false, backingOffMs: 0, waitedMs: 480 } as const;
    expect(run(s, [observed({ lease: lease(3), place: 0, look: held })]).effects).toEqual([
      { type: 'Schedule', afterMs: 50, msg: { type: 'WatchLease' }, key: 'watch' },
    ]);
    expect(run(s, [observed({ lease: lease(3), place: 2, look: held })]).effects).toEqual([
      { type: 'Schedule', afterMs: 200, msg: { type: 'WatchLease' }, key: 'watch' },
    ]);
    const backingOff = run(s, [observed({ place: 0, look: { verdict: { kind: 'free' }, clockWentBack: false, backingOffMs: 30, waitedMs: 480 } })]);
    expect(backingOff.effects).toEqual([{ type: 'Schedule', afterMs: 30, msg: { type: 'WatchLease' }, key: 'watch' }]);
    expect(backingOff.state.candidacy).toBe(false);
  });

  it('refuses a row of a future epoch, counts a holder the group does not list once per renewal, and a clock that went back', () => {
    const s = joined(true);
    const far = lease(90);
    expect(run(s, [observed({ lease: far, problem: 'future-epoch', knownEpoch: 3 })]).effects).toEqual([
      { type: 'Drop', cause: 'future-epoch', detail: 'singleton lease row of epoch 90 held by n0@i0; the newest epoch seen is 3' },
      { type: 'Schedule', afterMs: 50, msg: { type: 'WatchLease' }, key: 'watch' },
    ]);
    const stranger = lease(3, 'n7', 'i7');
    const look = { verdict: { kind: 'held', lease: stranger }, clockWentBack: false, backingOffMs: 0, waitedMs: 480 } as const;
    const first = run(s, [observed({ lease: stranger, problem: 'holder-not-member', look })]);
    expect(first.effects[0]).toEqual({
      type: 'Drop',
      cause: 'holder-not-member',
      detail: 'singleton lease row of epoch 3 renewed (4) by n7@i7, which the group does not list',
    });
    expect(first.state.holderNotMemberSeen).toBe(true);
    const same = run({ ...first.state, watchPending: false }, [observed({ lease: stranger, problem: 'holder-not-member', look })]);
    expect(same.effects.map((e) => e.type)).toEqual(['Schedule']);
    const renewed = run({ ...first.state, watchPending: false }, [observed({ lease: stranger, problem: 'holder-not-member', changedBefore: true, look })]);
    expect(renewed.effects.map((e) => e.type)).toEqual(['Drop', 'Schedule']);
    const jumped = run(s, [observed({ lease: lease(3), look: { ...look, verdict: { kind: 'held', lease: lease(3) }, clockWentBack: true } })]);
    expect(jumped.effects[0]).toMatchObject({ type: 'Drop', cause: 'clock-jump' });
  });

  it('backs off after a lost race or a lost lease, and says for how long', () => {
    const standing = run(joined(true), [
      observed({ place: 0, look: { verdict: { kind: 'free' }, clockWentBack: false, backingOffMs: 0, waitedMs: 480 } }),
    ]).state;
    const lost = run(standing, [{ type: 'LeaseTaken', lease: undefined, current: undefined, why: 'no lease yet', takenAt: 1 }]);
    expect(lost.effects).toEqual([
      { type: 'Log', level: 'info', fields: { current: undefined }, msg: 'another candidate took the singleton lease first; trying again' },
      { type: 'BackOff', why: 'lost a race for the singleton lease' },
      { type: 'Schedule', afterMs: 0, msg: { type: 'WatchLease' }, key: 'watch' },
    ]);
    const hosting = { ...joined(true), singleton: { epoch: 4 as Epoch, startedAt: 0 } };
    const stopped = run(hosting, [{ type: 'SingletonStopped', epoch: 4 as Epoch, reason: 'its lease ran out' }]);
    expect(stopped.effects).toEqual([
      { type: 'ResetLeaseWatch' },
      { type: 'BackOff', why: 'its singleton stopped: its lease ran out' },
      { type: 'Schedule', afterMs: 0, msg: { type: 'WatchLease' }, key: 'watch' },
    ]);
    expect(run(fresh(true), [{ type: 'BackedOff', why: 'w', ms: 450 }]).effects).toEqual([
      {
        type: 'Log',
        level: 'info',
        fields: { event: 'singleton.backoff', why: 'w', backoffMs: 450 },
        msg: 'this node does not stand for the singleton lease for 450 ms: w',
      },
    ]);
    // Heartbeat mode retries by looking at the lease, not by age.
    expect(run(fresh(true), [{ type: 'RetryCandidacy' }]).effects).toEqual([{ type: 'Schedule', afterMs: 0, msg: { type: 'WatchLease' }, key: 'watch' }]);
  });
});

describe('guardian step: purity', () => {
  it('never changes the state it is given', () => {
    const s = deepFreeze({
      ...fresh(true),
      joined: true,
      view: view(SELF, OTHER),
      maxEpoch: 2,
      formatToldTo: 2,
      singleton: { epoch: 2 as Epoch, startedAt: 0 },
    });
    const before = JSON.stringify(s);
    const msgs: GuardianInput[] = [
      { type: 'View', view: view(OTHER), member: false },
      { type: 'SingletonStopped', epoch: 2 as Epoch, reason: 'crashed' },
      read({ kind: 'members', epoch: 3, version: 1, members: [] }),
      { type: 'WatchLease' },
      { type: 'LeaseReadFailed', err: 'x' },
      { type: 'CandidacyFailed', err: 'x' },
    ];
    for (const msg of msgs) expect(() => guardianStep(s, msg, 10)).not.toThrow();
    expect(JSON.stringify(s)).toBe(before);
  });
});
