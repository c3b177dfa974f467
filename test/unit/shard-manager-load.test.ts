// Issue 37: the singleton's load-aware placement on simulated time — the load view from the nodes'
// reports, the load round held back by the trigger band, `sustainMs`, the hourly limit, the
// shard cooldown and an operator's pause; bad figures refused and counted; a new singleton with no
// view moving nothing. A small world on the ShardManager: nodes report what they ingest at the
// rates the test sets, and start each copy they are given at once. Balance is judged here, from
// the rates and the map, not by the code under test.
import { describe, expect, it } from 'vitest';
import { validateDatasetConfig, type LoadBalanceConfigInput } from '../../src/core/dataset-config.js';
import { datasetRef, type DatasetRef, type NodeId } from '../../src/core/ids.js';
import type { LoadReport, PlacementExplanation, Reply } from '../../src/core/shard-manager/protocol.js';
import { ShardEvents } from '../../src/core/status.js';
import { adminReplyTo, emptyRecovery, Harness, replyOf } from '../support/manager-harness.js';

const ds = datasetRef('metrics');
const REPORT_MS = 10_000;
const MINUTE = 60_000;

/** A cluster of `nodes` members (racks r0, r1 alternating) with one load-aware dataset, at the rates the test sets. */
class LoadWorld {
  readonly h = new Harness({ settleWindowMs: 0 });
  rates: number[];
  /** Copies created on a node that did not hold them, counted from the published changes. */
  moves = 0;
  readonly moveTimes: number[] = [];

  constructor(
    nodes: number,
    readonly shards: number,
    rf: number,
    loadBalance: LoadBalanceConfigInput,
    rates: number[],
  ) {
    this.rates = rates;
    for (let i = 0; i < nodes; i++) this.h.run({ type: 'MemberUp', member: { ...this.h.memberFor(`n${i}`), rack: `r${i % 2}` } });
    const config = validateDatasetConfig({
      ref: ds,
      numShards: shards,
      minNumNodes: 1,
      replicationFactor: rf,
      strategy: 'balanced',
      loadBalance,
      source: { type: 'synthetic' },
    });
    if (!config.ok) throw new Error(config.error.message);
    this.run({ type: 'SetupDataset', config: config.value, replyTo: adminReplyTo() });
    this.startCopies();
  }

  run(input: Parameters<Harness['run']>[0]) {
    const effects = this.h.run(input);
    for (const e of effects) {
      if (e.type !== 'PublishChanges') continue;
      for (const ev of e.events) {
        if (ev.type === 'ShardCopyAdded') {
          this.moves += 1;
          this.moveTimes.push(this.h.now);
        }
      }
    }
    // Timers the singleton asked for, run when due (`advance`).
    for (const e of effects) if (e.type === 'ScheduleCheck') this.checks.push(e.at);
    return effects;
  }

  private readonly checks: number[] = [];

  /** Every copy the map gives a node and that is not serving yet starts and catches up at once. */
  startCopies(): void {
    for (let round = 0; round < 20; round++) {
      const mapper = this.h.mapper(ds);
      let reported = false;
      for (let s = 0; s < this.shards; s++) {
        for (const a of mapper.recordForShard(s).assignments) {
          if (a.status.type === 'Active' || a.placement === 'Leaving') continue;
          const m = this.h.state.members.find((x) => x.node === a.node);
          if (!m) continue;
          this.run({ type: 'NodeReport', node: m.node, incarnation: m.incarnation, seq: 1, events: [ShardEvents.ingestionStarted(ds, s as never, a.node)] });
          reported = true;
        }
      }
      if (!reported) return;
    }
  }

  /** Every node reports its serving copies' rates for the last window. */
  report(extra: LoadReport[] = []): void {
    const mapper = this.h.mapper(ds);
    const reports: LoadReport[] = this.h.state.members.map((m) => {
      const shards = [...Array(this.shards).keys()].filter((s) => mapper.copyOnNode(s, m.node) !== undefined);
      return {
        node: m.node,
        incarnation: m.incarnation,
        dataset: ds,
        at: this.h.now,
        windowMs: REPORT_MS,
        shards,
        records: shards.map((s) => this.rates[s]!),
        bytes: shards.map((s) => this.rates[s]! * 40),
        sinkMs: shards.map(() => 1),
      };
    });
    this.run({ type: 'LoadReports', reports: [...reports, ...extra] });
    this.startCopies();
  }

