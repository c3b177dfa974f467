// The singleton's shell: spawns the actor, keeps what has a life of its own (the inbox
// subscription and the records it buffers, the failure detector's monitor and lease keeper, the
// timers, the role, the state reads are answered from), and performs the effects of the pure step
// (`step.ts`) in order. It recovers before it acts (docs/ARCHITECTURE.md §6) and stops at once when
// a newer epoch fences it.
import type { BusRecord, BusSubscription } from '../../cluster/bus.js';
import type { Cancel } from '../../cluster/clock.js';
import { aTurn } from '../../cluster/turns.js';
import type { MembershipView } from '../../cluster/membership.js';
import type { SingletonMonitor } from '../../cluster/failure-detector/singleton-monitor.js';
import { SingletonLeaseKeeper } from '../../cluster/failure-detector/singleton-lease-keeper.js';
import { leaseWaitMs } from '../../cluster/failure-detector/settings.js';
import type { Epoch } from '../../core/ids.js';
import { type Effect, isReadRequest, type Member } from '../../core/shard-manager/protocol.js';
import { ShardManager } from '../../core/shard-manager/shard-manager.js';
import type { ShardManagerState } from '../../core/shard-manager/step.js';
import { encodeRepliesMessage, parseInboxMessage, WIRE_FORMAT, type EventsMessage, type RepliesMessage } from '../../protocol/wire.js';
import { snapshotLabels } from '../../protocol/wire-events.js';
import { FencedError } from '../../store/meta-store.js';
import { isPermanentBusFailure } from '../../cluster/bus-failures.js';
import { type NodeEnv, withRetry } from '../node-env.js';
import { SingletonRole } from '../singleton-role.js';
import { MapReaders } from '../map-readers.js';
import type { ActorRef } from '../runtime.js';
import { looksLikeRead } from './bookkeeping.js';
import type { SingletonEffect } from './effects.js';
import { performEffect } from './perform.js';
import { type Performer, type Reducer, stepAndPerform } from '../reducer.js';
import { initialSingletonState, type SingletonState, type StepMsg } from './state.js';
import { singletonStep } from './step.js';
import type { Evidence } from '../../core/failure-detection/judge.js';

export type ClusterMsg =
  /** `takenAt`: when the lease's compare-and-set was sent, on the detector's clock (heartbeat mode). */
  | { readonly type: 'Begin'; readonly view: MembershipView; readonly takenAt?: number }
  /** Heartbeat mode: every lease a predecessor may have granted has run out; recovery may end. */
  | { readonly type: 'PredecessorLeasesOver' }
  /** Handles the inbox records read since (the shell's `inboxQueue`), a bounded lot per message. */
  | { readonly type: 'Inbox' }
  | { readonly type: 'View'; readonly view: MembershipView }
  | { readonly type: 'Tick' }
  | { readonly type: 'CheckCooldowns' }
  | { readonly type: 'RecoveryDeadline' }
  /** Writes the takeover record into the inbox, and again until it is read back (a record can be lost on the bus). */
  | { readonly type: 'WriteTakeoverRecord' }
  /** Asks the guardians that have not answered yet, again: a question can be lost on the bus. */
  | { readonly type: 'AskGuardians' }
  /** Applies the reports read since the last one, in one decision. */
  | { readonly type: 'Reports' }
  /** The failure detector evicted a member (docs/ARCHITECTURE.md §11.5): its lease has run out. */
  | { readonly type: 'Evicted'; readonly member: Member; readonly evidence: Evidence }
  /** A member the group dropped may now reach the core: its lease has run out (§11.5). */
  | { readonly type: 'Departed'; readonly member: Member }
  | { readonly type: 'Stop'; readonly reason: string }
  /** The singleton's state as it is now (for operators and tests); undefined until recovered. */
  | { readonly type: 'GetState'; readonly reply: (state: ShardManagerState | undefined) => void };

export interface SingletonCallbacks {
  /** The singleton stopped (fenced, lost its lease, told to): the guardian forgets it. */
  readonly onStopped: (reason: string) => void;
}

/** The singleton may not act any more: thrown before what it would have done, it stops the singleton. */
export class Fenced extends Error {}

/** A map this large makes a step yield to the event loop after storing or publishing it whole (`yieldAfterLarge`). */
const LARGE_MAP_SHARDS = 8192;

