// A node's own clock in the simulator: it runs at a rate of its own (within the design's bound on
// clock rate drift, docs/ARCHITECTURE.md §11.6), so leases and timeouts that two nodes measure
// disagree as real machines' do.
import type { Cancel, Clock, SimulatedClock } from '../cluster/clock.js';

export class DriftingClock implements Clock {
  private readonly start: number;

  /** `rate`: how many of its milliseconds pass per real (simulated) millisecond, e.g. 0.99 or 1.01. */
  constructor(
    private readonly base: SimulatedClock,
    readonly rate: number,
  ) {
    if (!(rate > 0 && Number.isFinite(rate))) throw new RangeError(`a clock rate must be positive, got ${rate}`);
    this.start = base.now();
  }

  now(): number {
    return this.start + (this.base.now() - this.start) * this.rate;
  }

  /**
   * Fires when `delayMs` of this clock have passed: `delayMs / rate` of real time, rounded up to a
   * whole millisecond (the simulation's time stays whole; a timer a fraction late is one a real
   * kernel could fire).
   */
  schedule(delayMs: number, fn: () => void): Cancel {
    return this.base.schedule(Math.ceil(Math.max(0, delayMs) / this.rate), fn);
  }
}
