// The failure detector's side of the simulation (docs/ARCHITECTURE.md §11): the ground truth the
// detector can only guess at — which node was paused or dead when, which link was cut in which
// direction — the faults of its network (loss and delay per message, one-way cuts), each node's
// drifting clock, and the invariants that judge the detector's verdicts against that truth:
//
// - I10 no false eviction: a live node is evicted only if, within the suspicion timeout before,
//   a majority of the others could not reach it for at least a second (the pauses it must survive);
// - I11 never two lease holders of an RF-1 shard: an incarnation the singleton took out (evicted,
//   or its departure let through once its lease ran out) writes nothing after, so its last write
//   precedes the first of whoever gets its shards;
// - I12 every dead node evicted within the bound: a crashed node leaves the singleton's view within
//   the wait of a silent one (a refused port is no proof) and three rounds of probes, counted from
//   the end of its join grace if it crashed during it, when nothing else disturbed the cluster;
//   each ping-req or vote about it that the network lost adds a quorum silence and a round (the
//   helper's run of failures starts over: it may have reached the node meanwhile, for I10).
import type { SimulatedClock } from '../cluster/clock.js';
import type { MemoryDetectorNetworkOptions } from '../cluster/failure-detector/memory-transport.js';
import type { Verdict } from '../cluster/failure-detector/node-detector.js';
import { lateAfterMs, leaseWaitMs, probePeriodMs, quorumSilenceMs, type FailureDetectorSettings } from '../cluster/failure-detector/settings.js';
import { SHORTEST_SILENCE } from '../core/failure-detection/suspicion.js';
import { MAX_CLOCK_DRIFT } from '../cluster/failure-detector/settings.js';
import { DriftingClock } from './drifting-clock.js';
import { SeededRandom } from './random.js';

export type DetectorInvariant = 'I10' | 'I11' | 'I12';

export interface DetectorViolation {
  readonly invariant: DetectorInvariant;
  readonly message: string;
}

/** The pause a node must survive without eviction (the issue's target: pauses up to 1 s). */
export const TOLERATED_PAUSE_MS = 1_000;

interface Interval {
  readonly from: number;
  readonly to: number;
}

interface Crash {
  readonly key: string;
  readonly node: string;
  readonly at: number;
  /** When its eviction's bound starts: the crash, or the end of its join grace if it crashed during it. */
  readonly judgedFrom: number;
  /** The other members running when it crashed (the votes its eviction can have, the singleton's own included). */
  readonly liveOthers: number;
  removedAt: number | undefined;
  reported: boolean;
}

const overlaps = (i: Interval, from: number, to: number) => i.from < to && i.to > from;
const inside = (i: Interval, t: number) => i.from <= t && t < i.to;

export class DetectorWorld {
  /** Message faults apply while true (the fault steps), as the bus's do. */
  lossy = false;
  private readonly linkRng: SeededRandom;
  private readonly pickRng: SeededRandom;
  private readonly driftRng: SeededRandom;
  private readonly clocks = new Map<string, DriftingClock>();
  /** Directed cuts between nodes (by name): nothing from `from` reaches `to` during `interval`. */
  private readonly cuts: { readonly from: string; readonly to: string; readonly interval: Interval }[] = [];
  /** Refusals and resets from live processes (`refusing`): unreachable time for I10 only. */
  private readonly refusals: { readonly from: string; readonly to: string; readonly interval: Interval }[] = [];
  /** When each node was paused or dead (by name). */
  private readonly down = new Map<string, Interval[]>();
  /** When the singleton of which epoch took each incarnation (`node@incarnation`) out (the first time). */
  private readonly removed = new Map<string, { readonly at: number; readonly epoch: number }>();
  /** Incarnations that have ended (crashed, stopped, restarted), and when. */
  private readonly ended = new Map<string, number>();
  private readonly crashes: Crash[] = [];
  /** When each node's current incarnation started (by name): its join grace runs from about then. */
  private readonly startedAt = new Map<string, number>();
  /** When faults happened that may rightly slow an eviction down (I12 does not judge across them). */
  private readonly disturbances: number[] = [];
  /**
   * When the network lost a ping-req or a vote about each incarnation (`node@incarnation`): the
   * helper's run of failures starts over (the judge's rule for I10), so each costs its eviction a
   * quorum silence and a round.
   */
  private readonly lostVotes = new Map<string, number[]>();
  readonly stats = { evictions: 0, departures: 0, cuts: 0 };

