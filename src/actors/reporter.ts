// A node's reliable channel to the singleton (FiloDB's StatusActor): the latest event per shard is
// sent in numbered reports and sent again until the singleton acknowledges it. The singleton
// acknowledges only after it applied, persisted and published a report, so an acknowledged event
// is never lost, and an unacknowledged one reaches the next singleton.
import type { Cancel } from '../cluster/clock.js';
import type { ShardEvent } from '../core/status.js';
import type { NodeEnv } from './node-env.js';
import type { ActorRef } from './runtime.js';
import { MAX_EVENTS_PER_REPORT, WIRE_FORMAT, type InboxMessage } from './wire.js';

export type ReporterMsg =
  | { readonly type: 'Flush' }
  | { readonly type: 'Ack'; readonly seq: number }
  /** `timer`: which arming of the resend timer fired (an older one, replaced since, is ignored). */
  | { readonly type: 'Resend'; readonly timer: number };

interface Pending {
  readonly event: ShardEvent;
  /** The report it was last sent in; undefined while it waits to be sent. */
  sentIn: number | undefined;
}

interface State {
  seq: number;
  /** `dataset/shard` → its latest event. */
  readonly pending: Map<string, Pending>;
  /** The keys of `pending` waiting to be sent, oldest first. */
  readonly unsent: Set<string>;
  /** Each report in flight → the keys it carried: an acknowledgement costs its report's size, not the pending's. */
  readonly inReport: Map<number, readonly string[]>;
  flushQueued: boolean;
  resend: Cancel | undefined;
  /** Armings of the resend timer so far. */
  resendTimers: number;
  /** When the last report's produce settled (the bus took it, or failed). */
  producedAt: number;
}

/** Where a node's copies say what became of them (the reporter, or a test's list). */
export interface ReportSink {
  report(event: ShardEvent): void;
}

export interface Reporter extends ReportSink {
  readonly ref: ActorRef<ReporterMsg>;
}

export function spawnReporter(env: NodeEnv, parent: ActorRef<unknown>): Reporter {
  // One state for the actor and for `report`: the actor handles one message per turn of the event
  // loop, and a node that starts 65 536 copies reports 65 536 times at once; as messages they took
  // minutes to get through its mailbox (issue 34), as calls they coalesce at once.
  const s: State = { seq: 0, pending: new Map(), unsent: new Set(), inReport: new Map(), flushQueued: false, resend: undefined, resendTimers: 0, producedAt: -Infinity };
  const armResend = (self: ActorRef<ReporterMsg>, delayMs: number) => {
    s.resend?.();
    const timer = ++s.resendTimers;
    s.resend = env.clock.schedule(delayMs, () => env.runtime.send(self, { type: 'Resend', timer }));
  };
  const ref = env.runtime.spawn<State, ReporterMsg>(parent, 'reporter', async (_, msg, ctx) => {
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
        s.seq += 1;
        const unsent = keys.map((key) => s.pending.get(key)!);
        for (const p of unsent) p.sentIn = s.seq;
        s.inReport.set(s.seq, keys);
        if (s.unsent.size > 0) {
          s.flushQueued = true;
          env.runtime.send(ctx.self, { type: 'Flush' });
        }
        const report: InboxMessage = {
          format: WIRE_FORMAT,
          kind: 'report',
          node: env.node,
          incarnation: env.incarnation,
          seq: s.seq,
          events: unsent.map((p) => p.event),
        };
        // The resend is armed whatever the produce does: a report whose produce failed is sent again
        // like one whose acknowledgement never came (it used to wait for the next report's ack).
        armResend(ctx.self, env.settings.reportResendMs);
        try {
          await env.bus.produce(env.topics.inbox, report);
        } finally {
          s.producedAt = env.clock.now();
        }
        return s;
      }
      case 'Ack':
        // Only the events of the report acknowledged: an acknowledgement of a later report says
        // nothing of an earlier one whose produce failed (the singleton never saw it), so an event
        // in it stays until it is sent again and acknowledged (sim seed 45 lost an IngestionError so).
        for (const key of s.inReport.get(msg.seq) ?? []) if (s.pending.get(key)?.sentIn === msg.seq) s.pending.delete(key);
        s.inReport.delete(msg.seq);
        if (s.pending.size === 0) {
          s.resend?.();
          s.resend = undefined;
        }
        return s;
      case 'Resend': {
        // A flush between the timer's firing and this message armed a newer timer: that one decides.
        if (msg.timer !== s.resendTimers) return s;
        s.resend = undefined;
        if (s.pending.size === 0) return s;
        // The wait counts from when the last report reached the bus, not from when it was handed to
        // it: a produce held by a pause (or a slow broker) ended just as the timer fired, and the
        // resend put the same events on the bus twice at once (sim seed 7260, I16).
        const sinceProduced = env.clock.now() - s.producedAt;
        if (sinceProduced < env.settings.reportResendMs) {
          armResend(ctx.self, env.settings.reportResendMs - sinceProduced);
          return s;
        }
        env.log.debug({ pending: s.pending.size, seq: s.seq }, 'report not acknowledged in time: sending it again');
        for (const [key, p] of s.pending) {
          p.sentIn = undefined;
          s.unsent.add(key);
        }
        s.inReport.clear();
        env.runtime.send(ctx.self, { type: 'Flush' });
        return s;
      }
    }
  }, {
    initialState: s,
    onCrash: 'resume',
    afterStop: () => s.resend?.(),
  });
  return {
    ref,
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

/** Events are small plain records: equal when their JSON is (the same keys in the same order, as ShardEvents builds them). */
function sameEvent(a: ShardEvent, b: ShardEvent): boolean {
  return a === b || JSON.stringify(a) === JSON.stringify(b);
}
