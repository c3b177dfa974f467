// The singleton's judgement of its members (docs/ARCHITECTURE.md §11.5): who is late, whom to probe
// and whom to ask, which votes count, when a node is evicted, and when a departure may reach the
// core (once the departed node's lease has run out). Pure and deterministic: time comes in as
// `now` (a monotonic clock), randomness as `pick`; the caller does the I/O its actions ask for.
import { memberKey, sameMember, type MemberRef, type Vote } from './member-ref.js';
import { lateAfterMs, leaseWaitMs, probePeriodMs, quorumSilenceMs, stallCreditMs, stallThresholdMs, type FailureDetectorSettings } from './timing.js';
import { quorum, SHORTEST_SILENCE, silenceNeededMs } from './suspicion.js';

/** A member of the group's view as the judge sees it: its detector endpoint, if it has one. */
export interface JudgedMember<M extends MemberRef> {
  readonly member: M;
  /** Its detector endpoint; a member without one is not monitored (§11.2). */
  readonly address: string | undefined;
}

/** What the evicting singleton knew: for the log. */
export interface Evidence {
  readonly silentMs: number;
  readonly quorum: number;
  readonly votes: readonly { readonly observer: string; readonly vote: Vote }[];
  /**
   * A `refused` vote was among the failures: its endpoint refused or closed probes. A hint, never
   * proof that its process is gone (a middlebox, a restarted listener or a full accept queue answer
   * the same way): it only shortened the silence needed to ¾ of the timeout.
   */
  readonly refused: boolean;
  /** How long the silence had to be: the whole timeout, less with confirmations, ¾ of it at least. */
  readonly neededMs: number;
}

export type JudgeAction<M extends MemberRef> =
  /** Probe `target` directly; report what was seen with `vote(self, target, round, …)`. */
  | { readonly type: 'probe'; readonly target: M; readonly address: string; readonly round: number }
  /** Ask `helper` to probe `target` (a `ping-req`); its answer is a vote for `round`. */
  | { readonly type: 'ask'; readonly helper: M; readonly helperAddress: string; readonly target: M; readonly address: string; readonly round: number }
  /** `target` is evicted: its lease has run out; give the core its `MemberDown`. */
  | { readonly type: 'evict'; readonly target: M; readonly evidence: Evidence }
  /** `target` left the group and its lease has run out (or it said goodbye): the core may hear of it now. */
  | { readonly type: 'depart'; readonly target: M };

interface Suspicion<M extends MemberRef> {
  round: number;
  roundAt: number;
  /** When each recent round of this suspicion started (its rounds, oldest first): a vote of another round is not of this suspicion, or stale. */
  readonly roundTimes: Map<number, number>;
  helpers: JudgedMember<M>[];
  /** Everyone asked during this suspicion: only their votes count. */
  readonly asked: Set<string>;
  /**
   * The latest vote of each observer (the singleton's own included), with its round and, while its
   * votes fail, when the first round of that unbroken run of failures started.
   */
  readonly votes: Map<string, { readonly vote: Vote; readonly round: number; readonly failingSince: number | undefined }>;
}

interface Tracked<M extends MemberRef> {
  judged: JudgedMember<M>;
  lastHeard: number;
  /**
   * Its silence counts from here at the earliest: a stall it reported (§11.5) excuses that much
   * silence after the heartbeat that said it, at most a suspicion timeout per claim.
   */
  excusedUntil: number;
  lastGrant: number;
  /** Until then it is in its join grace: still starting, it is not evicted on silence. */
  graceUntil: number;
  /** Its connection to the singleton closed since it was last heard: late at once (probed sooner), no more. */
  closed: boolean;
  /** It said goodbye: no more grants, and its departure needs no wait. */
  released: boolean;
  suspicion: Suspicion<M> | undefined;
}

const failing = (v: Vote): boolean => v === 'silent' || v === 'refused';

/** Rounds of a suspicion remembered; votes of older ones are stale anyway. */
const RECENT_ROUNDS = 16;