/**
 * Inbox records handled in one message at most. The actor handles one message per turn of the
 * event loop: one message per record made a request wait a turn for every report read before it
 * (2.7 s behind the reports of 65 536 copies starting on a busy process).
 */
const INBOX_RECORDS_PER_MESSAGE = 256;

export function spawnSingleton(env: NodeEnv, parent: ActorRef<unknown>, epoch: Epoch, callbacks: SingletonCallbacks): ActorRef<ClusterMsg> {
  const shell = new SingletonShell(env, epoch, callbacks);
  const initialState = initialSingletonState(
    {
      epoch,
      requestId: `recovery-${epoch}-${env.node}`,
      recoveryReplyTimeoutMs: env.settings.recoveryReplyTimeoutMs,
      publishIntervalMs: env.settings.publishIntervalMs,
      leaseWaitMs: env.detector ? leaseWaitMs(env.settings.failureDetector) : 0,
    },
    shell.manager.initialState(),
  );
  shell.latest = initialState;
  shell.self = env.runtime.spawn<SingletonState, ClusterMsg>(parent, `singleton-${epoch}`, (s, msg) => shell.handle(s, msg), {
    initialState,
    onCrash: 'stop',
    afterStop: () => shell.afterStop(),
  });
  return shell.self;
}

export class SingletonShell {
  readonly manager: ShardManager;
  readonly log: NodeEnv['log'];
  /**
   * Whether this singleton may still act, and the stop when it may not. Read before every effect and
   * every store call; set synchronously by whatever decides the stop (the lease keeper's timer, the
   * guardian), never by a message, which would wait behind a store call that hangs (§11.9).
   */
  readonly role: SingletonRole;
  /** Heartbeat mode: renews this singleton's own lease (§11.9); its lease, counted on the local clock, must still run. */
  keeper: SingletonLeaseKeeper | undefined;
  /** The failure detector's monitor, in `heartbeat` mode. */
  monitor: SingletonMonitor<Member> | undefined;
  inbox: BusSubscription | undefined;
  /** Inbox records read and not handed to the step yet, oldest first. */
  readonly inboxQueue: BusRecord[] = [];
  readonly timers = new Set<Cancel>();
  /** The cooldown checks scheduled (a timer each, forgotten when it fires). */
  readonly checks = new Set<number>();
  /** Which whole-map format each process reads: what a map is written in. */
  readonly mapReaders = new MapReaders();
  /**
   * The last decided state whose store writes are all done: read requests are answered from it at
   * once, as they arrive, without waiting behind a decision under way (`answerReadAtOnce`).
   * The core runs ahead of it while a decision's writes are awaited: a read must not show what a
   * successor would not recover. Undefined until recovery has been performed.
   */
  readable: ShardManagerState | undefined;
  /** Commits of the inbox position that failed in a row. */
  commitFailures = 0;
  /** When the commit on its way started (the node's clock); undefined when none is. */
  committingSince: number | undefined;
  /** The state the step gave last: the subscription's callback reads its phase outside the mailbox. */
  latest!: SingletonState;
  self!: ActorRef<ClusterMsg>;
  /** The singleton stopped itself (`stopSelf`); the guardian was told once (`stopReported`). */
  private stopped = false;
  private stopReported = false;

  constructor(
    readonly env: NodeEnv,
    readonly epoch: Epoch,
    private readonly callbacks: SingletonCallbacks,
  ) {
    this.manager = new ShardManager({
      reassignmentCooldownMs: env.settings.reassignmentCooldownMs,
      maxMapBytes: env.settings.maxMapBytes,
      settleWindowMs: env.settings.settleWindowMs,
    });
    this.log = env.log.child({ singleton: epoch });
    this.role = env.singletonRole ?? new SingletonRole();
  }

  /** The step, noting each state it gives: the subscription's callback reads it outside the mailbox. */
  private readonly step: Reducer<SingletonState, StepMsg, SingletonEffect> = (state, m, now) => {
    const stepped = singletonStep(state, m, now);
    this.latest = stepped.state;
    return stepped;
  };

  private readonly perform: Performer<SingletonState, StepMsg, SingletonEffect> = (effect, state) => performEffect(this, effect, state);

