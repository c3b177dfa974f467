// Performs the guardian's effects. An effect that waits on a call (the bus, the coordinator, the
// lease) answers with a message, which the step goes on from.
import { NEWEST_MAP_FORMAT } from '../../core/map-codec.js';
import type { ShardMapFollower } from '../../core/map-follower.js';
import { compareStamps } from '../../core/shard-map-snapshot.js';
import type { MapStamp, RunningShard } from '../../core/shard-manager/protocol.js';
import { runInSlices } from '../../core/steps.js';
import { eventsMessageReading, parseEventsMessage } from '../../protocol/wire-events.js';
import { WIRE_FORMAT } from '../../protocol/wire.js';
import { skipMalformed } from '../node-env.js';
import type { ClusterStateRequest, GuardianEffect, GuardianInput, MapsOp } from './effects.js';
import { performSingletonEffect } from './perform-singleton.js';
import { NOTHING_RUNNING } from './outside.js';
import type { GuardianShell } from './shell.js';

type Answer = GuardianInput | undefined | Promise<GuardianInput | undefined>;

export function performGuardianEffect(sh: GuardianShell, effect: GuardianEffect): Answer {
  const { env } = sh;
  switch (effect.type) {
    case 'Log':
      env.log[effect.level](effect.fields, effect.msg);
      return;
    case 'Schedule': {
      const msg = effect.msg;
      const cancel = env.clock.schedule(effect.afterMs, () => env.runtime.send(sh.self, msg));
      if (effect.key) sh.timers[effect.key] = cancel;
      return;
    }
    case 'CancelTimer':
      sh.timers[effect.key]?.();
      sh.timers[effect.key] = undefined;
      return;
    case 'TimerFired':
      sh.timers[effect.key] = undefined;
      return;
    case 'ReadEvents':
      return readEvents(sh, effect.record);
    case 'SkipMalformed':
      skipMalformed(env, effect.record, effect.reason);
      return;
    case 'Heard':
      env.singletonContact?.heard(effect.at);
      return;
    case 'DeclareMapFormat':
      // A `SyncMaps` of nothing, which changes nothing.
      void sh
        .request({ type: 'SyncMaps', subscriber: sh.state.config.guardianId, datasets: [], members: false, mapFormat: NEWEST_MAP_FORMAT })
        .catch((e: unknown) => env.log.debug({ err: e }, 'telling the singleton which map format this node reads failed: it writes the compact one for it'));
      return;
    case 'Maps':
      return mapsOp(sh, effect.op);
    case 'DeliverLocal':
      return sh.hub.deliver(effect.id, effect.message) ? undefined : { type: 'LocalGone', id: effect.id };
    case 'Request':
      return sh.request(effect.request).then(() => undefined);
    case 'ReadRunning':
      return readRunning(sh, effect.request);
    case 'SendClusterState':
      return sendClusterState(sh, effect.request, effect.running);
    default:
      return performChildEffect(sh, effect);
  }
}

type ChildEffect = Exclude<
  GuardianEffect,
  {
    type:
      | 'Log'
      | 'Schedule'
      | 'CancelTimer'
      | 'TimerFired'
      | 'ReadEvents'
      | 'SkipMalformed'
      | 'Heard'
      | 'DeclareMapFormat'
      | 'Maps'
      | 'DeliverLocal'
      | 'Request'
      | 'ReadRunning'
      | 'SendClusterState';
  }
>;

/** What goes to the coordinator, the reporter, the node and the singleton. */
function performChildEffect(sh: GuardianShell, effect: ChildEffect): Answer {
  const { env } = sh;
  switch (effect.type) {
    case 'StopAll':
      env.runtime.send(sh.coordinator, { type: 'StopAll', reason: effect.reason });
      return;
    case 'ReporterDigest':
      sh.reporter.digest(effect.epoch, effect.inbox, effect.acksSent);
      return;
    case 'ReporterAck':
      env.runtime.send(sh.reporter.ref, { type: 'Ack', seq: effect.seq });
      return;
    case 'ReporterAcknowledged':
      sh.reporter.acknowledged(effect.epoch, effect.passed, effect.ordinal);
      return;
    case 'Released':
      sh.callbacks.onReleased();
      return;
    case 'Fenced':
      sh.callbacks.onFenced(effect.reason);
      return;
    case 'AskRunning':
      env.runtime.ask(sh.coordinator, (reply) => ({ type: 'GetRunning' as const, reply }), effect.reply, []);
      return;
    case 'AskRunningSummary':
      env.runtime.ask(sh.coordinator, (reply) => ({ type: 'GetRunningSummary' as const, listUpTo: effect.listUpTo, reply }), effect.reply, NOTHING_RUNNING);
      return;
    default:
      return performSingletonEffect(sh, effect);
  }
}

