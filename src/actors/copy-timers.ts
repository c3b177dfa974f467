// The timers of a node's shard copies, on one timer of the node's clock. A node of tens of
// thousands of copies has as many pending polls, mostly idle ones far apart; a timer of the clock
// each (a Node `Timeout`, the clock's wrapper and a cancel function, about 0.45 KB) was the largest
// share of an idle copy's memory. Here a copy's timer is one small entry in a `TimerHeap` (ordered
// by due time, then by arming order, so a simulated clock replays the same), and only the earliest
// entry holds a timer of the clock.
import type { Cancel, Clock } from '../cluster/clock.js';
import { TimerHeap, type HeapTimer } from '../cluster/timer-heap.js';

/** What a due timer calls. */
export interface Due {
  due(): void;
}

/** One armed timer; cancel it with `CopyTimers.cancel`. */
export interface CopyTimer extends HeapTimer {
  readonly target: Due;
}

/**
 * Timers fired by one firing of the clock's timer; more due at once wait for the next (armed for
 * now). A synthetic source makes every shard's next record due at the same instant: 65 536 timers
 * in one task of the event loop held it for about 200 ms.
 */
export const DUE_PER_FIRING = 1024;

export class CopyTimers {
  private readonly timers = new TimerHeap<CopyTimer>();
  private seq = 0;
  /** The clock's timer for the earliest entry, and when it is due. */
  private armed: { readonly at: number; readonly cancel: Cancel } | undefined;
  private closed = false;

  constructor(private readonly clock: Clock) {}

  /** Timers armed, neither fired nor cancelled. */
  get size(): number {
    return this.timers.size;
  }

  /** Calls `target.due()` once `delayMs` have passed on the clock (0: at the clock's next firing). */
  add(delayMs: number, target: Due): CopyTimer {
    const timer: CopyTimer = { at: this.clock.now() + Math.max(0, delayMs), seq: this.seq++, target, done: this.closed };
    if (this.closed) return timer;
    this.timers.push(timer);
    if (this.armed === undefined || timer.at < this.armed.at) this.arm(timer.at);
    return timer;
  }

  cancel(timer: CopyTimer): void {
    this.timers.cancel(timer);
  }

  /** Cancels every timer; none is armed afterwards (the node stops). */
  close(): void {
    this.closed = true;
    this.armed?.cancel();
    this.armed = undefined;
    this.timers.clear();
  }

  private arm(at: number): void {
    this.armed?.cancel();
    this.armed = { at, cancel: this.clock.schedule(at - this.clock.now(), () => this.fire()) };
  }

  private fire(): void {
    this.armed = undefined;
    const now = this.clock.now();
    // Only what was armed before this firing: a timer armed by a `due` for now waits for the next one.
    const armedBefore = this.seq;
    try {
      for (
        let n = 0, next = this.timers.top();
        n < DUE_PER_FIRING && next !== undefined && next.at <= now && next.seq < armedBefore;
        n++, next = this.timers.top()
      ) {
        this.timers.pop();
        next.target.due();
      }
    } finally {
      // Even after a `due` that threw: every other copy's timer still fires.
      const next = this.timers.top();
      if (next !== undefined && !this.closed) this.arm(next.at);
    }
  }
}
