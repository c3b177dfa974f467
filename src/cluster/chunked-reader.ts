// What a subscription of either bus adds around the pure ChunkAssembler: the bus's clock with the
// time spent in the subscription's own handler left out, a timer that gives up messages whose
// chunks stopped coming, their report to onError, and the cap on commits.
import type { BusLimits } from './bus-limits.js';
import { IncompleteMessageError, type BusRecord } from './bus.js';
import { ChunkAssembler, type Chunk, type ChunkOutcome, type GivenUpMessage } from './chunk-assembly.js';
import type { Cancel, Clock } from './clock.js';

export interface ChunkedReaderParams {
  readonly topic: string;
  readonly clock: Clock;
  readonly limits: BusLimits;
  /** The subscription's report to `onError`. */
  readonly report: (error: unknown, record: BusRecord) => void;
}

/**
 * The chunk reassembly of one subscription. Its time is the bus's clock minus the time spent in
 * the subscription's handler: a handler that takes a minute (a MetaStore that is down) must not
 * make the messages whose next chunks wait behind it in the log look lost.
 */
export class ChunkedReader<P> {
  private readonly assembler: ChunkAssembler<P>;
  /** Time spent in handlers that returned. */
  private handlerMs = 0;
  /** When the handler in flight started, if one is. */
  private handlerSince: number | undefined;
  private cancelTimer: Cancel | undefined;
  /** When the timer is due, in this reader's time. */
  private timerAt = 0;
  private closed = false;

  constructor(private readonly p: ChunkedReaderParams) {
    this.assembler = new ChunkAssembler<P>({ timeoutMs: p.limits.chunkTimeoutMs, maxHeldBytes: 2 * p.limits.maxMessageBytes });
  }

  /**
   * One chunk record read. Messages given up meanwhile are reported; the outcome says whether this
   * chunk completed its message (then the caller delivers it at this chunk's offset).
   */
  read(chunk: Chunk<P>): ChunkOutcome<P> {
    const { outcome, givenUp } = this.assembler.add(chunk, this.now());
    this.reportGivenUp(givenUp);
    this.arm();
    return outcome;
  }

  /** At most `offset`, and never past the first chunk of a message still being assembled. */
  commitLimit(offset: number): number {
    return Math.min(offset, this.assembler.commitLimit() ?? offset);
  }

  handlerStarted(): void {
    this.handlerSince = this.p.clock.now();
  }

  handlerEnded(): void {
    if (this.handlerSince === undefined) return;
    this.handlerMs += Math.max(0, this.p.clock.now() - this.handlerSince);
    this.handlerSince = undefined;
    // A deadline that fell due during the handler was put off (see arm): look again now.
    if (this.cancelTimer === undefined) this.arm();
  }

  close(): void {
    this.closed = true;
    this.cancelTimer?.();
    this.cancelTimer = undefined;
  }

  private now(): number {
    const clock = this.p.clock.now();
    return clock - this.handlerMs - (this.handlerSince === undefined ? 0 : clock - this.handlerSince);
  }

  /**
   * Keeps one timer while messages are being assembled and no handler runs, due at or before the
   * nearest deadline. A timer due earlier is kept (deadlines only move later as chunks arrive): it
   * finds nothing to give up and sets the next one, so reading a chunk seldom touches the clock.
   */
  private arm(): void {
    const deadline = this.assembler.nextDeadline();
    if (deadline === undefined || this.closed || this.handlerSince !== undefined) {
      this.cancelTimer?.();
      this.cancelTimer = undefined;
      return;
    }
    if (this.cancelTimer !== undefined && this.timerAt <= deadline) return;
    this.cancelTimer?.();
    this.timerAt = deadline;
    // At least 1 ms: a timer due now that found nothing to give up must not be set again at once.
    this.cancelTimer = this.p.clock.schedule(Math.max(1, deadline - this.now()), () => {
      this.cancelTimer = undefined;
      if (this.closed || this.handlerSince !== undefined) return; // handlerEnded arms again
      this.reportGivenUp(this.assembler.expire(this.now()));
      this.arm();
    });
  }

  private reportGivenUp(givenUp: readonly GivenUpMessage[]): void {
    for (const g of givenUp) {
      const error = new IncompleteMessageError(this.p.topic, g.id, g.seen, g.count, g.reason);
      this.p.report(error, { topic: this.p.topic, offset: g.firstOffset, value: null });
    }
  }
}
