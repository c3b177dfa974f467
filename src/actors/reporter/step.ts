// The reporter's logic as a pure step (see the top of `reporter.ts` for when a report goes again).
//
// The events waiting for an acknowledgement (one per copy: 65 536 on a large node) are not copied
// at each step: the shell owns them (`PendingTable`), hands them to each step read-only with the
// message, and writes them only as the step's effects say (`Pend`, `Sent`, `Acked`, `SendAgain`),
// in their order. The reports in flight (a few hundred at most) are the step's own state.
import type { Incarnation, NodeId } from '../../core/ids.js';
import type { ShardEvent } from '../../core/status.js';
import { MAX_EVENTS_PER_REPORT, WIRE_FORMAT, type InboxMessage } from '../../protocol/wire.js';
import type { Reducer, Stepped } from '../reducer.js';

export type ReporterMsg =
  | { readonly type: 'Flush' }
  | { readonly type: 'Ack'; readonly seq: number }
  /** An acknowledgement to anyone moved `passed` past a report of this node: it was lost. */
  | { readonly type: 'Heard' }
  /** `timer`: which arming of the resend timer fired (an older one, replaced since, is ignored). */
  | { readonly type: 'Resend'; readonly timer: number };

/**
 * What the shell steps besides the mailbox's messages. `Report` and `Acknowledged` are calls, not
 * messages: the actor handles one message per turn of the event loop, and a node that starts
 * 65 536 copies reports 65 536 times at once; as messages they took minutes to get through its
 * mailbox (issue 34), as calls they coalesce at once.
 */
export type ReporterInternal =
  | { readonly type: 'Report'; readonly event: ShardEvent }
  /** The singleton runs, and every report before inbox offset `passed` (if any) was applied or dropped. */
  | { readonly type: 'Acknowledged'; readonly passed: number | undefined }
  /** A report's produce settled: at `offset` in the inbox, or failed (the singleton never saw it). */
  | { readonly type: 'Produced'; readonly seq: number; readonly offset?: number; readonly failure?: { readonly error: unknown } };

export interface Pending {
  readonly event: ShardEvent;
  /** The report it was last sent in; undefined while it waits to be sent. */
  readonly sentIn: number | undefined;
}

/** The shell's table of events, read-only to the step. */
export interface PendingView {
  /** `dataset/shard` → its latest event. */
  readonly pending: ReadonlyMap<string, Pending>;
  /** The keys of `pending` waiting to be sent, oldest first. */
  readonly unsent: ReadonlySet<string>;
}

export interface ReporterInput {
  readonly msg: ReporterMsg | ReporterInternal;
  readonly view: PendingView;
}

/** A report sent and not acknowledged yet. */
export interface InFlight {
  /** The keys it carried: an acknowledgement costs its report's size, not the pending's. */
  readonly keys: readonly string[];
  /** When its produce settled; undefined while the bus has it. */
  readonly producedAt: number | undefined;
  /** Its offset in the inbox, once produced. */
  readonly offset: number | undefined;
  /** Its produce failed: the singleton never saw it. */
  readonly lost: boolean;
}

export interface ReporterState {
  readonly node: NodeId;
  readonly incarnation: Incarnation;
  readonly resendMs: number;
  readonly seq: number;
  readonly inFlight: ReadonlyMap<number, InFlight>;
  readonly flushQueued: boolean;
  /** When the armed resend timer fires. */
  readonly resendAt: number;
  /** Armings of the resend timer so far. */
  readonly resendTimers: number;
  /** The newest report of this node acknowledged. */
  readonly newestAcked: number;
  /** Every report before this inbox offset was applied or dropped by the singleton (from the acknowledgements, anyone's). */
  readonly passed: number;
  /** When an acknowledgement, anyone's, last came. */
  readonly lastAckAt: number;
  /** Resends of reports ahead of every acknowledgement since the last one: the silence they wait for doubles with each. */
  readonly quietResends: number;
}

export type ReporterEffect =
  /** `event` is the key's latest, waiting to be sent. */
  | { readonly type: 'Pend'; readonly key: string; readonly event: ShardEvent }
  /** These keys are no longer waiting: they went in report `seq`. */
  | { readonly type: 'Sent'; readonly keys: readonly string[]; readonly seq: number }
  /** These keys' events were acknowledged: they are done with. */
  | { readonly type: 'Acked'; readonly keys: readonly string[] }
  /** These keys' events wait to be sent again, after the ones waiting already. */
  | { readonly type: 'SendAgain'; readonly keys: readonly string[] }
  /** Sends the reporter itself a message. */
  | { readonly type: 'Send'; readonly msg: ReporterMsg }
  /** Puts the report on the inbox; the shell steps `Produced` when that settles. */
  | { readonly type: 'Produce'; readonly seq: number; readonly report: InboxMessage }
  | { readonly type: 'CancelResend' }
  | { readonly type: 'Schedule'; readonly afterMs: number; readonly msg: ReporterMsg }
  | { readonly type: 'Resent'; readonly cause: 'lost' | 'silence'; readonly events: number }
  | { readonly type: 'Log'; readonly level: 'debug'; readonly fields: Record<string, unknown>; readonly text: string }
  /** The handler fails with this error, as the produce did (the actor logs it and goes on). */
  | { readonly type: 'Fail'; readonly error: unknown };

