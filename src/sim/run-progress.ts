// What a long simulation run tells its operator as it goes: seeds done of how many, the rate over
// the run so far and the time left at that rate, and how many seeds broke an invariant so far. On a
// terminal one line is rewritten every second; in a log (not a terminal) a line is added every
// `everyMs`, so that a run of 100 000 seeds writes a few dozen lines, not one per seed.

export interface ProgressOptions {
  readonly total: number;
  /** Where the lines go (stderr). */
  readonly write: (text: string) => void;
  /** Rewrite one line in place (a terminal) rather than add lines. */
  readonly inPlace: boolean;
  /** How often a line is added when not in place. Default 30 s. */
  readonly everyMs?: number;
  /** The time in ms (tests pass their own). Default `performance.now`. */
  readonly now?: () => number;
}

export class RunProgress {
  private done = 0;
  private violating = 0;
  private readonly started: number;
  private lastShown: number;
  private readonly now: () => number;

  constructor(private readonly o: ProgressOptions) {
    this.now = o.now ?? (() => performance.now());
    this.started = this.now();
    this.lastShown = this.started;
  }

  /** One seed finished; shows a line if it is time to. */
  seedDone(violations: number): void {
    this.done += 1;
    if (violations > 0) this.violating += 1;
    const now = this.now();
    if (now - this.lastShown < (this.o.inPlace ? 1_000 : (this.o.everyMs ?? 30_000))) return;
    this.lastShown = now;
    this.o.write(this.o.inPlace ? `\r${this.line(now)}   ` : `${this.line(now)}\n`);
  }

  /** Ends the line being rewritten in place. */
  finish(): void {
    if (this.o.inPlace && this.done > 0) this.o.write('\n');
  }

  line(now = this.now()): string {
    const secs = (now - this.started) / 1000;
    const rate = secs > 0 ? this.done / secs : 0;
    const left = rate > 0 ? (this.o.total - this.done) / rate : Number.NaN;
    return `${this.done} of ${this.o.total} seeds, ${rate.toFixed(1)} seeds/s, ${this.violating} with violations, ${formatDuration(secs)} elapsed, ${Number.isFinite(left) ? `~${formatDuration(left)} left` : '? left'}`;
  }
}

/** `1h 02m`, `4m 05s`, `12s`. */
export function formatDuration(secs: number): string {
  const s = Math.round(secs);
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const pad = (n: number) => String(n).padStart(2, '0');
  if (h > 0) return `${h}h ${pad(m)}m`;
  if (m > 0) return `${m}m ${pad(s % 60)}s`;
  return `${s}s`;
}
