// Who takes the singleton's role when its holder is gone, in `heartbeat` mode (docs/ARCHITECTURE.md
// §11.9). The group's view orders the members, oldest first; the next in line is the first member
// that does not hold the lease. It watches the lease and takes it by compare-and-set on the
// `(epoch, renewal)` it saw, either once that renewal stayed the same for a whole singleton lease
// stretched by the drift factor (the holder's lease, and every node lease it granted, has run out),
// or at once when the holder's detector endpoint refuses connections (its process is gone).
import type { Lease } from '../../store/meta-store.js';
import { sameMember, type MemberRef } from './messages.js';
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

/** Follows one lease's renewals on the watcher's own clock. */
export class LeaseWatch {
  private seen: { readonly lease: Lease; readonly since: number } | undefined;

  constructor(private readonly settings: Pick<FailureDetectorSettings, 'singletonLeaseMs'>) {}

  /** `lease` as read at `now` (the watcher's clock); it ran out once unchanged for a stretched lease and `extraMs`. */
  observe(lease: Lease | undefined, now: number, extraMs = 0): LeaseVerdict {
    if (lease === undefined) {
      this.seen = undefined;
      return { kind: 'free' };
    }
    const same = this.seen !== undefined && this.seen.lease.epoch === lease.epoch && this.seen.lease.renewal === lease.renewal && sameMember(this.seen.lease, lease);
    if (!same) this.seen = { lease, since: now };
    const unchangedForMs = now - this.seen!.since;
    return unchangedForMs >= singletonLeaseWaitMs(this.settings) + extraMs ? { kind: 'expired', lease } : { kind: 'held', lease };
  }

  /** Forget what was seen (the watcher stood, or stopped watching). */
  reset(): void {
    this.seen = undefined;
  }
}