/** The silence of the singleton a report past every acknowledgement waits for, in `reportResendMs`: first, and at most. */
export const FIRST_SILENCE_FACTOR = 4;
const MAX_SILENCE_FACTOR = 16;

export const initialReporterState = (node: NodeId, incarnation: Incarnation, resendMs: number): ReporterState => ({
  node,
  incarnation,
  resendMs,
  seq: 0,
  inFlight: new Map(),
  flushQueued: false,
  resendAt: Infinity,
  resendTimers: 0,
  newestAcked: 0,
  passed: 0,
  lastAckAt: -Infinity,
  quietResends: 0,
});

type Step = Stepped<ReporterState, ReporterEffect>;

export const stepReporter: Reducer<ReporterState, ReporterInput, ReporterEffect> = (state, { msg, view }, now) => {
  switch (msg.type) {
    case 'Report':
      return report(state, view, msg.event);
    case 'Flush':
      return flush(state, view);
    case 'Produced': {
      const r = state.inFlight.get(msg.seq);
      const inFlight = new Map(state.inFlight);
      if (r) inFlight.set(msg.seq, { ...r, producedAt: now, ...(msg.failure ? { lost: true } : { offset: msg.offset }) });
      const armed = armResend({ ...state, inFlight }, now);
      return msg.failure ? { state: armed.state, effects: [...armed.effects, { type: 'Fail', error: msg.failure.error }] } : armed;
    }
    case 'Ack': {
      // Only the events of the report acknowledged: an acknowledgement of a later report says
      // nothing of an earlier one whose produce failed (the singleton never saw it), so an event
      // in it stays until it is sent again and acknowledged (sim seed 45 lost an IngestionError so).
      const keys = (state.inFlight.get(msg.seq)?.keys ?? []).filter((key) => view.pending.get(key)?.sentIn === msg.seq);
      const inFlight = new Map(state.inFlight);
      inFlight.delete(msg.seq);
      const armed = armResend({ ...state, inFlight, newestAcked: Math.max(state.newestAcked, msg.seq) }, now);
      return keys.length > 0 ? { state: armed.state, effects: [{ type: 'Acked', keys }, ...armed.effects] } : armed;
    }
    case 'Heard':
      return armResend(state, now);
    case 'Resend':
      return resend(state, view, msg.timer, now);
    case 'Acknowledged':
      return acknowledged(state, msg.passed, now);
  }
};

function report(state: ReporterState, view: PendingView, event: ShardEvent): Step {
  // Only the latest event per shard matters: a newer one replaces an unacknowledged older one.
  // The same event again while one is on its way is not sent twice: the resend covers a loss.
  const key = `${event.dataset}/${event.shard}`;
  const pending = view.pending.get(key);
  if (pending !== undefined && sameEvent(pending.event, event)) return { state, effects: [] };
  const effects: ReporterEffect[] = [{ type: 'Pend', key, event }];
  if (state.flushQueued) return { state, effects };
  // Events reported together go in one report.
  return { state: { ...state, flushQueued: true }, effects: [...effects, { type: 'Send', msg: { type: 'Flush' } }] };
}

function flush(state: ReporterState, view: PendingView): Step {
  // At most MAX_EVENTS_PER_REPORT a report: a node that starts thousands of shards sends
  // several bounded reports in a row, each acknowledged on its own.
  const keys: string[] = [];
  for (const key of view.unsent) {
    if (keys.length === MAX_EVENTS_PER_REPORT) break;
    keys.push(key);
  }
  if (keys.length === 0) return { state: { ...state, flushQueued: false }, effects: [] };
  const seq = state.seq + 1;
  const inFlight = new Map(state.inFlight).set(seq, { keys, producedAt: undefined, offset: undefined, lost: false });
  const more = view.unsent.size > keys.length;
  const effects: ReporterEffect[] = [{ type: 'Sent', keys, seq }];
  if (more) effects.push({ type: 'Send', msg: { type: 'Flush' } });
  const events = keys.map((key) => view.pending.get(key)!.event);
  // Its wait counts from when it reached the bus, not from when it was handed to it: a produce
  // held by a pause (or a slow broker) that ended just as a timer fired put the same events on
  // the bus twice at once (sim seed 7260, I16). A failed produce is sent again like a report
  // lost on the way.
  effects.push({ type: 'Produce', seq, report: { format: WIRE_FORMAT, kind: 'report', node: state.node, incarnation: state.incarnation, seq, events } });
  return { state: { ...state, seq, inFlight, flushQueued: more }, effects };
}

