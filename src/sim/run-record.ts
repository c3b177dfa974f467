// A run's record: what happened step by step (the fault schedule as it ran) and the invariants it
// broke, each stamped with the seed, the step and the simulated time.
import type { Logger } from 'pino';
import type { Invariant, Violation } from './report.js';

export class RunRecord {
  readonly history: string[] = [];
  readonly violations: Violation[] = [];
  /** The step under way (the driver moves it on). */
  step = 0;

  constructor(
    readonly seed: number,
    private readonly now: () => number,
    /** The run's log (a child of the options' logger), if any. */
    readonly log: Logger | undefined,
  ) {}

  readonly violate = (invariant: Invariant, message: string): void => {
    this.violations.push({ seed: this.seed, step: this.step, time: this.now(), invariant, message });
  };

  // Each step goes into the log too (with its simulated time), so a replay's logs read in order with it.
  readonly note = (what: string): void => {
    this.history.push(`step ${this.step} @${this.now()}ms: ${what}`);
    this.log?.info({ step: this.step, at: this.now() }, `sim: ${what}`);
  };
}
