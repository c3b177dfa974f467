// Performing one decision of the core, in the shell: the decision is made in slices on the current
// core, and its effects carried out in order (persist, then publish and send, then reply and
// acknowledge). Its answer (`Decided`) gives the step the next core and the acknowledgement
// bookkeeping the decision moved.
//
// Why the performer numbers the acks and reads the report offsets (and not the step, translating
// the core's effects): an ack and a digest are built while the decision's effects are performed,
// after its store writes, and the digest must count the acks sent before it in the same decision.
// The performer reads that bookkeeping from the state it is given, keeps what it moves (acks sent,
// reports acknowledged) for the decision's length, and hands it back in `Decided`; nothing else
// reads it meanwhile (the mailbox waits for the decision). The cooldown checks' timers (`checks`)
// are the shell's, as every timer is: a check is forgotten when its timer fires, as before.
import type { DatasetConfig } from '../../core/dataset-config.js';
import type { DatasetRef } from '../../core/ids.js';
import type { Effect } from '../../core/shard-manager/protocol.js';
import type { ShardManagerState } from '../../core/shard-manager/step.js';
import { runInSlices, runWhole } from '../../core/steps.js';
import { WIRE_FORMAT } from '../../protocol/wire.js';
import { limitedLog } from '../log-limiter.js';
import { appliedInbox, readableFrom, reportKey } from './bookkeeping.js';
import type { SingletonEffect } from './effects.js';
import type { SingletonShell } from './shell.js';
import type { SingletonState, StepMsg } from './state.js';

/** What a decision moved of the acknowledgement bookkeeping, while its effects are performed. */
interface Acks {
  acksSent: number;
  /** Reports acknowledged (their offsets are forgotten). */
  readonly acked: Set<string>;
}

/** What one decision's effects are performed with. */
interface Decision {
  readonly s: SingletonState;
  readonly before: ShardManagerState;
  readonly after: ShardManagerState;
  readonly acks: Acks;
}

/**
 * One decision, in slices on a real process (a join wave's round at 65 536 × 3 is 100–250 ms of
 * work): the event loop gets its turns meanwhile, for the node's own copies, its heartbeats and
 * its HTTP routes. This actor's mailbox waits, so nothing else decides on the same state.
 */
export async function performDecision(sh: SingletonShell, e: Extract<SingletonEffect, { type: 'Decide' }>, s: SingletonState): Promise<StepMsg> {
  const { env } = sh;
  sh.mustAct(e.input.type);
  const before = s.core;
  const steps = sh.manager.decideInSteps(before, e.input, env.clock.now());
  const d = env.slicePause ? await runInSlices(steps, env.slicePause) : runWhole(steps);
  // The role may have been lost while the decision was being made: nothing of it is performed.
  sh.mustAct(e.input.type);
  const acks: Acks = { acksSent: s.acksSent, acked: new Set() };
  await performEffects(sh, { s, before, after: d.state, acks }, d.effects);
  return { type: 'Decided', core: d.state, acksSent: acks.acksSent, acked: [...acks.acked], then: e.then };
}

/**
 * Carries out one decision's effects. Its store writes are awaited, in order, before anything is
 * sent (a map is persisted before anyone hears of it). Its records (changes, snapshots, members,
 * digests, replies, acks) are handed to the bus, which appends them in call order, and not
 * awaited: the next message is handled while they are on their way, so slow appends (a broker
 * that answers late) never hold back the next decision or the digest. A record that fails for a
 * while is logged; nothing is lost for good by it, as every one is repaired by design (a node
 * that misses changes sees a gap or the next digest and asks, a node resends an unacknowledged
 * report, a requester asks again and a replayed request is answered as the first time). A record
 * the bus can never carry (too large for its limits) is an error, said once per kind of record
 * and counted, and shown on the node's /status: retrying it would never help.
 */
async function performEffects(sh: SingletonShell, d: Decision, effects: readonly Effect[]): Promise<void> {
  // Past its last store write, what the decision made is stored: reads may see it.
  const readable = readableFrom(effects);
  for (const [i, e] of effects.entries()) {
    // A singleton that lost its role meanwhile (a store call hung past its lease) does nothing more.
    sh.mustAct(e.type);
    if (i >= readable) sh.makeReadable(d.after);
    // Awaited only when it is asynchronous (a store write, a map packed in slices), as it was inline.
    const performing = storeWrite(sh, e) ?? record(sh, d, e);
    if (performing) await performing;
  }
  sh.makeReadable(d.after);
}

/** Performs `e` if it writes to the store (the promise of its write); undefined if it is no store write. */
function storeWrite(sh: SingletonShell, e: Effect): Promise<void> | undefined {
  const { metaStore } = sh.env;
  const epoch = sh.epoch;
  switch (e.type) {
    case 'PersistDataset':
      return sh.persist('writing a dataset', () => metaStore.putDataset(e.config, epoch));
    case 'DeleteDataset':
      return sh.persist('deleting a dataset', () => metaStore.deleteDataset(e.dataset, epoch));
    case 'PersistShardMap':
      return sh.persist('writing a shard map', () => metaStore.putShardMap(e.snapshot)).then(() => sh.yieldAfterLarge(e.snapshot.numShards));
    case 'PersistSubscriptions':
      return sh.persist('writing the subscriptions', () => metaStore.putSubscriptions({ subscriptions: e.subscriptions, watchers: e.watchers }, epoch));
    case 'PersistNodeOperations':
      return sh.persist('writing the node operations', () => metaStore.putNodeOperations(e.operations, epoch));
    case 'PersistAppliedRequests':
      return sh.persist('writing the applied requests', () => metaStore.putAppliedRequests(e.applied, epoch));
    case 'PersistCooldown':
      return sh.persist('writing a cooldown', () => metaStore.putCooldown({ dataset: e.dataset, shard: e.shard, reassignedAt: e.reassignedAt }, epoch));
    default:
      return undefined;
  }
}

