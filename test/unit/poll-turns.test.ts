// Turns of the event loop for due polls: a bounded number starts per turn, in order, the rest wait
// (issue 34: 65 536 polls in one turn held the control plane for seconds).
import { describe, expect, it } from 'vitest';
import { PollTurns, pollTurnsFor, processPollTurns } from '../../src/actors/poll-turns.js';
import { MonotonicClock, RealClock, SimulatedClock } from '../../src/cluster/clock.js';

/** A PollTurns whose turns of the event loop and time the test runs by hand. */
function manual(options: { targetTurnMs?: number; minPerTurn?: number; maxPerTurn?: number } = {}) {
  const pending: (() => void)[] = [];
  let now = 0;
  const turns = new PollTurns({ targetTurnMs: 20, minPerTurn: 4, maxPerTurn: 64, ...options, nextTurn: (fn) => pending.push(fn), now: () => now });
  return {
    turns,
    /** Runs the next turn of the event loop, `tookMs` after the previous one. */
    turn(tookMs: number) {
      now += tookMs;
      const fn = pending.shift();
      fn?.();
      return fn !== undefined;
    },
    scheduled: () => pending.length,
  };
}

describe('poll turns', () => {
  it('starts at most perTurn polls per turn of the event loop, oldest first, and asks for a turn only while some wait', () => {
    const m = manual();
    const ran: number[] = [];
    for (let i = 0; i < 100; i++) m.turns.enqueue(() => ran.push(i));
    expect(m.scheduled()).toBe(1);
    const first = m.turns.perTurn;
    m.turn(1);
    expect(ran).toEqual(Array.from({ length: first }, (_, i) => i));
    while (m.turn(1));
    expect(ran).toEqual(Array.from({ length: 100 }, (_, i) => i));
    expect(m.turns.waiting).toBe(0);
    expect(m.scheduled()).toBe(0);
  });

  it('drops a cancelled poll without counting it against the turn', () => {
    const m = manual();
    const ran: string[] = [];
    const cancel = m.turns.enqueue(() => ran.push('a'));
    m.turns.enqueue(() => ran.push('b'));
    cancel();
    cancel(); // twice: nothing more
    m.turn(1);
    expect(ran).toEqual(['b']);
  });

  it('halves the polls per turn after a long turn and raises them step by step while turns are short', () => {
    const m = manual();
    for (let i = 0; i < 10_000; i++) m.turns.enqueue(() => {});
    m.turn(1);
    const start = m.turns.perTurn;
    m.turn(100); // the turn before took 100 ms: too long
    expect(m.turns.perTurn).toBe(Math.max(4, Math.floor(start / 2)));
    for (let i = 0; i < 100; i++) m.turn(100);
    expect(m.turns.perTurn).toBe(4); // never below the minimum
    for (let i = 0; i < 100; i++) m.turn(1);
    expect(m.turns.perTurn).toBe(64); // never above the maximum
  });

  it("is the process's on a real clock, and on a simulated one a node's own, timed by it: a seed replays the same whatever the machine's speed", async () => {
    expect(pollTurnsFor(new RealClock())).toBe(processPollTurns);
    expect(pollTurnsFor(new MonotonicClock())).toBe(processPollTurns);
    const clock = new SimulatedClock(0);
    const turns = pollTurnsFor(clock);
    expect(turns).not.toBe(processPollTurns);
    const start = turns.perTurn;
    let ran = 0;
    for (let i = 0; i < 10 * start; i++) turns.enqueue(() => ran++);
    // Real turns of the event loop, slow ones among them: simulated time does not move, so none counts as long.
    for (let t = 0; t < 20 && turns.waiting > 0; t++) {
      const until = performance.now() + 30;
      while (performance.now() < until);
      await new Promise((resolve) => setImmediate(resolve));
    }
    expect(ran).toBe(10 * start);
    expect(turns.perTurn).toBeGreaterThan(start);
  });
});
