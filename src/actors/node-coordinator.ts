// The node coordinator's shell: runs the shard copies its step (`coordinator/step.ts`) starts and
// stops, owns their table, and says its lots of copies through a `LotLog`. A lost change heals
// when the guardian catches up (a gap, or the next digest).
import { ShardCopy, type CopyHost } from './shard-copy.js';
import { CopyTimers } from './copy-timers.js';
import { LotLog } from './lot-log.js';
import type { NodeEnv } from './node-env.js';
import type { ReportSink } from './reporter.js';
import type { ActorRef } from './runtime.js';
import type { CoordinatorMsg } from './coordinator/messages.js';
import {
  initialCoordinatorState,
  stepCoordinator,
  tokenOf,
  type CoordinatorEffect,
  type CoordinatorInput,
  type CoordinatorState,
  type RunningRec,
} from './coordinator/step.js';
import { kindOf, lineOf } from './coordinator/lines.js';
import { stepNow, type Box } from './reducer.js';

export { RECONCILE_SLICE, type CoordinatorMsg } from './coordinator/messages.js';

export function spawnNodeCoordinator(env: NodeEnv, parent: ActorRef<unknown>, reporter: ReportSink): ActorRef<CoordinatorMsg> {
  const lots = new LotLog(env.log, env.clock);
  // One state for the actor and for the copies' calls, which step it between messages.
  const box: Box<CoordinatorState> = { state: initialCoordinatorState(env.node, env.incarnation, env.detector !== undefined) };
  /** `dataset/shard` → the copy running it: the step's view, written only by its effects. */
  const running = new Map<string, RunningRec>();
  /** The same keys → the copy itself. */
  const copies = new Map<string, ShardCopy>();

  /** Performs an effect; `reply` answers the message being handled, if it asks for an answer. */
  const perform = (effect: CoordinatorEffect, reply: (effect: CoordinatorEffect) => void): undefined => {
    switch (effect.type) {
      case 'Start': {
        const copy = new ShardCopy(host, effect.config, effect.shard);
        copies.set(effect.key, copy);
        running.set(effect.key, effect.rec);
        return;
      }
      case 'Update': {
        const r = running.get(effect.key);
        if (r) running.set(effect.key, { ...r, ...effect.set });
        return;
      }
      case 'Stop':
        for (const key of effect.keys) {
          const copy = copies.get(key);
          running.delete(key);
          copies.delete(key);
          copy?.stop();
        }
        return;
      case 'Say':
        lots.say(kindOf(effect.line), effect.lot, (all, changes) => {
          const line = lineOf(effect.line, all, changes);
          env.log.info(line.fields, line.text);
        });
        return;
      case 'Report':
        reporter.report(effect.event);
        return;
      case 'Send':
        env.runtime.send(self, effect.msg);
        return;
      case 'Reply':
      case 'ReplySummary':
        reply(effect);
        return;
    }
  };
  const step = (msg: CoordinatorInput['msg'], reply: (effect: CoordinatorEffect) => void = () => {}): void => {
    // Every effect is performed at once: nothing here waits.
    void stepNow<CoordinatorState, CoordinatorInput, CoordinatorEffect>(
      box,
      { msg, running },
      stepCoordinator,
      (e) => perform(e, reply),
      () => env.clock.now(),
    );
  };

  /** What every copy of this node shares. */
  const host: CopyHost = {
    env,
    reporter,
    timers: new CopyTimers(env.clock),
    /** Only the copy's current run counts (see `CopyStatus`). */
    statusChanged(copy, status) {
      const key = `${copy.dataset}/${copy.shard}`;
      if (copies.get(key) !== copy) return;
      step({ type: 'CopyStatus', key, status });
    },
    tokenOf: (copy) => tokenOf(box.state, copy.dataset, copy.shard),
  };
  const self: ActorRef<CoordinatorMsg> = env.runtime.spawn<CoordinatorState, CoordinatorMsg>(
    parent,
    'coordinator',
    (_, msg) => {
      step(msg, (effect) => {
        if (effect.type === 'Reply' && msg.type === 'GetRunning') msg.reply(effect.running);
        if (effect.type === 'ReplySummary' && msg.type === 'GetRunningSummary') msg.reply(effect.summary);
      });
      return box.state;
    },
    {
      initialState: box.state,
      onCrash: 'resume',
      // The node stops (or crashes): its copies stop with it.
      afterStop: () => {
        for (const copy of copies.values()) copy.stop(true);
        copies.clear();
        running.clear();
        host.timers.close();
      },
    },
  );
  return self;
}
