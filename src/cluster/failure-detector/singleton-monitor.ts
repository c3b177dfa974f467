// The singleton's side of the failure detector (docs/ARCHITECTURE.md §11.4, §11.5): it answers
// heartbeats with grants (never past what its own role is sure to last), runs the judge every
// heartbeat interval, carries out the probes the judge asks for, and reports evictions and
// departures whose lease has run out. The singleton actor turns those into core inputs.
import type { Cancel, Clock } from '../clock.js';
import type { DroppedFrames } from './dropped.js';
import type { DetectorEndpoint, SingletonDesk } from './endpoint.js';
import { LivenessJudge, type Evidence } from '../../core/failure-detection/judge.js';
import { DETECTOR_FORMAT, memberKey, memberRef, sameMember, type DetectorMessage, type MemberRef } from './messages.js';
import { probeVote } from './probe-vote.js';
import type { Prober } from './prober.js';
import { DRIFT_FACTOR, type FailureDetectorSettings } from './settings.js';
import type { DetectorLink } from './transport.js';

/** A member as the singleton knows it: its detector endpoint, if it advertises one. */
export interface DetectedMember extends MemberRef {
  readonly detector?: string | undefined;
}

export interface SingletonMonitorOptions<M extends DetectedMember> {
  readonly settings: FailureDetectorSettings;
  readonly self: MemberRef;
  readonly cluster: string;
  readonly epoch: number;
  /** The node's clock (monotonic in a real process). */
  readonly clock: Clock;
  readonly endpoint: DetectorEndpoint;
  readonly prober: Prober;
  readonly dropped: DroppedFrames;
  /** A random index in `0 .. n-1`, for choosing helpers. */
  readonly pick: (n: number) => number;
  /**
   * For how much longer (ms) this node surely keeps the singleton's role: no grant reaches past it
   * (§11.9). Undefined when the membership cannot tell.
   */
  readonly roleForMs?: () => number | undefined;
  readonly onEvict: (member: M, evidence: Evidence) => void;
  readonly onDepart: (member: M) => void;
}

/** Probes of a late member are repeated every 3 heartbeat intervals (`probePeriodMs`); so is this. */
const PROBE_PERIOD_TICKS = 3;

const judged = <M extends DetectedMember>(m: M) => ({ member: m, address: m.detector });

export class SingletonMonitor<M extends DetectedMember> implements SingletonDesk {
  private readonly judge: LivenessJudge<M>;
  private timer: Cancel | undefined;
  private stopped = false;
  /** Ticks since evicted incarnations the group still lists were last told where this singleton is. */
  private ticksSinceEvictedTold = 0;
  /** Node → incarnation the group lists now: to tell an older incarnation's heartbeat from a stranger's. */
  private listed = new Map<string, string>();

  constructor(private readonly o: SingletonMonitorOptions<M>) {
    this.judge = new LivenessJudge<M>(o.settings, o.self, o.pick);
  }

  /** Starts judging the group's `members` and answering heartbeats; tells each where this singleton is. */
  start(members: readonly M[]): void {
    this.view(members);
    this.o.endpoint.host(this);
    for (const m of members) if (!sameMember(m, this.o.self)) this.announce(m);
    this.timer = this.o.clock.schedule(this.o.settings.heartbeatIntervalMs, () => this.tick());
  }

  /** The group's view changed. */
  view(members: readonly M[]): void {
    const before = this.listed;
    this.listed = new Map(members.map((m) => [m.node as string, m.incarnation as string]));
    if (!this.stopped) for (const m of members) if (before.size > 0 && before.get(m.node) !== m.incarnation) this.announce(m);
    this.judge.view(members.map(judged), this.o.clock.now());
  }

  /** The members the core should count (see `LivenessJudge.effective`). */
  effective(members: readonly M[]): M[] {
    return this.judge.effective(members);
  }

  /** Whether this singleton hears from a majority of the members now (see `LivenessJudge.hearsMajority`). */
  hearsMajority(): boolean {
    return this.judge.hearsMajority(this.o.clock.now());
  }

  /** Stops answering and judging (the singleton stopped). */
  stop(): void {
    this.stopped = true;
    this.timer?.();
    this.o.endpoint.host(undefined);
  }

  // ---------------------------------------------------------------- SingletonDesk