  constructor(
    private readonly clock: SimulatedClock,
    seed: number,
    readonly settings: FailureDetectorSettings,
    /** How long the cluster may go without a singleton after the singleton's node dies (the membership's session and a recovery). */
    private readonly singletonGoneMs: number,
    /** How long the group lists a crashed incarnation (its session): the detector counts it for majorities until then, evicted or not. */
    private readonly groupSessionMs: number,
  ) {
    this.linkRng = new SeededRandom(seed ^ 0x11ce);
    this.pickRng = new SeededRandom(seed ^ 0x91c4);
    this.driftRng = new SeededRandom(seed ^ 0xd21f);
  }

  // ---------------------------------------------------------------- what the cluster runs on

  /** The detector network's faults: loss and delay per message while lossy, and the cuts. */
  networkOptions(nodeOf: (address: string) => string | undefined): MemoryDetectorNetworkOptions {
    return {
      faults: (_from, _to, message) => {
        if (!this.lossy) return { kind: 'deliver' };
        const r = this.linkRng.int(0, 999);
        if (r < 20) {
          if (message.type === 'ping-req' || message.type === 'vote') this.lostVote(`${message.target.node}@${message.target.incarnation}`);
          return { kind: 'drop' }; // 2 %
        }
        if (r < 120) return { kind: 'delay', ms: this.linkRng.int(5, 60) };
        return { kind: 'deliver' };
      },
      reachable: (fromAddress, toAddress) => {
        const from = nodeOf(fromAddress);
        const to = nodeOf(toAddress);
        return from === undefined || to === undefined || !this.isCut(from, to, this.clock.now());
      },
    };
  }

  /** A node's clock: its own rate within the drift bound, the same for every incarnation (its machine's). */
  clockOf(node: string): DriftingClock {
    let c = this.clocks.get(node);
    if (!c) {
      const rate = 1 + (this.driftRng.int(-1000, 1000) / 1000) * MAX_CLOCK_DRIFT;
      c = new DriftingClock(this.clock, rate);
      this.clocks.set(node, c);
    }
    return c;
  }

  /** The helpers' random choice, seeded. */
  pick(n: number): number {
    return this.pickRng.int(0, n - 1);
  }

  // ---------------------------------------------------------------- the fault schedule as it ran

  /**
   * For `ms`, `to`'s endpoint refuses `from`'s connects and resets them (a live process, both run):
   * nothing `from` sends reaches `to` on the detector, though the network delivers. For I10 it is
   * unreachable time as a cut is (a node whose heartbeats are refused is silent); it is no cut for
   * the network, which `LinkResets` shapes. Windows are at most 1 s, under the 1 s of unreachable
   * time an eviction needs to be no false one, so a refusal alone still never excuses an eviction.
   */
  refusing(from: string, to: string, ms: number): void {
    const now = this.clock.now();
    this.refusals.push({ from, to, interval: { from: now, to: now + ms } });
  }

  /** Nothing from `from` reaches `to` for `ms` (one direction). */
  cut(from: string, to: string, ms: number): void {
    const now = this.clock.now();
    this.cuts.push({ from, to, interval: { from: now, to: now + ms } });
    this.stats.cuts += 1;
    this.disturbed(ms);
  }

  /** `node` is paused (SIGSTOP) for `ms`. */
  paused(node: string, ms: number): void {
    this.downFor(node, { from: this.clock.now(), to: this.clock.now() + ms });
    this.disturbed(ms);
  }

