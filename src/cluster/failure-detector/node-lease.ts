// A node's lease (docs/ARCHITECTURE.md §11.4): renewed by the singleton's grants, measured from
// each heartbeat's sending on the node's own monotonic clock, so a grant that was delayed shortens
// the lease and never lengthens it. Pure: time comes in as `now`.
import { memberKey, sameMember, type Dropped, type MemberRef } from './messages.js';

/** What the node holds: until when (its clock), granted by which singleton under which epoch. */
export interface LeaseState {
  readonly epoch: number;
  readonly until: number;
  readonly singleton: MemberRef;
}

/** A grant as the node receives it. */
export interface GrantIn {
  readonly from: MemberRef;
  readonly seq: number;
  readonly epoch: number;
  readonly leaseMs: number;
}

interface Outstanding {
  readonly sentAt: number;
  readonly to: MemberRef;
}

/** Heartbeats kept waiting for their grant: an older one's lease would end before a newer one's anyway. */
const MAX_OUTSTANDING = 64;

/**
 * How far ahead of the newest epoch a node has seen a grant's epoch may be. The epoch rises by one
 * per takeover, and a takeover takes at least one singleton lease: a node that missed a thousand of
 * them would have been evicted long before. A grant far ahead is a forged or corrupt frame, and
 * taking it would make every genuine grant after it look stale (the node would never write again).
 */
export const MAX_EPOCH_LEAP = 1000;

/** Whether `epoch` is implausibly far ahead of `newest` (-1: nothing seen yet, anything goes). */
export function isFutureEpoch(epoch: number, newest: number): boolean {
  return newest >= 0 && epoch > newest + MAX_EPOCH_LEAP;
}

export class NodeLease {
  private readonly outstanding = new Map<number, Outstanding>();
  private lastSeq = 0;
  private newestEpoch = -1;
  private state: LeaseState | undefined;
  /** Given up (a graceful stop, an eviction): nothing renews it any more. */
  private ended = false;
  /** The latest reading of the clock: one that goes back voids the lease (see `clockAt`). */
  private lastNow = Number.NEGATIVE_INFINITY;
  /** The newest epoch seen anywhere (grants, announcements, the maps asked about): far ahead of it is refused. */
  private knownEpoch = -1;

  /** @param onClockJump hears a clock that went backwards (to count it). */
  constructor(private readonly onClockJump: (dropped: Dropped) => void = () => {}) {}

  /**
   * A reading of the monotonic clock. One that went backwards voids the lease and every
   * outstanding heartbeat: both were measured on readings now ahead of the clock, so the lease would
   * run longer than granted (a second writer). The next grant of a heartbeat sent from now on holds
   * again. A clock that leaps forward only ends the lease sooner: nothing to do.
   */
  clockAt(now: number): void {
    if (now < this.lastNow) {
      const back = this.lastNow - now;
      this.state = undefined;
      this.outstanding.clear();
      this.lastNow = now;
      this.onClockJump({ cause: 'clock-jump', detail: `the monotonic clock went back ${back} ms: the lease is void until the next grant` });
      return;
    }
    this.lastNow = now;
  }

  /** An epoch the node saw elsewhere (an announcement, a map of the events topic): grants far ahead of the newest are refused. */
  sawEpoch(epoch: number): void {
    if (epoch > this.knownEpoch) this.knownEpoch = epoch;
  }

  /** Records a heartbeat to `singleton` sent at `now`; returns its sequence number. */
  send(singleton: MemberRef, now: number): number {
    this.clockAt(now);
    const seq = ++this.lastSeq;
    if (this.ended) return seq;
    this.outstanding.set(seq, { sentAt: now, to: singleton });
    if (this.outstanding.size > MAX_OUTSTANDING) this.outstanding.delete(this.outstanding.keys().next().value!);
    return seq;
  }

  /**
   * Applies a grant received at any time: the lease then runs until the answered heartbeat's
   * sending plus `leaseMs`. Returns why it was dropped instead: an older epoch than the newest
   * seen (`stale-epoch`), or no outstanding heartbeat of that number to that sender (`replayed`).
   */
  grant(g: GrantIn): Dropped | undefined {
    if (g.epoch < this.newestEpoch) return { cause: 'stale-epoch', detail: `grant of epoch ${g.epoch}, epoch ${this.newestEpoch} seen` };
    const newest = Math.max(this.newestEpoch, this.knownEpoch);
    if (isFutureEpoch(g.epoch, newest)) return { cause: 'future-epoch', detail: `grant of epoch ${g.epoch}, the newest seen is ${newest}` };
    const sent = this.outstanding.get(g.seq);
    if (!sent || !sameMember(sent.to, g.from))
      return { cause: 'replayed', detail: `grant ${g.seq} from ${memberKey(g.from)} answers no outstanding heartbeat` };
    // Older heartbeats' leases would end sooner than this one's: they are done with.
    for (const seq of this.outstanding.keys()) if (seq <= g.seq) this.outstanding.delete(seq);
    this.newestEpoch = g.epoch;
    this.sawEpoch(g.epoch);
    const until = sent.sentAt + g.leaseMs;
    const same = this.state && this.state.epoch === g.epoch && sameMember(this.state.singleton, g.from);
    // A new singleton's lease starts over: what an older one granted authorizes nothing under it.
    this.state = { epoch: g.epoch, until: same ? Math.max(this.state!.until, until) : until, singleton: g.from };
    return undefined;
  }

  /**
   * An `evicted` answer: the lease ends now (the node must restart as a new incarnation). Dropped
   * like a grant when it is of an older epoch or answers nothing outstanding.
   */
  evicted(e: { readonly from: MemberRef; readonly seq: number; readonly epoch: number }): Dropped | undefined {
    if (e.epoch < this.newestEpoch) return { cause: 'stale-epoch', detail: `eviction of epoch ${e.epoch}, epoch ${this.newestEpoch} seen` };
    const newest = Math.max(this.newestEpoch, this.knownEpoch);
    if (isFutureEpoch(e.epoch, newest)) return { cause: 'future-epoch', detail: `eviction of epoch ${e.epoch}, the newest seen is ${newest}` };
    const sent = this.outstanding.get(e.seq);
    if (!sent || !sameMember(sent.to, e.from))
      return { cause: 'replayed', detail: `eviction ${e.seq} from ${memberKey(e.from)} answers no outstanding heartbeat` };
    this.release();
    return undefined;
  }

  /** Gives the lease up (a graceful stop, an eviction): it holds no more, whatever comes later. */
  release(): void {
    this.ended = true;
    this.state = undefined;
    this.outstanding.clear();
  }

  /** True once the lease was given up. */
  get released(): boolean {
    return this.ended;
  }

  /** True while the lease runs at `now`, and, with `epoch`, was granted under that epoch. */
  holds(now: number, epoch?: number): boolean {
    this.clockAt(now);
    const s = this.state;
    return s !== undefined && now < s.until && (epoch === undefined || s.epoch === epoch);
  }

  /** The lease as it stands (it may have run out). */
  get current(): LeaseState | undefined {
    return this.state;
  }

  /** The newest epoch seen anywhere: grants, announcements, maps (-1 before any). */
  get newestKnownEpoch(): number {
    return Math.max(this.newestEpoch, this.knownEpoch);
  }

  /** The newest epoch a grant came from (-1 before any). */
  get epoch(): number {
    return this.newestEpoch;
  }
}
