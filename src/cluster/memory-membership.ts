import type { Incarnation, NodeId } from '../core/ids.js';
import type { Member } from '../core/shard-manager/protocol.js';
import type { Cancel, Clock } from './clock.js';
import { isMember, type JoinRequest, type Membership, type MembershipView } from './membership.js';

export interface MemoryMembershipOptions {
  /** A member whose last heartbeat is this old (or older) is removed. Must exceed `heartbeatIntervalMs`. */
  readonly sessionTimeoutMs: number;
  /** How often each joined handle heartbeats. */
  readonly heartbeatIntervalMs: number;
  /**
   * Receives what a membership listener threw. Without it the error is rethrown once every handle
   * has heard the view (so it surfaces from `join`, `leave` or the clock tick that changed the view).
   */
  readonly onListenerError?: (error: unknown) => void;
}

interface Entry {
  readonly member: Member;
  lastHeartbeat: number;
  expiry: Cancel;
}

/**
 * The group coordinator of embedded mode and of the simulator: one per cluster, shared by every
 * node's handle (`connect()`). Deterministic: time comes only from the injected clock (heartbeats,
 * session expiry), and everything else happens synchronously in the caller's turn.
 *
 * - Views list members in join order, oldest first; `joinedAt` is `clock.now()` made strictly
 *   increasing (a join in the same millisecond as the previous join is stamped 1 ms after it), so
 *   sorting by `joinedAt` — as the core does — gives the same order as the view.
 * - Every change bumps the generation by one. A join with a node id that is already a member under
 *   another incarnation (a restarted node) is two changes, two generations: first the old
 *   incarnation leaves, then the new one joins — as Akka reports a restarted node (removed, then
 *   up), so a listener that only compares node ids still sees the old incarnation go.
 * - A member is removed `sessionTimeoutMs` after its last heartbeat (not a moment before), by a
 *   clock timer due exactly then.
 * - Listeners are called synchronously, in handle-connection order, each handle's in subscription
 *   order. A change made by a listener (say, a `leave`) is queued and announced after the current
 *   view reached every handle, so every handle hears views in generation order.
 */
export class MemoryMembershipService {
  /** A member whose last heartbeat is this old is removed. */
  readonly sessionTimeoutMs: number;
  private readonly heartbeatIntervalMs: number;
  private readonly onListenerError: ((error: unknown) => void) | undefined;
  private entries: Entry[] = [];
  private generation = 0;
  private lastJoinedAt = Number.NEGATIVE_INFINITY;
  private current: MembershipView = Object.freeze({ generation: 0, members: Object.freeze([]) });
  private readonly handles: MemoryMembership[] = [];
  private readonly outbox: MembershipView[] = [];
  private announcing = false;

  constructor(
    private readonly clock: Clock,
    options: MemoryMembershipOptions,
  ) {
    const { sessionTimeoutMs, heartbeatIntervalMs } = options;
    if (!(Number.isFinite(heartbeatIntervalMs) && heartbeatIntervalMs > 0)) {
      throw new RangeError(`heartbeatIntervalMs must be a positive number, got ${heartbeatIntervalMs}`);
    }
    if (!(Number.isFinite(sessionTimeoutMs) && sessionTimeoutMs > heartbeatIntervalMs)) {
      throw new RangeError(`sessionTimeoutMs must be greater than heartbeatIntervalMs (${heartbeatIntervalMs}), got ${sessionTimeoutMs}`);
    }
    this.sessionTimeoutMs = sessionTimeoutMs;
    this.heartbeatIntervalMs = heartbeatIntervalMs;
    this.onListenerError = options.onListenerError;
  }

  /** A new node's handle. It hears every view from now on (joined or not) until it crashes or closes. */
  connect(): MemoryMembership {
    const handle = new MemoryMembership(this, this.clock, this.heartbeatIntervalMs, this.current);
    this.handles.push(handle);
    return handle;
  }

  /** The coordinator's current view (what a handle that is not paused has heard last). */
  view(): MembershipView {
    return this.current;
  }

  /** @internal A crashed or closed handle hears nothing more: forget it. */
  disconnect(handle: MemoryMembership): void {
    const i = this.handles.indexOf(handle);
    if (i >= 0) this.handles.splice(i, 1);
  }