/** Performs an effect that is no store write: a record for the bus, a timer, a notice (a promise only when it waits). */
function record(sh: SingletonShell, d: Decision, e: Effect): Promise<void> | undefined {
  const epoch = sh.epoch;
  switch (e.type) {
    case 'ReleaseNode':
      return sh.queueEvent({ format: WIRE_FORMAT, kind: 'release', epoch, node: e.node, incarnation: e.incarnation });
    case 'Publish':
      return sh.queueEvent({ format: WIRE_FORMAT, kind: 'publish', epoch, to: e.to, message: e.message });
    case 'PublishChanges':
      return sh.queueEvent({
        format: WIRE_FORMAT,
        kind: 'map-changes',
        epoch,
        dataset: e.dataset,
        numShards: e.numShards,
        base: e.base,
        changes: sh.mapReaders.encodeChanges(e.events, e.to, d.s.view.members),
        members: e.members,
      });
    case 'PublishSnapshot':
      return publishSnapshot(sh, d, e);
    case 'PublishMembers':
      return sh.queueEvent({ format: WIRE_FORMAT, kind: 'members', epoch, version: e.version, members: e.members });
    case 'PublishMembersChange':
      return sh.queueEvent({ format: WIRE_FORMAT, kind: 'members-change', epoch, version: e.version, joined: e.joined, left: e.left });
    case 'PublishDigest':
      return sh.queueEvent({
        format: WIRE_FORMAT,
        kind: 'digest',
        epoch,
        members: e.members,
        maps: e.maps.map(({ dataset, numShards, version }) => ({ dataset, numShards, version })),
        inbox: appliedInbox(d.s, d.acks.acked),
        acksSent: d.acks.acksSent,
      });
    case 'FenceNode':
      return sh.queueEvent({ format: WIRE_FORMAT, kind: 'fence', epoch, node: e.node, incarnation: e.incarnation, reason: e.reason });
    case 'Reply':
      return sh.queueReply(sh.replyRecord(e));
    case 'AckReport':
      ack(sh, d, e);
      return undefined;
    case 'ScheduleCheck':
      return sh.scheduleCheck(e.at);
    case 'Notice':
      notice(sh, e);
      return undefined;
    default:
      return undefined;
  }
}

async function publishSnapshot(sh: SingletonShell, d: Decision, e: Extract<Effect, { type: 'PublishSnapshot' }>): Promise<void> {
  const { dataset, numShards, version } = e.snapshot;
  const configOf = (ref: DatasetRef): DatasetConfig => (d.after.datasets.get(ref) ?? d.before.datasets.get(ref))!.config;
  // Packed in slices on a real process: a joiner's map of 65 536 × 3 was 100 ms and more of the singleton's loop.
  const encoding = sh.mapReaders.encoding(e.snapshot, e.to, d.s.view.members);
  const snapshot = sh.env.slicePause ? await runInSlices(encoding, sh.env.slicePause) : runWhole(encoding);
  sh.queueEvent({
    format: WIRE_FORMAT,
    kind: 'map-snapshot',
    epoch: sh.epoch,
    dataset,
    numShards,
    version,
    to: e.to,
    config: configOf(dataset),
    snapshot,
    members: e.members,
  });
  await sh.yieldAfterLarge(numShards);
}

function ack(sh: SingletonShell, d: Decision, e: Extract<Effect, { type: 'AckReport' }>): void {
  const key = reportKey(e.node, e.incarnation, e.seq);
  const inbox = d.acks.acked.has(key) ? undefined : d.s.reportOffsets.get(key);
  d.acks.acked.add(key);
  sh.queueReply({
    format: WIRE_FORMAT,
    kind: 'ack',
    epoch: sh.epoch,
    node: e.node,
    incarnation: e.incarnation,
    seq: e.seq,
    ...(inbox === undefined ? {} : { inbox }),
    ordinal: ++d.acks.acksSent,
  });
}

function notice(sh: SingletonShell, e: Extract<Effect, { type: 'Notice' }>): void {
  const { log, env } = sh;
  // The notice's node is who it is about; the logger's own `node` field is who logs it.
  const { name, level, message, node, ...fields } = e.notice;
  env.telemetry.notice(name, e.notice.dataset, e.notice.lot?.count ?? 1);
  const member = node === undefined ? {} : { member: node };
  if (name !== 'report.rejected') {
    log[level]({ event: name, ...fields, ...member }, message);
    return;
  }
  // A flood of refused reports (a node acting on an old map, replays) is one line per
  // member and 10 s, and one more counting the others; each is counted in the metrics.
  limitedLog(log, env.clock, `${name} ${node ?? ''}`, (more) =>
    more === 0
      ? log[level]({ event: name, ...fields, ...member }, message)
      : log[level]({ event: name, ...member, refused: more }, `${more} more report event(s) of ${node ?? 'a node'} refused in the last 10 s`),
  );
}