function resend(state: ReporterState, view: PendingView, timer: number, now: number): Step {
  // A flush or an acknowledgement between the timer's firing and this message armed a newer timer: that one decides.
  if (timer !== state.resendTimers) return { state, effects: [] };
  const effects: ReporterEffect[] = [];
  const resent = { lost: 0, silence: 0 };
  const inFlight = new Map(state.inFlight);
  for (const [seq, r] of state.inFlight) {
    if (dueAt(state, seq, r) > now) continue;
    const cause = isLost(state, seq, r) ? 'lost' : 'silence';
    const keys = r.keys.filter((key) => view.pending.get(key)?.sentIn === seq);
    if (keys.length > 0) effects.push({ type: 'SendAgain', keys });
    resent[cause] += keys.length;
    inFlight.delete(seq);
  }
  for (const cause of ['lost', 'silence'] as const) if (resent[cause] > 0) effects.push({ type: 'Resent', cause, events: resent[cause] });
  const quietResends = resent.silence > 0 ? state.quietResends + 1 : state.quietResends;
  let flushQueued = state.flushQueued;
  if (resent.lost + resent.silence > 0) {
    effects.push({
      type: 'Log',
      level: 'debug',
      fields: { ...resent, pending: view.pending.size, seq: state.seq, quietResends },
      text: 'reports not acknowledged in time: sending them again',
    });
    if (!flushQueued) {
      flushQueued = true;
      effects.push({ type: 'Send', msg: { type: 'Flush' } });
    }
  }
  // The timer that fired is spent: nothing is armed until `armResend` says.
  const armed = armResend({ ...state, inFlight, quietResends, flushQueued, resendAt: Infinity }, now);
  return { state: armed.state, effects: [...effects, ...armed.effects] };
}

function acknowledged(state: ReporterState, passed: number | undefined, now: number): Step {
  const heard = { ...state, lastAckAt: now, quietResends: 0 };
  if (passed === undefined || passed <= state.passed) return { state: heard, effects: [] };
  // Only when that passed a report of this node not acknowledged: the singleton acknowledges
  // many reports a second, and each would otherwise be a message here.
  const lostOne = [...state.inFlight.values()].some((r) => r.offset !== undefined && r.offset < passed);
  return { state: { ...heard, passed }, effects: lostOne ? [{ type: 'Send', msg: { type: 'Heard' } }] : [] };
}

/** Whether a report in flight will never be acknowledged: its produce failed, or the singleton passed it. */
const isLost = (s: ReporterState, seq: number, r: InFlight): boolean => r.lost || seq < s.newestAcked || (r.offset !== undefined && r.offset < s.passed);

/** When a report in flight is sent again, if nothing is acknowledged meanwhile (see the top of `reporter.ts`). */
export function dueAt(s: ReporterState, seq: number, r: InFlight): number {
  if (r.producedAt === undefined) return Infinity; // armed again when its produce settles
  if (isLost(s, seq, r)) return r.producedAt + s.resendMs;
  const silence = s.resendMs * Math.min(FIRST_SILENCE_FACTOR * 2 ** s.quietResends, MAX_SILENCE_FACTOR);
  return Math.max(r.producedAt + s.resendMs, Math.max(s.lastAckAt, r.producedAt) + silence);
}

/** Arms the resend timer for the earliest report due, unless one is armed as early. */
function armResend(state: ReporterState, now: number): Step {
  let at = Infinity;
  for (const [seq, r] of state.inFlight) at = Math.min(at, dueAt(state, seq, r));
  if (at === state.resendAt) return { state, effects: [] };
  if (at === Infinity) return { state: { ...state, resendAt: at }, effects: [{ type: 'CancelResend' }] };
  const timer = state.resendTimers + 1;
  return {
    state: { ...state, resendAt: at, resendTimers: timer },
    effects: [{ type: 'CancelResend' }, { type: 'Schedule', afterMs: Math.max(0, at - now), msg: { type: 'Resend', timer } }],
  };
}

/** Events are small plain records: equal when their JSON is (the same keys in the same order, as ShardEvents builds them). */
function sameEvent(a: ShardEvent, b: ShardEvent): boolean {
  return a === b || JSON.stringify(a) === JSON.stringify(b);
}
