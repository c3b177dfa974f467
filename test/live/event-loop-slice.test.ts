// EventLoopSlice: a run of short steps gives the event loop a turn once it has taken its slice,
// and a run that already had one (it waited on I/O) starts afresh.
import { describe, expect, it } from 'vitest';
import { EventLoopSlice } from '../../src/cluster/event-loop-slice.js';

/** Runs `steps` steps of `stepMs` (on a fake clock) and says before which steps a timer got a turn. */
async function run(slice: EventLoopSlice, clock: { t: number }, steps: number, stepMs: number): Promise<number[]> {
  const turns: number[] = [];
  let step = 0;
  let ticking = true;
  const tick = () => {
    turns.push(step);
    if (ticking) setImmediate(tick);
  };
  setImmediate(tick);
  for (; step < steps; step++) {
    await slice.yieldIfSpent();
    clock.t += stepMs; // the step's work, on the fake clock: no await in it
  }
  await new Promise((resolve) => setImmediate(resolve)); // the turn after the run
  ticking = false;
  return turns;
}

describe('EventLoopSlice', () => {
  it('lets the event loop run once a run of steps has taken the slice, and not before', async () => {
    const clock = { t: 0 };
    const slice = new EventLoopSlice(20, () => clock.t);
    // 5 ms steps, a 20 ms slice: the loop turns before every fifth step (the fifth starts 20 ms
    // into the run), then once more after the run; without the slice, only after the run.
    const turns = await run(slice, clock, 40, 5);
    expect(turns).toEqual([4, 9, 14, 19, 24, 29, 34, 39, 40]);
  });

  it('resolves at once for steps that stay within the slice', async () => {
    const clock = { t: 0 };
    const slice = new EventLoopSlice(20, () => clock.t);
    const turns = await run(slice, clock, 3, 1);
    expect(turns).toEqual([3]);
  });

  it('starts a new slice after the loop had a turn of its own (a wait on I/O between steps)', async () => {
    const clock = { t: 0 };
    const slice = new EventLoopSlice(20, () => clock.t);
    await slice.yieldIfSpent();
    clock.t += 19;
    await new Promise((resolve) => setTimeout(resolve, 1)); // the loop turns: the run so far is over
    let yielded = false;
    setImmediate(() => (yielded = true));
    await slice.yieldIfSpent(); // a new run: no yield although 19 ms passed before the wait
    expect(yielded).toBe(false);
  });

  it('shared by two runs, gives the loop a turn once their work together has taken the slice', async () => {
    const clock = { t: 0 };
    const slice = new EventLoopSlice(20, () => clock.t);
    const work: number[] = []; // the fake clock at each turn of the loop
    let ticking = true;
    const tick = () => {
      work.push(clock.t);
      if (ticking) setImmediate(tick);
    };
    setImmediate(tick);
    const runOf = async (steps: number) => {
      for (let step = 0; step < steps; step++) {
        await slice.yieldIfSpent();
        clock.t += 5;
      }
    };
    await Promise.all([runOf(40), runOf(40)]);
    ticking = false;
    expect(clock.t).toBe(400);
    const between = work.slice(1).map((t, i) => t - work[i]!);
    // The slice and, at most, the step of each run that crossed it (30 ms): never a slice of each
    // run in one turn, as two slices of their own would give (50 ms).
    expect(Math.max(...between)).toBeLessThanOrEqual(30);
    expect(work.length).toBeGreaterThanOrEqual(400 / 30);
  });
});
