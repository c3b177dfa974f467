// Bounds how many requests a store has in flight at once. Measured on Cassandra 5.0.9: 8192 shards
// starting at once, each reading its checkpoint, put 2048 requests on one driver connection and
// the driver refused the rest (`BusyConnectionError`); a bounded queue in front of the driver
// keeps that from ever happening and lets the requests run in the order they were asked for.

/**
 * Runs tasks with at most a fixed number at once. Deliberately tiny, so that swapping in a library
 * (`{ run: pLimit(n) }` with p-limit) is one line.
 */
export interface RequestLimiter {
  /** Runs `task` once fewer than the limit are running; tasks waiting start in the order they came. */
  run<T>(task: () => Promise<T>): Promise<T>;
}

/** What a limiter has seen: for metrics and for tests that prove the bound. */
export interface LimiterStats {
  /** Tasks running now. */
  readonly running: number;
  /** Tasks waiting for a slot now. */
  readonly waiting: number;
  /** The most tasks that ever ran at once. */
  readonly highWater: number;
}

/** A FIFO semaphore: at most `limit` tasks run at once, the others wait in order of arrival. */
export class FifoLimiter implements RequestLimiter {
  private running = 0;
  private highWater = 0;
  // A queue with a moving head: shifting a long array on every start would cost O(n) each.
  private queue: (() => void)[] = [];
  private head = 0;

  constructor(readonly limit: number) {
    if (!Number.isSafeInteger(limit) || limit < 1) throw new RangeError(`a limiter needs a whole number >= 1, got ${limit}`);
  }

  get stats(): LimiterStats {
    return { running: this.running, waiting: this.queue.length - this.head, highWater: this.highWater };
  }

  run<T>(task: () => Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const start = () => {
        this.running += 1;
        this.highWater = Math.max(this.highWater, this.running);
        let result: Promise<T>;
        try {
          result = task();
        } catch (e) {
          result = Promise.reject(e);
        }
        result.then(resolve, reject).finally(() => this.release());
      };
      // A newcomer never overtakes a waiting task, even when a slot is free at this instant.
      if (this.running < this.limit && this.head === this.queue.length) start();
      else this.queue.push(start);
    });
  }

  /** Hands the slot straight to the oldest waiting task, if any. */
  private release(): void {
    this.running -= 1;
    if (this.head === this.queue.length) return;
    const next = this.queue[this.head]!;
    this.head += 1;
    if (this.head === this.queue.length) {
      this.queue = [];
      this.head = 0;
    } else if (this.head >= 1024 && this.head * 2 >= this.queue.length) {
      this.queue = this.queue.slice(this.head);
      this.head = 0;
    }
    next();
  }
}
