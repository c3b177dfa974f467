// A node's reliable channel to the singleton (FiloDB's StatusActor): the latest event per shard is
// sent in numbered reports and sent again until the singleton acknowledges it. The singleton
// acknowledges only after it applied, persisted and published a report, so an acknowledged event
// is never lost, and an unacknowledged one reaches the next singleton.
//
// When to send again, without feeding the singleton's lag back into it: the singleton applies the
// reports in inbox order, and each acknowledgement, read by every node, says the inbox offset of
// the report it acknowledges, as each digest says the offset before which every report was applied
// or dropped. A report of this node before that offset, or before one of its own acknowledged, was
// lost (its produce failed, the bus lost it, a new singleton dropped it as written before its
// takeover), and goes again once `reportResendMs` passed since it was sent (a digest's offset counts
// once this node read the acknowledgements sent before it, `AckGate`). A report past it still
// waits in a durable inbox: sending it again only lengthens the queue it waits in (a resend of
// every pending event each `reportResendMs` while the singleton lagged put 72 % of a 4096 × 3
// join's reports on the inbox twice, issue 34); a singleton deciding on 65 536 copies' reports is
// silent for seconds while it works. Such a report goes again only after a silence of the
// singleton, no acknowledgement to anyone and no digest, of 4 × `reportResendMs`, doubling with
// each such resend up to 16 ×: a safety net for a singleton of an earlier release (no offsets), as
// a dead one's successor says by its digest what it dropped.
import type { Cancel } from '../cluster/clock.js';
import type { ShardEvent } from '../core/status.js';
import type { NodeEnv } from './node-env.js';
import { AckGate } from './ack-gate.js';
import type { ActorRef } from './runtime.js';
import { MAX_EVENTS_PER_REPORT, WIRE_FORMAT, type InboxMessage } from '../protocol/wire.js';

export type ReporterMsg =
  | { readonly type: 'Flush' }
  | { readonly type: 'Ack'; readonly seq: number }
  /** An acknowledgement to anyone moved `passed` past a report of this node: it was lost. */
  | { readonly type: 'Heard' }
  /** `timer`: which arming of the resend timer fired (an older one, replaced since, is ignored). */
  | { readonly type: 'Resend'; readonly timer: number };

interface Pending {
  readonly event: ShardEvent;
  /** The report it was last sent in; undefined while it waits to be sent. */
  sentIn: number | undefined;
}

/** A report sent and not acknowledged yet. */
interface InFlight {
  /** The keys it carried: an acknowledgement costs its report's size, not the pending's. */
  readonly keys: readonly string[];
  /** When its produce settled; undefined while the bus has it. */
  producedAt: number | undefined;
  /** Its offset in the inbox, once produced. */
  offset: number | undefined;
  /** Its produce failed: the singleton never saw it. */
  lost: boolean;
}

interface State {
  seq: number;
  /** `dataset/shard` → its latest event. */
  readonly pending: Map<string, Pending>;
  /** The keys of `pending` waiting to be sent, oldest first. */
  readonly unsent: Set<string>;
  readonly inFlight: Map<number, InFlight>;
  flushQueued: boolean;
  resend: Cancel | undefined;
  /** When the armed resend timer fires. */
  resendAt: number;
  /** Armings of the resend timer so far. */
  resendTimers: number;
  /** The newest report of this node acknowledged. */
  newestAcked: number;
  /** Every report before this inbox offset was applied or dropped by the singleton (from the acknowledgements, anyone's). */
  passed: number;
  /** When an acknowledgement, anyone's, last came. */
  lastAckAt: number;
  /** Resends of reports ahead of every acknowledgement since the last one: the silence they wait for doubles with each. */
  quietResends: number;
}

/** The silence of the singleton a report past every acknowledgement waits for, in `reportResendMs`: first, and at most. */
const FIRST_SILENCE_FACTOR = 4;
const MAX_SILENCE_FACTOR = 16;

/** Where a node's copies say what became of them (the reporter, or a test's list). */
export interface ReportSink {
  report(event: ShardEvent): void;
}

export interface Reporter extends ReportSink {
  readonly ref: ActorRef<ReporterMsg>;
  /**
   * The singleton of `epoch` acknowledged a report (to any node): it runs, and every report before
   * inbox offset `passed` (if it said) was applied or dropped. `ordinal`: the acknowledgement's
   * number, which digests count.
   */
  acknowledged(epoch: number, passed: number | undefined, ordinal: number | undefined): void;
  /** The singleton of `epoch` published its digest, written after `acksSent` acknowledgements: as `acknowledged`. */
  digest(epoch: number, passed: number | undefined, acksSent: number | undefined): void;
}

