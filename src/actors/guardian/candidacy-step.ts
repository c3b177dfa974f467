// The guardian's candidacy for the singleton: standing (the lease taken by compare-and-set), what a
// won or lost race does, and the timers of its retries and of the next look at the lease.
import type { Stepped } from '../reducer.js';
import type { Lease } from '../../store/meta-store.js';
import type { GuardianEffect, GuardianInput } from './effects.js';
import type { GuardianState } from './state.js';

export type Step = Stepped<GuardianState, GuardianEffect>;

/** A wait that doubles with each attempt in a row, from retryInitialMs up to retryMaxMs (as every MetaStore retry: withRetry). */
export function retryInMs(s: GuardianState, attempt: number): number {
  return Math.min(s.config.retryInitialMs * 2 ** (attempt - 1), s.config.retryMaxMs);
}

export function retryCandidacyIn(afterMs: number): GuardianEffect {
  return { type: 'Schedule', afterMs, msg: { type: 'RetryCandidacy' } };
}

/** Heartbeat mode: the next look at the lease in `ms` (an earlier one already due stays). */
export function watchSoon(s: GuardianState, ms: number): Step {
  if (s.watchPending && ms > 0) return { state: s, effects: [] };
  const schedule: GuardianEffect = { type: 'Schedule', afterMs: ms, msg: { type: 'WatchLease' }, key: 'watch' };
  return {
    state: s.watchPending ? s : { ...s, watchPending: true },
    effects: s.watchPending ? [{ type: 'CancelTimer', key: 'watch' }, schedule] : [schedule],
  };
}

/** `first`'s effects, then those of `next` applied to its state. */
export function andThen(first: Step, next: (s: GuardianState) => Step): Step {
  const second = next(first.state);
  return { state: second.state, effects: [...first.effects, ...second.effects] };
}

/**
 * Takes the singleton lease by compare-and-set and starts the singleton at the new epoch. In
 * heartbeat mode, `seen` is the lease the watch judged gone (undefined: never taken), and the
 * compare-and-set is on its epoch and renewal.
 */
export function stand(s: GuardianState, seen?: { readonly lease: Lease | undefined; readonly why: string }): Step {
  if (s.candidacy) return { state: s, effects: [] };
  const state = { ...s, candidacy: true };
  if (!seen) return { state, effects: [{ type: 'ReadLeaseToStand' }] };
  return { state, effects: [{ type: 'TakeLease', current: seen.lease, renewal: seen.lease?.renewal, why: seen.why }] };
}

type CandidacyInput = Extract<GuardianInput, { type: 'StandLeaseRead' | 'LeaseTaken' | 'CandidacyFailed' | 'CandidacyAbandoned' }>;

/** What came of a step of standing. */
export function candidacyStep(s: GuardianState, msg: CandidacyInput, now: number): Step {
  switch (msg.type) {
    case 'StandLeaseRead':
      return { state: s, effects: [{ type: 'TakeLease', current: msg.lease, renewal: undefined, why: undefined }] };
    case 'CandidacyAbandoned':
      return { state: { ...s, candidacy: false }, effects: [] };
    case 'CandidacyFailed': {
      // Backs off like every MetaStore retry (withRetry): the store may be away for a while.
      const attempt = s.candidacyFailures + 1;
      const afterMs = retryInMs(s, attempt);
      return {
        // No singleton either, should the lease have been taken and its singleton not made.
        state: { ...s, candidacy: false, candidacyFailures: attempt, singleton: undefined },
        effects: [
          {
            type: 'Log',
            level: 'warn',
            fields: { event: 'retry', what: 'taking the singleton lease', err: msg.err, attempt, retryInMs: afterMs },
            msg: 'could not take the singleton lease; trying again',
          },
          { type: 'RetryCounted', what: 'taking the singleton lease' },
          retryCandidacyIn(afterMs),
        ],
      };
    }
    case 'LeaseTaken':
      return msg.lease ? won(s, msg.lease, msg, now) : lost(s, msg.current);
  }
}

function lost(s: GuardianState, current: Lease | undefined): Step {
  const state = { ...s, candidacy: false };
  const log: GuardianEffect = {
    type: 'Log',
    level: 'info',
    fields: { current: current?.epoch },
    msg: 'another candidate took the singleton lease first; trying again',
  };
  if (!s.config.heartbeat) return { state, effects: [log, retryCandidacyIn(s.config.retryInitialMs)] };
  // The winner may be renewing already: back off rather than race it again (§11.9).
  return andThen({ state, effects: [log, { type: 'BackOff', why: 'lost a race for the singleton lease' }] }, (x) => watchSoon(x, 0));
}

function won(s: GuardianState, lease: Lease, taken: Extract<GuardianInput, { type: 'LeaseTaken' }>, now: number): Step {
  const epoch = lease.epoch;
  const effects: GuardianEffect[] = [];
  const current = taken.current;
  if (taken.why !== undefined && current)
    effects.push({
      type: 'Log',
      level: 'info',
      fields: { event: 'singleton.succession', epoch, predecessor: `${current.node}@${current.incarnation}`, predecessorEpoch: current.epoch, why: taken.why },
      msg: `took the singleton lease from ${current.node}: ${taken.why}`,
    });
  effects.push({ type: 'SpawnSingleton', epoch }, { type: 'SingletonBegin', epoch, view: s.view!, takenAt: taken.takenAt });
  return { state: { ...s, candidacy: false, candidacyFailures: 0, singleton: { epoch, startedAt: now } }, effects };
}
