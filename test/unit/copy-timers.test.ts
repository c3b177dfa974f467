// A node's shard copies share one timer of its clock (`CopyTimers` over a `TimerHeap`): each copy's
// timer still fires once, at its time, in the order armed; cancelled ones never fire, and many
// cancels do not pile up.
import { describe, expect, it } from 'vitest';
import { CopyTimers, DUE_PER_FIRING } from '../../src/actors/copy-timers.js';
import { SimulatedClock } from '../../src/cluster/clock.js';
import { TimerHeap, type HeapTimer } from '../../src/cluster/timer-heap.js';

function target(fired: string[], name: string, clock: SimulatedClock) {
  return { due: () => fired.push(`${name}@${clock.now()}`) };
}

describe('copy timers', () => {
  it('fires each timer once at its time, ties in the order armed, on a single timer of the clock', () => {
    const clock = new SimulatedClock();
    const timers = new CopyTimers(clock);
    const fired: string[] = [];
    timers.add(300, target(fired, 'c', clock));
    timers.add(100, target(fired, 'a', clock));
    timers.add(100, target(fired, 'b', clock));
    timers.add(0, target(fired, 'z', clock));
    expect(clock.pendingTimers).toBe(1);
    clock.advance(1_000);
    expect(fired).toEqual(['z@0', 'a@100', 'b@100', 'c@300']);
    expect(timers.size).toBe(0);
    expect(clock.pendingTimers).toBe(0);
  });

  it('never fires a cancelled timer, and the clock waits for the next live one', () => {
    const clock = new SimulatedClock();
    const timers = new CopyTimers(clock);
    const fired: string[] = [];
    const early = timers.add(10, target(fired, 'early', clock));
    timers.add(50, target(fired, 'late', clock));
    timers.cancel(early);
    clock.advance(20);
    expect(fired).toEqual([]);
    clock.advance(100);
    expect(fired).toEqual(['late@50']);
  });

  it("a timer armed by a due one for the same instant fires at the clock's next firing, not in the same loop", () => {
    const clock = new SimulatedClock();
    const timers = new CopyTimers(clock);
    const fired: string[] = [];
    let again = 3;
    const loop = {
      due: () => {
        fired.push(`loop@${clock.now()}`);
        if (again-- > 0) timers.add(0, loop);
      },
    };
    timers.add(5, loop);
    clock.advance(5);
    expect(fired).toEqual(['loop@5', 'loop@5', 'loop@5', 'loop@5']);
  });

  it('fires the others when one due throws', () => {
    const clock = new SimulatedClock();
    const timers = new CopyTimers(clock);
    const fired: string[] = [];
    timers.add(10, {
      due: () => {
        throw new Error('a bug in one copy');
      },
    });
    timers.add(10, target(fired, 'next', clock));
    timers.add(20, target(fired, 'later', clock));
    expect(() => clock.advance(10)).toThrow('a bug in one copy');
    clock.advance(20);
    expect(fired).toEqual(['next@10', 'later@20']);
  });

  it('fires nothing once closed, and arms nothing more', () => {
    const clock = new SimulatedClock();
    const timers = new CopyTimers(clock);
    const fired: string[] = [];
    timers.add(10, target(fired, 'a', clock));
    timers.close();
    timers.add(5, target(fired, 'b', clock));
    clock.advance(100);
    expect(fired).toEqual([]);
    expect(clock.pendingTimers).toBe(0);
  });
});

describe('timer heap', () => {
  it('pops in (time, order armed) order against a sorted oracle, with random cancels, and rebuilds without the cancelled', () => {
    let seed = 7;
    const random = () => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31;
    for (let run = 0; run < 200; run++) {
      const heap = new TimerHeap<HeapTimer>();
      const all: HeapTimer[] = [];
      const n = 1 + Math.floor(random() * 3000);
      for (let seq = 0; seq < n; seq++) {
        const t = { at: Math.floor(random() * 100), seq, done: false };
        heap.push(t);
        all.push(t);
      }
      for (const t of all) if (random() < 0.6) heap.cancel(t);
      const expected = all.filter((t) => !t.done).sort((a, b) => a.at - b.at || a.seq - b.seq);
      expect(heap.size).toBe(expected.length);
      const popped: HeapTimer[] = [];
      for (let t = heap.pop(); t !== undefined; t = heap.pop()) popped.push(t);
      expect(popped).toEqual(expected.map((t) => ({ ...t, done: true })));
      expect(heap.size).toBe(0);
    }
  });
});

describe('copy timers, many due at once', () => {
  it('fires at most DUE_PER_FIRING per firing of the clock, the rest at the next firing of the same instant, in order', () => {
    const clock = new SimulatedClock();
    // Which firing of the clock's timer each copy timer fired in.
    let firing = 0;
    const counted = {
      now: () => clock.now(),
      schedule: (ms: number, fn: () => void) =>
        clock.schedule(ms, () => {
          firing++;
          fn();
        }),
    };
    const timers = new CopyTimers(counted);
    const fired: { i: number; firing: number }[] = [];
    const n = DUE_PER_FIRING * 2 + 10;
    for (let i = 0; i < n; i++) timers.add(100, { due: () => fired.push({ i, firing }) });
    clock.advance(1_000);
    const perFiring = [1, 2, 3].map((f) => fired.filter((x) => x.firing === f).length);
    expect(perFiring).toEqual([DUE_PER_FIRING, DUE_PER_FIRING, 10]);
    expect(fired.map((x) => x.i)).toEqual(Array.from({ length: n }, (_, i) => i));
    expect(firing).toBe(3);
  });
});
