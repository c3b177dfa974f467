// A node's top actor. It supervises the node's coordinator and reporter, follows every dataset's
// map from the events topic (changes applied, whole maps only when behind: `FollowedMaps`), hands
// its maps and the members to the coordinator, which runs what they give this node, relays them to
// local subscribers, routes acknowledgements to the reporter and replies to waiting requests,
// keeps the maps for the next singleton's recovery, and hosts the singleton
// when its node is the oldest member.
import type { BusRecord, RecordLabels } from '../cluster/bus.js';
import type { Cancel } from '../cluster/clock.js';
import { isMember, oldestMember, type MembershipView } from '../cluster/membership.js';
import type { DatasetConfig } from '../core/dataset-config.js';
import type { DatasetRef, Epoch, SubscriberId } from '../core/ids.js';
import type { ShardMapFollower } from '../core/map-follower.js';
import { compareStamps } from '../core/shard-map-snapshot.js';
import type { MapStamp, RunningShard, RunningSummary, SubscriberMessage } from '../core/shard-manager/protocol.js';
import { FollowedMaps, type MembersRecord } from '../protocol/followed-maps.js';
import type { ShardManagerState } from '../core/shard-manager/step.js';
import { spawnNodeClusterActor, type ClusterMsg } from './node-cluster-actor.js';
import type { CoordinatorMsg } from './node-coordinator.js';
import { spawnNodeCoordinator } from './node-coordinator.js';
import { skipMalformed, type NodeEnv } from './node-env.js';
import type { NodeHub } from './node-hub.js';
import { spawnReporter, type Reporter } from './reporter.js';
import type { EventsRecord } from '../protocol/wire-events.js';
import type { Lease } from '../store/meta-store.js';
import { leaseRowProblem, LeaseWatch, placeInLine, placeWaitMs, StandBackoff, standBackoffMs } from '../cluster/failure-detector/succession.js';
import { singletonLeaseWaitMs } from '../cluster/failure-detector/settings.js';
import type { ActorRef } from './runtime.js';
import { eventsMessageReading, parseEventsMessage, snapshotEnvelope } from '../protocol/wire-events.js';
import { encodeInboxMessage, hostPrefix, parseRepliesMessage, WIRE_FORMAT, type InboxMessage, type Request } from '../protocol/wire.js';
import { NEWEST_MAP_FORMAT } from '../core/map-codec.js';
import { runInSlices } from '../core/steps.js';

export type GuardianMsg =
  | { readonly type: 'Start' }
  | { readonly type: 'View'; readonly view: MembershipView }
  | { readonly type: 'Events'; readonly record: BusRecord }
  | { readonly type: 'Replies'; readonly record: BusRecord }
  | { readonly type: 'SingletonStopped'; readonly epoch: Epoch; readonly reason: string }
  | { readonly type: 'RetryCandidacy' }
  /** Heartbeat mode: look at the singleton lease again (§11.9). */
  | { readonly type: 'WatchLease' }
  /** A `SyncMaps` got no complete answer in time: what is still lacking is asked again. */
  | { readonly type: 'SyncTimeout' }
  | { readonly type: 'GetRunning'; readonly reply: (running: RunningShard[]) => void }
  | { readonly type: 'GetRunningSummary'; readonly listUpTo: number; readonly reply: (summary: RunningSummary) => void }
  | { readonly type: 'GetSingletonState'; readonly reply: (state: ShardManagerState | undefined) => void };

/** What a guardian holds: its maps (for the node's reads and the next singleton) and the members. */
export interface GuardianCache {
  readonly maxEpoch: number;
  readonly maps: ReadonlyMap<DatasetRef, ShardMapFollower>;
  readonly configs: ReadonlyMap<DatasetRef, DatasetConfig>;
  readonly members: MembersRecord | undefined;
  readonly singletonEpoch: Epoch | undefined;
}

