// One node incarnation's failure detector in `heartbeat` mode (docs/ARCHITECTURE.md §11): its
// endpoint, its probes, its lease and heartbeats to the singleton, and — while the node hosts the
// singleton — the singleton's monitor. The node process owns one per incarnation; the singleton
// actor hosts its monitor through it.
import type { Logger } from 'pino';
import type { Clock } from '../clock.js';
import type { MembershipView } from '../membership.js';
import { DroppedFrames } from './dropped.js';
import { DetectorEndpoint } from './endpoint.js';
import type { Evidence } from '../../core/failure-detection/judge.js';
import { memberKey, memberRef, sameMember, type DropCause, type MemberRef } from './messages.js';
import { HeartbeatSender, type SingletonEndpoint } from './heartbeat-sender.js';
import { isFutureEpoch, NodeLease } from './node-lease.js';
import { Prober } from './prober.js';
import { readGraceMs, type FailureDetectorSettings } from './settings.js';
import { SingletonMonitor, type DetectedMember } from './singleton-monitor.js';
import type { DetectorTransport } from './transport.js';

export interface NodeDetectorOptions {
  readonly settings: FailureDetectorSettings;
  readonly self: MemberRef;
  /** The cluster's name (topic prefix). */
  readonly cluster: string;
  /** Makes the incarnation's transport; frames it drops are counted in `dropped`. */
  readonly transport: (dropped: DroppedFrames) => DetectorTransport;
  /** Monotonic in a real process; the simulator's clock in embedded mode. */
  readonly clock: Clock;
  readonly log: Logger;
  /** A random index in `0 .. n-1`, for choosing helpers (seeded in the simulator). */
  readonly pick: (n: number) => number;
  /** For how much longer (ms) the membership surely keeps this member (see `SingletonMonitorOptions.roleForMs`). */
  readonly memberForMs?: () => number | undefined;
  /** The singleton said it evicted this incarnation: it must restart as a new one. */
  readonly onEvicted: (by: MemberRef) => void;
  /** Counts each dropped frame (the node's metrics). */
  readonly counted?: (cause: DropCause) => void;
  /** Hears every verdict of a singleton hosted here (the simulator checks them). */
  readonly observe?: (verdict: Verdict) => void;
}

/** What a singleton's monitor decided about a member: evicted it, or let its departure through. */
export interface Verdict {
  readonly kind: 'evicted' | 'departed';
  readonly singleton: MemberRef;
  readonly epoch: number;
  readonly member: MemberRef;
  readonly evidence?: Evidence;
}

/** What the singleton actor needs to host its monitor. */
export interface SingletonHooks<M extends DetectedMember> {
  readonly epoch: number;
  /** For how much longer (ms) the singleton surely holds its own lease (§11.9): no grant reaches past it. */
  readonly leaseForMs?: () => number;
  readonly onEvict: (member: M, evidence: Evidence) => void;
  readonly onDepart: (member: M) => void;
}

/** The singleton's role lasts while both its membership and its own lease surely do. */
function roleCap(memberForMs: (() => number | undefined) | undefined, leaseForMs: (() => number) | undefined): { roleForMs?: () => number | undefined } {
  if (!memberForMs && !leaseForMs) return {};
  return {
    roleForMs: () => {
      const m = memberForMs?.();
      const l = leaseForMs?.();
      if (m === undefined) return l;
      return l === undefined ? m : Math.min(m, l);
    },
  };
}

export class NodeDetector {
  readonly dropped: DroppedFrames;
  readonly lease: NodeLease;
  private readonly prober: Prober;
  private readonly endpoint: DetectorEndpoint;
  private readonly heartbeats: HeartbeatSender;
  private readonly transport: DetectorTransport;
  /** The newest singleton that announced itself (§11.9), and the members the group lists now. */
  private announced: { readonly endpoint: SingletonEndpoint; readonly epoch: number } | undefined;
  private view: MembershipView | undefined;
  /** Sink calls waiting for the lease, re-checked at every grant. */
  private waiting: { readonly epoch: () => number | undefined; readonly resolve: () => void }[] = [];

  constructor(private readonly o: NodeDetectorOptions) {
    const { self, cluster, clock, settings, log } = o;
    this.dropped = new DroppedFrames(
      (d, from) =>
        log.warn(
          { event: 'detector.dropped', cause: d.cause, detail: d.detail, from },
          `a failure detector frame was dropped (${d.cause}); later ones of this cause are only counted`,
        ),
      o.counted,
    );
    const dropped = this.dropped;
    this.lease = new NodeLease((d) => dropped.drop(d));
    const transport = o.transport(dropped);
    this.transport = transport;
    this.prober = new Prober({ transport, self, cluster, clock, settings, dropped });
    this.endpoint = new DetectorEndpoint({
      transport,
      self,
      cluster,
      prober: this.prober,
      settings,
      dropped,
      onSingleton: (m) => this.singletonAnnounced(m.from, m.epoch, m.address),
    });
    this.heartbeats = new HeartbeatSender({
      transport,
      self,
      cluster,
      clock,
      heartbeatIntervalMs: settings.heartbeatIntervalMs,
      lease: this.lease,
      dropped,
      onGrant: () => this.recheck(),
      onEvicted: (by) => {
        log.warn({ event: 'node.evicted', by: memberKey(by) }, 'the singleton evicted this incarnation: it restarts as a new one');
        o.onEvicted(by);
      },
    });
  }

  /** The detector's clock (monotonic in a real process; drifting in the simulator). */
  get clock(): Clock {
    return this.o.clock;
  }

