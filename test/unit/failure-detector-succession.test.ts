// The singleton's own lease (docs/ARCHITECTURE.md §11.9) on a simulated clock: the holder renews it
// while it hears a majority and stops when it runs out or is taken, even while its store hangs; the
// successor takes it only after one renewal stayed the same for a whole lease, stretched by the
// drift factor; the next in line is the first member that does not hold it.
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { SimulatedClock } from '../../src/cluster/clock.js';
import { SingletonLeaseKeeper } from '../../src/cluster/failure-detector/singleton-lease-keeper.js';
import { LeaseWatch, placeInLine, placeWaitMs } from '../../src/cluster/failure-detector/succession.js';
import { epoch, incarnation, nodeId, type Epoch } from '../../src/core/ids.js';
import type { Lease } from '../../src/store/meta-store.js';

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
  const k = new SingletonLeaseKeeper({ store: s, epoch: epoch(3), settings, clock, log: pino({ level: 'silent' }), takenAt: clock.now(), hearsMajority, onLost: (r) => lost.push(r) });
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
});

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
    const w = new LeaseWatch(settings);
    w.observe(lease('a', 1, 5), 0, placeWaitMs(1, settings));
    expect(w.observe(lease('a', 1, 5), 1_021, placeWaitMs(1, settings)).kind).toBe('held');
    expect(w.observe(lease('a', 1, 5), 1_521, placeWaitMs(1, settings)).kind).toBe('expired');
  });

  it('a lease is expired only after the same renewal was seen for the lease stretched by the drift factor', () => {
    const w = new LeaseWatch(settings);
    expect(w.observe(undefined, 0).kind).toBe('free');
    expect(w.observe(lease('a', 1, 5), 100).kind).toBe('held');
    expect(w.observe(lease('a', 1, 5), 1_120).kind).toBe('held'); // 1020 ms < 1021
    expect(w.observe(lease('a', 1, 5), 1_121)).toEqual({ kind: 'expired', lease: lease('a', 1, 5) });
    // A new renewal starts the wait over, and so does a new holder at the same renewal number.
    expect(w.observe(lease('a', 1, 6), 1_200).kind).toBe('held');
    expect(w.observe(lease('a', 1, 6), 2_100).kind).toBe('held');
    expect(w.observe(lease('b', 2, 0), 2_300).kind).toBe('held');
    expect(w.observe(lease('b', 2, 0), 3_321).kind).toBe('expired');
  });
});
