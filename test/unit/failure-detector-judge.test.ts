// The singleton's judgement (docs/ARCHITECTURE.md §11.5) on a simulated clock: a crashed member is
// evicted as a silent one is, a refusal only shortening the silence needed to ¾ of the suspicion
// timeout (a reset is no proof of death); a silent one after ¾ of the timeout with every helper
// confirming (longer with fewer), a paused one not at all; no eviction without a majority of votes,
// and no reset shrinks that majority; a member in its join grace is not evicted on silence; a stall
// a member reports, and the singleton's own, are nobody's silence; departures wait out the lease.
import { describe, expect, it } from 'vitest';
import { LivenessJudge, type JudgeAction } from '../../src/core/failure-detection/judge.js';
import { memberKey, type MemberRef, type Vote } from '../../src/cluster/failure-detector/messages.js';
import { failureDetectorSettings, quorumSilenceMs } from '../../src/cluster/failure-detector/settings.js';
import { incarnation, nodeId } from '../../src/core/ids.js';

const SETTINGS = failureDetectorSettings({ mode: 'heartbeat' }); // 100 ms heartbeats, T 1800, lease 500 (wait 511), 3 helpers
const ref = (name: string, inc = 1): MemberRef => ({ node: nodeId(name), incarnation: incarnation(`${name}-${inc}`) });
const S = ref('s');
const judged = (m: MemberRef) => ({ member: m, address: `${m.node}:7000` });

/** How the network answers a probe: what `observer` sees of `target` at `t` (undefined: no answer comes back). */
type Reach = (observer: string, target: string, t: number) => Vote | undefined;
const DELAY: Record<Vote, number> = { alive: 2, refused: 2, silent: 200, unsure: 200 };

interface World {
  /** Whether `member` heartbeats (and is granted) at tick `t`. */
  readonly beats: (member: string, t: number) => boolean;
  readonly reach: Reach;
}

/**
 * Ticks the judge every 100 ms from `from` to `to` (inclusive), feeding heartbeats and grants of the
 * members that beat, and votes as the world answers the probes the judge asks for.
 */
function run(judge: LivenessJudge<MemberRef>, members: MemberRef[], world: World, from: number, to: number): { t: number; action: JudgeAction<MemberRef> }[] {
  const out: { t: number; action: JudgeAction<MemberRef> }[] = [];
  const votes: { at: number; observer: MemberRef; target: MemberRef; round: number; vote: Vote }[] = [];
  for (let t = from; t <= to; t += 100) {
    for (const m of members) {
      if (world.beats(m.node, t)) {
        judge.heard(m, t);
        judge.granted(m, t);
      }
    }
    for (const v of votes.filter((x) => x.at <= t)) judge.vote(v.observer, v.target, v.round, v.vote);
    votes.splice(0, votes.length, ...votes.filter((x) => x.at > t));
    for (const action of judge.tick(t)) {
      out.push({ t, action });
      if (action.type === 'probe' || action.type === 'ask') {
        const observer = action.type === 'probe' ? S : action.helper;
        const vote = world.reach(observer.node, action.target.node, t);
        if (vote) votes.push({ at: t + DELAY[vote], observer, target: action.target, round: action.round, vote });
      }
    }
  }
  return out;
}

function cluster(names: string[]): { judge: LivenessJudge<MemberRef>; members: MemberRef[] } {
  const members = names.map((n) => ref(n));
  const judge = new LivenessJudge<MemberRef>(SETTINGS, S, () => 0);
  judge.view([judged(S), ...members.map(judged)], 0);
  return { judge, members };
}

const evictions = (log: { t: number; action: JudgeAction<MemberRef> }[]) =>
  log.filter((x) => x.action.type === 'evict').map((x) => ({ t: x.t, node: (x.action as { target: MemberRef }).target.node }));
const everyone =
  (vote: Vote, who = 'a'): Reach =>
  (_o, target) =>
    target === who ? vote : 'alive';

