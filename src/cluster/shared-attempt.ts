// An asynchronous step (a connection, a check) made once and shared by every caller, and forgotten
// when it fails, so that the next caller tries again instead of getting the old failure.

/** Made on the first `get`; kept while it is pending or fulfilled; dropped once it rejects. */
export class SharedAttempt<T> {
  private attempt: Promise<T> | undefined;

  constructor(private readonly make: () => Promise<T>) {}

  /** The attempt in flight or fulfilled, or else a new one. */
  get(): Promise<T> {
    if (this.attempt === undefined) {
      const attempt = this.make();
      this.attempt = attempt;
      attempt.catch(() => {
        if (this.attempt === attempt) this.attempt = undefined;
      });
    }
    return this.attempt;
  }

  /** The attempt in flight or fulfilled, if there is one; none is made. */
  get current(): Promise<T> | undefined {
    return this.attempt;
  }

  /** Hands over the current attempt (for teardown) and forgets it: the next `get` makes a new one. */
  take(): Promise<T> | undefined {
    const attempt = this.attempt;
    this.attempt = undefined;
    return attempt;
  }
}
