// The singleton's own lease in `heartbeat` mode (docs/ARCHITECTURE.md §11.9): the holder renews it
// in the MetaStore by compare-and-set every quarter of `singletonLeaseMs`, only while it hears from
// a majority of the members, and counts it as lost `singletonLeaseMs` after it *sent* its last
// successful renewal. Its grants never reach past that moment, so when a successor sees a renewal
// unchanged for a whole lease (stretched by the drift factor), every lease this singleton granted has
// run out too. The stop is decided here, on this keeper's own timer and clock, never by reading or
// writing the store, so a store call that hangs cannot hold it back; `onLost` must stop the singleton
// without waiting for its actor (see `SingletonRole`).
import type { Logger } from 'pino';
import type { Epoch } from '../../core/ids.js';
import type { MetaStore } from '../../store/meta-store.js';
import type { Cancel, Clock } from '../clock.js';
import { singletonRenewalMs, type FailureDetectorSettings } from './settings.js';

export interface SingletonLeaseKeeperOptions {
  readonly store: Pick<MetaStore, 'renewLease'>;
  readonly epoch: Epoch;
  readonly settings: Pick<FailureDetectorSettings, 'singletonLeaseMs'>;
  /** The node's clock (monotonic in a real process). */
  readonly clock: Clock;
  readonly log: Logger;
  /** When the `takeLease` that won this epoch was sent: the lease runs from there. */
  readonly takenAt: number;
  /** Whether the singleton hears from a majority of the members now: a singleton cut off gives way. */
  readonly hearsMajority: () => boolean;
  /** The lease is gone (taken over, or not renewed in time): the singleton must stop at once. */
  readonly onLost: (reason: string) => void;
}

export class SingletonLeaseKeeper {
  private validUntil: number;
  private renewal = 0;
  private timer: Cancel | undefined;
  private stopped = false;
  private renewing = false;
  /** Failed renewals in a row: the first of a run is logged, the others only counted here. */
  private failures = 0;
  /** The latest reading of the clock: one that goes back makes the lease void (it was measured on readings now ahead). */
  private lastNow = Number.NEGATIVE_INFINITY;

  constructor(private readonly o: SingletonLeaseKeeperOptions) {
    this.validUntil = o.takenAt + o.settings.singletonLeaseMs;
  }

  start(): void {
    this.schedule();
  }

  stop(): void {
    this.stopped = true;
    this.timer?.();
  }

  /** For how much longer (ms) this node surely holds the singleton's role; 0 once it may not. */
  remainingMs(): number {
    if (this.stopped) return 0;
    const now = this.now();
    return this.stopped ? 0 : Math.max(0, this.validUntil - now);
  }

  /** The clock now; one that went back loses the lease at once (a grant computed on it could outlast the role). */
  private now(): number {
    const now = this.o.clock.now();
    if (now < this.lastNow) this.lose(`the monotonic clock went back ${this.lastNow - now} ms: the singleton lease is void`);
    this.lastNow = Math.max(this.lastNow, now);
    return now;
  }

  private schedule(): void {
    if (this.stopped) return;
    const untilExpiry = this.validUntil - this.o.clock.now();
    this.timer = this.o.clock.schedule(Math.max(0, Math.min(singletonRenewalMs(this.o.settings), untilExpiry)), () => this.tick());
  }

  /** Never waits for a renewal: a store that hangs must not keep the lease from running out. */
  private tick(): void {
    this.timer = undefined;
    if (this.stopped) return;
    const now = this.now();
    if (this.stopped) return;
    if (now >= this.validUntil) {
      this.lose(`the singleton lease ran out: not renewed within ${this.o.settings.singletonLeaseMs} ms`);
      return;
    }
    if (!this.renewing && this.o.hearsMajority()) void this.renew();
    this.schedule();
  }

  private async renew(): Promise<void> {
    const sentAt = this.now();
    if (this.stopped) return;
    this.renewing = true;
    const renewal = ++this.renewal;
    try {
      const renewed = await this.o.store.renewLease(this.o.epoch, renewal);
      if (this.stopped) return;
      if (!renewed) {
        this.lose('another node took the singleton lease');
        return;
      }
      this.validUntil = Math.max(this.validUntil, sentAt + this.o.settings.singletonLeaseMs);
      if (this.failures > 0)
        this.o.log.info({ event: 'singleton.lease-renewed', epoch: this.o.epoch, failures: this.failures }, 'the singleton lease is renewed again');
      this.failures = 0;
    } catch (e) {
      // An unknown outcome changes nothing here: the lease counts from the last renewal known to have landed.
      if (this.failures++ === 0)
        this.o.log.warn(
          { event: 'singleton.lease-renewal-failed', epoch: this.o.epoch, err: e, remainingMs: this.remainingMs() },
          'renewing the singleton lease failed; trying again until it runs out',
        );
    } finally {
      this.renewing = false;
    }
  }

  private lose(reason: string): void {
    if (this.stopped) return;
    this.stop();
    this.o.onLost(reason);
  }
}
