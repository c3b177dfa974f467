// Who takes the singleton's role when its holder is gone, in `heartbeat` mode (docs/ARCHITECTURE.md
// §11.9). The group's view orders the members, oldest first; the next in line is the first member
// that does not hold the lease. It watches the lease and takes it by compare-and-set on the
// `(epoch, renewal)` it saw, only once that renewal stayed the same for a whole singleton lease
// stretched by the drift factor (the holder's lease, and every node lease it granted, has run out).
// Nothing shortens that wait: a refused or reset connection to the holder proves nothing (a
// middlebox, a restarted listener or a full accept queue answer the same way), and taking the lease
// on one made two live nodes trade it eleven times in five seconds. A candidate that lost a race for
// the lease, or the lease itself, backs off before it stands again.
import { RELEASED_RENEWAL, type Lease } from '../../store/meta-store.js';
import { sameMember, type DropCause, type MemberRef } from './messages.js';
import { isFutureEpoch } from './node-lease.js';
import { singletonLeaseWaitMs, type FailureDetectorSettings } from './settings.js';

/**
 * The line of members that may stand: `members` (oldest first) without the lease's holder. A
 * holder that is `self` stays in line: its own lease ran out (its store was away), and in a
 * cluster of one nobody else would ever take it back.
 */
function line<M extends MemberRef>(members: readonly M[], holder: MemberRef | undefined, self: MemberRef): M[] {
  return members.filter((m) => holder === undefined || !sameMember(m, holder) || sameMember(m, self));
}

/**
 * `self`'s place in the line (0: next), or undefined when it is not in it. Those behind the next
 * wait longer, half a singleton lease per place, so a dead next in line (the group lists it until
 * its session ends) delays the takeover by that much, not by a session.
 */
export function placeInLine(members: readonly MemberRef[], holder: MemberRef | undefined, self: MemberRef): number | undefined {
  const place = line(members, holder, self).findIndex((m) => sameMember(m, self));
  return place < 0 ? undefined : place;
}

/** The extra wait of `place` in line before it takes a lease that ran out. */
export function placeWaitMs(place: number, s: Pick<FailureDetectorSettings, 'singletonLeaseMs'>): number {
  return place * Math.ceil(s.singletonLeaseMs / 2);
}

/** What a watcher of the lease should do now. */
export type LeaseVerdict =
  /** Nobody ever held it: take it at epoch 1. */
  | { readonly kind: 'free' }
  /** The holder's lease has surely run out: take it on this `(epoch, renewal)`. */
  | { readonly kind: 'expired'; readonly lease: Lease }
  /** The holder renews (or may still): wait. */
  | { readonly kind: 'held'; readonly lease: Lease };

/**
 * The most one step between two looks at the lease counts towards its wait: half a singleton lease
 * (the longest a watcher waits between looks). A longer gap (the watcher was paused, or its
 * monotonic clock leapt forward) counts only this much, so no single leap of the clock can skip
 * more than half the wait; a real pause only makes the takeover later.
 */
export function maxWatchStepMs(s: Pick<FailureDetectorSettings, 'singletonLeaseMs'>): number {
  return Math.ceil(s.singletonLeaseMs / 2);
}

/** Follows one lease's renewals on the watcher's own clock. */
export class LeaseWatch {
  private seen: { readonly lease: Lease; unchangedMs: number } | undefined;
  private lastNow: number | undefined;
  /** The newest epoch of a lease seen (-1 before any): a row far ahead of it is refused. */
  private newest = -1;
  /** The clock went backwards at the last look: the wait started over (the caller counts it). */
  clockWentBack = false;
  /** The last look saw a lease (a holder, an epoch or a renewal) other than the one before. */
  changed = false;

  constructor(private readonly settings: Pick<FailureDetectorSettings, 'singletonLeaseMs'>) {}

  /** The newest lease epoch this watch has seen (-1 before any). */
  get newestEpoch(): number {
    return this.newest;
  }

  /** `lease` as read at `now` (the watcher's clock); it ran out once unchanged for a stretched lease and `extraMs`. */
  observe(lease: Lease | undefined, now: number, extraMs = 0): LeaseVerdict {
    const stepMs = this.lastNow === undefined ? 0 : now - this.lastNow;
    this.clockWentBack = stepMs < 0;
    this.lastNow = now;
    if (lease === undefined) {
      this.changed = this.seen !== undefined;
      this.seen = undefined;
      return { kind: 'free' };
    }
    if (lease.epoch > this.newest) this.newest = lease.epoch;
    const same =
      this.seen !== undefined && this.seen.lease.epoch === lease.epoch && this.seen.lease.renewal === lease.renewal && sameMember(this.seen.lease, lease);
    this.changed = !same;
    if (!same || this.clockWentBack) {
      // A new renewal, or a clock that went back (what was measured on it is void): the wait starts over.
      this.seen = { lease, unchangedMs: 0 };
    } else {
      this.seen!.unchangedMs += Math.min(stepMs, maxWatchStepMs(this.settings));
    }
    // A lease handed over needs no waiting out, only the watcher's place in line.
    const waitMs = lease.renewal === RELEASED_RENEWAL ? 0 : singletonLeaseWaitMs(this.settings);
    return this.seen!.unchangedMs >= waitMs + extraMs ? { kind: 'expired', lease } : { kind: 'held', lease };
  }

  /** Forget what was seen (the watcher stood, or stopped watching). */
  reset(): void {
    this.seen = undefined;
  }
}

/**
 * What is wrong with a lease row read from the store, if anything: an epoch far ahead of any this
 * node has seen (`knownEpoch`: the newest of the events topic's and the leases'; -1 if none), which
 * no singleton of this cluster wrote; or a holder the group does not list. The first is not acted on
 * at all (standing on it would make epochs leap and every genuine grant look stale); the second is
 * only counted: its lease is waited out as any other, since that holder may still think it holds the
 * role until its own lease runs out.
 */
export function leaseRowProblem(
  lease: Lease,
  knownEpoch: number,
  members: readonly MemberRef[],
): Extract<DropCause, 'future-epoch' | 'holder-not-member'> | undefined {
  if (isFutureEpoch(lease.epoch, knownEpoch)) return 'future-epoch';
  if (!members.some((m) => sameMember(m, lease))) return 'holder-not-member';
  return undefined;
}

/**
 * How long a candidate waits before it may stand again after it lost a compare-and-set race for the
 * lease, or after its own singleton stopped (it lost or gave up the lease): a whole singleton lease
 * and up to half of one more (`jitterMs`, random), so a former holder does not take back at once a
 * lease it just lost, and two candidates that raced do not race again in step.
 */
export function standBackoffMs(s: Pick<FailureDetectorSettings, 'singletonLeaseMs'>, jitterMs: number): number {
  const most = Math.ceil(s.singletonLeaseMs / 2);
  return s.singletonLeaseMs + Math.min(Math.max(0, Math.floor(jitterMs)), most);
}

/** When a candidate may stand again, on its own clock. */
export class StandBackoff {
  private notBefore = Number.NEGATIVE_INFINITY;

  /** It lost a race or its lease at `now`: no standing for `ms`. */
  backOff(now: number, ms: number): void {
    this.notBefore = Math.max(this.notBefore, now + ms);
  }

  /**
   * How long it must still wait at `now`, in whole ms (0: it may stand). A clock that went back
   * cannot shorten it. Whole: a look again after a fraction of a millisecond, on a clock that runs
   * at another rate than the timers', may find a smaller fraction left, and so on without end.
   */
  remainingMs(now: number): number {
    return Math.max(0, Math.ceil(this.notBefore - now));
  }
}