function readEvents(sh: GuardianShell, record: Extract<GuardianEffect, { type: 'ReadEvents' }>['record']): Answer {
  const pause = sh.env.slicePause;
  if (!pause) return { type: 'EventsRead', record, parsed: parseEventsMessage(record.value) };
  // A decision's changes (tens of thousands of events in a join wave) are decoded in slices on a real process.
  return runInSlices(eventsMessageReading(record.value), pause).then((parsed): GuardianInput => ({ type: 'EventsRead', record, parsed }));
}

function mapsOp(sh: GuardianShell, op: MapsOp): Promise<undefined> | undefined {
  const { maps } = sh;
  const pause = sh.env.slicePause;
  switch (op.kind) {
    case 'want':
      maps.want({ ...(op.all ? { all: true } : {}), ...(op.members ? { members: true } : {}) });
      return;
    case 'changes':
      // A decision of tens of thousands of events is applied in slices on a real process.
      return pause ? maps.changesInSlices(op.record, pause).then(() => undefined) : void maps.changes(op.record);
    case 'snapshot':
      // A whole map of tens of thousands of shards (a joining node's) is decoded in slices on a real process.
      return pause ? maps.snapshotInSlices(op.record, pause).then(() => undefined) : void maps.snapshot(op.record);
    case 'members':
      return void maps.membersRecord(op.record);
    case 'members-change':
      return void maps.membersChange(op.record);
    case 'digest':
      return void maps.digest(op.record);
    case 'gone':
      return void maps.gone(op.dataset);
    case 'syncFailed':
      return void maps.syncFailed();
  }
}

function readRunning(sh: GuardianShell, request: ClusterStateRequest): Promise<GuardianInput> {
  return new Promise<RunningShard[]>((resolve) => sh.env.runtime.ask(sh.coordinator, (reply) => ({ type: 'GetRunning' as const, reply }), resolve, [])).then(
    (running) => ({ type: 'RunningRead', request, running }),
  );
}

/**
 * Whether the next singleton needs this guardian's copy of a map: yes unless the map it read from
 * the MetaStore has the same shard count and a stamp at least as new. When in doubt, send it: the
 * core keeps the newest candidate, so a map too many costs time, a map too few loses changes (I4).
 */
function newerThanStored(f: ShardMapFollower, stored: MapStamp | undefined): boolean {
  return stored === undefined || stored.numShards !== f.mapper?.numShards || compareStamps(f, stored) > 0;
}

async function sendClusterState(sh: GuardianShell, m: ClusterStateRequest, running: readonly RunningShard[]): Promise<undefined> {
  const stored = new Map((m.stored ?? []).map((x) => [x.dataset, x]));
  await sh.toInbox({
    format: WIRE_FORMAT,
    kind: 'cluster-state',
    requestId: m.requestId,
    epoch: m.epoch,
    node: sh.env.node,
    incarnation: sh.env.incarnation,
    maps: [...sh.maps.followers.values()].flatMap((f) => (f.mapper && newerThanStored(f, stored.get(f.dataset)) ? [f.mapper.toSnapshot(f.epoch)] : [])),
    // Subscriptions are the MetaStore's alone (persisted before anyone is told of them); a
    // node no longer subscribes to everything: it follows every map from the events topic.
    subscriptions: [],
    watchers: [],
    running: running as RunningShard[],
    mapFormat: NEWEST_MAP_FORMAT,
  });
  return undefined;
}
