// The guardian's step: what it does with each message, as effects its shell performs in order.
// It hands the node's maps and members to the coordinator (through the shell's followed maps),
// routes acknowledgements to the reporter, answers a new singleton's request for the cluster's
// state, and hosts the singleton when its node is the oldest member (or, in heartbeat mode, when it
// takes the lease).
import type { Reducer } from '../reducer.js';
import type { MembershipView } from '../../cluster/membership.js';
import type { GuardianEffect, GuardianInput } from './effects.js';
import type { GuardianState } from './state.js';
import { candidacyStep, retryCandidacyIn, retryInMs, stand, andThen, watchSoon, type Step } from './candidacy-step.js';
import { eventsRead, replies } from './events-step.js';
import { watchStep } from './lease-step.js';

export const guardianStep: Reducer<GuardianState, GuardianInput, GuardianEffect> = (s, msg, now) => {
  switch (msg.type) {
    case 'Start':
      // Every map and the members: what a node needs before it runs anything.
      return { state: s, effects: [{ type: 'Maps', op: { kind: 'want', all: true, members: true } }] };
    case 'View':
      return onView(s, msg.view, msg.member);
    case 'Events':
      return { state: s, effects: [{ type: 'ReadEvents', record: msg.record }] };
    case 'EventsRead':
      return eventsRead(s, msg, now);
    case 'LocalGone':
      return { state: s, effects: [{ type: 'Request', request: { type: 'SubscriberTerminated', subscriber: msg.id } }] };
    case 'RunningRead':
      return { state: s, effects: [{ type: 'SendClusterState', request: msg.request, running: msg.running }] };
    case 'Replies':
      return replies(s, msg.record, now);
    case 'SingletonStopped':
      return singletonStopped(s, msg.epoch, msg.reason, now);
    case 'WatchLease':
    case 'LeaseRead':
    case 'LeaseReadFailed':
    case 'LeaseObserved':
      return watchStep(s, msg);
    case 'RetryCandidacy': {
      if (s.config.heartbeat) return watchSoon(s, 0);
      return !s.singleton && isOldest(s, s.view) ? stand(s) : { state: s, effects: [] };
    }
    case 'StandLeaseRead':
    case 'LeaseTaken':
    case 'CandidacyFailed':
    case 'CandidacyAbandoned':
      return candidacyStep(s, msg, now);
    case 'BackedOff':
      return {
        state: s,
        effects: [
          {
            type: 'Log',
            level: 'info',
            fields: { event: 'singleton.backoff', why: msg.why, backoffMs: msg.ms },
            msg: `this node does not stand for the singleton lease for ${msg.ms} ms: ${msg.why}`,
          },
        ],
      };
    case 'GetSingletonState':
      // A singleton that stops with the question in its mailbox (its lease ran out) answers none.
      return {
        state: s,
        effects: [s.singleton ? { type: 'AskSingletonState', epoch: s.singleton.epoch, reply: msg.reply } : { type: 'ReplyNoSingleton', reply: msg.reply }],
      };
    case 'GetRunning':
      return { state: s, effects: [{ type: 'AskRunning', reply: msg.reply }] };
    case 'GetRunningSummary':
      return { state: s, effects: [{ type: 'AskRunningSummary', listUpTo: msg.listUpTo, reply: msg.reply }] };
    case 'SyncTimeout':
      return {
        state: s,
        effects: [
          { type: 'TimerFired', key: 'sync' },
          { type: 'Maps', op: { kind: 'syncFailed' } },
        ],
      };
  }
};

function isOldest(s: GuardianState, view: MembershipView | undefined): boolean {
  const oldest = view?.members[0];
  return oldest?.node === s.config.node && oldest.incarnation === s.config.incarnation;
}

function onView(s0: GuardianState, view: MembershipView, member: boolean): Step {
  const s = { ...s0, view };
  if (!member) {
    if (!s.joined) return { state: s, effects: [] };
    // Out of the group (paused too long, partitioned): stop acting as a member at once.
    const reason = 'this node is no longer a member';
    const effects: GuardianEffect[] = s.singleton ? [{ type: 'StopSingleton', epoch: s.singleton.epoch, reason }] : [];
    effects.push({ type: 'StopAll', reason }, { type: 'Fenced', reason: 'no longer a member of the cluster' });
    return { state: s, effects };
  }
  const joined = { ...s, joined: true };
  const singleton = s.singleton;
  if (s.config.heartbeat) {
    // Heartbeat mode: the lease, not age, says who holds the role (§11.9).
    if (singleton) return { state: joined, effects: [{ type: 'SingletonView', epoch: singleton.epoch, view }] };
    return watchSoon(joined, 0);
  }
  const oldest = isOldest(s, view);
  if (singleton && !oldest)
    return { state: joined, effects: [{ type: 'StopSingleton', epoch: singleton.epoch, reason: `${view.members[0]?.node} is now the oldest member` }] };
  if (singleton) return { state: joined, effects: [{ type: 'SingletonView', epoch: singleton.epoch, view }] };
  return oldest ? stand(joined) : { state: joined, effects: [] };
}

function singletonStopped(s: GuardianState, epoch: number, reason: string, now: number): Step {
  if (s.singleton?.epoch !== epoch) return { state: s, effects: [] };
  const ranMs = now - s.singleton.startedAt;
  let step: Step = { state: { ...s, singleton: undefined }, effects: [] };
  if (s.config.heartbeat) {
    // It lost or gave up the lease: it must not take it back at once (§11.9).
    step = andThen({ state: step.state, effects: [{ type: 'ResetLeaseWatch' }, { type: 'BackOff', why: `its singleton stopped: ${reason}` }] }, (x) =>
      watchSoon(x, 0),
    );
  }
  // A singleton that crashed (Kafka or the MetaStore failed it past its retries: a commit
  // refused while a broker was away) is replaced at once by a new epoch if this node is still
  // the oldest member; nothing else would start one before the next membership change.
  // ('crashed' is what the singleton reports from its crash, see spawnNodeClusterActor.)
  if (reason !== 'crashed') return step;
  const attempt = (ranMs >= s.config.retryMaxMs ? 0 : s.singletonCrashes) + 1;
  const afterMs = retryInMs(s, attempt);
  return {
    state: { ...step.state, singletonCrashes: attempt },
    effects: [
      ...step.effects,
      {
        type: 'Log',
        level: 'warn',
        fields: { event: 'singleton.stopped', reason: 'crashed', epoch, ranMs, retryInMs: afterMs },
        msg: 'the singleton crashed; standing again',
      },
      retryCandidacyIn(afterMs),
    ],
  };
}