/** The round of suspicion `s` before `round` (rounds are numbered across every suspicion). */
function previousRound(s: { readonly roundTimes: ReadonlyMap<number, number> }, round: number): number | undefined {
  let previous: number | undefined;
  for (const r of s.roundTimes.keys()) if (r < round && (previous === undefined || r > previous)) previous = r;
  return previous;
}

export class LivenessJudge<M extends MemberRef> {
  private readonly self: MemberRef;
  private readonly selfKey: string;
  /** Monitored members of the group's view, other than the singleton's own. */
  private readonly tracked = new Map<string, Tracked<M>>();
  /** Gone from the group's view, lease still running: the core still counts them. */
  private readonly departing = new Map<string, Tracked<M>>();
  /**
   * Evicted incarnations the group may still list: left out of every view. Every one of them may
   * still run (cut off, paused, or behind a middlebox that resets its connections) until it hears of
   * it: it stays part of the cluster whose majority an eviction needs, or a singleton that evicted the
   * nodes it could not reach would go on to evict the rest on its own vote (§11.5). Only the group
   * dropping it shrinks the cluster: no refusal or closed connection does (a reset proves nothing).
   */
  private readonly evicted = new Map<string, { readonly member: M; lastHeard: number }>();
  /** The first view is the takeover's: those members were judged by the predecessor, they get no join grace. */
  private viewed = false;
  private lastTick: number | undefined;
  /** After a stall of its own, the singleton judges nobody until then. */
  private quietUntil = Number.NEGATIVE_INFINITY;
  private rounds = 0;

  constructor(
    private readonly settings: FailureDetectorSettings,
    self: MemberRef,
    /** A random index in `0 .. n-1` (seeded in the simulator). */
    private readonly pick: (n: number) => number,
  ) {
    this.self = { node: self.node, incarnation: self.incarnation };
    this.selfKey = memberKey(self);
  }

  /**
   * The group's view now. New monitored members count as granted a lease `now` (a new singleton
   * does not know its predecessor's grants, §11.7); members that left start departing; evicted ones
   * the group no longer lists are forgotten.
   */
  view(members: readonly JudgedMember<M>[], now: number): void {
    const listed = new Set<string>();
    for (const j of members) {
      const key = memberKey(j.member);
      listed.add(key);
      if (key === this.selfKey || j.address === undefined || this.evicted.has(key)) continue;
      const t = this.tracked.get(key) ?? this.departing.get(key);
      this.departing.delete(key); // listed again (the group's view flapped): it never left
      if (t) t.judged = j;
      const graceUntil = this.viewed ? now + this.settings.joinGraceMs : now;
      this.tracked.set(
        key,
        t ?? { judged: j, lastHeard: now, excusedUntil: now, lastGrant: now, graceUntil, closed: false, released: false, suspicion: undefined },
      );
    }
    this.viewed = true;
    for (const [key, t] of [...this.tracked]) {
      if (listed.has(key)) continue;
      this.tracked.delete(key);
      t.suspicion = undefined;
      this.departing.set(key, t);
    }
    for (const key of [...this.evicted.keys()]) if (!listed.has(key)) this.evicted.delete(key);
  }

  /**
   * The members the core should count, from the group's `members`: without evicted incarnations,
   * with departing ones still in (their leases run), and without a new incarnation of a node whose
   * previous one is departing (it joins once that one's lease ran out).
   */
  effective(members: readonly M[]): M[] {
    const departingNodes = new Set([...this.departing.values()].map((t) => t.judged.member.node as string));
    const kept = members.filter((m) => !this.evicted.has(memberKey(m)) && !departingNodes.has(m.node));
    return [...kept, ...[...this.departing.values()].map((t) => t.judged.member)];
  }

  /** Whether `m` may be granted a lease: monitored, not evicted, not departing, not released. */
  mayGrant(m: MemberRef): boolean {
    const t = this.tracked.get(memberKey(m));
    return t !== undefined && !t.released;
  }

  isEvicted(m: MemberRef): boolean {
    return this.evicted.has(memberKey(m));
  }

  /** Whether the group lists `m` and it is monitored (not evicted or departing). */
  isMonitored(m: MemberRef): boolean {
    return this.tracked.has(memberKey(m));
  }

