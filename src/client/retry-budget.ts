// How many attempts beyond each request's first the client may make: Finagle's retry budget. Every
// request deposits `ratio` of an attempt, every extra attempt (a retry after a failure, a copy asked
// because the first was slow, a new round after TRYAGAIN) withdraws one, and a small reserve refills
// over time so a quiet client can still retry. When a cluster is sick, retries then add at most
// `ratio` to its load instead of multiplying it.
import type { Clock } from '../cluster/clock.js';

/** Sums of fractions (5 × 0.2) fall just short of whole numbers in floating point. */
const EPSILON = 1e-9;

export interface RetryBudgetOptions {
  /** Extra attempts allowed per request, on average. Default 0.2 (Finagle's and gRPC's usual figure). */
  readonly ratio?: number;
  /** Extra attempts allowed per second whatever the traffic (the reserve). Default 10. */
  readonly minPerSecond?: number;
  /** Most extra attempts saved up from requests. Default 100. */
  readonly maxSaved?: number;
}

export class RetryBudget {
  private readonly ratio: number;
  private readonly minPerSecond: number;
  private readonly maxSaved: number;
  private saved = 0;
  private reserve: number;
  private reserveAt: number;
  private refusedCount = 0;

  constructor(
    private readonly clock: Clock,
    options: RetryBudgetOptions = {},
  ) {
    this.ratio = options.ratio ?? 0.2;
    this.minPerSecond = options.minPerSecond ?? 10;
    this.maxSaved = options.maxSaved ?? 100;
    if (!(this.ratio >= 0) || !Number.isFinite(this.ratio)) throw new RangeError(`retryBudget.ratio must be a number >= 0, got ${String(options.ratio)}`);
    if (!(this.minPerSecond >= 0) || !Number.isFinite(this.minPerSecond))
      throw new RangeError(`retryBudget.minPerSecond must be a number >= 0, got ${String(options.minPerSecond)}`);
    if (!(this.maxSaved >= 0) || !Number.isFinite(this.maxSaved))
      throw new RangeError(`retryBudget.maxSaved must be a number >= 0, got ${String(options.maxSaved)}`);
    this.reserve = this.minPerSecond;
    this.reserveAt = clock.now();
  }

  /** A request began. */
  deposit(): void {
    this.saved = Math.min(this.maxSaved, this.saved + this.ratio);
  }

  /** Takes one extra attempt from the budget; false when it is spent. */
  tryWithdraw(): boolean {
    const now = this.clock.now();
    this.reserve = Math.min(this.minPerSecond, this.reserve + ((now - this.reserveAt) * this.minPerSecond) / 1000);
    this.reserveAt = now;
    if (this.reserve >= 1 - EPSILON) {
      this.reserve -= 1;
      return true;
    }
    if (this.saved >= 1 - EPSILON) {
      this.saved -= 1;
      return true;
    }
    this.refusedCount += 1;
    return false;
  }

  /** Extra attempts refused so far (a metric: a sick cluster, or a budget too small). */
  get refused(): number {
    return this.refusedCount;
  }
}
