// Performs the guardian's effects on the singleton it hosts and on the singleton lease: the calls
// of its candidacy, and in heartbeat mode its watch of the lease and its backoff.
import { leaseRowProblem, placeInLine, placeWaitMs, standBackoffMs } from '../../cluster/failure-detector/succession.js';
import { singletonLeaseWaitMs } from '../../cluster/failure-detector/settings.js';
import type { MembershipView } from '../../cluster/membership.js';
import type { Lease } from '../../store/meta-store.js';
import { spawnNodeClusterActor } from '../node-cluster-actor.js';
import type { GuardianEffect, GuardianInput, LeaseObservation } from './effects.js';
import type { GuardianShell } from './shell.js';

type Answer = GuardianInput | undefined | Promise<GuardianInput | undefined>;

type LeaseEffect = Extract<
  GuardianEffect,
  { type: 'ReadLease' | 'ObserveLease' | 'ResetLeaseWatch' | 'ReadLeaseToStand' | 'TakeLease' | 'BackOff' | 'Drop' | 'RetryCounted' }
>;
export type SingletonEffect =
  | Extract<GuardianEffect, { type: 'SpawnSingleton' | 'SingletonBegin' | 'SingletonView' | 'StopSingleton' | 'AskSingletonState' | 'ReplyNoSingleton' }>
  | LeaseEffect;

export function performSingletonEffect(sh: GuardianShell, effect: SingletonEffect): Answer {
  const { env } = sh;
  switch (effect.type) {
    case 'SpawnSingleton': {
      const { epoch } = effect;
      try {
        const ref = spawnNodeClusterActor(env, sh.self, epoch, {
          onStopped: (reason) => env.runtime.send(sh.self, { type: 'SingletonStopped', epoch, reason }),
        });
        sh.singleton = { ref, epoch };
        return;
      } catch (err) {
        // A singleton that could not be made is a failed candidacy, tried again with backoff.
        return { type: 'CandidacyFailed', err };
      }
    }
    case 'SingletonBegin':
      if (sh.singleton?.epoch === effect.epoch)
        env.runtime.send(sh.singleton.ref, { type: 'Begin', view: effect.view, ...(effect.takenAt === undefined ? {} : { takenAt: effect.takenAt }) });
      return;
    case 'SingletonView':
      if (sh.singleton?.epoch === effect.epoch) env.runtime.send(sh.singleton.ref, { type: 'View', view: effect.view });
      return;
    case 'StopSingleton':
      // At once through its role's flag (it may be blocked on a store call, and must not act when
      // that returns), then by the message that makes it clean up.
      env.singletonRole?.stop(effect.epoch, effect.reason);
      if (sh.singleton?.epoch === effect.epoch) env.runtime.send(sh.singleton.ref, { type: 'Stop', reason: effect.reason });
      return;
    case 'AskSingletonState':
      if (sh.singleton?.epoch === effect.epoch) env.runtime.ask(sh.singleton.ref, (reply) => ({ type: 'GetState' as const, reply }), effect.reply, undefined);
      else effect.reply(undefined);
      return;
    case 'ReplyNoSingleton':
      effect.reply(undefined);
      return;
    default:
      return performLeaseEffect(sh, effect);
  }
}

function performLeaseEffect(sh: GuardianShell, effect: LeaseEffect): Answer {
  const { env } = sh;
  switch (effect.type) {
    case 'ReadLease':
      return env.lease.readLease().then(
        (lease): GuardianInput => ({ type: 'LeaseRead', lease }),
        (err: unknown): GuardianInput => ({ type: 'LeaseReadFailed', err }),
      );
    case 'ObserveLease':
      return { type: 'LeaseObserved', observation: observe(sh, effect.lease) };
    case 'ResetLeaseWatch':
      sh.leaseWatch!.reset();
      return;
    case 'ReadLeaseToStand':
      return readToStand(sh);
    case 'TakeLease':
      return take(sh, effect.current, effect.renewal, effect.why);
    case 'BackOff': {
      // No standing for a singleton lease and a random part of one more (`standBackoffMs`).
      const settings = env.settings.failureDetector;
      const detector = env.detector!;
      const ms = standBackoffMs(settings, detector.random(Math.ceil(settings.singletonLeaseMs / 2) + 1));
      sh.standBackoff.backOff(detector.clock.now(), ms);
      return { type: 'BackedOff', why: effect.why, ms };
    }
    case 'Drop':
      env.detector!.dropped.drop({ cause: effect.cause, detail: effect.detail });
      return;
    case 'RetryCounted':
      env.telemetry.retry(effect.what);
      return;
    default: {
      const none: never = effect;
      throw new Error(`the guardian has no performer for ${JSON.stringify(none)}`);
    }
  }
}

async function readToStand(sh: GuardianShell): Promise<GuardianInput> {
  let current: Lease | undefined;
  try {
    current = await sh.env.lease.readLease();
  } catch (err) {
    return { type: 'CandidacyFailed', err };
  }
  if (!sh.env.runtime.isAlive(sh.self)) return { type: 'CandidacyAbandoned' }; // the node stopped meanwhile: no candidacy
  return { type: 'StandLeaseRead', lease: current };
}

async function take(sh: GuardianShell, current: Lease | undefined, renewal: number | undefined, why: string | undefined): Promise<GuardianInput> {
  const { env } = sh;
  const takenAt = env.detector?.clock.now();
  let lease: Lease | undefined;
  try {
    lease = await env.lease.takeLease(env.node, env.incarnation, current?.epoch ?? 0, renewal);
  } catch (err) {
    return { type: 'CandidacyFailed', err };
  }
  if (!env.runtime.isAlive(sh.self)) return { type: 'CandidacyAbandoned' };
  return { type: 'LeaseTaken', lease, current, why, takenAt };
}

/**
 * The lease read, as the watch judges it: this node's place in line, what is wrong with the row,
 * and (unless its epoch is far ahead, which is not watched) the watch's verdict.
 */
function observe(sh: GuardianShell, lease: Lease | undefined): LeaseObservation {
  const { env } = sh;
  const settings = env.settings.failureDetector;
  const watch = sh.leaseWatch!;
  const view = sh.state.view!;
  const place = placeInLine(inLine(sh, view), lease, { node: env.node, incarnation: env.incarnation });
  const knownEpoch = Math.max(sh.state.maxEpoch, watch.newestEpoch);
  const problem = lease ? leaseRowProblem(lease, knownEpoch, view.members) : undefined;
  const seen = { lease, place, problem, knownEpoch, changedBefore: watch.changed };
  if (problem === 'future-epoch') return seen;
  const now = env.detector!.clock.now();
  const extraMs = place === undefined ? 0 : placeWaitMs(place, settings);
  const verdict = watch.observe(lease, now, extraMs);
  return {
    ...seen,
    look: { verdict, clockWentBack: watch.clockWentBack, backingOffMs: sh.standBackoff.remainingMs(now), waitedMs: singletonLeaseWaitMs(settings) + extraMs },
  };
}

/**
 * The members that may stand: the group's view without the incarnations the last singleton no
 * longer counted (it evicted them: the group may list a dead one for a session, and it would hold
 * the line), this node always included.
 */
function inLine(sh: GuardianShell, view: MembershipView): MembershipView['members'] {
  const counted = sh.maps.members?.members;
  if (!counted) return view.members;
  const self = (m: { node: string; incarnation: string }) => m.node === sh.env.node && m.incarnation === sh.env.incarnation;
  return view.members.filter((m) => self(m) || counted.some((c) => c.node === m.node && c.incarnation === m.incarnation));
}