export function spawnReporter(env: NodeEnv, parent: ActorRef<unknown>): Reporter {
  // One state for the actor and for `report`: the actor handles one message per turn of the event
  // loop, and a node that starts 65 536 copies reports 65 536 times at once; as messages they took
  // minutes to get through its mailbox (issue 34), as calls they coalesce at once.
  const s: State = {
    seq: 0,
    pending: new Map(),
    unsent: new Set(),
    inFlight: new Map(),
    flushQueued: false,
    resend: undefined,
    resendAt: Infinity,
    resendTimers: 0,
    newestAcked: 0,
    passed: 0,
    lastAckAt: -Infinity,
    quietResends: 0,
  };
  const resendMs = env.settings.reportResendMs;
  // A digest's offset counts once this node read the acknowledgements sent before it; a digest
  // whose acknowledgements never come (lost, or sent before this node read the replies) counts
  // after the silence a report past every acknowledgement waits for.
  const gate = new AckGate(FIRST_SILENCE_FACTOR * resendMs);
  /** Whether a report in flight will never be acknowledged: its produce failed, or the singleton passed it. */
  const isLost = (seq: number, r: InFlight): boolean => r.lost || seq < s.newestAcked || (r.offset !== undefined && r.offset < s.passed);
  /** When a report in flight is sent again, if nothing is acknowledged meanwhile (see the top of this file). */
  const dueAt = (seq: number, r: InFlight): number => {
    if (r.producedAt === undefined) return Infinity; // armed again when its produce settles
    if (isLost(seq, r)) return r.producedAt + resendMs;
    const silence = resendMs * Math.min(FIRST_SILENCE_FACTOR * 2 ** s.quietResends, MAX_SILENCE_FACTOR);
    return Math.max(r.producedAt + resendMs, Math.max(s.lastAckAt, r.producedAt) + silence);
  };
  /** Arms the resend timer for the earliest report due, unless one is armed as early. */
  const armResend = (self: ActorRef<ReporterMsg>) => {
    let at = Infinity;
    for (const [seq, r] of s.inFlight) at = Math.min(at, dueAt(seq, r));
    if (at === s.resendAt) return;
    s.resend?.();
    s.resend = undefined;
    s.resendAt = at;
    if (at === Infinity) return;
    const timer = ++s.resendTimers;
    s.resend = env.clock.schedule(Math.max(0, at - env.clock.now()), () => env.runtime.send(self, { type: 'Resend', timer }));
  };
  const ref = env.runtime.spawn<State, ReporterMsg>(
    parent,
    'reporter',
    async (_, msg, ctx) => {
      switch (msg.type) {
        case 'Flush': {
          s.flushQueued = false;
          // At most MAX_EVENTS_PER_REPORT a report: a node that starts thousands of shards sends
          // several bounded reports in a row, each acknowledged on its own.
          const keys: string[] = [];
          for (const key of s.unsent) {
            if (keys.length === MAX_EVENTS_PER_REPORT) break;
            keys.push(key);
            s.unsent.delete(key);
          }
          if (keys.length === 0) return s;
          const seq = ++s.seq;
          const unsent = keys.map((key) => s.pending.get(key)!);
          for (const p of unsent) p.sentIn = seq;
          const inFlight: InFlight = { keys, producedAt: undefined, offset: undefined, lost: false };
          s.inFlight.set(seq, inFlight);
          if (s.unsent.size > 0) {
            s.flushQueued = true;
            env.runtime.send(ctx.self, { type: 'Flush' });
          }
          const report: InboxMessage = {
            format: WIRE_FORMAT,
            kind: 'report',
            node: env.node,
            incarnation: env.incarnation,
            seq,
            events: unsent.map((p) => p.event),
          };
          // Its wait counts from when it reached the bus, not from when it was handed to it: a
          // produce held by a pause (or a slow broker) that ended just as a timer fired put the same
          // events on the bus twice at once (sim seed 7260, I16). A failed produce is sent again
          // like a report lost on the way.
          try {
            inFlight.offset = await env.bus.produce(env.topics.inbox, report);
          } catch (e) {
            inFlight.lost = true;
            throw e;
          } finally {
            inFlight.producedAt = env.clock.now();
            armResend(ctx.self);
          }
          return s;
        }
        case 'Ack': {
          // Only the events of the report acknowledged: an acknowledgement of a later report says
          // nothing of an earlier one whose produce failed (the singleton never saw it), so an event
          // in it stays until it is sent again and acknowledged (sim seed 45 lost an IngestionError so).
          for (const key of s.inFlight.get(msg.seq)?.keys ?? []) if (s.pending.get(key)?.sentIn === msg.seq) s.pending.delete(key);
          s.inFlight.delete(msg.seq);
          s.newestAcked = Math.max(s.newestAcked, msg.seq);
          armResend(ctx.self);
          return s;
        }
        case 'Heard':
          armResend(ctx.self);
          return s;
        case 'Resend': {
          // A flush or an acknowledgement between the timer's firing and this message armed a newer timer: that one decides.
          if (msg.timer !== s.resendTimers) return s;
          s.resend = undefined;
          s.resendAt = Infinity;
          const now = env.clock.now();
          const resent = { lost: 0, silence: 0 };
          for (const [seq, r] of s.inFlight) {
            if (dueAt(seq, r) > now) continue;
            const cause = isLost(seq, r) ? 'lost' : 'silence';
            for (const key of r.keys) {
              if (s.pending.get(key)?.sentIn !== seq) continue;
              s.pending.get(key)!.sentIn = undefined;
              s.unsent.add(key);
              resent[cause]++;
            }
            s.inFlight.delete(seq);
          }
          for (const cause of ['lost', 'silence'] as const) if (resent[cause] > 0) env.telemetry.reportEventsResent(cause, resent[cause]);
          if (resent.silence > 0) s.quietResends++;
          if (resent.lost + resent.silence > 0) {
            env.log.debug(
              { ...resent, pending: s.pending.size, seq: s.seq, quietResends: s.quietResends },
              'reports not acknowledged in time: sending them again',
            );
            if (!s.flushQueued) {
              s.flushQueued = true;
              env.runtime.send(ctx.self, { type: 'Flush' });
            }
          }
          armResend(ctx.self);
          return s;
        }
      }
    },
    {
      initialState: s,
      onCrash: 'resume',
      afterStop: () => s.resend?.(),
    },
  );
  /** The singleton runs, and every report before inbox offset `passed` (if any) was applied or dropped. */
  const heard = (passed: number | undefined): void => {
    s.lastAckAt = env.clock.now();
    s.quietResends = 0;
    if (passed === undefined || passed <= s.passed) return;
    s.passed = passed;
    // Only when that passed a report of this node not acknowledged: the singleton acknowledges
    // many reports a second, and each would otherwise be a message here.
    for (const r of s.inFlight.values()) {
      if (r.offset !== undefined && r.offset < s.passed) {
        env.runtime.send(ref, { type: 'Heard' });
        return;
      }
    }
  };
  return {
    ref,
    acknowledged(epoch, passed, ordinal) {
      heard(larger(passed, gate.acknowledgement(epoch, ordinal, env.clock.now())));
    },
    digest(epoch, passed, acksSent) {
      const now = env.clock.now();
      heard(passed === undefined ? gate.acknowledgement(epoch, undefined, now) : gate.digest(epoch, acksSent, passed, now));
    },
    report(event) {
      // Only the latest event per shard matters: a newer one replaces an unacknowledged older one.
      // The same event again while one is on its way is not sent twice: the resend covers a loss.
      const key = `${event.dataset}/${event.shard}`;
      const pending = s.pending.get(key);
      if (pending !== undefined && sameEvent(pending.event, event)) return;
      s.pending.set(key, { event, sentIn: undefined });
      s.unsent.add(key);
      if (!s.flushQueued) {
        s.flushQueued = true;
        env.runtime.send(ref, { type: 'Flush' }); // events reported together go in one report
      }
    },
  };
}

const larger = (a: number | undefined, b: number | undefined): number | undefined => (a === undefined ? b : b === undefined ? a : Math.max(a, b));

/** Events are small plain records: equal when their JSON is (the same keys in the same order, as ShardEvents builds them). */
function sameEvent(a: ShardEvent, b: ShardEvent): boolean {
  return a === b || JSON.stringify(a) === JSON.stringify(b);
}
