// A node's heartbeats to the singleton and the grants that answer them (docs/ARCHITECTURE.md
// §11.4): one connection to the singleton's endpoint, a heartbeat every interval (the singleton's
// interval once it said it), each grant applied to the node's lease, an `evicted` answer passed on.
import type { Cancel, Clock } from '../clock.js';
import type { DroppedFrames } from './dropped.js';
import { DETECTOR_FORMAT, memberKey, sameMember, type DetectorMessage, type MemberRef } from './messages.js';
import type { NodeLease } from './node-lease.js';
import { stallThresholdMs } from './settings.js';
import type { DetectorLink, DetectorTransport } from './transport.js';

/** Where the singleton's endpoint is. */
export interface SingletonEndpoint {
  readonly member: MemberRef;
  readonly address: string;
}

export interface HeartbeatSenderOptions {
  readonly transport: DetectorTransport;
  readonly self: MemberRef;
  readonly cluster: string;
  /** The node's clock (monotonic in a real process); heartbeats stop while the process is paused. */
  readonly clock: Clock;
  readonly heartbeatIntervalMs: number;
  readonly lease: NodeLease;
  readonly dropped: DroppedFrames;
  /** A grant renewed the lease. */
  readonly onGrant?: () => void;
  /** The singleton answered that it evicted this incarnation: the lease is gone for good. */
  readonly onEvicted: (by: MemberRef) => void;
}

/** The largest stall a heartbeat may report (the wire's bound). */
const MAX_REPORTED_STALL_MS = 3_600_000;

export class HeartbeatSender {
  private target: SingletonEndpoint | undefined;
  private link: DetectorLink | undefined;
  private timer: Cancel | undefined;
  private intervalMs: number;
  private stopped = false;
  /** Beats sent while the connection's handshake had not completed. */
  private beatsUnestablished = 0;
  /** When the next beat's timer is due: one that fires much later means this process stalled. */
  private dueAt: number | undefined;
  /**
   * A stall of this node's own event loop not yet known to have reached the singleton: reported in
   * every heartbeat from `sinceSeq` on until a grant answers one of them (§11.5).
   */
  private stall: { readonly ms: number; readonly sinceSeq: number } | undefined;

  constructor(private readonly o: HeartbeatSenderOptions) {
    this.intervalMs = o.heartbeatIntervalMs;
  }

  /** The singleton's endpoint now (or none known): a new one is sent a heartbeat at once. */
  follow(target: SingletonEndpoint | undefined): void {
    if (this.stopped) return;
    const same = target && this.target && sameMember(target.member, this.target.member) && target.address === this.target.address;
    if (same) return;
    this.link?.close();
    this.link = undefined;
    this.target = target;
    this.timer?.();
    this.timer = undefined;
    this.dueAt = undefined;
    if (target) this.beat();
  }

  /**
   * A graceful stop: the lease is given up first (nothing is written after), then the singleton is
   * told so its departure needs no wait; heartbeats stop.
   */
  goodbye(): void {
    this.o.lease.release();
    const target = this.target;
    if (target && this.link?.open)
      this.link.send({ format: DETECTOR_FORMAT, cluster: this.o.cluster, type: 'goodbye', from: this.o.self, to: target.member, seq: 0 });
    this.stop();
  }

  /** Stops sending (the connection closes; the lease runs out on its own). */
  stop(): void {
    this.stopped = true;
    this.timer?.();
    this.timer = undefined;
    this.link?.close();
    this.link = undefined;
  }

  private beat(): void {
    this.timer = undefined;
    const target = this.target;
    if (this.stopped || !target) return;
    // A handshake that has not completed in two beats went into a cut (or a dead host): dial again,
    // as a new SYN would, rather than queue behind it until it times out.
    if (this.link?.open && !this.link.established && ++this.beatsUnestablished > 2) {
      this.link.close();
      this.link = undefined;
    }
    if (!this.link?.open) {
      this.link = this.connect(target);
      this.beatsUnestablished = 0;
    }
    const now = this.o.clock.now();
    const seq = this.o.lease.send(target.member, now);
    const stalledMs = this.noteStall(now, seq);
    this.link.send({
      format: DETECTOR_FORMAT,
      cluster: this.o.cluster,
      type: 'heartbeat',
      from: this.o.self,
      to: target.member,
      seq,
      ...(stalledMs === undefined ? {} : { stalledMs }),
    });
    this.dueAt = now + this.intervalMs;
    this.timer = this.o.clock.schedule(this.intervalMs, () => this.beat());
  }

  /**
   * How late this beat's timer fired, when that means the process did not run (more than a heartbeat
   * late, as the singleton judges its own stalls): the stall to report, the largest one not yet
   * answered. The singleton does not count it as silence; the lease still runs from each
   * heartbeat's sending, so a stall never lengthens it.
   */
  private noteStall(now: number, seq: number): number | undefined {
    const lateMs = this.dueAt === undefined ? 0 : now - this.dueAt;
    if (lateMs > stallThresholdMs({ heartbeatIntervalMs: this.intervalMs })) {
      const ms = Math.min(Math.round(lateMs), MAX_REPORTED_STALL_MS);
      if (!this.stall || ms > this.stall.ms) this.stall = { ms, sinceSeq: this.stall?.sinceSeq ?? seq };
    }
    return this.stall?.ms;
  }

  private connect(target: SingletonEndpoint): DetectorLink {
    const link = this.o.transport.connect(target.address, {
      message: (m) => this.receive(m, target),
      // The next heartbeat connects again; until a grant comes, the lease runs out on its own.
      ended: () => {},
    });
    return link;
  }

  private receive(m: DetectorMessage, target: SingletonEndpoint): void {
    const from = memberKey(m.from);
    if (!sameMember(m.to, this.o.self)) {
      this.o.dropped.drop({ cause: 'wrong-addressee', detail: `${m.type} for ${memberKey(m.to)}, this is ${memberKey(this.o.self)}` }, from);
      return;
    }
    if (m.type === 'grant') {
      const dropped = this.o.lease.grant(m);
      if (dropped) {
        this.o.dropped.drop(dropped, from);
        return;
      }
      if (m.heartbeatIntervalMs !== this.intervalMs && sameMember(m.from, target.member)) this.intervalMs = m.heartbeatIntervalMs;
      // The singleton has read a heartbeat that reported the stall: it need not be said again.
      if (this.stall && m.seq >= this.stall.sinceSeq) this.stall = undefined;
      this.o.onGrant?.();
    } else if (m.type === 'evicted') {
      const dropped = this.o.lease.evicted(m);
      if (dropped) {
        this.o.dropped.drop(dropped, from);
        return;
      }
      this.stop();
      this.o.onEvicted(m.from);
    } else {
      this.o.dropped.drop({ cause: 'replayed', detail: `${m.type} ${m.seq} on the heartbeat connection` }, from);
    }
  }
}