  /**
   * Once stopped (a lost lease, a fence), nothing more: the rest of an inbox batch is a
   * successor's. Whether the role still allows an act is asked where it always was (`mustAct`,
   * which names the act in the stop's reason), not before a log line or a timer.
   */
  private readonly stillActs = (state: SingletonState): boolean => state.phase !== 'stopped';

  handle(s: SingletonState, msg: ClusterMsg): SingletonState | Promise<SingletonState> {
    if (s.phase === 'stopped') return s;
    if (msg.type === 'GetState') {
      msg.reply(s.phase === 'active' ? s.core : undefined);
      return s;
    }
    return stepAndPerform(s, this.prepare(s, msg), this.step, this.perform, () => this.env.clock.now(), this.stillActs).catch((e: unknown) => this.failed(e));
  }

  /** A call failed: `Fenced` stops the singleton (what it would have done is not done); anything else crashes it. */
  private async failed(e: unknown): Promise<SingletonState> {
    if (!(e instanceof Fenced)) throw e;
    await this.stopSelf(e.message);
    return (this.latest = singletonStep(this.latest, { type: 'Stopped' }, this.env.clock.now()).state);
  }

  /** The step's message for `msg`: what the shell's objects say goes with it (the effective view, the records read). */
  private prepare(s: SingletonState, msg: Exclude<ClusterMsg, { type: 'GetState' }>): StepMsg {
    switch (msg.type) {
      case 'Begin':
        return this.begin(msg);
      case 'View':
        this.monitor?.view(msg.view.members);
        return { type: 'View', groupView: msg.view, view: this.effectiveView(msg.view) };
      case 'Inbox':
        return { type: 'Inbox', records: this.inboxQueue.splice(0, INBOX_RECORDS_PER_MESSAGE) };
      case 'Evicted':
      case 'Departed':
        return { ...msg, view: this.effectiveView(s.groupView) };
      default:
        return msg;
    }
  }

  /** Takes the role, and in heartbeat mode starts the lease keeper and the monitor. */
  private begin(msg: Extract<ClusterMsg, { type: 'Begin' }>): StepMsg {
    const { env, epoch } = this;
    const self = this.self;
    this.role.begin(epoch, (reason) => {
      this.stopNow(reason);
      env.runtime.send(self, { type: 'Stop', reason });
    });
    const detector = env.detector;
    if (detector) {
      const k = new SingletonLeaseKeeper({
        store: env.lease,
        epoch,
        settings: env.settings.failureDetector,
        clock: detector.clock,
        log: this.log,
        takenAt: msg.takenAt ?? detector.clock.now(),
        hearsMajority: () => this.monitor?.hearsMajority() ?? true,
        // On the keeper's timer, not through the mailbox: the actor may be blocked on the store.
        onLost: (reason) => {
          this.stopNow(reason);
          env.runtime.send(self, { type: 'Stop', reason });
        },
      });
      this.keeper = k;
      this.monitor = detector.hostSingleton(msg.view.members, {
        epoch,
        leaseForMs: () => k.remainingMs(),
        onEvict: (member, evidence) => env.runtime.send(self, { type: 'Evicted', member, evidence }),
        onDepart: (member) => env.runtime.send(self, { type: 'Departed', member }),
      });
      k.start();
    }
    return { type: 'Begin', groupView: msg.view, view: this.effectiveView(msg.view), heartbeat: detector !== undefined };
  }

  /** The members the core counts, from the group's view and the detector's verdicts. */
  private effectiveView(groupView: MembershipView): MembershipView {
    return this.monitor ? { generation: groupView.generation, members: this.monitor.effective(groupView.members) } : groupView;
  }

  stopReason(): string | undefined {
    const stopped = this.role.stoppedBecause(this.epoch);
    if (stopped !== undefined) return stopped;
    if (!this.role.acting(this.epoch)) return 'another singleton acts on this node';
    if (this.keeper && this.keeper.remainingMs() <= 0)
      return `the singleton lease ran out: not renewed within ${this.env.settings.failureDetector.singletonLeaseMs} ms`;
    return undefined;
  }

  /** Throws `Fenced` (the singleton stops) when it may not act any more. */
  mustAct(what: string): void {
    const reason = this.stopReason();
    if (reason !== undefined) throw new Fenced(`${reason} (before ${what})`);
  }