  /** Incarnation `key` of `node` died now; `singleton`: it hosted the singleton. */
  crashed(node: string, key: string, singleton: boolean, liveOthers: number): void {
    const now = this.clock.now();
    this.ended.set(key, now);
    this.downFor(node, { from: now, to: Number.POSITIVE_INFINITY });
    // Without a singleton nobody evicts: until the membership has replaced it, crashes are not judged.
    if (singleton) this.disturbed(this.singletonGoneMs);
    else this.crashes.push({ key, node, at: now, judgedFrom: Math.max(now, this.graceEndOf(node)), liveOthers, removedAt: undefined, reported: false });
  }

  /**
   * When the join grace of `node`'s current incarnation surely ended: the singleton lists it a
   * little after it started (the membership's propagation), so a suspicion timeout is added.
   */
  private graceEndOf(node: string): number {
    const started = this.startedAt.get(node);
    if (started === undefined || this.settings.joinGraceMs === 0) return Number.NEGATIVE_INFINITY;
    return started + this.settings.joinGraceMs + this.settings.suspicionTimeoutMs;
  }

  /** A new incarnation of `node` started: the node is up again. */
  started(node: string): void {
    const now = this.clock.now();
    this.startedAt.set(node, now);
    const intervals = this.down.get(node) ?? [];
    this.down.set(
      node,
      intervals.map((i) => (i.to === Number.POSITIVE_INFINITY ? { from: i.from, to: now } : i)),
    );
    this.disturbed(0);
  }

  /**
   * The singleton's host stopped gracefully and is handing the role over: like a singleton's crash,
   * nobody evicts until the successor has taken over and judged the members afresh.
   */
  handingOver(): void {
    this.disturbed(this.singletonGoneMs);
  }

  /** A node joined for the first time (a spare added by a replacement): its join grace starts. */
  joined(node: string): void {
    this.startedAt.set(node, this.clock.now());
  }

  /** Incarnation `key` ended without a crash (a graceful stop, a restart as a new incarnation). */
  stopped(key: string): void {
    if (!this.ended.has(key)) this.ended.set(key, this.clock.now());
  }

  /** Another kind of fault that may slow the detector (a singleton crash, a node operation). */
  disturbed(lastsMs: number): void {
    const now = this.clock.now();
    this.disturbances.push(now, now + lastsMs);
  }

  // ---------------------------------------------------------------- the invariants

  /**
   * A singleton's verdict, with the group's members at that moment (node names): I10 for an
   * eviction; both kinds start I11's watch of the incarnation and settle I12's wait for it.
   */
  verdict(v: Verdict, members: readonly string[]): DetectorViolation[] {
    const now = this.clock.now();
    const key = `${v.member.node}@${v.member.incarnation}`;
    if (!this.removed.has(key)) this.removed.set(key, { at: now, epoch: v.epoch });
    for (const c of this.crashes) if (c.key === key && c.removedAt === undefined) c.removedAt = now;
    if (v.kind === 'departed') {
      this.stats.departures += 1;
      return [];
    }
    this.stats.evictions += 1;
    const ended = this.ended.get(key);
    if (ended !== undefined && ended <= now) return []; // a dead incarnation is always rightly evicted
    const observers = members.filter((m) => m !== v.member.node);
    const unreachable = this.longestUnreachable(v.member.node, observers, now - this.settings.suspicionTimeoutMs, now);
    if (unreachable >= TOLERATED_PAUSE_MS) return [];
    const why = v.evidence ? ` (silent ${Math.round(v.evidence.silentMs)} ms, votes ${v.evidence.votes.map((x) => `${x.observer}:${x.vote}`).join(' ')})` : '';
    return [
      {
        invariant: 'I10',
        message: `${key} was evicted by ${v.singleton.node} though a majority of ${observers.join(',')} could reach it all but ${Math.round(unreachable)} ms of the last ${this.settings.suspicionTimeoutMs} ms${why}`,
      },
    ];
  }

  /** Whether a singleton took incarnation `key` out (evicted it, or let its departure through). */
  wasRemoved(key: string): boolean {
    return this.removed.has(key);
  }

