// The clocks everything outside the core takes its time from: the simulated one must replay the
// same timers in the same order every run; the real one must fire and cancel real timers.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { MonotonicClock, RealClock, SimulatedClock } from '../../src/cluster/clock.js';

describe('SimulatedClock', () => {
  it('stands still until advanced, then fires due timers in time order with now() at each timer', () => {
    const clock = new SimulatedClock(100);
    const fired: [string, number][] = [];
    clock.schedule(30, () => fired.push(['c', clock.now()]));
    clock.schedule(10, () => fired.push(['a', clock.now()]));
    clock.schedule(20, () => fired.push(['b', clock.now()]));
    expect(clock.now()).toBe(100);
    expect(fired).toEqual([]);

    clock.advance(25);
    expect(fired).toEqual([
      ['a', 110],
      ['b', 120],
    ]);
    expect(clock.now()).toBe(125);
    clock.advanceTo(130);
    expect(fired.at(-1)).toEqual(['c', 130]);
  });

  // Seen in the simulator (seed 34365): a backoff's remainder on a drifting clock was a few
  // nanoseconds, each look set a timer for what was left, and the due time, rounded to the same
  // instant, never let time move. Node waits a whole millisecond for such a delay; so does this clock.
  it('waits a whole millisecond for a delay of a fraction of one, as Node does; 0 stays this instant', () => {
    const clock = new SimulatedClock(32_837.424502575);
    const fired: number[] = [];
    clock.schedule(3.6e-12, () => fired.push(clock.now()));
    clock.schedule(0, () => fired.push(clock.now()));
    clock.advance(0);
    expect(fired).toEqual([32_837.424502575]);
    clock.advance(1);
    expect(fired).toEqual([32_837.424502575, 32_838.424502575]);
  });

  it('fires timers due at the same time in the order they were scheduled', () => {
    const clock = new SimulatedClock();
    const fired: number[] = [];
    for (let i = 0; i < 5; i += 1) clock.schedule(10, () => fired.push(i));
    clock.schedule(5, () => fired.push(-1));
    clock.advance(10);
    expect(fired).toEqual([-1, 0, 1, 2, 3, 4]);
  });

  it('fires timers scheduled by timers within the same advance, after earlier ones due at the same time', () => {
    const clock = new SimulatedClock();
    const fired: string[] = [];
    clock.schedule(10, () => {
      fired.push(`first@${clock.now()}`);
      clock.schedule(0, () => fired.push(`child0@${clock.now()}`));
      clock.schedule(5, () => fired.push(`child5@${clock.now()}`));
      clock.schedule(50, () => fired.push(`child50@${clock.now()}`));
    });
    clock.schedule(10, () => fired.push(`second@${clock.now()}`));
    clock.advance(20);
    expect(fired).toEqual(['first@10', 'second@10', 'child0@10', 'child5@15']);
    expect(clock.pendingTimers).toBe(1);
    expect(clock.nextTimerAt()).toBe(60);
  });

  it('a cancelled timer never fires; cancelling twice or after it fired does nothing', () => {
    const clock = new SimulatedClock();
    const fired: string[] = [];
    const cancelA = clock.schedule(10, () => fired.push('a'));
    const cancelB = clock.schedule(10, () => fired.push('b'));
    cancelA();
    cancelA();
    expect(clock.pendingTimers).toBe(1);
    clock.advance(10);
    cancelB();
    clock.advance(100);
    expect(fired).toEqual(['b']);
    expect(clock.nextTimerAt()).toBeUndefined();
  });

  it('a timer can cancel a later one due at the same time', () => {
    const clock = new SimulatedClock();
    const fired: string[] = [];
    let cancelLater = (): void => {};
    clock.schedule(10, () => {
      fired.push('first');
      cancelLater();
    });
    cancelLater = clock.schedule(10, () => fired.push('later'));
    clock.advance(10);
    expect(fired).toEqual(['first']);
  });

  it('refuses to move backwards and keeps its time when asked to', () => {
    const clock = new SimulatedClock(50);
    expect(() => clock.advance(-1)).toThrow(RangeError);
    expect(() => clock.advance(Number.NaN)).toThrow(RangeError);
    expect(() => clock.advanceTo(49)).toThrow(RangeError);
    expect(clock.now()).toBe(50);
    clock.advanceTo(50); // standing still is fine
    expect(clock.now()).toBe(50);
  });

  it('treats a negative delay as zero: due now, fired on the next advance', () => {
    const clock = new SimulatedClock(10);
    const fired: number[] = [];
    clock.schedule(-5, () => fired.push(clock.now()));
    expect(clock.nextTimerAt()).toBe(10);
    clock.advance(0);
    expect(fired).toEqual([10]);
  });
});

describe('RealClock', () => {
  it('tells wall-clock time', () => {
    const before = Date.now();
    const now = new RealClock().now();
    expect(now).toBeGreaterThanOrEqual(before);
    expect(now).toBeLessThanOrEqual(Date.now());
  });

  it('fires a scheduled callback after roughly its delay', async () => {
    const clock = new RealClock();
    const start = Date.now();
    const firedAt = await new Promise<number>((resolve) => clock.schedule(5, () => resolve(Date.now())));
    expect(firedAt - start).toBeGreaterThanOrEqual(4); // timers may round down by a millisecond
  });

  it('a cancelled callback never fires', async () => {
    const clock = new RealClock();
    let fired = false;
    const cancel = clock.schedule(5, () => (fired = true));
    cancel();
    await new Promise<void>((resolve) => clock.schedule(30, resolve));
    expect(fired).toBe(false);
  });
});

// Node's timers take at most 2^31 - 1 ms (24.8 days) and fire a longer one after 1 ms instead. A
// synthetic dataset of 1e-10 records per second (the API takes any rate above 0) waited for its
// next record that way: each of its shards polled every millisecond, found by Schemathesis.
describe.each([
  ['RealClock', () => new RealClock()],
  ['MonotonicClock', () => new MonotonicClock()],
])('%s: a delay longer than a Node timer takes', (_name, make) => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('does not fire at once', () => {
    vi.useFakeTimers();
    const clock = make();
    let fired = 0;
    clock.schedule(2 ** 31, () => (fired += 1));
    clock.schedule(5e13, () => (fired += 1));
    vi.advanceTimersByTime(1_000);
    expect(fired).toBe(0);
  });

  it('fires once, when it is due, and can be cancelled while it waits', () => {
    vi.useFakeTimers();
    const clock = make();
    const delay = 3 * 2 ** 31 + 7;
    let fired = 0;
    clock.schedule(delay, () => (fired += 1));
    let cancelledFired = false;
    const cancel = clock.schedule(delay, () => (cancelledFired = true));
    vi.advanceTimersByTime(2 ** 31 + 5);
    cancel();
    vi.advanceTimersByTime(delay - (2 ** 31 + 5) - 1);
    expect(fired).toBe(0);
    vi.advanceTimersByTime(1);
    expect(fired).toBe(1);
    vi.advanceTimersByTime(10 * 2 ** 31);
    expect(fired).toBe(1);
    expect(cancelledFired).toBe(false);
  });
});
