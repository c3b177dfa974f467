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
    const t = setTimeout(fn, Math.max(0, delayMs));
    t.unref();
    return () => clearTimeout(t);
  }
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
    const t = setTimeout(fn, Math.max(0, delayMs));
    t.unref();
    return () => clearTimeout(t);
  }
}

interface Timer {
  readonly at: number;
  readonly seq: number;
  readonly fn: () => void;
  cancelled: boolean;
}

/**
 * A clock that moves only on `advance`/`advanceTo`, firing due timers in time order (ties in the
 * order they were scheduled), with `now()` equal to each timer's time while it runs — so a
 * simulation replays identically for the same inputs.
 */
export class SimulatedClock implements Clock {
  private current: number;
  private seq = 0;
  private timers: Timer[] = [];

  constructor(start = 0) {
    this.current = start;
  }

  now(): number {
    return this.current;
  }

  schedule(delayMs: number, fn: () => void): Cancel {
    const timer: Timer = { at: this.current + Math.max(0, delayMs), seq: this.seq++, fn, cancelled: false };
    this.timers.push(timer);
    return () => {
      timer.cancelled = true;
    };
  }

  /** When the next live timer is due, or undefined if none is. */
  nextTimerAt(): number | undefined {
    this.timers = this.timers.filter((t) => !t.cancelled);
    return this.timers.reduce<number | undefined>((min, t) => (min === undefined || t.at < min ? t.at : min), undefined);
  }

  /** Live timers not yet fired. */
  get pendingTimers(): number {
    return this.timers.filter((t) => !t.cancelled).length;
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
      const due = this.timers.filter((t) => !t.cancelled && t.at <= at).sort((a, b) => a.at - b.at || a.seq - b.seq)[0];
      if (!due) break;
      this.timers = this.timers.filter((t) => t !== due);
      this.current = Math.max(this.current, due.at);
      due.fn();
    }
    this.current = at;
  }
}
