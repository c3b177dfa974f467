// The guardian's shell: it spawns the actor, holds what has a life of its own (the coordinator and
// reporter it supervises, the followed maps, the singleton it hosts, the lease watch, the timers'
// handles), steps each message (`guardianStep`) and performs the effects (`performGuardianEffect`).
import type { Cancel } from '../../cluster/clock.js';
import { isMember } from '../../cluster/membership.js';
import { LeaseWatch, StandBackoff } from '../../cluster/failure-detector/succession.js';
import type { Epoch } from '../../core/ids.js';
import type { FollowedMaps } from '../../protocol/followed-maps.js';
import { encodeInboxMessage, WIRE_FORMAT, type InboxMessage, type Request } from '../../protocol/wire.js';
import type { ClusterMsg } from '../node-cluster-actor.js';
import { spawnNodeCoordinator, type CoordinatorMsg } from '../node-coordinator.js';
import type { NodeEnv } from '../node-env.js';
import type { NodeHub } from '../node-hub.js';
import { stepNow } from '../reducer.js';
import { startLoadReports } from '../load-reporter.js';
import { spawnReporter, type Reporter } from '../reporter.js';
import type { ActorRef } from '../runtime.js';
import type { GuardianEffect, GuardianInput, GuardianMsg } from './effects.js';
import { followedMaps } from './followed.js';
import type { GuardianOutside } from './outside.js';
import { performGuardianEffect } from './perform.js';
import { guardianConfig, initialGuardianState, type GuardianState } from './state.js';
import { guardianStep } from './step.js';

export interface GuardianCallbacks {
  /** The node learned it is no longer a member: it must rejoin as a new incarnation. */
  readonly onFenced: (reason: string) => void;
  /** The singleton drained this node: it holds no copy and may stop. */
  readonly onReleased: () => void;
}

/** What the guardian's effects are performed with. */
export class GuardianShell {
  /** The step's state as of the effect being performed (read by the outlook between steps). */
  state: GuardianState;
  readonly reporter: Reporter;
  readonly coordinator: ActorRef<CoordinatorMsg>;
  readonly maps: FollowedMaps;
  readonly timers: { sync?: Cancel | undefined; watch?: Cancel | undefined; loads?: Cancel | undefined } = {};
  /** This node's singleton, if it spawned one. */
  singleton: { readonly ref: ActorRef<ClusterMsg>; readonly epoch: Epoch } | undefined;
  /** Heartbeat mode: the lease as this node watches it. */
  readonly leaseWatch: LeaseWatch | undefined;
  /** Heartbeat mode: after a lost race for the lease, or a lost lease, no standing before this has passed. */
  readonly standBackoff = new StandBackoff();
  readonly request: (r: Request) => Promise<unknown>;
  readonly toInbox: (m: InboxMessage) => Promise<unknown>;

  constructor(
    readonly env: NodeEnv,
    readonly hub: NodeHub,
    readonly callbacks: GuardianCallbacks,
    readonly self: ActorRef<GuardianMsg>,
    outside: GuardianOutside | undefined,
  ) {
    const fd = env.settings.failureDetector;
    const config = guardianConfig(env.node, env.incarnation, env.detector !== undefined, {
      retryInitialMs: env.settings.retryInitialMs,
      retryMaxMs: env.settings.retryMaxMs,
      heartbeatIntervalMs: fd.heartbeatIntervalMs,
      singletonLeaseMs: fd.singletonLeaseMs,
    });
    this.state = initialGuardianState(config);
    this.toInbox = (m) => env.bus.produce(env.topics.inbox, encodeInboxMessage(m));
    this.request = (r) => this.toInbox({ format: WIRE_FORMAT, kind: 'request', request: r });
    // Children need the guardian's ref, so they are made with the first message.
    this.reporter = spawnReporter(env, self);
    this.coordinator = spawnNodeCoordinator(env, self, this.reporter);
    this.maps = followedMaps({
      env,
      hub,
      self,
      coordinator: this.coordinator,
      guardianId: config.guardianId,
      hostPrefix: config.hostPrefix,
      request: this.request,
      timers: this.timers,
    });
    this.leaseWatch = env.detector ? new LeaseWatch(fd) : undefined;
    this.timers.loads = startLoadReports(env, () => this.maps.configs, this.toInbox);
    outside?.outlook.attach(() => ({ maxEpoch: this.state.maxEpoch, maps: this.maps, singletonEpoch: this.state.singleton?.epoch }));
  }

  /**
   * Steps `msg` and performs its effects; the state is kept as it is after each effect performed,
   * should one fail. A promise only when an effect is awaited: a message whose effects all run at
   * once is handled within the turn it came in, as the guardian always handled it.
   */
  handle(msg: GuardianInput): Promise<void> | undefined {
    const box = { state: this.state };
    const pending = stepNow(box, msg, guardianStep, this.perform, () => this.env.clock.now());
    if (pending === undefined) this.state = box.state;
    return pending?.then(() => void (this.state = box.state));
  }

  private readonly perform = (effect: GuardianEffect, state: GuardianState) => {
    this.state = state;
    return performGuardianEffect(this, effect);
  };

  stopped(): void {
    this.timers.sync?.();
    this.timers.watch?.();
    this.timers.loads?.();
  }
}

export function spawnGuardian(env: NodeEnv, hub: NodeHub, callbacks: GuardianCallbacks, outside?: GuardianOutside): ActorRef<GuardianMsg> {
  return env.runtime.spawn<GuardianShell | undefined, GuardianMsg>(
    env.runtime.system,
    'guardian',
    async (s0, msg, ctx) => {
      const shell = s0 ?? new GuardianShell(env, hub, callbacks, ctx.self, outside);
      // Awaited only when an effect is: a message handled at once ends within its turn.
      if (msg.type === 'View') {
        const pending = shell.handle({ ...msg, member: isMember(msg.view, env.node, env.incarnation) });
        if (pending) await pending;
      } else if (msg.type !== 'Events') {
        const pending = shell.handle(msg);
        if (pending) await pending;
      } else {
        try {
          const pending = shell.handle(msg);
          if (pending) await pending;
        } finally {
          outside?.skip.taken();
        }
      }
      return shell;
    },
    { initialState: undefined, onCrash: 'resume', afterStop: (shell) => shell?.stopped() },
  );
}
