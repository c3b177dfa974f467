// The singleton's own lease (docs/ARCHITECTURE.md §11.9) on a simulated clock: the holder renews it
// while it hears a majority and stops when it runs out or is taken, even while its store hangs, or
// when its clock goes back; the successor takes it only after one renewal stayed the same for a
// whole lease, stretched by the drift factor, however its clock jumps; the next in line is the first
// member that does not hold it; a lease row from the future is refused; a candidate that lost backs off.
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { SimulatedClock } from '../../src/cluster/clock.js';
import { SingletonLeaseKeeper } from '../../src/cluster/failure-detector/singleton-lease-keeper.js';
import {
  leaseRowProblem,
  LeaseWatch,
  maxWatchStepMs,
  placeInLine,
  placeWaitMs,
  StandBackoff,
  standBackoffMs,
} from '../../src/cluster/failure-detector/succession.js';
import { epoch, incarnation, nodeId, type Epoch } from '../../src/core/ids.js';
import { RELEASED_RENEWAL, type Lease } from '../../src/store/meta-store.js';

const settings = { singletonLeaseMs: 1000 };
const member = (n: string, i = 1) => ({ node: nodeId(n), incarnation: incarnation(`${n}#${i}`) });
const lease = (n: string, e: number, renewal: number): Lease => ({ ...member(n), epoch: epoch(e), renewal });
const flush = () => new Promise((resolve) => setImmediate(resolve));

/** A store whose renewals answer as the test says, or never. */
function store(answer: (epoch: Epoch, renewal: number) => boolean | 'hang') {
  const renewals: number[] = [];
  return {
    renewals,
    renewLease: (e: Epoch, renewal: number) => {
      renewals.push(renewal);
      const a = answer(e, renewal);
      return a === 'hang' ? new Promise<boolean>(() => {}) : Promise.resolve(a);
    },
  };
}

function keeper(clock: SimulatedClock, s: ReturnType<typeof store>, hearsMajority: () => boolean = () => true) {
  const lost: string[] = [];
  const k = new SingletonLeaseKeeper({
    store: s,
    epoch: epoch(3),
    settings,
    clock,
    log: pino({ level: 'silent' }),
    takenAt: clock.now(),
    hearsMajority,
    onLost: (r) => lost.push(r),
  });
  k.start();
  return { k, lost };
}

async function advance(clock: SimulatedClock, ms: number, step = 10): Promise<void> {
  for (let t = 0; t < ms; t += step) {
    clock.advance(step);
    await flush();
  }
}

describe('SingletonLeaseKeeper', () => {
  it('renews four times per lease and keeps the role as long as renewals land', async () => {
    const clock = new SimulatedClock(0);
    const s = store(() => true);
    const { k, lost } = keeper(clock, s);
    await advance(clock, 5_000);
    expect(s.renewals.length).toBeGreaterThanOrEqual(19);
    expect(s.renewals).toEqual(s.renewals.map((_, i) => i + 1)); // a new number each time
    expect(lost).toEqual([]);
    expect(k.remainingMs()).toBeGreaterThan(700);
  });

  it('stops at once when a renewal is refused: another node took the lease', async () => {
    const clock = new SimulatedClock(0);
    const s = store((_, r) => r < 3);
    const { k, lost } = keeper(clock, s);
    await advance(clock, 1_000);
    expect(lost).toEqual(['another node took the singleton lease']);
    expect(k.remainingMs()).toBe(0);
  });

  it('runs out a lease after its last landed renewal was sent, while the store hangs', async () => {
    const clock = new SimulatedClock(0);
    const s = store((_, r) => (r <= 2 ? true : 'hang'));
    const { lost } = keeper(clock, s);
    // Renewal 2 was sent at 500 ms: the lease ends at 1500 ms, though renewal 3 never answers.
    await advance(clock, 1_490);
    expect(lost).toEqual([]);
    await advance(clock, 20);
    expect(lost).toEqual(['the singleton lease ran out: not renewed within 1000 ms']);
  });

  it('does not renew while it hears no majority, so it gives way', async () => {
    const clock = new SimulatedClock(0);
    const s = store(() => true);
    let majority = true;
    const { lost } = keeper(clock, s, () => majority);
    await advance(clock, 600);
    majority = false;
    const before = s.renewals.length;
    await advance(clock, 1_200);
    expect(s.renewals.length).toBe(before);
    expect(lost).toHaveLength(1);
  });

  it('loses the lease at once when its clock goes back: a grant measured on it could outlast the role', async () => {
    const clock = new SimulatedClock(10_000);
    const s = store(() => true);
    const k = new SingletonLeaseKeeper({
      store: s,
      epoch: epoch(3),
      settings,
      clock: { now: () => clockNow, schedule: (ms, fn) => clock.schedule(ms, fn) },
      log: pino({ level: 'silent' }),
      takenAt: 10_000,
      hearsMajority: () => true,
      onLost: (r) => lost.push(r),
    });
    const lost: string[] = [];
    let clockNow = 10_000;
    k.start();
    clockNow = 10_100;
    expect(k.remainingMs()).toBe(900);
    clockNow = 9_000; // back 1.1 s: the lease would seem to run 1.1 s longer
    expect(k.remainingMs()).toBe(0);
    expect(lost).toEqual([expect.stringMatching(/clock went back 1100 ms/)]);
  });
});