interface State {
  joined: boolean;
  view: MembershipView | undefined;
  maxEpoch: number;
  /** The newest singleton this node told which map format it reads. */
  formatToldTo: number;
  readonly maps: FollowedMaps;
  /** The timer of the `SyncMaps` on its way. */
  syncTimer: Cancel | undefined;
  /** This node's singleton, if it hosts one, and when it started (for the crash backoff). */
  singleton: { ref: ActorRef<ClusterMsg>; epoch: Epoch; startedAt: number } | undefined;
  candidacy: boolean;
  /** Failed attempts to take the lease in a row (the MetaStore is away): they back off. */
  candidacyFailures: number;
  /**
   * Singletons of this node that crashed in a row: standing again after each backs off, up to
   * retryMaxMs. A singleton that ran retryMaxMs before it crashed starts the count over, so a
   * crash next week is not delayed by the crashes of today.
   */
  singletonCrashes: number;
  /** Heartbeat mode: the lease as this node watches it, and its next look. */
  readonly leaseWatch: LeaseWatch | undefined;
  watchTimer: Cancel | undefined;
  /** Heartbeat mode: after a lost race for the lease, or a lost lease, no standing before this has passed. */
  readonly standBackoff: StandBackoff;
  /** The last failure to read the lease was logged; later ones of the same run are not. */
  leaseReadFailing: boolean;
  /** The last lease row read was held by an incarnation the group does not list (counted once per renewal). */
  holderNotMemberSeen: boolean;
  readonly coordinator: ActorRef<CoordinatorMsg>;
  readonly reporter: Reporter;
}

export interface GuardianCallbacks {
  /** The node learned it is no longer a member: it must rejoin as a new incarnation. */
  readonly onFenced: (reason: string) => void;
  /** The singleton drained this node: it holds no copy and may stop. */
  readonly onReleased: () => void;
}

/**
 * Whether the next singleton needs this guardian's copy of a map: yes unless the map it read from
 * the MetaStore has the same shard count and a stamp at least as new. When in doubt, send it: the
 * core keeps the newest candidate, so a map too many costs time, a map too few loses changes (I4).
 */
function newerThanStored(f: ShardMapFollower, stored: MapStamp | undefined): boolean {
  return stored === undefined || stored.numShards !== f.mapper?.numShards || compareStamps(f, stored) > 0;
}

/**
 * Which records of the events topic a node handles from their labels alone, unread
 * (`SubscribeOptions.skip`): a whole map it has already (another node's sync answer), handled
 * against the guardian's state (`FollowedMaps.snapshotFromEnvelope`). Only while no record read
 * before it waits in the guardian's mailbox: the state it is handled in is then the state it would
 * have been read in, and the count of records handed on and not yet taken keeps that true.
 */
export class EventsSkip {
  /** Records of the events topic handed to the guardian and not handled to their end yet. */
  private waiting = 0;

  constructor(
    private readonly env: Pick<NodeEnv, 'node' | 'incarnation' | 'clock' | 'singletonContact'>,
    private readonly outlook: GuardianOutlook,
  ) {}

  /** A record goes to the guardian's mailbox. */
  handedOn(): void {
    this.waiting++;
  }

  /** The guardian is done with a record (handling one may wait on the bus or the coordinator). */
  taken(): void {
    this.waiting = Math.max(0, this.waiting - 1);
  }

  readonly skips = (labels: RecordLabels): boolean => {
    const s = this.outlook.state();
    const m = snapshotEnvelope(labels);
    if (!s || !m || this.waiting > 0) return false;
    if (m.epoch < s.maxEpoch) return true; // a replaced singleton's: the guardian ignores it (I6)
    if (m.epoch > s.maxEpoch || m.toHosts.includes(hostPrefix(this.env.node, this.env.incarnation))) return false;
    if (!s.maps.snapshotFromEnvelope(m)) return false;
    // Unread, it still says the singleton is there, as reading it would have.
    this.env.singletonContact?.heard(this.env.clock.now());
    return true;
  };
}