  /** A random index in `0 .. n-1` (seeded in the simulator): a candidate's backoff jitter. */
  random(n: number): number {
    return this.o.pick(n);
  }

  /** Opens the endpoint; resolves with the address to advertise in the membership. */
  start(): Promise<string> {
    return this.endpoint.start();
  }

  get address(): string | undefined {
    return this.endpoint.address;
  }

  /**
   * A new membership view. Heartbeats go to the newest singleton that announced itself while the
   * group lists it, else to the oldest member's endpoint (where a singleton starts).
   */
  follow(view: MembershipView): void {
    this.view = view;
    this.heartbeats.follow(this.target());
  }

  private target(): SingletonEndpoint | undefined {
    const a = this.announced;
    const members = this.view?.members ?? [];
    if (a && members.some((m) => sameMember(m, a.endpoint.member))) return a.endpoint;
    const oldest = members[0];
    return oldest?.detector === undefined ? undefined : { member: memberRef(oldest), address: oldest.detector };
  }

  /** `own`: the singleton this node hosts, whose epoch came from the store's compare-and-set, not a frame. */
  private singletonAnnounced(from: MemberRef, epoch: number, address: string, own = false): void {
    if (this.announced && epoch < this.announced.epoch) {
      this.dropped.drop({ cause: 'stale-epoch', detail: `singleton of epoch ${epoch}, ${this.announced.epoch} announced before` }, memberKey(from));
      return;
    }
    const newest = Math.max(this.announced?.epoch ?? -1, this.lease.newestKnownEpoch);
    if (!own && isFutureEpoch(epoch, newest)) {
      this.dropped.drop({ cause: 'future-epoch', detail: `singleton of epoch ${epoch}, the newest seen is ${newest}` }, memberKey(from));
      return;
    }
    this.lease.sawEpoch(epoch);
    this.announced = { endpoint: { member: memberRef(from), address }, epoch };
    this.heartbeats.follow(this.target());
  }

  /**
   * Whether this node answers routed requests now: its lease runs, or lapsed less than
   * `readGraceMs` ago (a failover of the singleton must not stop every read; see `readGraceMs`).
   * Never before a first grant, nor once the lease was given up (an eviction, a graceful stop).
   */
  answersReads(): boolean {
    const s = this.lease.current;
    return s !== undefined && !this.lease.released && this.o.clock.now() < s.until + readGraceMs(this.o.settings);
  }

  /** Whether the lease runs now (and, with `epoch`, was granted under it). */
  holds(epoch?: number): boolean {
    // The epoch of a map this node follows was seen on the events topic: a grant far ahead of it is forged.
    if (epoch !== undefined) this.lease.sawEpoch(epoch);
    return this.lease.holds(this.o.clock.now(), epoch);
  }

  /**
   * Resolves as soon as the lease runs under the epoch `epoch()` names (the epoch of the map a
   * shard is ingested under): at once if it does, else at the first grant after which it does.
   * Never resolves after the lease was given up (the incarnation is ending).
   */
  whenHolding(epoch: () => number | undefined): Promise<void> {
    const e = epoch();
    if (e !== undefined && this.holds(e)) return Promise.resolve();
    return new Promise((resolve) => this.waiting.push({ epoch, resolve }));
  }

  /** Hosts the singleton's monitor for a singleton of `hooks.epoch`, started on `members`. */
  hostSingleton<M extends DetectedMember>(members: readonly M[], hooks: SingletonHooks<M>): SingletonMonitor<M> {
    const { settings, self, cluster, clock, pick } = this.o;
    const monitor = new SingletonMonitor<M>({
      settings,
      self,
      cluster,
      epoch: hooks.epoch,
      clock,
      endpoint: this.endpoint,
      prober: this.prober,
      dropped: this.dropped,
      pick,
      ...roleCap(this.o.memberForMs, hooks.leaseForMs),
      onEvict: (member, evidence) => {
        this.o.observe?.({ kind: 'evicted', singleton: self, epoch: hooks.epoch, member: memberRef(member), evidence });
        hooks.onEvict(member, evidence);
      },
      onDepart: (member) => {
        this.o.observe?.({ kind: 'departed', singleton: self, epoch: hooks.epoch, member: memberRef(member) });
        hooks.onDepart(member);
      },
    });
    monitor.start(members);
    // Its own node follows it at once: no frame to lose.
    if (this.endpoint.address !== undefined) this.singletonAnnounced(self, hooks.epoch, this.endpoint.address, true);
    return monitor;
  }

  /** A graceful stop: the lease is given up and the singleton told, before the node leaves the group. */
  goodbye(): void {
    this.heartbeats.goodbye();
    this.waiting = [];
  }

  /**
   * The process died (embedded mode's crash): its connections end at their peers as a killed
   * process's do, and connects to its endpoint are refused.
   */
  kill(): void {
    this.heartbeats.stop();
    this.lease.release();
    this.waiting = [];
    if (this.transport.kill) this.transport.kill();
    else void this.transport.close();
  }

  /** The incarnation ends: everything closes (the lease runs out on its own). */
  async close(): Promise<void> {
    this.heartbeats.stop();
    this.lease.release();
    this.waiting = [];
    this.prober.close();
    await this.transport.close();
  }

  private recheck(): void {
    if (this.waiting.length === 0) return;
    const still: typeof this.waiting = [];
    for (const w of this.waiting) {
      const e = w.epoch();
      if (e !== undefined && this.holds(e)) w.resolve();
      else still.push(w);
    }
    this.waiting = still;
  }
}
