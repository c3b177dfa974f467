// The story's only notion of time. On real time (`npm start`) waiting is sleeping; on a simulated
// clock (the test) waiting moves the SimDriver forward, so the same story runs in both.
import type { Clock } from '../../cluster/clock.js';
import type { SimDriver } from '../../sim/driver.js';

/** The demo was interrupted (Ctrl-C): every wait rejects with this. */
export class DemoInterrupted extends Error {
  constructor() {
    super('interrupted');
    this.name = 'DemoInterrupted';
  }
}

export interface Timeline {
  /** Milliseconds, on the cluster's clock. */
  now(): number;
  /** Lets `ms` of cluster time pass. */
  sleep(ms: number): Promise<void>;
  /** Waits for `p` while cluster time passes; rejects if it has not settled after `maxMs`. */
  settle<T>(p: Promise<T>, maxMs: number, what: string): Promise<T>;
}

/** Real time. `signal` aborts every wait (Ctrl-C). */
export function realTimeline(clock: Clock, signal?: AbortSignal): Timeline {
  /** Resolves after `ms`; rejects at once on Ctrl-C; `cancel` drops the timer (no leak, no hold on the process). */
  const delay = (ms: number) => {
    let cancel = () => {};
    const done = new Promise<void>((resolve, reject) => {
      if (signal?.aborted) return reject(new DemoInterrupted());
      const onAbort = () => {
        clearTimeout(t);
        reject(new DemoInterrupted());
      };
      const t = setTimeout(() => {
        signal?.removeEventListener('abort', onAbort);
        resolve();
      }, ms);
      signal?.addEventListener('abort', onAbort, { once: true });
      cancel = () => {
        clearTimeout(t);
        signal?.removeEventListener('abort', onAbort);
      };
    });
    return { done, cancel };
  };
  return {
    now: () => clock.now(),
    sleep: (ms) => delay(ms).done,
    settle: async <T>(p: Promise<T>, maxMs: number, what: string) => {
      const timer = delay(maxMs);
      try {
        return await Promise.race([
          p,
          timer.done.then(() => {
            throw new Error(`${what} did not finish within ${maxMs} ms`);
          }),
        ]);
      } finally {
        timer.cancel();
      }
    },
  };
}

/** Simulated time through a SimDriver: `sleep` advances the clock and lets the actors settle. */
export function simTimeline(driver: SimDriver, stepMs = 50): Timeline {
  return {
    now: () => driver.clock.now(),
    sleep: (ms) => driver.advance(ms),
    settle: async <T>(p: Promise<T>, maxMs: number, what: string) => {
      let done = false;
      p.then(
        () => (done = true),
        () => (done = true),
      );
      await driver.settle();
      for (let waited = 0; !done; waited += stepMs) {
        if (waited >= maxMs) throw new Error(`${what} did not finish within ${maxMs} ms (simulated)`);
        await driver.advance(stepMs);
      }
      return p;
    },
  };
}
