// When a node may believe a digest's `inbox` (every report before that offset was applied or
// dropped): only once it has read every acknowledgement the singleton had sent before the digest.
// Acknowledgements come on the replies topic and digests on the events topic, read apart: a node
// that read a digest ahead of its replies took its own acknowledged reports for lost and sent them
// again (34 525 reports resent in one join wave whose nodes fell behind on their replies, issue 34).
// The singleton numbers its acknowledgements (per epoch) and each digest says how many it had sent.
// A gate not met within `patienceMs` opens anyway: a node that began reading the replies after the
// last acknowledgement was sent never reads it, and lost reports must still go again.

interface Waiting {
  readonly epoch: number;
  readonly acksSent: number;
  readonly inbox: number;
  readonly since: number;
}

/** Digests waiting at most: each newer one says at least as much, so the oldest may go first. */
const MAX_WAITING = 64;

export class AckGate {
  /** The newest acknowledgement read: its singleton's epoch and its ordinal in that epoch. */
  private read = { epoch: -1, ordinal: 0 };
  private readonly waiting: Waiting[] = [];

  constructor(private readonly patienceMs: number) {}

  /**
   * A digest of `epoch` that says `inbox`, written after `acksSent` acknowledgements (undefined
   * from a singleton of an earlier release): the offset to take now, if any (the largest that may
   * be taken, this one's or an earlier digest's).
   */
  digest(epoch: number, acksSent: number | undefined, inbox: number, now: number): number | undefined {
    if (this.covers(epoch, acksSent ?? 0)) return this.release(now, inbox);
    this.waiting.push({ epoch, acksSent: acksSent!, inbox, since: now });
    if (this.waiting.length > MAX_WAITING) this.waiting.shift();
    return this.release(now, undefined);
  }

  /** An acknowledgement of `epoch` numbered `ordinal` was read: the offset now taken, if any. */
  acknowledgement(epoch: number, ordinal: number | undefined, now: number): number | undefined {
    if (ordinal === undefined) return this.release(now, undefined);
    if (epoch > this.read.epoch) this.read = { epoch, ordinal };
    else if (epoch === this.read.epoch) this.read = { epoch, ordinal: Math.max(this.read.ordinal, ordinal) };
    return this.release(now, undefined);
  }

  /** Whether every acknowledgement a digest of `epoch` written after `acksSent` of them counts was read. */
  private covers(epoch: number, acksSent: number): boolean {
    // An older singleton's acknowledgements all came before a newer one's (it stopped first).
    return acksSent === 0 || epoch < this.read.epoch || (epoch === this.read.epoch && this.read.ordinal >= acksSent);
  }

  /** Takes out the digests whose gate is met or whose patience ran out; the largest offset of them and `also`. */
  private release(now: number, also: number | undefined): number | undefined {
    let taken = also;
    for (let i = 0; i < this.waiting.length;) {
      const w = this.waiting[i]!;
      if (this.covers(w.epoch, w.acksSent) || now - w.since >= this.patienceMs) {
        taken = Math.max(taken ?? w.inbox, w.inbox);
        this.waiting.splice(i, 1);
      } else {
        i++;
      }
    }
    return taken;
  }
}
