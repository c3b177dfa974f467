// The FIFO limiter in front of the Cassandra driver (src/store/request-limiter.ts): never more
// than its limit at once, waiting tasks start in the order they came, and a failing task frees
// its slot like any other.
import { describe, expect, it } from 'vitest';
import { FifoLimiter } from '../../src/store/request-limiter.js';

/** A task that runs until `finish` is called. */
function controlled(log: string[], name: string) {
  let finish!: (ok: boolean) => void;
  const task = () =>
    new Promise<string>((resolve, reject) => {
      log.push(`start ${name}`);
      finish = (ok) => (ok ? resolve(name) : reject(new Error(`${name} failed`)));
    });
  return { task, finish: (ok = true) => finish(ok) };
}

const settle = () => new Promise((r) => setImmediate(r));

describe('FifoLimiter', () => {
  it('runs at most `limit` tasks at once and starts the waiting ones in the order they came', async () => {
    const limiter = new FifoLimiter(2);
    const log: string[] = [];
    const tasks = ['a', 'b', 'c', 'd', 'e'].map((n) => controlled(log, n));
    const results = Promise.allSettled(tasks.map((t) => limiter.run(t.task)));
    await settle();
    expect(log).toEqual(['start a', 'start b']);
    expect(limiter.stats).toEqual({ running: 2, waiting: 3, highWater: 2 });

    tasks[1]!.finish();
    await settle();
    expect(log).toEqual(['start a', 'start b', 'start c']);
    tasks[0]!.finish(false); // a failure frees its slot too
    await settle();
    expect(log.at(-1)).toBe('start d');
    tasks[2]!.finish();
    tasks[3]!.finish();
    await settle();
    tasks[4]!.finish();
    expect(await results).toEqual([
      { status: 'rejected', reason: new Error('a failed') },
      { status: 'fulfilled', value: 'b' },
      { status: 'fulfilled', value: 'c' },
      { status: 'fulfilled', value: 'd' },
      { status: 'fulfilled', value: 'e' },
    ]);
    expect(limiter.stats).toEqual({ running: 0, waiting: 0, highWater: 2 });
  });

  it('a task that throws at once rejects and frees its slot', async () => {
    const limiter = new FifoLimiter(1);
    await expect(
      limiter.run(() => {
        throw new Error('at once');
      }),
    ).rejects.toThrow('at once');
    expect(await limiter.run(async () => 'next')).toBe('next');
  });

  it('thousands of tasks: never more than the limit in flight, all done, in order of arrival', async () => {
    const limiter = new FifoLimiter(16);
    let inFlight = 0;
    let most = 0;
    const started: number[] = [];
    const results = await Promise.all(
      Array.from({ length: 5_000 }, (_, i) =>
        limiter.run(async () => {
          started.push(i);
          inFlight += 1;
          most = Math.max(most, inFlight);
          await new Promise((r) => setImmediate(r));
          inFlight -= 1;
          return i;
        }),
      ),
    );
    expect(results).toEqual(Array.from({ length: 5_000 }, (_, i) => i));
    expect(started).toEqual(results);
    expect(most).toBe(16);
    expect(limiter.stats.highWater).toBe(16);
  });

  it('refuses a limit that is not a whole number >= 1', () => {
    expect(() => new FifoLimiter(0)).toThrow(RangeError);
    expect(() => new FifoLimiter(1.5)).toThrow(RangeError);
  });
});
