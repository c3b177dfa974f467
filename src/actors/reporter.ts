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
//
// The logic is the pure step of `reporter/step.ts`; this is its shell.
import type { Cancel } from '../cluster/clock.js';
import type { ShardEvent } from '../core/status.js';
import type { NodeEnv } from './node-env.js';
import { AckGate } from './ack-gate.js';
import type { ActorRef } from './runtime.js';
import {
  FIRST_SILENCE_FACTOR,
  initialReporterState,
  stepReporter,
  type ReporterEffect,
  type ReporterInput,
  type ReporterMsg,
  type ReporterState,
} from './reporter/step.js';
import { PendingTable } from './reporter/pending-table.js';
import { stepNow, type Box } from './reducer.js';

export type { ReporterMsg } from './reporter/step.js';

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
  // One state for the actor and for the calls (`report`, `acknowledged`, `digest`), which step it
  // between messages and while a produce is awaited.
  const box: Box<ReporterState> = { state: initialReporterState(env.node, env.incarnation, env.settings.reportResendMs) };
  const table = new PendingTable();
  let resend: Cancel | undefined;
  // A digest's offset counts once this node read the acknowledgements sent before it; a digest
  // whose acknowledgements never come (lost, or sent before this node read the replies) counts
  // after the silence a report past every acknowledgement waits for.
  const gate = new AckGate(FIRST_SILENCE_FACTOR * env.settings.reportResendMs);

  const perform = (effect: ReporterEffect): undefined | Promise<undefined> => {
    switch (effect.type) {
      case 'Pend':
        table.pend(effect.key, effect.event);
        return;
      case 'Sent':
        table.sent(effect.keys, effect.seq);
        return;
      case 'Acked':
        table.acked(effect.keys);
        return;
      case 'SendAgain':
        table.sendAgain(effect.keys);
        return;
      case 'Send':
        env.runtime.send(ref, effect.msg);
        return;
      case 'Produce': {
        const { seq } = effect;
        // Its answer is stepped as soon as the produce settles, as the code after its `await` ran;
        // a failure then fails the handler, as it did.
        const settled = (msg: ReporterInput['msg']): undefined => void step(msg);
        return env.bus.produce(env.topics.inbox, effect.report).then(
          (offset) => settled({ type: 'Produced', seq, offset }),
          (error: unknown) => settled({ type: 'Produced', seq, failure: { error } }),
        );
      }
      case 'CancelResend':
        resend?.();
        resend = undefined;
        return;
      case 'Schedule': {
        const { msg } = effect;
        resend = env.clock.schedule(effect.afterMs, () => env.runtime.send(ref, msg));
        return;
      }
      case 'Resent':
        env.telemetry.reportEventsResent(effect.cause, effect.events);
        return;
      case 'Log':
        env.log[effect.level](effect.fields, effect.text);
        return;
      case 'Fail':
        throw effect.error;
    }
  };
  const step = (msg: ReporterInput['msg']): Promise<void> | undefined =>
    stepNow<ReporterState, ReporterInput, ReporterEffect>(box, { msg, view: table }, stepReporter, perform, () => env.clock.now());

  const ref = env.runtime.spawn<ReporterState, ReporterMsg>(
    parent,
    'reporter',
    async (_, msg) => {
      await step(msg);
      return box.state;
    },
    {
      initialState: box.state,
      onCrash: 'resume',
      afterStop: () => resend?.(),
    },
  );
  return {
    ref,
    acknowledged(epoch, passed, ordinal) {
      void step({ type: 'Acknowledged', passed: larger(passed, gate.acknowledgement(epoch, ordinal, env.clock.now())) });
    },
    digest(epoch, passed, acksSent) {
      const now = env.clock.now();
      void step({
        type: 'Acknowledged',
        passed: passed === undefined ? gate.acknowledgement(epoch, undefined, now) : gate.digest(epoch, acksSent, passed, now),
      });
    },
    report(event) {
      void step({ type: 'Report', event });
    },
  };
}

const larger = (a: number | undefined, b: number | undefined): number | undefined => (a === undefined ? b : b === undefined ? a : Math.max(a, b));