/**
 * The guardian's state as it is between two of its steps, read outside its mailbox by what must
 * not wait behind a map being applied there (about 470 ms per guardian for a new 65 536-shard map
 * on the embedded demo): whole maps skipped unread (`EventsSkip`), replies (`RequestLane`), and the
 * maps the node's HTTP routes and query-router checks read. A map is applied in slices but
 * installed at once, so a read between slices sees the map before it, whole.
 */
export class GuardianOutlook {
  private current: (() => State) | undefined;

  /** The guardian's state, once it has one. */
  attach(state: () => State): void {
    this.current = state;
  }

  /** @internal */
  state(): State | undefined {
    return this.current?.();
  }

  /** The newest singleton epoch the guardian has seen (-1 before it has a state). */
  newestEpoch(): number {
    return this.state()?.maxEpoch ?? -1;
  }

  /** The maps, configs and members the guardian follows now; undefined before it has a state. */
  cache(): GuardianCache | undefined {
    const s = this.state();
    return s && { maxEpoch: s.maxEpoch, maps: s.maps.followers, configs: s.maps.configs, members: s.maps.members, singletonEpoch: s.singleton?.epoch };
  }
}

/** What a node that runs nothing (or whose coordinator has stopped) says it runs. */
export const NOTHING_RUNNING: RunningSummary = { listed: [], counts: {} };

/** What reads the guardian's state outside its mailbox; `skip` is told when it is done with each events record. */
export interface GuardianOutside {
  readonly outlook: GuardianOutlook;
  readonly skip: EventsSkip;
}

