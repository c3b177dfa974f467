// When this process did not run: a SIGSTOP, a stalled event loop, a starved CPU. A timer that
// fires late says so only for its own wait; a sink call whose process was paused just after it
// began fires its timer nearly on time at resume, although the process ran for a moment of the
// wait (and the call may not even have been sent). A light ticker of its own tells the difference.
import type { Cancel, Clock } from '../cluster/clock.js';

/** How often the ticker runs. */
const TICK_MS = 200;
/** A tick later than due by more than this is a gap in the process's run. */
const GAP_AFTER_MS = 50;
/** Gaps older than this are forgotten (longer than any sink timeout worth re-arming for). */
const KEEP_MS = 10 * 60_000;

export class RunGaps {
  private readonly gaps: { from: number; to: number }[] = [];
  private cancel: Cancel | undefined;

  constructor(private readonly clock: Clock) {}

  start(): void {
    if (this.cancel) return;
    const tick = (due: number) => {
      this.cancel = this.clock.schedule(TICK_MS, () => {
        const now = this.clock.now();
        if (now - due > GAP_AFTER_MS) this.note(due, now);
        tick(now + TICK_MS);
      });
    };
    tick(this.clock.now() + TICK_MS);
  }

  stop(): void {
    this.cancel?.();
    this.cancel = undefined;
  }

  /** How long, of the time since `since`, this process is known not to have run. */
  stalledSince(since: number): number {
    let total = 0;
    for (const g of this.gaps) if (g.to > since) total += g.to - Math.max(g.from, since);
    return total;
  }

  private note(from: number, to: number): void {
    this.gaps.push({ from, to });
    while (this.gaps.length > 0 && this.gaps[0]!.to < to - KEEP_MS) this.gaps.shift();
  }
}