  /**
   * A write by incarnation `key` under a lease of `leaseEpoch`: I11. A later singleton, which never
   * heard of an eviction, may take the incarnation back (it then writes only under that singleton's
   * epoch and maps); a write under the epoch that took it out, or an older one, breaks the lease.
   */
  wrote(key: string, leaseEpoch: number | undefined, what: string): DetectorViolation[] {
    const removed = this.removed.get(key);
    if (removed === undefined || this.clock.now() < removed.at) return [];
    if (leaseEpoch !== undefined && leaseEpoch > removed.epoch) return [];
    return [
      {
        invariant: 'I11',
        message: `${key} wrote ${what} at ${this.clock.now()} ms under a lease of epoch ${leaseEpoch ?? 'none'}, after the singleton of epoch ${removed.epoch} took it out at ${removed.at} ms (its lease had run out)`,
      },
    ];
  }

  /**
   * I11 on the singleton's side: the core of the singleton of `epoch` never counts again an
   * incarnation that singleton took out (it would give it shards while it holds no lease). Only
   * verdicts before `askedAt`, when the core's state was asked for, count: the singleton applies a
   * verdict after it was given, and a question already in its mailbox is answered first.
   */
  readmitted(epoch: number, members: readonly { readonly node: string; readonly incarnation: string }[], askedAt: number): DetectorViolation[] {
    return members
      .filter((m) => {
        const removed = this.removed.get(`${m.node}@${m.incarnation}`);
        return removed?.epoch === epoch && removed.at < askedAt;
      })
      .map((m) => ({
        invariant: 'I11' as const,
        message: `the singleton of epoch ${epoch} counts ${m.node}@${m.incarnation} as a member again after it took it out`,
      }));
  }

  /** I12, for every crash whose bound has passed: the dead node must be out of the singleton's view. */
  overdueEvictions(): DetectorViolation[] {
    const now = this.clock.now();
    const out: DetectorViolation[] = [];
    for (const c of this.crashes) {
      if (c.reported) continue;
      const bound = this.boundOf(c);
      if (now < c.judgedFrom + bound) continue;
      const late = c.removedAt === undefined || c.removedAt > c.judgedFrom + bound;
      if (!late || this.disturbedBetween(c.at - this.settings.suspicionTimeoutMs, c.judgedFrom + bound, c.at) || !this.majorityLived(c, c.judgedFrom + bound))
        continue;
      c.reported = true;
      out.push({
        invariant: 'I12',
        message: `${c.key} crashed at ${c.at} ms and was ${c.removedAt === undefined ? 'still not' : `only at ${c.removedAt} ms`} taken out of the singleton's view (the bound is ${bound} ms)`,
      });
    }
    return out;
  }

  /**
   * How soon a crashed node must be out: as a silent one (its refused port is no proof), the later
   * of ¾ of the suspicion timeout and the majority's failures lasting their time from the first
   * round of probes, and its last lease surely run out (stretched by the drift bound); then three
   * rounds of probes, and two ticks. With no message about it lost: `boundOf` adds what losses cost.
   */
  evictionBoundMs(): number {
    const s = this.settings;
    const silent = Math.max(Math.ceil(s.suspicionTimeoutMs * SHORTEST_SILENCE), lateAfterMs(s) + quorumSilenceMs(s), leaseWaitMs(s));
    return Math.ceil((silent + 3 * probePeriodMs(s) + 2 * s.heartbeatIntervalMs) * (1 + MAX_CLOCK_DRIFT));
  }

  /**
   * The bound for `c`: `evictionBoundMs`, and a quorum silence and a round more for each ping-req
   * or vote about it that the network lost before its eviction was due (each lengthens the time it
   * is due, so this counts until no more fall inside).
   */
  private boundOf(c: Crash): number {
    const lost = this.lostVotes.get(c.key) ?? [];
    const base = this.evictionBoundMs();
    const perLoss = Math.ceil((quorumSilenceMs(this.settings) + probePeriodMs(this.settings)) * (1 + MAX_CLOCK_DRIFT));
    let bound = base;
    for (;;) {
      const counted = lost.filter((t) => t >= c.at && t <= c.judgedFrom + bound).length;
      const next = base + counted * perLoss;
      if (next === bound) return bound;
      bound = next;
    }
  }

  private lostVote(key: string): void {
    const list = this.lostVotes.get(key) ?? [];
    list.push(this.clock.now());
    this.lostVotes.set(key, list);
  }