  /** @internal Adds `request` as a member; replaces another incarnation of the same node. Returns the view with it. */
  join(request: JoinRequest): MembershipView {
    const existing = this.entries.find((e) => e.member.node === request.node);
    if (existing?.member.incarnation === request.incarnation) return this.current;
    if (existing) this.remove(existing);
    const joinedAt = Math.max(this.clock.now(), this.lastJoinedAt + 1);
    this.lastJoinedAt = joinedAt;
    const member: Member = Object.freeze({
      node: request.node,
      incarnation: request.incarnation,
      joinedAt,
      ...(request.rack === undefined ? {} : { rack: request.rack }),
      ...(request.address === undefined ? {} : { address: request.address }),
      ...(request.weight === undefined ? {} : { weight: request.weight }),
      ...(request.detector === undefined ? {} : { detector: request.detector }),
    });
    const entry: Entry = { member, lastHeartbeat: this.clock.now(), expiry: () => {} };
    this.entries.push(entry);
    this.armExpiry(entry);
    const withMember = this.change();
    this.announce();
    return withMember;
  }

  /** @internal Removes the member at once; false if it was not a member. */
  leave(node: NodeId, incarnation: Incarnation): boolean {
    const entry = this.find(node, incarnation);
    if (!entry) return false;
    this.remove(entry);
    this.announce();
    return true;
  }

  /** @internal Records a heartbeat; false if the sender is not a member (any more). */
  heartbeat(node: NodeId, incarnation: Incarnation): boolean {
    const entry = this.find(node, incarnation);
    if (!entry) return false;
    entry.lastHeartbeat = this.clock.now();
    return true;
  }

  private find(node: NodeId, incarnation: Incarnation): Entry | undefined {
    return this.entries.find((e) => e.member.node === node && e.member.incarnation === incarnation);
  }

  /**
   * One timer per member, due when its session ends if it does not heartbeat again; if it did,
   * the timer re-arms for the new end. (Comparing heartbeat times, not durations, so rounding can
   * never make a due timer re-arm itself for the same moment.)
   */
  private armExpiry(entry: Entry): void {
    const heartbeatAt = entry.lastHeartbeat;
    entry.expiry = this.clock.schedule(heartbeatAt + this.sessionTimeoutMs - this.clock.now(), () => {
      if (!this.entries.includes(entry)) return;
      if (entry.lastHeartbeat === heartbeatAt) {
        this.remove(entry);
        this.announce();
      } else {
        this.armExpiry(entry);
      }
    });
  }

  private remove(entry: Entry): void {
    entry.expiry();
    this.entries = this.entries.filter((e) => e !== entry);
    this.change();
  }

  /** Makes a new view of the current members and queues it for every handle. */
  private change(): MembershipView {
    this.generation += 1;
    this.current = Object.freeze({ generation: this.generation, members: Object.freeze(this.entries.map((e) => e.member)) });
    this.outbox.push(this.current);
    return this.current;
  }

  /** Tells every live handle each queued view in order; re-entrant calls only queue. */
  private announce(): void {
    if (this.announcing) return;
    this.announcing = true;
    const errors: unknown[] = [];
    try {
      for (let view = this.outbox.shift(); view; view = this.outbox.shift()) {
        for (const handle of this.handles) errors.push(...handle.hear(view));
      }
    } finally {
      this.announcing = false;
    }
    this.reportListenerErrors(errors);
  }

  /** @internal Hands what listeners threw to `onListenerError`, or throws it. */
  reportListenerErrors(errors: readonly unknown[]): void {
    if (errors.length === 0) return;
    if (this.onListenerError) {
      for (const e of errors) this.onListenerError(e);
      return;
    }
    throw errors.length === 1 ? errors[0] : new AggregateError(errors, `${errors.length} membership listeners threw`);
  }
}

/**
 * One node's handle on a `MemoryMembershipService`, with fault hooks for the simulator:
 * `crash()`, `pause()` and `resume()`, and `close()` for a node that stops for good.
 */
export class MemoryMembership implements Membership {
  private self: { readonly node: NodeId; readonly incarnation: Incarnation } | undefined;
  private latest: MembershipView;
  private listeners: ((view: MembershipView) => void)[] = [];
  private heartbeatTimer: Cancel | undefined;
  /** When the service last took this member's heartbeat (or join). */
  private acknowledgedAt: number | undefined;
  private crashed = false;
  private closed = false;
  private paused = false;

  /** @internal Use `MemoryMembershipService.connect()`. */
  constructor(
    private readonly service: MemoryMembershipService,
    private readonly clock: Clock,
    private readonly heartbeatIntervalMs: number,
    initial: MembershipView,
  ) {
    this.latest = initial;
  }