  /** `ms` of simulated time: a report every window, the singleton's timers as they come due. */
  advance(ms: number): void {
    const end = this.h.now + ms;
    while (this.h.now < end) {
      const next = Math.min(end, this.h.now + REPORT_MS);
      const due = this.checks.filter((at) => at <= next).sort((a, b) => a - b);
      for (const at of due) {
        this.checks.splice(this.checks.indexOf(at), 1);
        this.h.now = Math.max(this.h.now, at);
        this.run({ type: 'CheckCooldowns' });
        this.startCopies();
      }
      this.h.now = next;
      this.report();
    }
  }

  /** Each node's load from the map and the rates (judged here, not by the code under test). */
  nodeLoads(): Map<NodeId, number> {
    const mapper = this.h.mapper(ds);
    const loads = new Map<NodeId, number>(this.h.state.members.map((m) => [m.node, 0]));
    for (let s = 0; s < this.shards; s++) for (const n of mapper.nodesForShard(s)) loads.set(n, (loads.get(n) ?? 0) + this.rates[s]!);
    return loads;
  }

  /** The nodes holding a copy of `shard`. */
  holders(shard: number): NodeId[] {
    return this.h.mapper(ds).nodesForShard(shard);
  }

  explain(): PlacementExplanation {
    const reply = replyOf(this.h.run({ type: 'ExplainPlacement', dataset: ds, replyTo: adminReplyTo() }));
    if (reply?.type !== 'PlacementExplanation') throw new Error(`expected an explanation, got ${JSON.stringify(reply)}`);
    return reply.explanation;
  }

  setPaused(paused: boolean): Reply | undefined {
    return replyOf(this.run({ type: 'SetLoadBalancing', dataset: ds, paused, replyTo: adminReplyTo() }));
  }

  /** Copies moved within the hour before `at`. */
  movesInHourBefore(at: number): number {
    return this.moveTimes.filter((t) => t > at - 60 * MINUTE && t <= at).length;
  }
}

/** The rates of `shards` shards: even at `base`, except those given. */
const ratesWith = (shards: number, base: number, hot: Record<number, number> = {}) => Array.from({ length: shards }, (_, s) => hot[s] ?? base);