  /** `withRetry` that gives up as soon as the singleton may not act: no attempt starts after its stop. */
  retrying<T>(what: string, op: () => Promise<T>): Promise<T> {
    return withRetry(this.env, what, () => {
      this.mustAct(what);
      return op();
    });
  }

  /** Runs one store write; a fencing error means another singleton took over. */
  async persist(what: string, op: () => Promise<void>): Promise<void> {
    try {
      await this.retrying(what, op);
    } catch (e) {
      if (e instanceof FencedError) throw new Fenced(e.message);
      throw e;
    }
  }

  produceEvents(m: EventsMessage): Promise<unknown> {
    // A whole map says what it is in its labels: a node that has it passes it over unread.
    const labels = m.kind === 'map-snapshot' ? snapshotLabels(m) : undefined;
    return this.env.bus.produce(this.env.topics.events, m, labels ? { labels } : {});
  }

  produceReplies(m: RepliesMessage): Promise<unknown> {
    return this.env.bus.produce(this.env.topics.replies, encodeRepliesMessage(m));
  }

  queueEvent(m: EventsMessage): undefined {
    this.sendLater(m.kind, this.produceEvents(m));
    return undefined;
  }

  queueReply(m: RepliesMessage): undefined {
    this.sendLater(m.kind, this.produceReplies(m));
    return undefined;
  }

  /**
   * Hands a record to the bus without waiting for it: a failure is logged and counted, never a
   * crash of the singleton (each record is repaired by design: see `performEffects`).
   */
  sendLater(what: string, sending: Promise<unknown>): void {
    const { env, log } = this;
    void sending.catch((e: unknown) => {
      if (!isPermanentBusFailure(e)) {
        log.warn({ event: 'bus.send-failed', err: e, what }, 'a record of the singleton was not sent; a resend, a sync or the digest repairs it');
      } else if (env.problems.note('bus.record-refused', what, `a ${what} record of the singleton cannot be sent: ${(e as Error).message}`)) {
        log.error(
          { event: 'bus.record-refused', err: e, what },
          'a record of the singleton can never be sent (too large for the bus): it is dropped, and this is said once per kind of record',
        );
      }
      env.telemetry.busError('produce');
    });
  }

  /**
   * After an effect on a large map, the rest of the step waits for a turn of the event loop. With
   * the in-memory MetaStore and bus (the embedded mode) nothing in a step yields: deciding on a
   * 65 536-shard map, storing it, encoding and handing it to the bus, and the nodes decoding it were
   * one task of about 200 ms, and every request on the process waited behind it (issue 34). A real
   * store or bus yields at each call anyway; maps of simulated worlds are far smaller.
   */
  async yieldAfterLarge(numShards: number): Promise<void> {
    if (numShards >= LARGE_MAP_SHARDS) await aTurn();
  }

  later(ms: number, fn: () => void): void {
    const cancel = this.env.clock.schedule(ms, () => {
      this.timers.delete(cancel);
      fn();
    });
    this.timers.add(cancel);
  }

  scheduleCheck(at: number): undefined {
    if (!this.checks.has(at)) {
      this.checks.add(at);
      this.later(Math.max(0, at - this.env.clock.now()), () => {
        this.checks.delete(at);
        this.env.runtime.send(this.self, { type: 'CheckCooldowns' });
      });
    }
    return undefined;
  }

  /** What the singleton decided is stored: its reads and the node's /status may show it. */
  makeReadable(core: ShardManagerState): void {
    if (this.readable === core) return;
    this.readable = core;
    this.role.show(this.epoch, core);
  }

  replyRecord(e: Extract<Effect, { type: 'Reply' }>): RepliesMessage {
    // An operator looking at the cluster sees what failed for good on the singleton's node.
    const reply = e.reply.type === 'ClusterDescription' ? { ...e.reply, problems: this.env.problems.list() } : e.reply;
    return { format: WIRE_FORMAT, kind: 'reply', epoch: this.epoch, to: e.to, reply };
  }

  /** Handed every record the inbox subscription reads, outside the mailbox. */
  onRecord(record: BusRecord): void {
    if (this.answerReadAtOnce(record)) return;
    if (this.inboxQueue.push(record) === 1) this.env.runtime.send(this.self, { type: 'Inbox' });
  }

