// How one attempt of a routed request (or its handling) is called off (a timeout, a hedge that lost, the request
// ending). An `AbortController` per attempt cost several microseconds on the hot path, where nearly
// every attempt simply answers; this costs nothing until it is used: a transport that wants an
// `AbortSignal` asks for `signal`, which is made then (already aborted if the attempt was).

/** What a transport sees of an attempt's cancellation. */
export interface AttemptCancellation {
  /** True once the attempt was called off. */
  readonly cancelled: boolean;
  /** Why it was called off (an `Error`), once it was. */
  readonly reason: unknown;
  /** A standard signal that aborts with the attempt (made on first use: prefer `onCancel` on hot paths). */
  readonly signal: AbortSignal;
  /** Calls `listener` once when the attempt is called off; returns a function that removes it. */
  onCancel(listener: (reason: unknown) => void): () => void;
}

export class Cancellation implements AttemptCancellation {
  private controller: AbortController | undefined;
  private listeners: ((reason: unknown) => void)[] = [];
  private why: unknown;
  private done = false;

  get cancelled(): boolean {
    return this.done;
  }

  get reason(): unknown {
    return this.why;
  }

  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.done) this.controller.abort(this.why);
    }
    return this.controller.signal;
  }

  onCancel(listener: (reason: unknown) => void): () => void {
    if (this.done) {
      listener(this.why);
      return () => {};
    }
    this.listeners.push(listener);
    return () => {
      const i = this.listeners.indexOf(listener);
      if (i >= 0) this.listeners.splice(i, 1);
    };
  }

  cancel(reason: unknown): void {
    if (this.done) return;
    this.done = true;
    this.why = reason;
    this.controller?.abort(reason);
    const listeners = this.listeners;
    this.listeners = [];
    for (const l of listeners) l(reason);
  }
}
