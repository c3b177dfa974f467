// What the guardian does with a record of the events topic (maps, members, digests, fences,
// releases, a new singleton's request for the cluster's state) and of the replies topic.
import type { BusRecord } from '../../cluster/bus.js';
import type { SubscriberId } from '../../core/ids.js';
import { parseRepliesMessage } from '../../protocol/wire.js';
import type { EventsRecord } from '../../protocol/wire-events.js';
import type { GuardianEffect, GuardianInput } from './effects.js';
import type { GuardianState } from './state.js';
import type { Step } from './candidacy-step.js';

export function eventsRead(s: GuardianState, msg: Extract<GuardianInput, { type: 'EventsRead' }>, now: number): Step {
  const parsed = msg.parsed;
  if (!parsed.ok) return { state: s, effects: [{ type: 'SkipMalformed', record: msg.record, reason: parsed.error.reason }] };
  const m = parsed.value;
  // Fencing: nothing from a singleton older than the newest one seen (I6).
  if (m.epoch < s.maxEpoch)
    return {
      state: s,
      effects: [
        { type: 'Log', level: 'debug', fields: { epoch: m.epoch, current: s.maxEpoch, kind: m.kind }, msg: 'record from a replaced singleton ignored' },
      ],
    };
  const effects: GuardianEffect[] = [];
  let formatToldTo = s.formatToldTo;
  // A new singleton learns which map format this node reads from the first request it reads
  // from it; the node's first ask may have gone before that singleton read its inbox.
  if (m.epoch > formatToldTo) {
    formatToldTo = m.epoch;
    effects.push({ type: 'DeclareMapFormat' });
  }
  effects.push({ type: 'Heard', at: now }, ...recordEffects(s, m));
  const state = formatToldTo === s.formatToldTo && m.epoch === s.maxEpoch ? s : { ...s, formatToldTo, maxEpoch: m.epoch };
  return { state, effects };
}

function recordEffects(s: GuardianState, m: EventsRecord): GuardianEffect[] {
  const self = s.config;
  switch (m.kind) {
    case 'publish':
      return publish(s, m.to, m.message);
    case 'map-changes':
      return [{ type: 'Maps', op: { kind: 'changes', record: m } }];
    case 'map-snapshot':
      return [{ type: 'Maps', op: { kind: 'snapshot', record: m } }];
    case 'members':
      return [{ type: 'Maps', op: { kind: 'members', record: m } }];
    case 'members-change':
      return [{ type: 'Maps', op: { kind: 'members-change', record: m } }];
    case 'digest':
      return [
        { type: 'ReporterDigest', epoch: m.epoch, inbox: m.inbox, acksSent: m.acksSent },
        { type: 'Maps', op: { kind: 'digest', record: m } },
      ];
    case 'fence':
      return m.node === self.node && m.incarnation === self.incarnation ? [{ type: 'StopAll', reason: `fenced by the singleton: ${m.reason}` }] : [];
    case 'release':
      return m.node === self.node && m.incarnation === self.incarnation ? [{ type: 'Released' }] : [];
    case 'cluster-state-request':
      return [{ type: 'ReadRunning', request: m }];
  }
}

function publish(s: GuardianState, to: readonly SubscriberId[], message: Extract<EventsRecord, { kind: 'publish' }>['message']): GuardianEffect[] {
  const effects: GuardianEffect[] = [];
  for (const id of to) {
    if (id === s.config.guardianId) {
      if (message.type === 'DatasetUnknown' || message.type === 'DatasetRemoved')
        effects.push({ type: 'Maps', op: { kind: 'gone', dataset: message.dataset } });
    } else if (id.startsWith(s.config.hostPrefix)) {
      // A local subscriber that is gone (`LocalGone`): the singleton is told, so it stops sending (deathwatch).
      effects.push({ type: 'DeliverLocal', id, message });
    }
  }
  // Every node forgets a removed dataset, whether or not it was told by name.
  if (message.type === 'DatasetRemoved') effects.push({ type: 'Maps', op: { kind: 'gone', dataset: message.dataset } });
  return effects;
}

export function replies(s: GuardianState, record: BusRecord, now: number): Step {
  const parsed = parseRepliesMessage(record.value);
  if (!parsed.ok) return { state: s, effects: [{ type: 'SkipMalformed', record, reason: parsed.error.reason }] };
  const m = parsed.value;
  if (m.epoch < s.maxEpoch) return { state: s, effects: [] };
  const effects: GuardianEffect[] = [{ type: 'Heard', at: now }];
  // Replies to requests are the request lane's (`request-lane.ts`): they never wait in this mailbox.
  if (m.kind !== 'ack') return { state: s, effects };
  if (m.node === s.config.node && m.incarnation === s.config.incarnation) effects.push({ type: 'ReporterAck', seq: m.seq });
  effects.push({ type: 'ReporterAcknowledged', epoch: m.epoch, passed: m.inbox === undefined ? undefined : m.inbox + 1, ordinal: m.ordinal });
  return { state: s, effects };
}
