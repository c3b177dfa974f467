// Heartbeat mode, while this node hosts no singleton: its watch of the singleton lease (§11.9).
import type { GuardianEffect, GuardianInput, LeaseObservation } from './effects.js';
import type { GuardianState } from './state.js';
import { stand, andThen, watchSoon, type Step } from './candidacy-step.js';

type WatchInput = Extract<GuardianInput, { type: 'WatchLease' | 'LeaseRead' | 'LeaseReadFailed' | 'LeaseObserved' }>;

export function watchStep(s: GuardianState, msg: WatchInput): Step {
  switch (msg.type) {
    case 'WatchLease': {
      const state = { ...s, watchPending: false };
      const fired: GuardianEffect = { type: 'TimerFired', key: 'watch' };
      if (s.singleton || !s.joined || !s.view || s.candidacy) return { state, effects: [fired] };
      return { state, effects: [fired, { type: 'ReadLease' }] };
    }
    case 'LeaseReadFailed': {
      const effects: GuardianEffect[] = s.leaseReadFailing
        ? []
        : [
            {
              type: 'Log',
              level: 'warn',
              fields: { event: 'retry', what: 'reading the singleton lease', err: msg.err },
              msg: 'could not read the singleton lease; looking again',
            },
          ];
      return andThen({ state: { ...s, leaseReadFailing: true }, effects }, (x) => watchSoon(x, s.config.heartbeatIntervalMs));
    }
    case 'LeaseRead': {
      const state = s.leaseReadFailing ? { ...s, leaseReadFailing: false } : s;
      if (s.singleton || !s.view) return { state, effects: [] };
      return { state, effects: [{ type: 'ObserveLease', lease: msg.lease }] };
    }
    case 'LeaseObserved':
      return observed(s, msg.observation);
  }
}

/**
 * The next in line takes the lease once it ran out, never sooner, and looks every heartbeat; the
 * others look every half singleton lease (the holder may change, and with it the line) and take it
 * half a lease later per place (the one before them in line may be dead). A row no singleton of
 * this cluster can have written (an epoch far ahead) is refused and counted; nobody stands while
 * backing off.
 */
function observed(s: GuardianState, o: LeaseObservation): Step {
  const { place, lease } = o;
  const nextLookMs = place === 0 ? s.config.heartbeatIntervalMs : Math.ceil(s.config.singletonLeaseMs / 2);
  const effects: GuardianEffect[] = [];
  let state = s;
  if (lease) {
    if (o.problem === 'future-epoch') {
      effects.push({
        type: 'Drop',
        cause: o.problem,
        detail: `singleton lease row of epoch ${lease.epoch} held by ${lease.node}@${lease.incarnation}; the newest epoch seen is ${o.knownEpoch}`,
      });
      return andThen({ state, effects }, (x) => watchSoon(x, nextLookMs));
    }
    if (o.problem === 'holder-not-member' && (o.changedBefore || !s.holderNotMemberSeen)) {
      // Counted once per renewal seen, not per look.
      effects.push({
        type: 'Drop',
        cause: o.problem,
        detail: `singleton lease row of epoch ${lease.epoch} renewed (${lease.renewal}) by ${lease.node}@${lease.incarnation}, which the group does not list`,
      });
    }
    const seen = o.problem === 'holder-not-member';
    if (seen !== s.holderNotMemberSeen) state = { ...s, holderNotMemberSeen: seen };
  }
  const look = o.look!;
  const verdict = look.verdict;
  if (look.clockWentBack)
    effects.push({ type: 'Drop', cause: 'clock-jump', detail: 'the monotonic clock went back between two looks at the singleton lease: its wait starts over' });
  const done: Step = { state, effects };
  if (look.backingOffMs > 0 && (verdict.kind === 'free' || verdict.kind === 'expired'))
    return andThen(done, (x) => watchSoon(x, Math.min(nextLookMs, look.backingOffMs)));
  if (place === 0 && verdict.kind === 'free') return andThen(done, (x) => stand(x, { lease: undefined, why: 'no lease yet' }));
  if (place !== undefined && verdict.kind === 'expired') {
    // The watch is not reset: if the compare-and-set fails for want of the store, the lease is
    // still as expired at the next look (a new holder or renewal starts the watch over anyway).
    return andThen(done, (x) => stand(x, { lease: verdict.lease, why: `its lease was not renewed for ${look.waitedMs} ms` }));
  }
  return andThen(done, (x) => watchSoon(x, nextLookMs));
}