  heartbeat(m: Extract<DetectorMessage, { type: 'heartbeat' }>, link: DetectorLink): void {
    const { self, cluster, epoch } = this.o;
    const now = this.o.clock.now();
    if (sameMember(m.from, self)) {
      // The singleton's own node: alive as long as the singleton is; its lease is capped the same way.
      const leaseMs = this.grantable();
      if (leaseMs > 0) this.grant(link, m, leaseMs);
      return;
    }
    if (this.judge.isEvicted(m.from)) {
      this.judge.heard(m.from, now); // it still runs: part of the majority this singleton must hear
      link.send({ format: DETECTOR_FORMAT, cluster, type: 'evicted', from: self, to: m.from, seq: m.seq, epoch });
      return;
    }
    if (!this.judge.mayGrant(m.from)) {
      const listed = this.listed.get(m.from.node);
      const cause = listed !== undefined && listed !== m.from.incarnation ? 'stale-incarnation' : 'not-a-member';
      this.o.dropped.drop({ cause, detail: `heartbeat ${m.seq} from ${memberKey(m.from)}` }, memberKey(m.from));
      return;
    }
    // A stall the node reports is not counted as its silence (bounded, §11.5); its lease is not lengthened by it.
    this.judge.heard(m.from, now, m.stalledMs);
    const leaseMs = this.grantable();
    if (leaseMs <= 0) return;
    if (this.grant(link, m, leaseMs)) this.judge.granted(m.from, now);
  }

  /** Grants the heartbeat's sender a lease of `leaseMs`; whether the link took the grant. */
  private grant(link: DetectorLink, m: Extract<DetectorMessage, { type: 'heartbeat' }>, leaseMs: number): boolean {
    const { self, cluster, epoch, settings } = this.o;
    return link.send({
      format: DETECTOR_FORMAT,
      cluster,
      type: 'grant',
      from: self,
      to: m.from,
      seq: m.seq,
      epoch,
      leaseMs,
      heartbeatIntervalMs: settings.heartbeatIntervalMs,
    });
  }

  goodbye(from: MemberRef): void {
    this.judge.released(from);
  }

  linkEnded(from: MemberRef): void {
    this.judge.closed(from);
  }

  // ---------------------------------------------------------------- internals

  /** Tells `m` that this node hosts the singleton of this epoch, at this endpoint. */
  private announce(m: M): void {
    const address = this.o.endpoint.address;
    if (m.detector === undefined || address === undefined) return;
    const { cluster, self, epoch } = this.o;
    this.o.prober.tell(m.detector, (seq) => ({ format: DETECTOR_FORMAT, cluster, type: 'singleton', from: self, to: memberRef(m), seq, epoch, address }));
  }

  /** The lease a grant may carry now: `leaseMs`, less when this node's role may end sooner. */
  private grantable(): number {
    const remaining = this.o.roleForMs?.();
    if (remaining === undefined) return this.o.settings.leaseMs;
    return Math.min(this.o.settings.leaseMs, Math.floor(remaining / DRIFT_FACTOR));
  }

  private tick(): void {
    if (this.stopped) return;
    const { clock, prober, settings, self, epoch } = this.o;
    for (const action of this.judge.tick(clock.now())) {
      switch (action.type) {
        case 'probe':
          // A late member may be sending its heartbeats to a former singleton: tell it again.
          this.announce(action.target);
          void prober.probe(action.address, action.target).then((outcome) => {
            if (this.stopped) return;
            if (outcome.kind === 'acked') this.judge.heard(action.target, clock.now());
            this.judge.vote(self, action.target, action.round, probeVote(outcome, settings));
          });
          break;
        case 'ask':
          void prober.ask(action.helperAddress, action.helper, action.target, action.address, epoch).then((vote) => {
            if (!this.stopped && vote !== undefined) this.judge.vote(action.helper, action.target, action.round, vote);
          });
          break;
        case 'evict':
          this.o.onEvict(action.target, action.evidence);
          break;
        case 'depart':
          this.o.onDepart(action.target);
          break;
      }
    }
    // An evicted incarnation that still runs learns it from the answer to a heartbeat: if it missed
    // this singleton's announcement (it was cut off then), it sends them elsewhere.
    if (++this.ticksSinceEvictedTold >= PROBE_PERIOD_TICKS) {
      this.ticksSinceEvictedTold = 0;
      for (const m of this.judge.evictedListed) this.announce(m);
    }
    this.timer = clock.schedule(settings.heartbeatIntervalMs, () => this.tick());
  }
}