  /**
   * Joins as `self`. Joining again under another incarnation (after the service dropped this node,
   * say) replaces the previous one. Rejects on a crashed, closed or paused handle: that process
   * runs no code.
   */
  join(self: JoinRequest): Promise<MembershipView> {
    try {
      this.assertRunning('join');
      const previous = this.self;
      if (previous && (previous.node !== self.node || previous.incarnation !== self.incarnation)) {
        this.stopHeartbeats();
        this.self = undefined;
        this.service.leave(previous.node, previous.incarnation);
      }
      this.self = { node: self.node, incarnation: self.incarnation };
      const view = this.service.join(self);
      this.acknowledgedAt = this.clock.now();
      this.startHeartbeats();
      return Promise.resolve(view);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /** Leaves at once (no-op when not a member). The handle keeps hearing views. */
  leave(): Promise<void> {
    try {
      this.assertRunning('leave');
      const self = this.self;
      this.stopHeartbeats();
      this.self = undefined;
      this.acknowledgedAt = undefined;
      if (self) this.service.leave(self.node, self.incarnation);
      return Promise.resolve();
    } catch (error) {
      return Promise.reject(error);
    }
  }

  view(): MembershipView {
    return this.latest;
  }

  onChange(listener: (view: MembershipView) => void): () => void {
    const wrapped = (view: MembershipView): void => listener(view);
    this.listeners.push(wrapped);
    return () => {
      this.listeners = this.listeners.filter((l) => l !== wrapped);
    };
  }

  /** The process died: no more heartbeats and no more views, ever. The service notices by session timeout. */
  crash(): void {
    this.crashed = true;
    this.stopHeartbeats();
    this.service.disconnect(this);
  }

  /**
   * Graceful end of this handle (a stopped node): leaves if it is a member, then hears no more
   * views; its listeners are dropped. Idempotent. A paused handle cannot say goodbye: it is
   * dropped without leaving, like a crashed one, and the service notices by session timeout.
   */
  async close(): Promise<void> {
    if (this.closed || this.crashed) return;
    if (!this.paused) await this.leave();
    this.closed = true;
    this.stopHeartbeats();
    this.listeners = [];
    this.service.disconnect(this);
  }

  /** Like SIGSTOP: no heartbeats and no views until `resume`. */
  pause(): void {
    if (this.crashed || this.closed) return;
    this.paused = true;
    this.stopHeartbeats();
  }

  /**
   * Like SIGCONT: hears the current view at once if it missed any (it may no longer contain this
   * node), and heartbeats again right away if it is still a member.
   */
  resume(): void {
    if (this.crashed || this.closed || !this.paused) return;
    this.paused = false;
    if (this.self && this.service.heartbeat(this.self.node, this.self.incarnation)) {
      this.acknowledgedAt = this.clock.now();
      this.startHeartbeats();
    }
    this.service.reportListenerErrors(this.hear(this.service.view()));
  }

  memberForMs(): number | undefined {
    if (this.acknowledgedAt === undefined || !this.self || !isMember(this.latest, this.self.node, this.self.incarnation)) return undefined;
    return this.acknowledgedAt + this.service.sessionTimeoutMs - this.clock.now();
  }

  /** True after `crash()`. */
  get isCrashed(): boolean {
    return this.crashed;
  }

  /** True between `pause()` and `resume()`. */
  get isPaused(): boolean {
    return this.paused;
  }

  /** @internal Delivers `view` unless crashed, paused or already known; returns what listeners threw. */
  hear(view: MembershipView): unknown[] {
    if (this.crashed || this.closed || this.paused || view.generation <= this.latest.generation) return [];
    this.latest = view;
    const errors: unknown[] = [];
    for (const listener of this.listeners.slice()) {
      try {
        listener(view);
      } catch (error) {
        errors.push(error);
      }
    }
    return errors;
  }

  private assertRunning(operation: string): void {
    if (this.crashed) throw new Error(`membership ${operation} on a crashed handle`);
    if (this.closed) throw new Error(`membership ${operation} on a closed handle`);
    if (this.paused) throw new Error(`membership ${operation} on a paused handle`);
  }

  private startHeartbeats(): void {
    this.stopHeartbeats();
    const self = this.self;
    if (!self) return;
    const beat = (): void => {
      this.heartbeatTimer = undefined;
      if (this.crashed || this.closed || this.paused || this.self !== self) return;
      // A member the service no longer knows stops heartbeating; it learns why from its view.
      if (this.service.heartbeat(self.node, self.incarnation)) {
        this.acknowledgedAt = this.clock.now();
        this.heartbeatTimer = this.clock.schedule(this.heartbeatIntervalMs, beat);
      }
    };
    this.heartbeatTimer = this.clock.schedule(this.heartbeatIntervalMs, beat);
  }

  private stopHeartbeats(): void {
    this.heartbeatTimer?.();
    this.heartbeatTimer = undefined;
  }
}