/** Looks at `lease` every `stepMs` from `from`; the first time it is judged expired (undefined: never by `to`). */
function expiresAt(w: LeaseWatch, l: Lease, from: number, to: number, stepMs: number, extraMs = 0): number | undefined {
  for (let t = from; t <= to; t += stepMs) if (w.observe(l, t, extraMs).kind === 'expired') return t;
  return undefined;
}

describe('succession', () => {
  it('the line is the members without the lease holder, oldest first; a holder that is this incarnation stays in line', () => {
    const members = [member('a'), member('b'), member('c')];
    expect(placeInLine(members, undefined, member('a'))).toBe(0);
    expect(placeInLine(members, member('a'), member('b'))).toBe(0);
    expect(placeInLine(members, member('a'), member('c'))).toBe(1);
    expect(placeInLine(members, member('b'), member('c'))).toBe(1);
    expect(placeInLine(members, member('a', 0), member('b'))).toBe(1); // an older incarnation of a holds it
    expect(placeInLine(members, member('a'), member('a'))).toBe(0);
    expect(placeInLine(members, member('a'), member('d'))).toBeUndefined(); // not a member
    expect(placeWaitMs(0, settings)).toBe(0);
    expect(placeWaitMs(2, settings)).toBe(1000);
  });

  it('one behind in line waits half a lease more: a dead next in line costs that, not a session', () => {
    expect(expiresAt(new LeaseWatch(settings), lease('a', 1, 5), 0, 5_000, 1, placeWaitMs(1, settings))).toBe(1_521);
    expect(expiresAt(new LeaseWatch(settings), lease('a', 1, 5), 0, 5_000, 1)).toBe(1_021);
  });

  it('a lease is expired only after the same renewal was seen for the lease stretched by the drift factor', () => {
    const w = new LeaseWatch(settings);
    expect(w.observe(undefined, 0).kind).toBe('free');
    expect(w.observe(lease('a', 1, 5), 100).kind).toBe('held');
    expect(w.observe(lease('a', 1, 5), 600).kind).toBe('held');
    expect(w.observe(lease('a', 1, 5), 1_100).kind).toBe('held');
    expect(w.observe(lease('a', 1, 5), 1_120).kind).toBe('held'); // 1020 ms < 1021
    expect(w.observe(lease('a', 1, 5), 1_121)).toEqual({ kind: 'expired', lease: lease('a', 1, 5) });
    // A new renewal starts the wait over, and so does a new holder at the same renewal number.
    expect(w.observe(lease('a', 1, 6), 1_200).kind).toBe('held');
    expect(w.changed).toBe(true);
    expect(w.observe(lease('a', 1, 6), 1_700).kind).toBe('held');
    expect(w.changed).toBe(false);
    expect(w.observe(lease('a', 1, 6), 2_100).kind).toBe('held');
    expect(w.observe(lease('b', 2, 0), 2_300).kind).toBe('held');
    expect(w.observe(lease('b', 2, 0), 2_800).kind).toBe('held');
    expect(w.observe(lease('b', 2, 0), 3_300).kind).toBe('held');
    expect(w.observe(lease('b', 2, 0), 3_321).kind).toBe('expired');
  });

  it('a lease its holder released (a graceful stop, its grants waited out) is taken at once by the next in line; the others still wait their place', () => {
    const w = new LeaseWatch(settings);
    expect(w.observe(lease('a', 1, 5), 0).kind).toBe('held');
    expect(w.observe(lease('a', 1, RELEASED_RENEWAL), 100)).toEqual({ kind: 'expired', lease: lease('a', 1, RELEASED_RENEWAL) });
    const second = new LeaseWatch(settings);
    expect(second.observe(lease('a', 1, RELEASED_RENEWAL), 0, placeWaitMs(1, settings)).kind).toBe('held');
    expect(second.observe(lease('a', 1, RELEASED_RENEWAL), 499, placeWaitMs(1, settings)).kind).toBe('held');
    expect(second.observe(lease('a', 1, RELEASED_RENEWAL), 500, placeWaitMs(1, settings)).kind).toBe('expired');
  });

  it('counts at most half a lease per look, so no leap of the clock skips the wait', () => {
    expect(maxWatchStepMs(settings)).toBe(500);
    const w = new LeaseWatch(settings);
    w.observe(lease('a', 1, 5), 0);
    // The clock leaps 10 s between two looks (no real time may have passed): half a lease counted.
    expect(w.observe(lease('a', 1, 5), 10_000).kind).toBe('held');
    expect(w.observe(lease('a', 1, 5), 10_100).kind).toBe('held');
    // The rest of the wait must still be looked at: 1021 ms in all.
    expect(expiresAt(w, lease('a', 1, 5), 10_200, 20_000, 100)).toBe(10_600);
  });

  it('starts the wait over when the clock goes back, and says so', () => {
    const w = new LeaseWatch(settings);
    w.observe(lease('a', 1, 5), 5_000);
    w.observe(lease('a', 1, 5), 5_500);
    expect(w.clockWentBack).toBe(false);
    expect(w.observe(lease('a', 1, 5), 4_000).kind).toBe('held');
    expect(w.clockWentBack).toBe(true);
    expect(expiresAt(w, lease('a', 1, 5), 4_100, 9_000, 100)).toBe(5_100); // 1021 ms from 4000, at the next look
  });

  it('refuses a lease row far ahead of every epoch seen, and notes one held by a non-member', () => {
    const members = [member('a'), member('b')];
    expect(leaseRowProblem(lease('a', 7, 3), 6, members)).toBeUndefined();
    expect(leaseRowProblem(lease('a', 9_000, 3), -1, members)).toBeUndefined(); // nothing seen yet: nothing to compare
    expect(leaseRowProblem(lease('a', 1_007, 3), 7, members)).toBeUndefined(); // a thousand takeovers ahead: still plausible
    expect(leaseRowProblem(lease('a', 1_008, 3), 7, members)).toBe('future-epoch');
    expect(leaseRowProblem(lease('z', 8, 3), 7, members)).toBe('holder-not-member');
    expect(leaseRowProblem(lease('a', 8, 3), 7, [member('a', 2), member('b')])).toBe('holder-not-member'); // an older incarnation
  });

  it('backs a candidate off a whole lease and up to half of one more after it lost', () => {
    expect(standBackoffMs(settings, 0)).toBe(1_000);
    expect(standBackoffMs(settings, 250.7)).toBe(1_250);
    expect(standBackoffMs(settings, 10_000)).toBe(1_500);
    const b = new StandBackoff();
    expect(b.remainingMs(0)).toBe(0);
    b.backOff(100, 1_200);
    expect(b.remainingMs(600)).toBe(700);
    b.backOff(200, 100); // a shorter one does not shorten it
    expect(b.remainingMs(1_299)).toBe(1);
    expect(b.remainingMs(1_299.999_999_999)).toBe(1); // whole ms: never a fraction to wait for again
    expect(b.remainingMs(1_300)).toBe(0);
  });
});