  /**
   * A heartbeat or ack from `m`: it is alive; any suspicion ends. `stalledMs`: the stall of its own
   * event loop the heartbeat reports; that much silence after now is excused, at most a suspicion
   * timeout per claim (`stallCreditMs`), and only because it was heard: a claim that does not arrive
   * excuses nothing. Its lease is not lengthened by it (it runs from the heartbeat's sending).
   */
  heard(m: MemberRef, now: number, stalledMs?: number): void {
    const e = this.evicted.get(memberKey(m));
    if (e) e.lastHeard = Math.max(e.lastHeard, now);
    const t = this.tracked.get(memberKey(m));
    if (!t) return;
    t.lastHeard = Math.max(t.lastHeard, now);
    t.excusedUntil = Math.max(t.excusedUntil, now + stallCreditMs(stalledMs, this.settings));
    t.closed = false;
    t.suspicion = undefined;
  }

  /** The singleton granted `m` a lease at `now`. */
  granted(m: MemberRef, now: number): void {
    const t = this.tracked.get(memberKey(m));
    if (t) t.lastGrant = Math.max(t.lastGrant, now);
  }

  /**
   * `m`'s connection to the singleton closed: it is late at once (probed now rather than two
   * heartbeats on), nothing more. A close or reset is no proof that its process is gone.
   */
  closed(m: MemberRef): void {
    const t = this.tracked.get(memberKey(m));
    if (t) t.closed = true;
  }

  /** `m` said goodbye: it holds no lease any more, so its departure needs no wait. */
  released(m: MemberRef): void {
    const key = memberKey(m);
    const t = this.tracked.get(key) ?? this.departing.get(key);
    if (t) t.released = true;
  }

  /**
   * What `observer` (the singleton itself, or a helper it asked) saw when it probed `target` in
   * `round`. Counted only while `target` is suspected, for a round of this suspicion, from an
   * observer asked during it, and unless the observer already voted in a later round.
   */
  vote(observer: MemberRef, target: MemberRef, round: number, vote: Vote): void {
    const s = this.tracked.get(memberKey(target))?.suspicion;
    const key = memberKey(observer);
    if (!s || !s.roundTimes.has(round) || !s.asked.has(key)) return;
    const before = s.votes.get(key);
    if (before && before.round >= round) {
      // The same round again (a retried probe's late answer) may only turn a failure into life.
      if (before.round === round && vote === 'alive') s.votes.set(key, { vote, round, failingSince: undefined });
      return;
    }
    // A run of failures goes on only from the round just before, and only if that round was
    // recent: an observer that did not answer a round (its ping-req or vote was lost, or the
    // singleton could not reach it) may have reached the target meanwhile, and so may everyone while
    // no round ran (the singleton stalled): nobody probed then, and the run starts over.
    const previous = previousRound(s, round);
    const continues = before !== undefined && failing(before.vote) && before.round === previous && this.ranLately(s, previous, s.roundTimes.get(round)!);
    const failingSince = !failing(vote) ? undefined : continues ? before.failingSince : s.roundTimes.get(round);
    s.votes.set(key, { vote, round, failingSince });
  }

  /**
   * Called every heartbeat interval: notices its own stalls, starts and repeats probes of late
   * members, evicts those the evidence condemns, and lets departures through whose lease ran out.
   */
  tick(now: number): JudgeAction<M>[] {
    const s = this.settings;
    const actions: JudgeAction<M>[] = [];
    if (this.lastTick !== undefined) {
      const stall = now - this.lastTick - s.heartbeatIntervalMs;
      if (stall > stallThresholdMs(s)) this.stalled(stall, now);
    }
    this.lastTick = now;

    const wait = leaseWaitMs(s);
    for (const [key, t] of [...this.departing]) {
      if (t.released || now >= t.lastGrant + wait) {
        this.departing.delete(key);
        actions.push({ type: 'depart', target: t.judged.member });
      }
    }

    for (const [key, t] of [...this.tracked]) {
      if (t.released) continue;
      const late = t.closed || this.silentMs(t, now) >= lateAfterMs(s);
      if (!late) continue;
      if (!t.suspicion) {
        t.suspicion = { round: 0, roundAt: now, roundTimes: new Map(), helpers: [], asked: new Set([this.selfKey]), votes: new Map() };
        this.nextRound(t, now, actions);
      } else if (now - t.suspicion.roundAt >= probePeriodMs(s)) {
        this.nextRound(t, now, actions);
      }
      if (now < this.quietUntil) continue;
      const evidence = this.evidence(t, now);
      if (!evidence) continue;
      this.tracked.delete(key);
      this.evicted.set(key, { member: t.judged.member, lastHeard: t.lastHeard });
      actions.push({ type: 'evict', target: t.judged.member, evidence });
    }
    return actions;
  }

