// An answer for an operator's read (/status, /metrics) that never waits on the store or the bus:
// the asked party's reply if it comes within a few milliseconds, else the last reply it gave. An
// actor busy with a slow MetaStore write or a bus produce, or a MetaStore read 1.25 s slow, then
// delays how fresh the answer is, not the answer.
import type { Clock } from '../cluster/clock.js';

/** How old a `LastAnswer`'s last reply is (undefined before the first), and how long the question outstanding has waited (0: none is). */
export interface AnswerAge {
  readonly ageMs: number | undefined;
  readonly waitingMs: number;
}

export class LastAnswer<T> {
  private last: { readonly value: T; readonly at: number } | undefined;
  private asking: Promise<T> | undefined;
  /** When the outstanding question was asked. */
  private askedAt = 0;

  constructor(
    /** The question (undefined: a subclass asks it, overriding `question`). */
    private readonly ask: (() => Promise<T>) | undefined,
    private readonly clock: Clock,
    /** How long a caller waits for a fresh reply before it takes the last one. */
    private readonly waitMs: number,
    /** The same once a reply is known (0 for a question always slower than a caller should wait: a store read). */
    private readonly waitWhenKnownMs = waitMs,
  ) {}

  /** A fresh reply within `waitMs`, else the last reply (undefined before the first). One question is outstanding at a time. */
  get(): Promise<T | undefined> {
    const asking = this.askOnce();
    return new Promise<T | undefined>((resolve) => {
      const cancel = this.clock.schedule(this.last === undefined ? this.waitMs : this.waitWhenKnownMs, () => resolve(this.last?.value));
      asking.then(
        (value) => {
          cancel();
          resolve(value);
        },
        () => {
          cancel();
          resolve(this.last?.value);
        },
      );
    });
  }

  /**
   * The last reply at once (undefined before the first), and a fresh question for the next read:
   * no timer, no wait, for a reader of thousands of them at a time.
   */
  peek(): T | undefined {
    void this.askOnce().catch(() => undefined);
    return this.last?.value;
  }

  /** Asks the question afresh. */
  protected question(): Promise<T> {
    if (!this.ask) throw new Error('a LastAnswer without a question must override question()');
    return this.ask();
  }

  /**
   * How old the last reply is (0 when none is outstanding and it just came; undefined before the
   * first), and how long the question now outstanding has waited (0 when none is): what a reader
   * of `get` or `peek` was shown, and whether the asked party is slow to answer.
   */
  age(): AnswerAge {
    const now = this.clock.now();
    return { ageMs: this.last && now - this.last.at, waitingMs: this.asking ? now - this.askedAt : 0 };
  }

  private askOnce(): Promise<T> {
    if (!this.asking) this.askedAt = this.clock.now();
    const asking = (this.asking ??= this.question()
      .then((value) => {
        this.last = { value, at: this.clock.now() };
        return value;
      })
      .finally(() => {
        if (this.asking === asking) this.asking = undefined;
      }));
    return asking;
  }

  /** Forgets the last reply (a new incarnation answers for itself). */
  reset(): void {
    this.last = undefined;
  }
}