  /**
   * Whether a strict majority of the members that counted when `c` crashed stayed alive to vote
   * until `until`: an eviction needs a majority's votes (the singleton's own alone never does it),
   * so with the dead still counted as members (crashed earlier, and listed by the group until its
   * session for them ends, evicted or not) or crashing meanwhile, nobody can evict within the
   * bound, by design.
   */
  private majorityLived(c: Crash, until: number): boolean {
    const deadBefore = this.crashes.filter((o) => o !== c && o.at <= c.at && o.at + this.groupSessionMs > c.at).length;
    const diedSince = this.crashes.filter((o) => o.at > c.at && o.at < until).length;
    const counted = c.liveOthers + 1 + deadBefore;
    return c.liveOthers - diedSince >= Math.floor(counted / 2) + 1;
  }

  /** Whether `node` was paused, stalled or dead at some moment of `from .. to` (both included). */
  stoppedDuring(node: string, from: number, to: number): boolean {
    return (this.down.get(node) ?? []).some((i) => i.from <= to && i.to > from);
  }

  // ---------------------------------------------------------------- internals

  private isCut(from: string, to: string, t: number): boolean {
    return this.cuts.some((c) => c.from === from && c.to === to && inside(c.interval, t));
  }

  private isDown(node: string, t: number): boolean {
    return (this.down.get(node) ?? []).some((i) => inside(i, t));
  }

  private downFor(node: string, interval: Interval): void {
    const list = this.down.get(node) ?? [];
    list.push(interval);
    this.down.set(node, list);
  }

  /** Whether a disturbance other than one at `except` happened in `from .. to`. */
  private disturbedBetween(from: number, to: number, except: number): boolean {
    for (let i = 0; i < this.disturbances.length; i += 2) {
      const start = this.disturbances[i]!;
      const end = this.disturbances[i + 1]!;
      if (start === except && end === except) continue;
      if (start < to && end >= from) return true;
    }
    return this.crashes.some((c) => c.at !== except && c.at >= from && c.at < to);
  }

  /**
   * The longest stretch of `from .. to` during which `node` could not be reached by a strict
   * majority of `observers`: it was down, or too many of them were down or cut from it (either way).
   */
  private longestUnreachable(node: string, observers: readonly string[], from: number, to: number): number {
    const points = new Set<number>([from, to]);
    const add = (i: Interval) => {
      if (i.from > from && i.from < to) points.add(i.from);
      if (i.to > from && i.to < to) points.add(i.to);
    };
    for (const n of [node, ...observers]) for (const i of this.down.get(n) ?? []) if (overlaps(i, from, to)) add(i);
    for (const c of [...this.cuts, ...this.refusals]) if ((c.from === node || c.to === node) && overlaps(c.interval, from, to)) add(c.interval);
    const sorted = [...points].sort((a, b) => a - b);
    let longest = 0;
    let run = 0;
    let gap = 0;
    for (let k = 0; k + 1 < sorted.length; k++) {
      const a = sorted[k]!;
      const b = sorted[k + 1]!;
      const mid = (a + b) / 2;
      const blocked = (a: string, b: string) => this.isCut(a, b, mid) || this.refusals.some((r) => r.from === a && r.to === b && inside(r.interval, mid));
      const reachedBy = this.isDown(node, mid) ? 0 : observers.filter((o) => !this.isDown(o, mid) && !blocked(node, o) && !blocked(o, node)).length;
      // A moment of reach shorter than a probe period does not end the run (a refusal window ending
      // 10 ms before a pause, say): the helpers vote on probes, one per probe period, and a moment
      // between two of them shows nobody that the node is back (seed 19010: 193 ms of reach
      // between 807 ms of resets and a stall, the singleton's own link still cut one way).
      if (reachedBy * 2 > observers.length) {
        gap += b - a;
        if (gap >= Math.max(this.settings.heartbeatIntervalMs, probePeriodMs(this.settings))) run = 0;
      } else {
        run += b - a;
        gap = 0;
      }
      longest = Math.max(longest, run);
    }
    return longest;
  }
}