  /**
   * Whether the singleton heard lately (within two lateness windows) from enough members that, with
   * itself, they make a majority: one cut off from most of the cluster stops renewing its own lease
   * and gives way (§11.9). In a cluster of two, itself is enough. The members are those of the
   * quorum: the monitored ones and the incarnations evicted on silence the group still lists.
   */
  hearsMajority(now: number): boolean {
    // Every member the group lists counts, closed connections and refused probes included: a reset
    // proves nothing, and a singleton that counted it would let a middlebox shrink the majority it
    // must hear. When a majority crashes at once the singleton gives way and so do its successors
    // until the group drops the dead: a majority is down, and the group's session is the backstop.
    const counted = [...this.tracked.values(), ...this.evicted.values()];
    const needed = Math.floor(counted.length / 2);
    let heard = 0;
    for (const t of counted) if (now - t.lastHeard < 2 * lateAfterMs(this.settings)) heard++;
    return heard >= needed;
  }

  /** Evicted incarnations the group still lists: they may still run, and must learn it. */
  get evictedListed(): M[] {
    return [...this.evicted.values()].map((e) => e.member);
  }

  /** The members being probed now (for /status and tests). */
  get suspected(): M[] {
    return [...this.tracked.values()].filter((t) => t.suspicion).map((t) => t.judged.member);
  }

  // ---------------------------------------------------------------- internals

  /** The members whose majority an eviction needs: the monitored ones, the singleton, and the evicted ones the group still lists. */
  private clusterSize(): number {
    return this.tracked.size + 1 + this.evicted.size;
  }

  /** How long `t` has been silent at `now`, less the stall it last reported (never below 0). */
  private silentMs(t: Tracked<M>, now: number): number {
    return Math.max(0, now - Math.max(t.lastHeard, t.excusedUntil));
  }

  /**
   * The singleton did not run for `stall` ms: that time is nobody's silence, its own probes of the
   * time are worthless, and heartbeats queued meanwhile must be read before anyone is judged. Nor
   * does it count towards the wait for anyone's lease: a monotonic clock that leapt forward looks
   * just like a stall, and had no real time passed, a lease counted as run out would still run (a
   * second writer). After a real stall this only makes the wait longer.
   */
  private stalled(stall: number, now: number): void {
    for (const t of [...this.tracked.values(), ...this.departing.values()]) t.lastGrant = Math.min(now, t.lastGrant + stall);
    for (const t of this.tracked.values()) {
      t.lastHeard = Math.min(now, t.lastHeard + stall);
      t.suspicion?.votes.delete(this.selfKey);
    }
    for (const e of this.evicted.values()) e.lastHeard = Math.min(now, e.lastHeard + stall);
    this.quietUntil = now + 2 * this.settings.heartbeatIntervalMs;
  }

  /**
   * Whether `round` ran at most two probe periods before `at`: rounds run one a probe period, so a
   * longer gap means the singleton did not run meanwhile (a stall), and nobody probed.
   */
  private ranLately(s: Suspicion<M>, round: number | undefined, at: number): boolean {
    const ranAt = round === undefined ? undefined : s.roundTimes.get(round);
    return ranAt !== undefined && at - ranAt <= 2 * probePeriodMs(this.settings);
  }