describe('issue 37: the singleton places a load-aware dataset by measured load', () => {
  it('a skewed load is evened out after it lasted sustainMs: every node within ±5 % of the mean, the moves through planned handoffs', () => {
    // 64 shards on 4 nodes: 16 copies each; half of n0's shards carry 4× the others (n0 at 1.6 × the mean).
    const w = new LoadWorld(4, 64, 1, { sustainMs: 3 * MINUTE }, ratesWith(64, 100));
    const onN0 = [...Array(64).keys()].filter((s) => w.holders(s).includes('n0' as NodeId));
    w.rates = ratesWith(64, 100, Object.fromEntries(onN0.slice(0, 8).map((s) => [s, 400])));
    const copiesAtStart = w.moves;
    w.advance(2 * MINUTE);
    expect(w.moves - copiesAtStart).toBe(0);
    expect(w.explain().verdict).toBe('waiting');
    w.advance(3 * MINUTE);
    expect(w.moves - copiesAtStart).toBeGreaterThan(0);
    const loads = [...w.nodeLoads().values()];
    const mean = loads.reduce((a, b) => a + b, 0) / loads.length;
    for (const l of loads) expect(Math.abs(l / mean - 1)).toBeLessThanOrEqual(0.05 + 1e-9);
    expect(w.explain().verdict).toBe('balanced');
    // Every shard still has its copy: a handoff never left one without.
    for (let s = 0; s < 64; s++) expect(w.holders(s)).toHaveLength(1);
  });

  it('a shard 20× hotter for 10 minutes, then back: its node sheds the rest, the moves stay within the hourly limit, and nothing oscillates', () => {
    const w = new LoadWorld(4, 64, 2, { sustainMs: 2 * MINUTE, maxMovesPerHour: 40, shardCooldownMs: 10 * MINUTE }, ratesWith(64, 10));
    const start = w.moves;
    w.advance(10 * MINUTE);
    expect(w.moves - start).toBe(0);
    w.rates = ratesWith(64, 10, { 5: 200 });
    w.advance(10 * MINUTE);
    // Shard 5's two nodes carried 32 copies of 10 and its 200: 510 against a mean of 415 (+23 %), so they shed copies.
    const duringSpike = w.moves - start;
    expect(duringSpike).toBeGreaterThan(0);
    for (const n of w.holders(5)) expect(w.nodeLoads().get(n)! / 415).toBeLessThanOrEqual(1.05 + 1e-9);
    w.rates = ratesWith(64, 10);
    w.advance(100 * MINUTE);
    for (let t = w.h.now - 120 * MINUTE; t <= w.h.now; t += MINUTE) expect(w.movesInHourBefore(t)).toBeLessThanOrEqual(40);
    const loads = [...w.nodeLoads().values()];
    const mean = loads.reduce((a, b) => a + b, 0) / loads.length;
    for (const l of loads) expect(Math.abs(l / mean - 1)).toBeLessThanOrEqual(0.1 + 1e-9);
    // Settled: the last hour moved nothing.
    expect(w.movesInHourBefore(w.h.now)).toBe(0);
  });

  it('moves at most maxMovesPerHour copies in any hour: a plan of more waits for the hour to pass', () => {
    const w = new LoadWorld(4, 64, 1, { sustainMs: MINUTE, maxMovesPerHour: 3, shardCooldownMs: MINUTE }, ratesWith(64, 100));
    const onN0 = [...Array(64).keys()].filter((s) => w.holders(s).includes('n0' as NodeId));
    w.rates = ratesWith(64, 100, Object.fromEntries(onN0.slice(0, 8).map((s) => [s, 400])));
    const start = w.moves;
    w.advance(30 * MINUTE);
    expect(w.moves - start).toBe(3);
    expect(w.explain().verdict).toBe('hourly-limit');
    w.advance(60 * MINUTE);
    expect(w.moves - start).toBeGreaterThan(3);
    for (let t = w.h.now - 90 * MINUTE; t <= w.h.now; t += MINUTE) expect(w.movesInHourBefore(t)).toBeLessThanOrEqual(3);
  });

  it('a shard hot every other minute never holds a node outside the trigger band for sustainMs: nothing moves', () => {
    const w = new LoadWorld(4, 32, 1, { sustainMs: 3 * MINUTE }, ratesWith(32, 10));
    const start = w.moves;
    for (let minute = 0; minute < 60; minute++) {
      w.rates = ratesWith(32, 10, minute % 2 === 0 ? { 3: 60 } : {});
      w.advance(MINUTE);
    }
    expect(w.moves - start).toBe(0);
    // Held the hot minute for good, the same load does move copies: the rule above is what held them.
    w.rates = ratesWith(32, 10, { 3: 60 });
    w.advance(5 * MINUTE);
    expect(w.moves - start).toBeGreaterThan(0);
  });

  it('an operator pauses load moves (nothing moves, the explanation says why) and resumes them', () => {
    const w = new LoadWorld(4, 32, 1, { sustainMs: MINUTE }, ratesWith(32, 10, { 0: 80, 1: 80, 2: 80, 3: 80 }));
    const start = w.moves;
    expect(w.setPaused(true)).toEqual({ type: 'LoadBalancingSet', dataset: ds, paused: true });
    w.advance(10 * MINUTE);
    expect(w.moves - start).toBe(0);
    const paused = w.explain();
    expect(paused.verdict).toBe('paused');
    expect(paused.moves.length).toBeGreaterThan(0);
    expect(paused.moves.every((m) => m.why.length > 0 && w.holders(m.shard).includes(m.from))).toBe(true);
    expect(w.setPaused(false)).toEqual({ type: 'LoadBalancingSet', dataset: ds, paused: false });
    w.advance(3 * MINUTE);
    expect(w.moves - start).toBeGreaterThan(0);
  });

  it('refuses and counts figures that are not a number, negative, absurd, from the future, not of its copy, or of a non-member; none moves a copy', () => {
    const w = new LoadWorld(2, 8, 1, { sustainMs: MINUTE }, ratesWith(8, 10));
    const start = w.moves;
    const m = w.h.state.members[0]!;
    const notMine = [...Array(8).keys()].find((s) => !w.holders(s).includes(m.node))!;
    const mine = [...Array(8).keys()].find((s) => w.holders(s).includes(m.node))!;
    const bad = (over: Partial<LoadReport>): LoadReport => ({
      node: m.node,
      incarnation: m.incarnation,
      dataset: ds,
      at: w.h.now,
      windowMs: REPORT_MS,
      shards: [mine],
      records: [1e6],
      bytes: [0],
      sinkMs: [0],
      ...over,
    });
    const future = bad({ at: w.h.now + 10 * MINUTE });
    const stranger = bad({ incarnation: 'stranger#1' as never });
    for (let i = 0; i < 12; i++) {
      w.h.now += REPORT_MS;
      w.report([
        bad({ records: [Number.NaN] }),
        bad({ records: [null as never] }),
        bad({ records: [-5] }),
        bad({ records: [1e15] }),
        bad({ shards: [notMine] }),
        { ...future, at: w.h.now + 10 * MINUTE },
        { ...stranger, at: w.h.now },
      ]);
    }
    expect(w.moves - start).toBe(0);
    const refused = w.explain().refused;
    expect(refused).toMatchObject({ 'not-a-number': 24, negative: 12, absurd: 12, 'not-its-copy': 12, 'from-the-future': 12, 'not-a-member': 12 });
  });

  it('a new singleton with no load view moves nothing at its recovery round: its view is incomplete until the nodes report', () => {
    const w = new LoadWorld(4, 32, 1, { sustainMs: MINUTE }, ratesWith(32, 10, { 0: 300 }));
    w.advance(5 * MINUTE);
    const before = w.h.mapper(ds).toSnapshot(w.h.state.epoch);
    const next = new Harness(
      { settleWindowMs: 0 },
      {
        ...emptyRecovery(2, w.h.state.members),
        datasets: [w.h.state.datasets.get(ds)!.config],
        maps: [before],
      },
    );
    next.now = w.h.now;
    for (let s = 0; s < 32; s++) expect(next.mapper(ds).nodesForShard(s)).toEqual(w.h.mapper(ds).nodesForShard(s));
    const reply = replyOf(next.run({ type: 'ExplainPlacement', dataset: ds, replyTo: adminReplyTo() }));
    expect(reply?.type === 'PlacementExplanation' && reply.explanation.verdict).toBe('view-incomplete');
  });

  it('refuses a load-aware config on the filodb-default strategy, a band of 0, a trigger band narrower than the band', () => {
    const base = { ref: 'x', numShards: 8, minNumNodes: 1, source: { type: 'synthetic' } };
    const field = (input: object) => {
      const r = validateDatasetConfig(input);
      return r.ok ? 'ok' : r.error.message;
    };
    expect(field({ ...base, loadBalance: {} })).toMatch(/^loadBalance needs "strategy": "balanced"/);
    expect(field({ ...base, strategy: 'balanced', loadBalance: { band: 0 } })).toMatch(/^loadBalance\.band must be above 0/);
    expect(field({ ...base, strategy: 'balanced', loadBalance: { band: 0.1, triggerBand: 0.05 } })).toMatch(/^loadBalance\.triggerBand must be at least band/);
    expect(field({ ...base, strategy: 'balanced', loadBalance: { measure: 'cpu' } })).toMatch(/^loadBalance\.measure must be/);
    expect(field({ ...base, strategy: 'balanced', loadBalance: {} })).toBe('ok');
  });

  it('ExplainPlacement and SetLoadBalancing of a dataset placed by copy counts answer NotLoadAware', () => {
    const h = new Harness();
    h.addMember('a');
    h.setup(datasetRef('plain') as DatasetRef, 4, 1);
    expect(replyOf(h.run({ type: 'ExplainPlacement', dataset: datasetRef('plain'), replyTo: adminReplyTo() }))?.type).toBe('NotLoadAware');
    expect(replyOf(h.run({ type: 'SetLoadBalancing', dataset: datasetRef('plain'), paused: true, replyTo: adminReplyTo() }))?.type).toBe('NotLoadAware');
  });
});
