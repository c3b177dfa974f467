// An operator's read answered from local state: a fresh reply within the wait, else the last one,
// one question outstanding at a time.
import { describe, expect, it } from 'vitest';
import { LastAnswer } from '../../src/actors/last-answer.js';
import { SimulatedClock } from '../../src/cluster/clock.js';

describe('LastAnswer', () => {
  it('answers fresh within the wait, else with the last answer, asking once at a time', async () => {
    const clock = new SimulatedClock(0);
    const pending: ((v: number) => void)[] = [];
    let asked = 0;
    const a = new LastAnswer(() => (asked++, new Promise<number>((resolve) => pending.push(resolve))), clock, 20, 0);
    const first = a.get();
    pending.shift()!(1);
    expect(await first).toBe(1);
    // Slow now: the known answer at once (waitWhenKnownMs 0), one question outstanding however often asked.
    const second = a.get();
    const third = a.get();
    clock.advance(0);
    expect([await second, await third]).toEqual([1, 1]);
    expect(asked).toBe(2);
    pending.shift()!(2);
    await new Promise((r) => setImmediate(r));
    const fourth = a.get();
    pending.shift()!(3);
    expect(await fourth).toBe(3);
  });

  it('before any answer it waits up to the wait, then says it does not know', async () => {
    const clock = new SimulatedClock(0);
    const a = new LastAnswer(() => new Promise<number>(() => {}), clock, 20);
    const p = a.get();
    clock.advance(20);
    expect(await p).toBeUndefined();
  });

  it('says how old its last answer is and how long the question outstanding has waited', async () => {
    const clock = new SimulatedClock(1_000);
    const pending: ((v: number) => void)[] = [];
    const a = new LastAnswer(() => new Promise<number>((resolve) => pending.push(resolve)), clock, 20, 0);
    expect(a.age()).toEqual({ ageMs: undefined, waitingMs: 0 });
    const first = a.get();
    clock.advance(5);
    pending.shift()!(1);
    expect(await first).toBe(1);
    expect(a.age()).toEqual({ ageMs: 0, waitingMs: 0 });
    clock.advance(100);
    void a.get(); // asked again; the asked party does not answer
    clock.advance(30_000);
    expect(a.age()).toEqual({ ageMs: 30_100, waitingMs: 30_000 });
    pending.shift()!(2);
    await new Promise((r) => setImmediate(r));
    expect(a.age()).toEqual({ ageMs: 0, waitingMs: 0 });
  });
});