  /** A new round of probes of `t`: the singleton's own, and its helpers' (kept, topped up). */
  private nextRound(t: Tracked<M>, now: number, actions: JudgeAction<M>[]): void {
    const s = t.suspicion!;
    s.round = ++this.rounds;
    s.roundAt = now;
    s.roundTimes.set(s.round, now);
    // Only recent rounds matter (a vote counts while fresh): a suspicion that lasts (a node the
    // singleton cannot reach but the majority can) must not grow without end.
    if (s.roundTimes.size > RECENT_ROUNDS) s.roundTimes.delete(s.roundTimes.keys().next().value!);
    const target = t.judged.member;
    const address = t.judged.address!;
    const fit = (j: JudgedMember<M>) => {
      const h = this.tracked.get(memberKey(j.member));
      return h !== undefined && h !== t && !h.released && !h.suspicion;
    };
    const want = Math.max(this.settings.indirectProbes, quorum(this.clusterSize()) - 1);
    const helpers = s.helpers.filter(fit);
    const candidates = [...this.tracked.values()]
      .map((h) => h.judged)
      .filter((j) => fit(j) && !helpers.some((x) => sameMember(x.member, j.member)))
      .sort((a, b) => (memberKey(a.member) < memberKey(b.member) ? -1 : 1));
    while (helpers.length < want && candidates.length > 0) helpers.push(candidates.splice(this.pick(candidates.length), 1)[0]!);
    s.helpers = helpers;
    actions.push({ type: 'probe', target, address, round: s.round });
    for (const h of helpers) {
      s.asked.add(memberKey(h.member));
      actions.push({ type: 'ask', helper: h.member, helperAddress: h.address!, target, address, round: s.round });
    }
  }

  /** Whether `t` may be evicted now, and on what evidence (§11.5: quorum, timeouts, lease). */
  private evidence(t: Tracked<M>, now: number): Evidence | undefined {
    const s = t.suspicion!;
    const q = quorum(this.clusterSize());
    const votes = [...s.votes].map(([observer, v]) => ({ observer, vote: v.vote, since: v.failingSince, round: v.round }));
    // Only fresh votes count: of this round or the one before (this one's answers may be on their
    // way), and the one before only if it ran lately (not before a stall of the singleton, when
    // nobody probed). An observer that no longer answers says nothing of now (a singleton cut off
    // from its helpers keeps their old votes, which must not evict anyone).
    const fresh = (round: number) => round === s.round || (round === s.round - 1 && this.ranLately(s, round, s.roundAt));
    const failingVotes = votes.filter((v) => failing(v.vote) && fresh(v.round) && (v.observer === this.selfKey || this.tracked.has(v.observer)));
    if (failingVotes.length < q) return undefined;
    // A member still in its join grace is not evicted on silence: it may still be starting, and the
    // group's session is the backstop if it never comes up.
    if (now < t.graceUntil) return undefined;
    // A majority must have failed to reach it in every round for long enough: the q observers
    // that have failed the longest have all failed since the q-th earliest start of their runs.
    // (The singleton's own silence alone says nothing of the others' links.) A refusal is a failure
    // like a silence: it is not waited out any sooner.
    const since = failingVotes.map((v) => v.since!).sort((a, b) => a - b)[q - 1]!;
    if (now - since < quorumSilenceMs(this.settings)) return undefined;
    // A refused or closed probe is no proof that the process is gone, only the strongest hint: it
    // shortens the silence needed to ¾ of the timeout (as if every helper confirmed), never below.
    const refused = failingVotes.some((v) => v.vote === 'refused');
    const confirmations = failingVotes.filter((v) => v.observer !== this.selfKey).length;
    const T = this.settings.suspicionTimeoutMs;
    const neededMs = refused ? Math.ceil(T * SHORTEST_SILENCE) : silenceNeededMs(T, s.helpers.length, confirmations);
    const silentMs = this.silentMs(t, now);
    if (silentMs < neededMs) return undefined;
    // And in every case not before its last lease has surely run out.
    if (now < t.lastGrant + leaseWaitMs(this.settings)) return undefined;
    return { silentMs, quorum: q, votes: votes.map(({ observer, vote }) => ({ observer, vote })), refused, neededMs };
  }
}
