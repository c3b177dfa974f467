// Whether the broker may have dropped this member: when its last heartbeat or join the broker
// acknowledged was sent (on the monotonic clock), and whether this process itself ran on time.

/** Watches one membership handle's liveness; the handle fences itself on what `overdue` says. */
export class LivenessWatchdog {
  /** Monotonic time (ms) when the last heartbeat or sync the broker acknowledged was sent. */
  private aliveAt = 0;
  /** Monotonic send times of the last completed request of each group API, from kafkajs's request events. */
  private readonly sentAt = new Map<string, number>();
  /** True between a rebalance notice and the join that follows it. */
  private rebalancing = false;
  /** When the JoinGroup of the current rebalance started: the broker keeps a member that is waiting in it. */
  private joinStartedAt: number | undefined;
  private tickTimer: NodeJS.Timeout | undefined;
  private lastTick = 0;

  constructor(
    private readonly sessionTimeoutMs: number,
    private readonly rebalanceTimeoutMs: number,
  ) {}

  /**
   * A response arrived (kafkajs emits its REQUEST event before it looks at it): remember when it
   * was sent, so a response that waited out a pause does not count as fresh.
   */
  responded(apiName: string, durationMs: number): void {
    if (apiName === 'Heartbeat' || apiName === 'SyncGroup') this.sentAt.set(apiName, performance.now() - durationMs);
  }

  /** The broker acknowledged a heartbeat. */
  heartbeat(): void {
    this.alive(this.sentAt.get('Heartbeat'));
  }

  /** Monotonic time (ms) when the last heartbeat or sync the broker acknowledged was sent (0 before any). */
  get acknowledgedSentAt(): number {
    return this.aliveAt;
  }

  /** The group is rebalancing: the next JoinGroup starts the broker's wait for this member. */
  rebalanceNoticed(): void {
    this.rebalancing = true;
  }

  /** A JoinGroup is about to be sent at `now`. */
  joining(now: number): void {
    if (this.rebalancing) this.joinStartedAt = now;
  }

  /** A join completed: its SyncGroup was acknowledged. */
  joined(): void {
    this.rebalancing = false;
    this.joinStartedAt = undefined;
    this.alive(this.sentAt.get('SyncGroup'));
  }

  /**
   * Why the broker may have dropped this member, or undefined while it may not. `gap` is how long
   * since the previous check ran.
   */
  overdue(now: number, gap: number): string | undefined {
    const { sessionTimeoutMs, rebalanceTimeoutMs } = this;
    if (gap >= sessionTimeoutMs) {
      return `this process did not run for ${Math.round(gap)} ms (stopped or starved), longer than the ${sessionTimeoutMs} ms session timeout`;
    }
    // A member waiting in a JoinGroup is kept by the broker until the rebalance completes (at most
    // rebalanceTimeoutMs), and then has a session timeout to sync.
    const joinGrace = this.joinStartedAt === undefined ? 0 : this.joinStartedAt + rebalanceTimeoutMs + sessionTimeoutMs;
    const deadline = Math.max(this.aliveAt + sessionTimeoutMs, joinGrace);
    if (now > deadline) {
      return `no heartbeat or join acknowledged for ${Math.round(now - this.aliveAt)} ms (session timeout ${sessionTimeoutMs} ms): the broker or the group coordinator was away, or the requests did not get through`;
    }
    return undefined;
  }

  /** Calls `check` with the time and the gap since the last tick every `sessionTimeoutMs / 4`, while `active`. */
  start(active: () => boolean, check: (now: number, gap: number) => void): void {
    const every = Math.max(10, Math.floor(this.sessionTimeoutMs / 4));
    this.lastTick = performance.now();
    const tick = (): void => {
      this.tickTimer = undefined;
      if (!active()) return;
      const now = performance.now();
      const gap = now - this.lastTick;
      this.lastTick = now;
      check(now, gap);
      if (active()) this.tickTimer = setTimeout(tick, every);
    };
    this.tickTimer = setTimeout(tick, every);
  }

  stop(): void {
    if (this.tickTimer) clearTimeout(this.tickTimer);
    this.tickTimer = undefined;
  }

  private alive(sentAt: number | undefined): void {
    const at = sentAt ?? performance.now();
    if (at > this.aliveAt) this.aliveAt = at;
  }
}