export function spawnNodeGuardian(env: NodeEnv, hub: NodeHub, callbacks: GuardianCallbacks, outside?: GuardianOutside): ActorRef<GuardianMsg> {
  const guardianId = `${hostPrefix(env.node, env.incarnation)}guardian` as SubscriberId;
  const toInbox = (m: InboxMessage) => env.bus.produce(env.topics.inbox, encodeInboxMessage(m));
  const request = (r: Request) => toInbox({ format: WIRE_FORMAT, kind: 'request', request: r });
  /** Tells the singleton the newest map format this node reads: a `SyncMaps` of nothing, which changes nothing. */
  const declareMapFormat = () =>
    void request({ type: 'SyncMaps', subscriber: guardianId, datasets: [], members: false, mapFormat: NEWEST_MAP_FORMAT }).catch((e: unknown) =>
      env.log.debug({ err: e }, 'telling the singleton which map format this node reads failed: it writes the compact one for it'),
    );

  /** The node's copy of every map, wired to its coordinator, its local subscribers and the singleton. */
  function followedMaps(self: ActorRef<GuardianMsg>, coordinator: ActorRef<CoordinatorMsg>, state: () => State): FollowedMaps {
    const maps: FollowedMaps = new FollowedMaps(
      {
        mapChanged: (dataset, follower, config, shards) => {
          const madeFor = maps.madeForMembers(dataset);
          env.runtime.send(coordinator, {
            type: 'MapState',
            dataset,
            epoch: follower.epoch,
            mapper: follower.mapper!,
            config,
            ...(shards ? { shards } : {}),
            ...(madeFor === undefined ? {} : { madeFor }),
          });
        },
        membersChanged: (members) => {
          const admission = maps.admission;
          env.runtime.send(coordinator, { type: 'Members', members, ...(admission ? { admission } : {}) });
        },
        datasetGone: (dataset) => {
          env.runtime.send(coordinator, { type: 'DatasetGone', dataset });
          env.telemetry.datasetRemoved(dataset);
        },
        deliver: (dataset, message, only) => {
          if (only === undefined) return hub.deliverToDataset(dataset, message);
          const prefix = hostPrefix(env.node, env.incarnation);
          let built: SubscriberMessage | undefined;
          for (const id of only) if (id !== guardianId && id.startsWith(prefix)) hub.deliver(id, (built ??= message()));
        },
        askSync: (wanted) => {
          const s = state();
          s.syncTimer?.();
          // An answer lost on the bus (or never sent) is asked for again, at the pace of reports, and
          // more slowly while no answer comes (a singleton busy with a large decision).
          s.syncTimer = env.clock.schedule(env.settings.reportResendMs * maps.syncWaitFactor, () => env.runtime.send(self, { type: 'SyncTimeout' }));
          env.log.debug({ ...wanted }, 'this node is behind on some maps: asking the singleton');
          void request({ type: 'SyncMaps', subscriber: guardianId, ...wanted, mapFormat: NEWEST_MAP_FORMAT }).catch((e: unknown) =>
            env.log.warn({ err: e }, 'asking the singleton for maps failed; asked again later'),
          );
        },
      },
      { node: env.node, incarnation: env.incarnation },
    );
    return maps;
  }

  async function onPublish(s: State, to: readonly SubscriberId[], message: Extract<EventsRecord, { kind: 'publish' }>['message']): Promise<void> {
    const prefix = hostPrefix(env.node, env.incarnation);
    for (const id of to) {
      if (id === guardianId) {
        if (message.type === 'DatasetUnknown' || message.type === 'DatasetRemoved') {
          s.maps.gone(message.dataset);
        }
      } else if (id.startsWith(prefix) && !hub.deliver(id, message)) {
        // A local subscriber that is gone: tell the singleton, so it stops sending (deathwatch).
        await request({ type: 'SubscriberTerminated', subscriber: id });
      }
    }
    // Every node forgets a removed dataset, whether or not it was told by name.
    if (message.type === 'DatasetRemoved') s.maps.gone(message.dataset);
  }

  async function onEvents(s: State, record: BusRecord): Promise<void> {
    // A decision's changes (tens of thousands of events in a join wave) are decoded in slices on a real process.
    const parsed = env.slicePause ? await runInSlices(eventsMessageReading(record.value), env.slicePause) : parseEventsMessage(record.value);
    if (!parsed.ok) {
      skipMalformed(env, record, parsed.error.reason);
      return;
    }
    const m = parsed.value;
    // Fencing: nothing from a singleton older than the newest one seen (I6).
    if (m.epoch < s.maxEpoch) {
      env.log.debug({ epoch: m.epoch, current: s.maxEpoch, kind: m.kind }, 'record from a replaced singleton ignored');
      return;
    }
    // A new singleton learns which map format this node reads from the first request it reads
    // from it; the node's first ask may have gone before that singleton read its inbox.
    if (m.epoch > s.formatToldTo) {
      s.formatToldTo = m.epoch;
      declareMapFormat();
    }
    s.maxEpoch = m.epoch;
    env.singletonContact?.heard(env.clock.now());
    switch (m.kind) {
      case 'publish':
        return onPublish(s, m.to, m.message);
      case 'map-changes':
        // A decision of tens of thousands of events is applied in slices on a real process.
        return env.slicePause ? s.maps.changesInSlices(m, env.slicePause) : s.maps.changes(m);
      case 'map-snapshot':
        // A whole map of tens of thousands of shards (a joining node's) is decoded in slices on a real process.
        return env.slicePause ? s.maps.snapshotInSlices(m, env.slicePause) : s.maps.snapshot(m);
      case 'members':
        return s.maps.membersRecord(m);
      case 'members-change':
        return s.maps.membersChange(m);
      case 'digest':
        s.reporter.digest(m.epoch, m.inbox, m.acksSent);
        return s.maps.digest(m);
      case 'fence':
        if (m.node === env.node && m.incarnation === env.incarnation)
          env.runtime.send(s.coordinator, { type: 'StopAll', reason: `fenced by the singleton: ${m.reason}` });
        return;
      case 'release':
        if (m.node === env.node && m.incarnation === env.incarnation) callbacks.onReleased();
        return;
      case 'cluster-state-request': {
        const stored = new Map((m.stored ?? []).map((x) => [x.dataset, x]));
        const running = await new Promise<RunningShard[]>((resolve) =>
          env.runtime.ask(s.coordinator, (reply) => ({ type: 'GetRunning' as const, reply }), resolve, []),
        );
        await toInbox({
          format: WIRE_FORMAT,
          kind: 'cluster-state',
          requestId: m.requestId,
          epoch: m.epoch,
          node: env.node,
          incarnation: env.incarnation,
          maps: [...s.maps.followers.values()].flatMap((f) => (f.mapper && newerThanStored(f, stored.get(f.dataset)) ? [f.mapper.toSnapshot(f.epoch)] : [])),
          // Subscriptions are the MetaStore's alone (persisted before anyone is told of them); a
          // node no longer subscribes to everything: it follows every map from the events topic.
          subscriptions: [],
          watchers: [],
          running,
          mapFormat: NEWEST_MAP_FORMAT,
        });
        return;
      }
    }
  }

  function onReplies(s: State, record: BusRecord): void {
    const parsed = parseRepliesMessage(record.value);
    if (!parsed.ok) {
      skipMalformed(env, record, parsed.error.reason);
      return;
    }
    const m = parsed.value;
    if (m.epoch < s.maxEpoch) return;
    env.singletonContact?.heard(env.clock.now());
    // Replies to requests are the request lane's (`request-lane.ts`): they never wait in this mailbox.
    if (m.kind !== 'ack') return;
    if (m.node === env.node && m.incarnation === env.incarnation) env.runtime.send(s.reporter.ref, { type: 'Ack', seq: m.seq });
    s.reporter.acknowledged(m.epoch, m.inbox === undefined ? undefined : m.inbox + 1, m.ordinal);
  }

  /**
   * Stops this node's singleton: at once through its role's flag (it may be blocked on a store call,
   * and must not act when that returns), then by the message that makes it clean up.
   */
  function stopSingleton(singleton: { readonly ref: ActorRef<ClusterMsg>; readonly epoch: Epoch }, reason: string): void {
    env.singletonRole?.stop(singleton.epoch, reason);
    env.runtime.send(singleton.ref, { type: 'Stop', reason });
  }

  async function onView(s: State, view: MembershipView, self: ActorRef<GuardianMsg>): Promise<void> {
    s.view = view;
    const member = isMember(view, env.node, env.incarnation);
    if (!member) {
      if (s.joined) {
        // Out of the group (paused too long, partitioned): stop acting as a member at once.
        if (s.singleton) stopSingleton(s.singleton, 'this node is no longer a member');
        env.runtime.send(s.coordinator, { type: 'StopAll', reason: 'this node is no longer a member' });
        callbacks.onFenced('no longer a member of the cluster');
      }
      return;
    }
    s.joined = true;
    if (s.leaseWatch) {
      // Heartbeat mode: the lease, not age, says who holds the role (§11.9).
      if (s.singleton) env.runtime.send(s.singleton.ref, { type: 'View', view });
      else watchSoon(s, self, 0);
      return;
    }
    const oldest = oldestMember(view);
    const isOldest = oldest?.node === env.node && oldest.incarnation === env.incarnation;
    if (s.singleton && !isOldest) stopSingleton(s.singleton, `${oldest?.node} is now the oldest member`);
    if (s.singleton && isOldest) env.runtime.send(s.singleton.ref, { type: 'View', view });
    if (!s.singleton && isOldest) await stand(s, self);
  }

  /**
   * Takes the singleton lease by compare-and-set and starts the singleton at the new epoch. In
   * heartbeat mode, `seen` is the lease the watch judged gone (undefined: never taken), and the
   * compare-and-set is on its epoch and renewal.
   */
  async function stand(s: State, self: ActorRef<GuardianMsg>, seen?: { lease: Lease | undefined; why: string }): Promise<void> {
    if (s.candidacy) return;
    s.candidacy = true;
    try {
      const current = seen ? seen.lease : await env.lease.readLease();
      if (!env.runtime.isAlive(self)) return; // the node stopped meanwhile: no candidacy
      const takenAt = env.detector?.clock.now();
      const lease = await env.lease.takeLease(env.node, env.incarnation, current?.epoch ?? 0, seen ? current?.renewal : undefined);
      if (!env.runtime.isAlive(self)) return;
      if (!lease) {
        env.log.info({ current: current?.epoch }, 'another candidate took the singleton lease first; trying again');
        if (s.leaseWatch) {
          // The winner may be renewing already: back off rather than race it again (§11.9).
          backOff(s, 'lost a race for the singleton lease');
          watchSoon(s, self, 0);
        } else env.clock.schedule(env.settings.retryInitialMs, () => env.runtime.send(self, { type: 'RetryCandidacy' }));
        return;
      }
      s.candidacyFailures = 0;
      const epoch = lease.epoch;
      if (seen && current)
        env.log.info(
          { event: 'singleton.succession', epoch, predecessor: `${current.node}@${current.incarnation}`, predecessorEpoch: current.epoch, why: seen.why },
          `took the singleton lease from ${current.node}: ${seen.why}`,
        );
      const ref = spawnNodeClusterActor(env, self, epoch, {
        onStopped: (reason) => env.runtime.send(self, { type: 'SingletonStopped', epoch, reason }),
      });
      s.singleton = { ref, epoch, startedAt: env.clock.now() };
      env.runtime.send(ref, { type: 'Begin', view: s.view!, ...(takenAt === undefined ? {} : { takenAt }) });
    } catch (e) {
      // Backs off like every MetaStore retry (withRetry): the store may be away for a while.
      const attempt = ++s.candidacyFailures;
      const retryInMs = Math.min(env.settings.retryInitialMs * 2 ** (attempt - 1), env.settings.retryMaxMs);
      env.log.warn({ event: 'retry', what: 'taking the singleton lease', err: e, attempt, retryInMs }, 'could not take the singleton lease; trying again');
      env.telemetry.retry('taking the singleton lease');
      env.clock.schedule(retryInMs, () => env.runtime.send(self, { type: 'RetryCandidacy' }));
    } finally {
      s.candidacy = false;
    }
  }

  /** Heartbeat mode: no standing for a singleton lease and a random part of one more (`standBackoffMs`). */
  function backOff(s: State, why: string): void {
    const settings = env.settings.failureDetector;
    const detector = env.detector!;
    const ms = standBackoffMs(settings, detector.random(Math.ceil(settings.singletonLeaseMs / 2) + 1));
    s.standBackoff.backOff(detector.clock.now(), ms);
    env.log.info({ event: 'singleton.backoff', why, backoffMs: ms }, `this node does not stand for the singleton lease for ${ms} ms: ${why}`);
  }

  /** Heartbeat mode: the next look at the lease in `ms` (an earlier one already due stays). */
  function watchSoon(s: State, self: ActorRef<GuardianMsg>, ms: number): void {
    if (s.watchTimer) {
      if (ms > 0) return;
      s.watchTimer();
    }
    s.watchTimer = env.clock.schedule(ms, () => env.runtime.send(self, { type: 'WatchLease' }));
  }

  /**
   * Heartbeat mode, while this node hosts no singleton: reads the lease; the next in line takes it
   * once it ran out, never sooner, and looks every heartbeat; the others look every half singleton
   * lease (the holder may change, and with it the line) and take it half a lease later per place
   * (the one before them in line may be dead). A row no singleton of this cluster can have written
   * (an epoch far ahead) is refused and counted; nobody stands while backing off.
   */
  async function watchLease(s: State, self: ActorRef<GuardianMsg>): Promise<void> {
    s.watchTimer = undefined;
    const detector = env.detector!;
    const settings = env.settings.failureDetector;
    if (s.singleton || !s.joined || !s.view || s.candidacy) return;
    let lease: Lease | undefined;
    try {
      lease = await env.lease.readLease();
      s.leaseReadFailing = false;
    } catch (e) {
      if (!s.leaseReadFailing)
        env.log.warn({ event: 'retry', what: 'reading the singleton lease', err: e }, 'could not read the singleton lease; looking again');
      s.leaseReadFailing = true;
      watchSoon(s, self, settings.heartbeatIntervalMs);
      return;
    }
    if (s.singleton || !s.view) return;
    const place = placeInLine(inLine(s, s.view), lease, { node: env.node, incarnation: env.incarnation });
    const nextLookMs = place === 0 ? settings.heartbeatIntervalMs : Math.ceil(settings.singletonLeaseMs / 2);
    const watch = s.leaseWatch!;
    if (lease) {
      const problem = leaseRowProblem(lease, Math.max(s.maxEpoch, watch.newestEpoch), s.view.members);
      if (problem === 'future-epoch') {
        detector.dropped.drop({
          cause: problem,
          detail: `singleton lease row of epoch ${lease.epoch} held by ${lease.node}@${lease.incarnation}; the newest epoch seen is ${Math.max(s.maxEpoch, watch.newestEpoch)}`,
        });
        watchSoon(s, self, nextLookMs);
        return;
      }
      if (problem === 'holder-not-member' && (watch.changed || !s.holderNotMemberSeen)) {
        // Counted once per renewal seen, not per look.
        detector.dropped.drop({
          cause: problem,
          detail: `singleton lease row of epoch ${lease.epoch} renewed (${lease.renewal}) by ${lease.node}@${lease.incarnation}, which the group does not list`,
        });
      }
      s.holderNotMemberSeen = problem === 'holder-not-member';
    }
    const now = detector.clock.now();
    const extraMs = place === undefined ? 0 : placeWaitMs(place, settings);
    const verdict = watch.observe(lease, now, extraMs);
    if (watch.clockWentBack)
      detector.dropped.drop({ cause: 'clock-jump', detail: 'the monotonic clock went back between two looks at the singleton lease: its wait starts over' });
    const backingOffMs = s.standBackoff.remainingMs(now);
    if (backingOffMs > 0 && (verdict.kind === 'free' || verdict.kind === 'expired')) {
      watchSoon(s, self, Math.min(nextLookMs, backingOffMs));
      return;
    }
    if (place === 0 && verdict.kind === 'free') return stand(s, self, { lease: undefined, why: 'no lease yet' });
    if (place !== undefined && verdict.kind === 'expired') {
      // The watch is not reset: if the compare-and-set fails for want of the store, the lease is
      // still as expired at the next look (a new holder or renewal starts the watch over anyway).
      return stand(s, self, { lease: verdict.lease, why: `its lease was not renewed for ${singletonLeaseWaitMs(settings) + extraMs} ms` });
    }
    watchSoon(s, self, nextLookMs);
  }

  /**
   * The members that may stand: the group's view without the incarnations the last singleton no
   * longer counted (it evicted them: the group may list a dead one for a session, and it would hold
   * the line), this node always included.
   */
  function inLine(s: State, view: MembershipView): MembershipView['members'] {
    const counted = s.maps.members?.members;
    if (!counted) return view.members;
    const self = (m: { node: string; incarnation: string }) => m.node === env.node && m.incarnation === env.incarnation;
    return view.members.filter((m) => self(m) || counted.some((c) => c.node === m.node && c.incarnation === m.incarnation));
  }

  const reporterAndCoordinator = (self: ActorRef<GuardianMsg>) => {
    const reporter = spawnReporter(env, self);
    const coordinator = spawnNodeCoordinator(env, self, reporter);
    return { reporter, coordinator };
  };

  // Children need the guardian's ref, so its state is made with the first message.
  const firstState = (self: ActorRef<GuardianMsg>): State => {
    const children = reporterAndCoordinator(self);
    const state: State = {
      joined: false,
      view: undefined,
      maxEpoch: -1,
      formatToldTo: -1,
      maps: followedMaps(self, children.coordinator, () => state),
      syncTimer: undefined,
      singleton: undefined,
      candidacy: false,
      candidacyFailures: 0,
      singletonCrashes: 0,
      leaseWatch: env.detector ? new LeaseWatch(env.settings.failureDetector) : undefined,
      watchTimer: undefined,
      standBackoff: new StandBackoff(),
      holderNotMemberSeen: false,
      leaseReadFailing: false,
      ...children,
    };
    outside?.outlook.attach(() => state);
    return state;
  };
  return env.runtime.spawn<State | undefined, GuardianMsg>(
    env.runtime.system,
    'guardian',
    async (s0, msg, ctx) => {
      const s = s0 ?? firstState(ctx.self);
      switch (msg.type) {
        case 'Start':
          // Every map and the members: what a node needs before it runs anything.
          s.maps.want({ all: true, members: true });
          return s;
        case 'View':
          await onView(s, msg.view, ctx.self);
          return s;
        case 'Events':
          try {
            await onEvents(s, msg.record);
          } finally {
            outside?.skip.taken();
          }
          return s;
        case 'Replies':
          onReplies(s, msg.record);
          return s;
        case 'SingletonStopped': {
          if (s.singleton?.epoch !== msg.epoch) return s;
          const ranMs = env.clock.now() - s.singleton.startedAt;
          s.singleton = undefined;
          if (s.leaseWatch) {
            // It lost or gave up the lease: it must not take it back at once (§11.9).
            s.leaseWatch.reset();
            backOff(s, `its singleton stopped: ${msg.reason}`);
            watchSoon(s, ctx.self, 0);
          }
          // A singleton that crashed (Kafka or the MetaStore failed it past its retries: a commit
          // refused while a broker was away) is replaced at once by a new epoch if this node is still
          // the oldest member; nothing else would start one before the next membership change.
          // ('crashed' is what the singleton reports from its crash, see spawnNodeClusterActor.)
          if (msg.reason === 'crashed') {
            if (ranMs >= env.settings.retryMaxMs) s.singletonCrashes = 0;
            const attempt = ++s.singletonCrashes;
            const retryInMs = Math.min(env.settings.retryInitialMs * 2 ** (attempt - 1), env.settings.retryMaxMs);
            env.log.warn({ event: 'singleton.stopped', reason: 'crashed', epoch: msg.epoch, ranMs, retryInMs }, 'the singleton crashed; standing again');
            env.clock.schedule(retryInMs, () => env.runtime.send(ctx.self, { type: 'RetryCandidacy' }));
          }
          return s;
        }
        case 'WatchLease':
          await watchLease(s, ctx.self);
          return s;
        case 'RetryCandidacy': {
          if (s.leaseWatch) {
            watchSoon(s, ctx.self, 0);
            return s;
          }
          const oldest = s.view && oldestMember(s.view);
          if (!s.singleton && oldest?.node === env.node && oldest.incarnation === env.incarnation) await stand(s, ctx.self);
          return s;
        }
        case 'GetSingletonState':
          // A singleton that stops with the question in its mailbox (its lease ran out) answers none.
          if (!s.singleton) msg.reply(undefined);
          else env.runtime.ask(s.singleton.ref, (reply) => ({ type: 'GetState' as const, reply }), msg.reply, undefined);
          return s;
        case 'GetRunning':
          env.runtime.ask(s.coordinator, (reply) => ({ type: 'GetRunning' as const, reply }), msg.reply, []);
          return s;
        case 'GetRunningSummary':
          env.runtime.ask(s.coordinator, (reply) => ({ type: 'GetRunningSummary' as const, listUpTo: msg.listUpTo, reply }), msg.reply, NOTHING_RUNNING);
          return s;
        case 'SyncTimeout':
          s.syncTimer = undefined;
          s.maps.syncFailed();
          return s;
      }
    },
    {
      initialState: undefined,
      onCrash: 'resume',
      afterStop: (s) => {
        s?.syncTimer?.();
        s?.watchTimer?.();
      },
    },
  );
}
