// Dropped detector frames, counted by cause and reported once per cause (docs/ARCHITECTURE.md
// §11.10): a peer that keeps sending bad frames must not flood the log, yet every cause must be
// seen once, with an example.
import { DROP_CAUSES, type DropCause, type Dropped } from './messages.js';

export class DroppedFrames {
  private readonly counts = new Map<DropCause, number>(DROP_CAUSES.map((c) => [c, 0]));

  /**
   * @param firstOfCause hears the first drop of each cause (to log it), with the sender when known.
   * @param counted hears every drop (to count it in the node's metrics).
   */
  constructor(
    private readonly firstOfCause: (dropped: Dropped, from: string | undefined) => void = () => {},
    private readonly counted: (cause: DropCause) => void = () => {},
  ) {}

  /** Counts a dropped frame; the first of its cause is reported. */
  drop(dropped: Dropped, from?: string): void {
    const n = this.counts.get(dropped.cause)! + 1;
    this.counts.set(dropped.cause, n);
    this.counted(dropped.cause);
    if (n === 1) this.firstOfCause(dropped, from);
  }

  /** Frames dropped so far, per cause (every cause listed, 0 included). */
  get byCause(): ReadonlyMap<DropCause, number> {
    return this.counts;
  }

  get total(): number {
    let n = 0;
    for (const c of this.counts.values()) n += c;
    return n;
  }
}