  /**
   * Answers a read request (a map, the datasets, the node operations, the cluster's description)
   * as soon as the bus hands it over, from the last state whose writes are done: a read waited
   * behind the decision under way, seconds for a 65 536-shard setup, and every operator route with
   * it (issue 34). A read sees every change acknowledged before it was sent (a change is answered
   * only after its state is readable); it may not see a change still being decided, which has
   * answered nobody yet. Not taken from the inbox's order, it is not part of the position
   * committed: a replay after a failover answers it again, which is harmless.
   */
  private answerReadAtOnce(record: BusRecord): boolean {
    if (this.latest.phase !== 'active' || this.readable === undefined || !looksLikeRead(record.value) || this.stopReason() !== undefined) return false;
    const parsed = parseInboxMessage(record.value);
    if (!parsed.ok || parsed.value.kind !== 'request' || !isReadRequest(parsed.value.request)) return false;
    for (const e of this.manager.answer(this.readable, parsed.value.request, this.env.clock.now())) {
      if (e.type === 'Reply') this.sendLater('reply', this.produceReplies(this.replyRecord(e)));
    }
    return true;
  }

  /**
   * Commits the inbox up to what was applied. Only right after recovery and after each lease check
   * (every publish interval), never per message: a replaced singleton that resumes must not move
   * the group's position past records the new one has not applied. Replaying a few records after a
   * failover is harmless (reports are idempotent, requests are answered again).
   */
  commit(lastOffset: number): void {
    this.mustAct('committing the inbox');
    if (!this.inbox || lastOffset < 0) return;
    // Not awaited: a commit that hangs (seen for two minutes after a broker was frozen and came
    // back) must not hold the mailbox, and a failed one costs a longer replay after a failover,
    // nothing else: the next tick commits again. Crashing on it (a Kafka rebalance answers "the
    // coordinator is not aware of this member" until the consumer has rejoined) made the
    // singleton crash-loop. One at a time, unless the one on its way has hung for two ticks.
    // Its outcome updates the shell's counters directly (no message): it is no input of the step.
    const now = this.env.clock.now();
    if (this.committingSince !== undefined && now - this.committingSince < 2 * this.env.settings.publishIntervalMs) return;
    const offset = lastOffset + 1;
    const since = now;
    this.committingSince = since;
    this.inbox
      .commit(offset)
      .then(
        () => {
          if (this.commitFailures > 0)
            this.log.info(
              { event: 'inbox.commit-recovered', failures: this.commitFailures },
              `the inbox position is committed again, after ${this.commitFailures} failed commit(s)`,
            );
          this.commitFailures = 0;
        },
        (e: unknown) => {
          this.commitFailures += 1;
          const fields = { event: 'inbox.commit-failed', err: e, failures: this.commitFailures, offset };
          if (this.commitFailures === 1)
            this.log.warn(fields, 'committing the inbox position failed: the singleton goes on and commits again at its next tick');
          else this.log.debug(fields, 'committing the inbox position failed again');
        },
      )
      .finally(() => {
        if (this.committingSince === since) this.committingSince = undefined;
      });
  }

  /**
   * What stops at once, without the actor: the role's flag, grants and judging, the timers, and the
   * guardian is told (it may watch for a successor again). Called on the keeper's timer while the
   * actor may be blocked; `stopSelf` does it too, and the rest.
   */
  stopNow(reason: string): void {
    this.role.stop(this.epoch, reason);
    this.monitor?.stop();
    this.keeper?.stop();
    for (const cancel of this.timers) cancel();
    this.timers.clear();
    if (!this.stopReported) {
      this.stopReported = true;
      this.log.warn({ event: 'singleton.stopped', reason }, 'singleton stopped');
      this.callbacks.onStopped(reason);
    }
  }

  async stopSelf(reason: string): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    this.stopNow(reason);
    await this.inbox?.close().catch(() => undefined);
    this.env.runtime.stop(this.self);
  }

  /** The actor stopped: by itself (nothing more to do), or by a crash. */
  afterStop(): void {
    if (this.stopped) return;
    this.role.stop(this.epoch, 'crashed');
    this.monitor?.stop();
    this.keeper?.stop();
    for (const cancel of this.timers) cancel();
    void this.inbox?.close().catch(() => undefined);
    // A singleton that already stopped by its own clock told the guardian then: once is enough.
    if (!this.stopReported) {
      this.stopReported = true;
      this.callbacks.onStopped('crashed');
    }
  }
}
