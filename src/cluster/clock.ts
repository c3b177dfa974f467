import { TimerHeap, type HeapTimer } from './timer-heap.js';

/** Cancels a scheduled callback; calling it twice, or after the callback ran, does nothing. */
export type Cancel = () => void;

/**
 * Time for everything outside the pure core. A real clock in production; a simulated one in tests
 * and the simulator, where time moves only when told to.
 */
export interface Clock {
  /** Milliseconds since the epoch (real) or since the start of the simulation. */
  now(): number;
  /** Runs `fn` once, `delayMs` (>= 0) from now. */
  schedule(delayMs: number, fn: () => void): Cancel;
}

/** Wall-clock time and Node timers. Timers do not keep the process alive on their own. */
export class RealClock implements Clock {
  now(): number {
    return Date.now();
  }

  schedule(delayMs: number, fn: () => void): Cancel {
    return nodeTimer(delayMs, fn);
  }
}

/** The longest delay a Node timer takes (about 24.8 days); a longer one would fire after 1 ms. */
const MAX_NODE_TIMER_MS = 2 ** 31 - 1;

/**
 * `fn` once, `delayMs` from now, on Node timers that do not keep the process alive. A delay longer
 * than a Node timer takes waits in steps of `MAX_NODE_TIMER_MS` (Node would fire it after 1 ms).
 */
function nodeTimer(delayMs: number, fn: () => void): Cancel {
  let timer: NodeJS.Timeout;
  const arm = (remainingMs: number) => {
    timer = remainingMs > MAX_NODE_TIMER_MS ? setTimeout(() => arm(remainingMs - MAX_NODE_TIMER_MS), MAX_NODE_TIMER_MS) : setTimeout(fn, remainingMs);
    timer.unref();
  };
  arm(Math.max(0, delayMs));
  return () => clearTimeout(timer);
}

/**
 * Monotonic time (`performance.now()`: it never jumps when the wall clock is set) and Node timers:
 * for measuring durations that must hold across machines, such as the failure detector's leases
 * (docs/ARCHITECTURE.md §11.6). Its `now()` is not an instant anyone else can read.
 */
export class MonotonicClock implements Clock {
  now(): number {
    return performance.now();
  }

  schedule(delayMs: number, fn: () => void): Cancel {
    return nodeTimer(delayMs, fn);
  }
}

interface Timer extends HeapTimer {
  readonly fn: () => void;
}

/**
 * A clock that moves only on `advance`/`advanceTo`, firing due timers in time order (ties in the
 * order they were scheduled), with `now()` equal to each timer's time while it runs — so a
 * simulation replays identically for the same inputs.
 *
 * The timers wait in a `TimerHeap` ordered by (time, order of scheduling): the simulator fires
 * tens of thousands per run, and sorting them all for each was a good part of its cost.
 */
export class SimulatedClock implements Clock {
  private current: number;
  private seq = 0;
  private readonly timers = new TimerHeap<Timer>();

  constructor(start = 0) {
    this.current = start;
  }

  now(): number {
    return this.current;
  }

  schedule(delayMs: number, fn: () => void): Cancel {
    // As Node's timers: a delay of a fraction of a millisecond is one millisecond (a due time a
    // fraction later could round to the same instant, and a timer set again for what remains would
    // never let time move).
    const timer: Timer = { at: this.current + (delayMs > 0 ? Math.max(1, delayMs) : 0), seq: this.seq++, fn, done: false };
    this.timers.push(timer);
    return () => this.timers.cancel(timer);
  }

  /** When the next live timer is due, or undefined if none is. */
  nextTimerAt(): number | undefined {
    return this.timers.top()?.at;
  }

  /** Live timers not yet fired. */
  get pendingTimers(): number {
    return this.timers.size;
  }

  /** Moves time forward by `ms`, firing every timer that falls due on the way (including new ones). */
  advance(ms: number): void {
    if (!(ms >= 0)) throw new RangeError(`cannot move time backwards: advance(${ms})`);
    this.advanceTo(this.current + ms);
  }

  /** Moves time to `at`, firing due timers in order; `now()` ends at `at`. */
  advanceTo(at: number): void {
    if (at < this.current) throw new RangeError(`cannot move time backwards: ${at} < ${this.current}`);
    for (;;) {
      const due = this.timers.top();
      if (!due || due.at > at) break;
      this.timers.pop();
      this.current = Math.max(this.current, due.at);
      due.fn();
    }
    this.current = at;
  }
}
