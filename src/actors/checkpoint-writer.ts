// A shard's checkpoint writes, off the ingestion path (docs/ARCHITECTURE.md §12.4): the shard offers
// the offset its sink accepted and goes on reading; one write at a time goes to the MetaStore, and
// an offer made while one is in flight replaces any offer still waiting (the latest wins: a write
// of a lower offset that nobody needs any more is never sent). A failed write is tried again with
// backoff unless a newer offer replaced it. A slow store therefore delays checkpoints, not records;
// the shard only waits once more than `maxUncheckpointedRecords` are accepted and not checkpointed.
import type { Clock } from '../cluster/clock.js';
import type { FencingToken } from '../core/fencing-token.js';
import { CheckpointRefusedError } from '../store/meta-store.js';

export interface CheckpointWriterOptions {
  readonly clock: Clock;
  readonly write: (offset: number, token: FencingToken) => Promise<void>;
  /** A write went through. */
  readonly written: (offset: number) => void;
  /** A write was refused by its token: not tried again (a newer offer may be admitted). */
  readonly refused: (e: CheckpointRefusedError, offset: number, token: FencingToken) => void;
  /** A write failed otherwise: tried again after `retryInMs` unless a newer offer comes first. */
  readonly failed: (e: unknown, offset: number, retryInMs: number) => void;
  readonly retryInitialMs: number;
  readonly retryMaxMs: number;
}

interface Offer {
  readonly offset: number;
  readonly token: FencingToken;
}

export class CheckpointWriter {
  private waiting: Offer | undefined;
  private busy = false;
  private retryDelay: number;
  private cancelRetry: (() => void) | undefined;
  private closed = false;
  /** The highest offset settled: written, or refused (a refused one will never be written by this copy). */
  private settledOffset = -1;
  private offeredOffset = -1;
  private lastOfferAt: number | undefined;
  private readonly idle: (() => void)[] = [];

  constructor(private readonly o: CheckpointWriterOptions) {
    this.retryDelay = o.retryInitialMs;
  }

  /** When the last offer was made (the clock's ms; undefined: none yet). */
  get offeredAt(): number | undefined {
    return this.lastOfferAt;
  }

  /** The highest offset offered so far (-1: none). */
  get offered(): number {
    return this.offeredOffset;
  }

  /** The highest offset written or refused (-1: none): what the bound on un-checkpointed records counts from. */
  get settled(): number {
    return this.settledOffset;
  }

  /** Whether a write is in flight or waiting. */
  get pending(): boolean {
    return this.busy || this.waiting !== undefined;
  }

  /** The shard starts after `offset` (its stored checkpoint, or before its first record): nothing to write up to it. */
  startFrom(offset: number): void {
    this.settledOffset = Math.max(this.settledOffset, offset);
    this.offeredOffset = Math.max(this.offeredOffset, offset);
  }

  /** Offers the checkpoint `offset` (inclusive) of records accepted under `token`; returns at once. */
  offer(offset: number, token: FencingToken): void {
    if (this.closed || offset <= this.offeredOffset) return;
    this.offeredOffset = offset;
    this.lastOfferAt = this.o.clock.now();
    this.waiting = { offset, token };
    // A newer offer does not wait out the backoff of an older failure.
    this.cancelRetry?.();
    this.cancelRetry = undefined;
    this.pump();
  }

  /** Resolves once nothing is in flight or waiting (for tests and a shard that stops). */
  whenIdle(): Promise<void> {
    if (!this.pending && this.cancelRetry === undefined) return Promise.resolve();
    return new Promise((resolve) => this.idle.push(resolve));
  }

  /** Sends what is waiting, then nothing more (a write in flight completes). */
  close(): void {
    this.closed = true;
  }

  private pump(): void {
    if (this.busy || this.waiting === undefined) {
      if (!this.busy && this.cancelRetry === undefined) for (const f of this.idle.splice(0)) f();
      return;
    }
    const next = this.waiting;
    this.waiting = undefined;
    this.busy = true;
    void this.o
      .write(next.offset, next.token)
      .then(
        () => {
          this.retryDelay = this.o.retryInitialMs;
          this.settledOffset = Math.max(this.settledOffset, next.offset);
          this.o.written(next.offset);
        },
        (e: unknown) => {
          if (e instanceof CheckpointRefusedError) {
            this.settledOffset = Math.max(this.settledOffset, next.offset);
            this.o.refused(e, next.offset, next.token);
            return;
          }
          const delay = this.retryDelay;
          this.retryDelay = Math.min(this.retryDelay * 2, this.o.retryMaxMs);
          this.o.failed(e, next.offset, delay);
          if (this.waiting !== undefined || this.closed) return; // a newer offer replaces it, or nobody waits for it
          this.cancelRetry = this.o.clock.schedule(delay, () => {
            this.cancelRetry = undefined;
            if (this.waiting === undefined && !this.closed) this.waiting = next;
            this.pump();
          });
        },
      )
      .finally(() => {
        this.busy = false;
        this.pump();
      });
  }
}
