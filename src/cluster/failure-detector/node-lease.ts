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

export class NodeLease {
  private readonly outstanding = new Map<number, Outstanding>();
  private lastSeq = 0;
  private newestEpoch = -1;
  private state: LeaseState | undefined;
  /** Given up (a graceful stop, an eviction): nothing renews it any more. */
  private ended = false;

  /** Records a heartbeat to `singleton` sent at `now`; returns its sequence number. */
  send(singleton: MemberRef, now: number): number {
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
    const sent = this.outstanding.get(g.seq);
    if (!sent || !sameMember(sent.to, g.from)) return { cause: 'replayed', detail: `grant ${g.seq} from ${memberKey(g.from)} answers no outstanding heartbeat` };
    // Older heartbeats' leases would end sooner than this one's: they are done with.
    for (const seq of this.outstanding.keys()) if (seq <= g.seq) this.outstanding.delete(seq);
    this.newestEpoch = g.epoch;
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
    const sent = this.outstanding.get(e.seq);
    if (!sent || !sameMember(sent.to, e.from)) return { cause: 'replayed', detail: `eviction ${e.seq} from ${memberKey(e.from)} answers no outstanding heartbeat` };
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
    const s = this.state;
    return s !== undefined && now < s.until && (epoch === undefined || s.epoch === epoch);
  }

  /** The lease as it stands (it may have run out). */
  get current(): LeaseState | undefined {
    return this.state;
  }

  /** The newest epoch a grant came from (-1 before any). */
  get epoch(): number {
    return this.newestEpoch;
  }
}
