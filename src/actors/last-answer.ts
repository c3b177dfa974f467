// An answer for an operator's read (/status, /metrics) that never waits on the store or the bus:
// the asked party's reply if it comes within a few milliseconds, else the last reply it gave. An
// actor busy with a slow MetaStore write or a bus produce, or a MetaStore read 1.25 s slow, then
// delays how fresh the answer is, not the answer.
import type { Clock } from '../cluster/clock.js';

export class LastAnswer<T> {
  private last: { readonly value: T } | undefined;
  private asking: Promise<T> | undefined;

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

  private askOnce(): Promise<T> {
    const asking = (this.asking ??= this.question()
      .then((value) => {
        this.last = { value };
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