describe('LivenessJudge', () => {
  it('evicts a crashed member (refused probes) as a silent one: after ¾ of the timeout and a majority failing long enough, never on the refusal alone', () => {
    const { judge, members } = cluster(['a', 'b', 'c', 'd']);
    const world: World = { beats: (m, t) => m !== 'a' || t <= 1000, reach: (o, target, t) => (target === 'a' && t > 1000 ? 'refused' : 'alive') };
    run(judge, members, world, 0, 1000);
    judge.closed(members[0]!); // its heartbeat connection closed at the crash
    const log = run(judge, members, world, 1100, 3000);
    // Probed at once (closed: late, not gone), refused by everyone within ms; the lease granted at
    // 1000 ran out at 1511, but the majority's failures (from the round at 1100) must last 1300 ms.
    expect(log[0]).toMatchObject({ t: 1100, action: { type: 'probe' } });
    expect(evictions(log)).toEqual([{ t: 2400, node: 'a' }]);
    const evict = log.find((x) => x.action.type === 'evict')!.action as Extract<JudgeAction<MemberRef>, { type: 'evict' }>;
    expect(evict.evidence).toMatchObject({ refused: true, quorum: 3, neededMs: 1350, silentMs: 1400 });
    expect(judge.mayGrant(members[0]!)).toBe(false);
    expect(judge.effective([S, ...members]).map((m) => m.node)).toEqual(['s', 'b', 'c', 'd']);
  });

  it('evicts a silent member after three quarters of the suspicion timeout when every helper confirms', () => {
    const { judge, members } = cluster(['a', 'b', 'c', 'd']);
    const world: World = { beats: (m, t) => m !== 'a' || t <= 1000, reach: everyone('silent') };
    const log = run(judge, members, world, 0, 4000);
    // Late at 1200 (2 heartbeats): every observer fails from that round on, for 1300 ms at 2500
    // (the singleton's own silence of 1350 ms came at 2350).
    expect(log.find((x) => x.action.type === 'probe')?.t).toBe(1200);
    expect(
      log
        .filter((x) => x.action.type === 'ask' && x.t === 1200)
        .map((x) => (x.action as { helper: MemberRef }).helper.node)
        .sort(),
    ).toEqual(['b', 'c', 'd']);
    expect(evictions(log)).toEqual([{ t: 2500, node: 'a' }]);
  });

  it('needs a longer silence when fewer helpers confirm, and a majority of votes in any case', () => {
    // Two of three helpers confirm: 1800 − 450 × log 3 / log 4 ≈ 1443 ms.
    const twoOfThree = cluster(['a', 'b', 'c', 'd']);
    const reach2: Reach = (o, target) => (target !== 'a' ? 'alive' : o === 'd' ? 'unsure' : 'silent');
    const log2 = run(twoOfThree.judge, twoOfThree.members, { beats: (m, t) => m !== 'a' || t <= 1000, reach: reach2 }, 0, 4000);
    expect(evictions(log2)).toEqual([{ t: 2500, node: 'a' }]);

    // One helper confirms: with the singleton's vote that is 2 of the 3 needed among 4 observers.
    const oneOfThree = cluster(['a', 'b', 'c', 'd']);
    const reach1: Reach = (o, target) => (target !== 'a' ? 'alive' : o === 's' || o === 'b' ? 'silent' : 'unsure');
    const log1 = run(oneOfThree.judge, oneOfThree.members, { beats: (m, t) => m !== 'a' || t <= 1000, reach: reach1 }, 0, 10_000);
    expect(evictions(log1)).toEqual([]);
  });

  it('does not count a silence that the observer did not see in two rounds in a row (a lost ping is no vote)', () => {
    const { judge, members } = cluster(['a', 'b', 'c', 'd']);
    // Every helper's probe fails in every other round, as with lost pings; the singleton is cut from a.
    const reach: Reach = (o, target, t) => (target !== 'a' ? 'alive' : o === 's' ? 'silent' : Math.floor(t / 300) % 2 === 0 ? 'silent' : 'alive');
    const log = run(judge, members, { beats: (m, t) => m !== 'a' || t <= 1000, reach }, 0, 10_000);
    expect(evictions(log)).toEqual([]);
    // Refusals in every other round do no better: a refusal is a failure like a silence, not proof.
    const refusedHalf = cluster(['a', 'b', 'c', 'd']);
    const reachR: Reach = (o, target, t) => (target !== 'a' ? 'alive' : o === 's' ? 'refused' : Math.floor(t / 300) % 2 === 0 ? 'refused' : 'alive');
    expect(evictions(run(refusedHalf.judge, refusedHalf.members, { beats: (m, t) => m !== 'a' || t <= 1000, reach: reachR }, 0, 10_000))).toEqual([]);
    // Refused by everyone in every round: late at 1200, the majority has failed for 1300 ms at 2500.
    const refused = cluster(['a', 'b', 'c', 'd']);
    const log2 = run(refused.judge, refused.members, { beats: (m, t) => m !== 'a' || t <= 1000, reach: everyone('refused') }, 0, 3000);
    expect(evictions(log2)).toEqual([{ t: 2500, node: 'a' }]);
  });

  it('waits until a majority has failed long enough, whatever the singleton’s own silence (its link was cut first)', () => {
    const { judge, members } = cluster(['a', 'b', 'c', 'd']);
    // The singleton stops hearing a at 1000 (its own link is cut); the others lose a only at 3000.
    const reach: Reach = (o, target, t) => (target !== 'a' ? 'alive' : o === 's' || t >= 3000 ? 'silent' : 'alive');
    const log = run(judge, members, { beats: (m, t) => m !== 'a' || t <= 1000, reach }, 0, 8000);
    // Rounds every 300 ms from 1200: the helpers fail from the round at 3000, for 1300 ms at 4300.
    expect(evictions(log)).toEqual([{ t: 4300, node: 'a' }]);
  });

  it('starts an observer’s run of failures over after a round it did not answer', () => {
    const { judge, members } = cluster(['a', 'b', 'c', 'd']);
    // The helpers' answers are lost every third round (from 1200, rounds every 300 ms): no run of
    // theirs lasts the 1300 ms a majority must fail for, though the singleton never hears a again.
    const reach: Reach = (o, target, t) => (target !== 'a' ? 'alive' : o === 's' ? 'silent' : Math.floor(t / 300) % 3 === 0 ? undefined : 'silent');
    const log = run(judge, members, { beats: (m, t) => m !== 'a' || t <= 1000, reach }, 0, 10_000);
    expect(evictions(log)).toEqual([]);
  });

  it('does not count votes of observers that stopped answering (a singleton cut off from its helpers)', () => {
    const { judge, members } = cluster(['a', 'b', 'c', 'd']);
    // Everyone fails to reach a until 1900; then the singleton is cut off: its helpers' answers never come back.
    const reach: Reach = (o, target, t) => (target !== 'a' ? (t < 1900 ? 'alive' : undefined) : o === 's' || t < 1900 ? 'silent' : undefined);
    const log = run(judge, members, { beats: (m, t) => m !== 'a' || t <= 1000, reach }, 0, 10_000);
    expect(evictions(log)).toEqual([]);
  });

  it('never evicts a member that a majority still reaches, however long the singleton does not hear it', () => {
    const { judge, members } = cluster(['a', 'b', 'c', 'd']);
    // The singleton → a path is cut both ways; the helpers reach a.
    const reach: Reach = (o, target) => (target === 'a' && o === 's' ? 'silent' : 'alive');
    const log = run(judge, members, { beats: (m) => m !== 'a', reach }, 0, 20_000);
    expect(evictions(log)).toEqual([]);
    expect(judge.suspected.map((m) => m.node)).toEqual(['a']);
  });

  it('survives a pause shorter than three quarters of the suspicion timeout (minus a heartbeat)', () => {
    const { judge, members } = cluster(['a', 'b', 'c', 'd']);
    const paused = (t: number) => t > 1000 && t < 2250; // silent for 1250 ms
    const log = run(
      judge,
      members,
      { beats: (m, t) => m !== 'a' || !paused(t), reach: (o, target, t) => (target === 'a' && paused(t) ? 'silent' : 'alive') },
      0,
      6000,
    );
    expect(evictions(log)).toEqual([]);
    expect(log.some((x) => x.action.type === 'probe')).toBe(true); // it was suspected
    expect(judge.suspected).toEqual([]); // and cleared when heard again
  });

  it('lets a two-member cluster evict on the singleton vote alone, after the whole timeout', () => {
    const { judge, members } = cluster(['a']);
    const log = run(judge, members, { beats: (_m, t) => t <= 1000, reach: everyone('silent') }, 0, 4000);
    expect(log.filter((x) => x.action.type === 'ask')).toEqual([]);
    expect(evictions(log)).toEqual([{ t: 2800, node: 'a' }]);
  });

  it('counts an evicted incarnation that may still run in the majority: a singleton that hears nobody evicts nobody on its own vote', () => {
    const { judge, members } = cluster(['a', 'b']);
    const [a, b] = members as [MemberRef, MemberRef];
    // b is cut off from everyone at 1000 and evicted (the singleton and a vote), but its process
    // runs on and the group lists it; at 4000 the singleton is cut off from a.
    const world: World = {
      beats: (m, t) => (m === 'b' ? t <= 1000 : t <= 4000),
      reach: (o, target, t) => (target === 'b' ? (t > 1000 ? 'silent' : 'alive') : o === 's' && t > 4000 ? 'silent' : 'alive'),
    };
    expect(evictions(run(judge, members, world, 0, 4000))).toEqual([{ t: 2500, node: 'b' }]);
    expect(evictions(run(judge, members, world, 4100, 10_000))).toEqual([]);
    expect(judge.hearsMajority(10_000)).toBe(false); // it gives way instead (§11.9)
    // Once the group no longer lists b, the cluster is the singleton and a: its vote is the majority.
    judge.view([judged(S), judged(a)], 10_000);
    expect(judge.isEvicted(b)).toBe(false);
    expect(evictions(run(judge, [a], world, 10_100, 14_000))).toEqual([{ t: 10_100, node: 'a' }]); // silent for 6 s by now
  });

  it('does not let a reset shrink the majority: an incarnation evicted after refusals counts until the group drops it', () => {
    const { judge, members } = cluster(['a', 'b']);
    const [a, b] = members as [MemberRef, MemberRef];
    const world: World = {
      beats: (m, t) => (m === 'b' ? t <= 1000 : t <= 4000),
      reach: (o, target, t) => (target === 'b' ? (t > 1000 ? 'refused' : 'alive') : o === 's' && t > 4000 ? 'silent' : 'alive'),
    };
    run(judge, members, world, 0, 1000);
    judge.closed(b); // b's connection was reset, its port refuses: crashed, or a middlebox
    expect(evictions(run(judge, members, world, 1100, 4000))).toEqual([{ t: 2400, node: 'b' }]);
    // The singleton is then cut off from a: with b still counted (3 members, 2 votes needed) its own vote is not enough.
    expect(evictions(run(judge, members, world, 4100, 8000))).toEqual([]);
    expect(judge.hearsMajority(8000)).toBe(false);
    // Once the group drops b, the singleton's vote is the majority of two.
    judge.view([judged(S), judged(a)], 8000);
    expect(evictions(run(judge, [a], world, 8100, 8100))).toEqual([{ t: 8100, node: 'a' }]);
  });

  it('never evicts a live member whose connection was reset and whose probes are refused while its heartbeats arrive', () => {
    const { judge, members } = cluster(['a', 'b', 'c', 'd']);
    const world: World = { beats: () => true, reach: everyone('refused') };
    run(judge, members, world, 0, 1000);
    judge.closed(members[0]!); // a reset on its heartbeat connection
    expect(evictions(run(judge, members, world, 1100, 10_000))).toEqual([]);
    expect(judge.hearsMajority(10_000)).toBe(true); // nor does it count as gone for the singleton's own majority
  });

  it('counts a closed connection as no proof in the singleton’s majority: a reset does not make it give way, nor keep it', () => {
    const { judge, members } = cluster(['a', 'b', 'c', 'd']);
    run(judge, members, { beats: () => true, reach: everyone('alive') }, 0, 1000);
    for (const m of members.slice(0, 3)) judge.closed(m); // three resets; only d is heard after
    run(judge, members, { beats: (m) => m === 'd', reach: everyone('alive') }, 1100, 1100);
    // 4 others counted, 2 must be heard: a, b and c are not heard any more, whatever closed.
    expect(judge.hearsMajority(1100 + 800)).toBe(false);
  });

  it('does not evict a member on silence during its join grace; after it, as any other', () => {
    const { judge, members } = cluster(['a', 'b', 'c']);
    const late = ref('n');
    run(judge, members, { beats: () => true, reach: everyone('alive') }, 0, 1000);
    judge.view([judged(S), ...members.map(judged), judged(late)], 1000); // n joins at 1000 and never heartbeats
    const world: World = { beats: (m) => m !== 'n', reach: everyone('refused', 'n') };
    const log = run(judge, [...members, late], world, 1100, 8000);
    // Its grace runs to 1000 + 3 × 1800 = 6400; it is suspected and probed meanwhile, but not evicted.
    expect(log.some((x) => x.action.type === 'probe' && x.t < 6400)).toBe(true);
    expect(evictions(log)).toEqual([{ t: 6400, node: 'n' }]);
    // Members of the takeover's first view get no grace (the predecessor judged them).
    const { judge: j2, members: m2 } = cluster(['a', 'b', 'c']);
    expect(evictions(run(j2, m2, { beats: (m) => m !== 'a', reach: everyone('silent') }, 0, 3000))).toEqual([{ t: 1500, node: 'a' }]);
  });

  it('does not count a stall the member reported as silence, at most one suspicion timeout per claim, and only once heard', () => {
    const { judge, members } = cluster(['a', 'b', 'c', 'd']);
    const a = members[0]!;
    run(judge, members, { beats: () => true, reach: everyone('alive') }, 0, 1000);
    judge.heard(a, 1000, 1500); // its heartbeat says its event loop stalled 1.5 s
    const silent: World = { beats: (m) => m !== 'a', reach: everyone('silent') };
    const log = run(judge, members, silent, 1100, 6000);
    // Its silence counts from 2500: late at 2700, the majority has failed 1300 ms at 4000.
    expect(log.find((x) => x.action.type === 'probe')?.t).toBe(2700);
    expect(evictions(log)).toEqual([{ t: 4000, node: 'a' }]);
    // A claim of an hour excuses one suspicion timeout (1800 ms), no more.
    const c2 = cluster(['a', 'b', 'c', 'd']);
    run(c2.judge, c2.members, { beats: () => true, reach: everyone('alive') }, 0, 1000);
    c2.judge.heard(c2.members[0]!, 1000, 3_600_000);
    expect(evictions(run(c2.judge, c2.members, silent, 1100, 8000))).toEqual([{ t: 4300, node: 'a' }]);
  });

  it('does not let a tick that comes late (a stall, or a clock that leapt forward) count towards anyone’s lease', () => {
    const { judge, members } = cluster(['a', 'b', 'c']);
    const [a, b, c] = members as [MemberRef, MemberRef, MemberRef];
    run(judge, members, { beats: () => true, reach: everyone('alive') }, 0, 1000);
    judge.view([judged(S), judged(b), judged(c)], 1050); // a left the group; its last grant was at 1000
    const departs = (t: number) => judge.tick(t).filter((x) => x.type === 'depart');
    expect(departs(1100)).toEqual([]);
    // The next tick comes 2 s later: without the rule, a's lease (1000 + 511) would count as run out.
    expect(departs(3100)).toEqual([]);
    for (let t = 3200; t <= 3400; t += 100) expect(departs(t)).toEqual([]);
    expect(departs(3500)).toEqual([{ type: 'depart', target: a }]); // 1000 + 1900 of stall + 511
  });

  it('does not count its own stall as anyone’s silence, and reads the queued heartbeats before judging', () => {
    const { judge, members } = cluster(['a', 'b', 'c', 'd']);
    const world: World = { beats: () => true, reach: everyone('alive') };
    run(judge, members, world, 0, 1000);
    // The singleton did not run from 1000 to 2500: its next tick comes late, before the heartbeats
    // that queued meanwhile are read.
    const atStall = judge.tick(2500);
    expect(atStall).toEqual([]);
    expect(judge.suspected).toEqual([]);
    // Everyone silent since then for real (a partition right after the stall): nobody is judged
    // during the quiet period after the stall, and the silence counts from the stall's end.
    const log = run(judge, members, { beats: () => false, reach: (_o, _t) => 'silent' }, 2600, 3400);
    expect(evictions(log)).toEqual([]);
  });

  // Seen in the simulator (seed 25855): the singleton paused while it suspected a member that was cut
  // off; the member came back, then paused itself. At the singleton's first round after its pause,
  // its helpers' runs of failures went on from before it — across a time nobody probed, when the
  // member was reachable — and it was evicted after a 0.9 s pause. Nobody failed to reach it then.
  it('starts every run of failures over after a gap in its rounds (its own stall): nobody probed meanwhile', () => {
    const { judge, members } = cluster(['a', 'b', 'c', 'd']);
    const cutOff = (o: string, target: string) => (target === 'a' ? 'silent' : 'alive') as Vote;
    run(judge, members, { beats: (m, t) => m !== 'a' || t < 500, reach: cutOff }, 0, 1_700); // the round of 1500 answered
    expect(judge.suspected.map((m) => m.node)).toEqual(['a']);
    // The singleton does not run from 1700 to 4000; a is reachable from 2000 to 3000 (its
    // heartbeats lost: its connection to the singleton was down), then pauses for good.
    judge.tick(4_000); // its first round after the stall: the asks are lost with the helpers' answers
    const log = run(judge, members, { beats: (m) => m !== 'a', reach: cutOff }, 4_100, 8_000);
    const at = evictions(log)[0]?.t;
    // Failures count from the first round after the stall, and must last their time.
    expect(at).toBeGreaterThanOrEqual(4_100 + quorumSilenceMs(SETTINGS));
  });

  it('holds a departure from the group until the member’s lease ran out; a goodbye needs no wait', () => {
    const { judge, members } = cluster(['a', 'b', 'c']);
    const [a, b, c] = members as [MemberRef, MemberRef, MemberRef];
    run(judge, members, { beats: () => true, reach: everyone('alive') }, 0, 1000);
    judge.view([judged(S), judged(b), judged(c)], 1050); // a left the group (its session ran out)
    expect(judge.effective([S, b, c]).map(memberKey)).toEqual([S, b, c, a].map(memberKey));
    expect(judge.mayGrant(a)).toBe(false);
    const alive = { beats: (m: string) => m !== 'a', reach: everyone('alive') };
    // The last grant was at 1000: it has surely run out at 1511.
    expect(run(judge, [b, c], alive, 1100, 2000)).toEqual([{ t: 1600, action: { type: 'depart', target: a } }]);
    expect(judge.effective([S, b, c]).map(memberKey)).toEqual([S, b, c].map(memberKey));

    judge.released(b); // b says goodbye, then leaves
    judge.view([judged(S), judged(c)], 2050);
    expect(run(judge, [c], alive, 2100, 2100)).toEqual([{ t: 2100, action: { type: 'depart', target: b } }]);
  });

  it('keeps a new incarnation out until its predecessor’s lease ran out', () => {
    const { judge, members } = cluster(['a', 'b']);
    const [a, b] = members as [MemberRef, MemberRef];
    run(judge, members, { beats: () => true, reach: everyone('alive') }, 0, 1000);
    const a2 = ref('a', 2);
    judge.view([judged(S), judged(b), judged(a2)], 1000);
    expect(judge.effective([S, b, a2]).map(memberKey)).toEqual([S, b, a].map(memberKey));
    const log = run(judge, [b, a2], { beats: () => true, reach: everyone('alive') }, 1100, 1600);
    expect(log).toEqual([{ t: 1600, action: { type: 'depart', target: a } }]);
    expect(judge.effective([S, b, a2]).map(memberKey)).toEqual([S, b, a2].map(memberKey));
  });

  it('cancels a departure when the group lists the member again before its lease ran out', () => {
    const { judge, members } = cluster(['a', 'b']);
    const [a, b] = members as [MemberRef, MemberRef];
    judge.view([judged(S), judged(b)], 100);
    judge.view([judged(S), judged(a), judged(b)], 200);
    expect(run(judge, members, { beats: () => true, reach: everyone('alive') }, 300, 2000)).toEqual([]);
    expect(judge.mayGrant(a)).toBe(true);
  });

  it('keeps an evicted incarnation out of every view while the group lists it, and forgets it after', () => {
    const { judge, members } = cluster(['a']);
    const [a] = members as [MemberRef];
    run(judge, members, { beats: (_m, t) => t <= 1000, reach: everyone('silent') }, 0, 3000);
    expect(judge.isEvicted(a)).toBe(true);
    judge.view([judged(S), judged(a)], 3100); // the group still lists it
    expect(judge.effective([S, a]).map(memberKey)).toEqual([memberKey(S)]);
    expect(judge.mayGrant(a)).toBe(false);
    judge.view([judged(S)], 3200); // the group dropped it at last
    expect(judge.isEvicted(a)).toBe(false);
    expect(judge.tick(3300)).toEqual([]); // no departure: it was evicted already
  });

  it('ignores votes nobody asked for and votes of an earlier suspicion', () => {
    const { judge, members } = cluster(['a', 'b', 'c', 'd', 'e', 'f']);
    const [a, , , , e] = members as MemberRef[];
    const world: World = { beats: (m, t) => m !== 'a' || t <= 1000, reach: everyone('unsure') };
    const log = run(judge, members, world, 0, 1300);
    const asks = log.filter((x) => x.action.type === 'ask').map((x) => (x.action as { helper: MemberRef }).helper.node);
    expect(asks).toHaveLength(3); // max(indirectProbes 3, quorum(7) − 1 = 3)
    const notAsked = members.find((m) => m.node !== 'a' && !asks.includes(m.node))!;
    const round = (log.find((x) => x.action.type === 'probe')!.action as { round: number }).round;
    judge.vote(notAsked, a!, round, 'silent');
    judge.vote(e!, a!, round + 5, 'silent'); // a round that has not happened
    expect(evictions(run(judge, members, world, 1400, 6000))).toEqual([]);
    // Heard again: the suspicion ends, and its votes are worth nothing for the next one.
    judge.heard(a!, 6050);
    for (const h of asks)
      judge.vote(
        members.find((m) => m.node === h)!,
        a!,
        round,
        'silent',
      );
    expect(evictions(run(judge, members, { ...world, beats: (m, t) => m !== 'a' || t <= 6050 }, 6100, 6800))).toEqual([]);
  });
});
