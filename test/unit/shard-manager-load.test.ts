// Issue 37: the singleton's load-aware placement on simulated time — the load view from the nodes'
// reports, the load round held back by the trigger band, `sustainMs`, the hourly limit, the
// shard cooldown and an operator's pause; bad figures refused and counted; a new singleton with no
// view moving nothing. A small world on the ShardManager: nodes report what they ingest at the
// rates the test sets, and start each copy they are given at once. Balance is judged here, from
// the rates and the map, not by the code under test.
import { describe, expect, it } from 'vitest';
import { validateDatasetConfig, type LoadBalanceConfigInput } from '../../src/core/dataset-config.js';
import { datasetRef, type DatasetRef, type NodeId } from '../../src/core/ids.js';
import { loadRatios } from '../../src/core/shard-manager/load-view.js';
import type { LoadReport, Reply } from '../../src/core/shard-manager/protocol.js';
import { LOAD_REPORT_MS, LoadWorld, zipfRates } from '../../src/sim/load-world.js';
import { SeededRandom } from '../../src/sim/random.js';
import { adminReplyTo, emptyRecovery, Harness, replyOf } from '../support/manager-harness.js';

const ds = datasetRef('metrics');
const REPORT_MS = LOAD_REPORT_MS;
const MINUTE = 60_000;

/** A load world of `nodes` nodes (two racks) with one load-aware dataset, as the tests below use it. */
function world(nodes: number, shards: number, rf: number, loadBalance: LoadBalanceConfigInput, rates: number[], maxConcurrentMoves?: number) {
  const w = new LoadWorld({ nodes, shards, replicationFactor: rf, loadBalance, rates, ...(maxConcurrentMoves === undefined ? {} : { maxConcurrentMoves }) });
  const start = w.copiesAdded.length;
  return Object.assign(w, {
    /** Copies created since the dataset was placed. */
    moved: () => w.copiesAdded.length - start,
    holders: (shard: number): NodeId[] => w.mapper.nodesForShard(shard),
    setPaused: (paused: boolean): Reply | undefined => w.ask((to) => ({ type: 'SetLoadBalancing', dataset: ds, paused, replyTo: to })),
  });
}

/** Per node: the copies it gains plus the copies it sheds in `moves`. */
function changedPerNode(moves: readonly { readonly from: NodeId; readonly to: NodeId }[]): Map<NodeId, number> {
  const changed = new Map<NodeId, number>();
  for (const m of moves) for (const n of [m.from, m.to]) changed.set(n, (changed.get(n) ?? 0) + 1);
  return changed;
}

const most = (m: Map<NodeId, number>) => Math.max(0, ...m.values());

/** The rates of `shards` shards: even at `base`, except those given. */
const ratesWith = (shards: number, base: number, hot: Record<number, number> = {}) => Array.from({ length: shards }, (_, s) => hot[s] ?? base);

describe('issue 37: the singleton places a load-aware dataset by measured load', () => {
  it('a skewed load is evened out after it lasted sustainMs: every node within ±5 % of the mean, the moves through planned handoffs', () => {
    // 64 shards on 4 nodes: 16 copies each; half of n0's shards carry 4× the others (n0 at 1.6 × the mean).
    const w = world(4, 64, 1, { sustainMs: 3 * MINUTE }, ratesWith(64, 100));
    const onN0 = w.copiesOf('n0');
    w.rates = ratesWith(64, 100, Object.fromEntries(onN0.slice(0, 8).map((s) => [s, 400])));
    w.advance(2 * MINUTE);
    expect(w.moved()).toBe(0);
    expect(w.explain().verdict).toBe('waiting');
    w.advance(3 * MINUTE);
    expect(w.moved()).toBeGreaterThan(0);
    const loads = [...w.nodeLoads().values()];
    const mean = loads.reduce((a, b) => a + b, 0) / loads.length;
    for (const l of loads) expect(Math.abs(l / mean - 1)).toBeLessThanOrEqual(0.05 + 1e-9);
    expect(w.explain().verdict).toBe('balanced');
    // Every shard still has its copy: a handoff never left one without.
    for (let s = 0; s < 64; s++) expect(w.holders(s)).toHaveLength(1);
  });

  it('a shard 20× hotter for 10 minutes, then back: its node sheds the rest, the moves stay within the hourly limit, and nothing oscillates', () => {
    const w = world(4, 64, 2, { sustainMs: 2 * MINUTE, maxMovesPerHour: 40, shardCooldownMs: 10 * MINUTE }, ratesWith(64, 10));
    w.advance(10 * MINUTE);
    expect(w.moved()).toBe(0);
    w.rates = ratesWith(64, 10, { 5: 200 });
    w.advance(10 * MINUTE);
    // Shard 5's two nodes carried 32 copies of 10 and its 200: 510 against a mean of 415 (+23 %), so they shed copies.
    const duringSpike = w.moved();
    expect(duringSpike).toBeGreaterThan(0);
    for (const n of w.holders(5)) expect(w.nodeLoads().get(n)! / 415).toBeLessThanOrEqual(1.05 + 1e-9);
    w.rates = ratesWith(64, 10);
    w.advance(100 * MINUTE);
    for (let t = w.now - 120 * MINUTE; t <= w.now; t += MINUTE) expect(w.copiesAddedInHourBefore(t)).toBeLessThanOrEqual(40);
    const loads = [...w.nodeLoads().values()];
    const mean = loads.reduce((a, b) => a + b, 0) / loads.length;
    for (const l of loads) expect(Math.abs(l / mean - 1)).toBeLessThanOrEqual(0.1 + 1e-9);
    // Settled: the last hour moved nothing.
    expect(w.copiesAddedInHourBefore(w.now)).toBe(0);
  });

  it('moves at most maxMovesPerHour copies in any hour: a plan of more waits for the hour to pass', () => {
    const w = world(4, 64, 1, { sustainMs: MINUTE, maxMovesPerHour: 3, shardCooldownMs: MINUTE }, ratesWith(64, 100));
    const onN0 = w.copiesOf('n0');
    w.rates = ratesWith(64, 100, Object.fromEntries(onN0.slice(0, 8).map((s) => [s, 400])));
    w.advance(30 * MINUTE);
    expect(w.moved()).toBe(3);
    expect(w.explain().verdict).toBe('hourly-limit');
    w.advance(60 * MINUTE);
    expect(w.moved()).toBeGreaterThan(3);
    for (let t = w.now - 90 * MINUTE; t <= w.now; t += MINUTE) expect(w.copiesAddedInHourBefore(t)).toBeLessThanOrEqual(3);
  });

  it("a load round moves at most the dataset's maxConcurrentMoves copies, at most maxConcurrentMovesPerNode per node, as its dry run shows; the rounds after it go on until every node is within the band", () => {
    const limits = { maxConcurrentMoves: 6, maxConcurrentMovesPerNode: 2 };
    const w = world(8, 128, 1, { sustainMs: MINUTE, maxMovesPerHour: 1000, maxConcurrentMovesPerNode: 2 }, ratesWith(128, 10), limits.maxConcurrentMoves);
    // Half the shards of n0..n3 turn 3× hotter: four nodes at 4/3 of the mean, four at 2/3.
    const hot = ['n0', 'n1', 'n2', 'n3'].flatMap((n) => w.copiesOf(n).slice(0, 8));
    w.rates = ratesWith(128, 10, Object.fromEntries(hot.map((s) => [s, 30])));
    let rounds = 0;
    let largest = 0;
    for (let t = 0; t < (60 * MINUTE) / REPORT_MS; t++) {
      const dryRun = w.explain();
      expect(dryRun.moves.length).toBeLessThanOrEqual(limits.maxConcurrentMoves);
      expect(most(changedPerNode(dryRun.moves))).toBeLessThanOrEqual(limits.maxConcurrentMovesPerNode);
      const before = [...Array(128).keys()].map((s) => w.holders(s));
      w.advance(REPORT_MS);
      // One window holds at most one round: the next waits for its moves, and then for fresh figures.
      const moves = [...Array(128).keys()].flatMap((s) =>
        w.holders(s).flatMap((to) => (before[s]!.includes(to) ? [] : [{ shard: s, from: before[s]![0]!, to }])),
      );
      if (moves.length === 0) continue;
      rounds += 1;
      largest = Math.max(largest, moves.length);
      expect(moves.length).toBeLessThanOrEqual(limits.maxConcurrentMoves);
      expect(most(changedPerNode(moves))).toBeLessThanOrEqual(limits.maxConcurrentMovesPerNode);
    }
    // Four nodes shedding a quarter of their load, six copies a round: more than one round, then the band.
    expect(rounds).toBeGreaterThan(1);
    expect(largest).toBe(limits.maxConcurrentMoves);
    const loads = [...w.nodeLoads().values()];
    const mean = loads.reduce((a, b) => a + b, 0) / loads.length;
    for (const l of loads) expect(Math.abs(l / mean - 1)).toBeLessThanOrEqual(0.05 + 1e-9);
    expect(w.explain().verdict).toBe('balanced');
  });

  it('the limits of moves at once hold back load rounds only: a lost node’s copies are all placed again at once', () => {
    const w = world(8, 128, 1, { sustainMs: MINUTE, maxConcurrentMovesPerNode: 1 }, ratesWith(128, 10), 2);
    w.advance(5 * MINUTE);
    const lost = w.state.members[0]!;
    const before = [...Array(128).keys()].map((s) => w.holders(s));
    w.run({ type: 'MemberDown', node: lost.node, incarnation: lost.incarnation });
    // Each of its 16 copies had no other: placed again in the same decision, several on a node.
    const moves = [...Array(128).keys()].flatMap((s) => w.holders(s).flatMap((to) => (before[s]!.includes(to) ? [] : [{ shard: s, from: lost.node, to }])));
    expect(moves).toHaveLength(16);
    for (let s = 0; s < 128; s++) expect(w.holders(s)).toHaveLength(1);
    expect(Math.max(...[...changedPerNode(moves)].filter(([n]) => n !== lost.node).map(([, c]) => c))).toBeGreaterThan(1);
  });

  it('a shard hot every other minute never holds a node outside the trigger band for sustainMs: nothing moves', () => {
    const w = world(4, 32, 1, { sustainMs: 3 * MINUTE }, ratesWith(32, 10));
    for (let minute = 0; minute < 60; minute++) {
      w.rates = ratesWith(32, 10, minute % 2 === 0 ? { 3: 60 } : {});
      w.advance(MINUTE);
    }
    expect(w.moved()).toBe(0);
    // Held the hot minute for good, the same load does move copies: the rule above is what held them.
    w.rates = ratesWith(32, 10, { 3: 60 });
    w.advance(5 * MINUTE);
    expect(w.moved()).toBeGreaterThan(0);
  });

  it('an operator pauses load moves (nothing moves, the explanation says why) and resumes them', () => {
    const w = world(4, 32, 1, { sustainMs: MINUTE }, ratesWith(32, 10, { 0: 80, 1: 80, 2: 80, 3: 80 }));
    expect(w.setPaused(true)).toEqual({ type: 'LoadBalancingSet', dataset: ds, paused: true });
    w.advance(10 * MINUTE);
    expect(w.moved()).toBe(0);
    const paused = w.explain();
    expect(paused.verdict).toBe('paused');
    expect(paused.moves.length).toBeGreaterThan(0);
    expect(paused.moves.every((m) => m.why.length > 0 && w.holders(m.shard).includes(m.from))).toBe(true);
    expect(w.setPaused(false)).toEqual({ type: 'LoadBalancingSet', dataset: ds, paused: false });
    w.advance(3 * MINUTE);
    expect(w.moved()).toBeGreaterThan(0);
  });

  it('refuses and counts figures that are not a number, negative, absurd, from the future, not of its copy, or of a non-member; none moves a copy', () => {
    const w = world(2, 8, 1, { sustainMs: MINUTE }, ratesWith(8, 10));
    const m = w.state.members[0]!;
    const notMine = [...Array(8).keys()].find((s) => !w.holders(s).includes(m.node))!;
    const mine = [...Array(8).keys()].find((s) => w.holders(s).includes(m.node))!;
    const bad = (over: Partial<LoadReport>): LoadReport => ({
      node: m.node,
      incarnation: m.incarnation,
      dataset: ds,
      at: w.now,
      windowMs: REPORT_MS,
      shards: [mine],
      records: [1e6],
      bytes: [0],
      sinkMs: [0],
      ...over,
    });
    const future = bad({ at: w.now + 10 * MINUTE });
    const stranger = bad({ incarnation: 'stranger#1' as never });
    for (let i = 0; i < 12; i++) {
      w.now += REPORT_MS;
      w.report([
        bad({ records: [Number.NaN] }),
        bad({ records: [null as never] }),
        bad({ records: [-5] }),
        bad({ records: [1e15] }),
        bad({ shards: [notMine] }),
        { ...future, at: w.now + 10 * MINUTE },
        { ...stranger, at: w.now },
      ]);
    }
    expect(w.moved()).toBe(0);
    const refused = w.explain().refused;
    expect(refused).toMatchObject({ 'not-a-number': 24, negative: 12, absurd: 12, 'not-its-copy': 12, 'from-the-future': 12, 'not-a-member': 12 });
  });

  it('a new singleton with no load view moves nothing at its recovery round: its view is incomplete until the nodes report', () => {
    const w = world(4, 32, 1, { sustainMs: MINUTE }, ratesWith(32, 10, { 0: 300 }));
    w.advance(5 * MINUTE);
    const before = w.mapper.toSnapshot(w.state.epoch);
    const next = new Harness(
      { settleWindowMs: 0 },
      {
        ...emptyRecovery(2, w.state.members),
        datasets: [w.state.datasets.get(ds)!.config],
        maps: [before],
      },
    );
    next.now = w.now;
    for (let s = 0; s < 32; s++) expect(next.mapper(ds).nodesForShard(s)).toEqual(w.mapper.nodesForShard(s));
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

  it('takes maxConcurrentMovesPerNode (default 4), and refuses it unless a positive integer, naming it', () => {
    const base = { ref: 'x', numShards: 8, minNumNodes: 1, strategy: 'balanced', source: { type: 'synthetic' } };
    const loadBalanceOf = (loadBalance: object) => {
      const r = validateDatasetConfig({ ...base, loadBalance });
      return r.ok ? r.value.loadBalance : r.error.message;
    };
    expect(loadBalanceOf({})).toMatchObject({ maxConcurrentMovesPerNode: 4 });
    expect(loadBalanceOf({ maxConcurrentMovesPerNode: 1 })).toMatchObject({ maxConcurrentMovesPerNode: 1 });
    // The dataset's own maxConcurrentMoves is the limit of a round's moves in all: not a loadBalance key.
    expect(loadBalanceOf({ maxConcurrentMoves: 3 })).toMatch(/maxConcurrentMoves/);
    const field = 'loadBalance.maxConcurrentMovesPerNode';
    expect(loadBalanceOf({ maxConcurrentMovesPerNode: 0 })).toBe(`${field} must be at least 1`);
    expect(loadBalanceOf({ maxConcurrentMovesPerNode: -2 })).toBe(`${field} must be at least 1`);
    expect(loadBalanceOf({ maxConcurrentMovesPerNode: 1.5 })).toBe(`${field} must be an integer`);
    expect(loadBalanceOf({ maxConcurrentMovesPerNode: '4' })).toBe(`${field} must be a number of copies`);
    expect(loadBalanceOf({ maxConcurrentMovesPerNode: null })).toBe(`${field} must be a number of copies`);
    expect(loadBalanceOf({ maxConcurrentMovesPerNode: 10_000_000 })).toBe(`${field} must be at most 524288`);
  });

  it('refuses a band or a trigger band of 1 or more, 0 or less, at setup', () => {
    const base = { ref: 'x', numShards: 8, minNumNodes: 1, strategy: 'balanced', source: { type: 'synthetic' } };
    const refusal = (loadBalance: object) => {
      const r = validateDatasetConfig({ ...base, loadBalance });
      return r.ok ? 'ok' : r.error.message;
    };
    for (const band of [1, 1.5, -0.05]) expect(refusal({ band })).toMatch(/^loadBalance\.band must be (above 0|below 1)/);
    for (const triggerBand of [1, 0, -1]) expect(refusal({ triggerBand })).toMatch(/^loadBalance\.triggerBand must be (above 0|below 1)/);
    expect(refusal({ band: 0.99, triggerBand: 0.995 })).toBe('ok');
  });

  it('gives each member’s load over its weighted share as the load round sees it (shardherd_load_node_ratio): none before the view is complete, none for a dataset placed by copy counts', () => {
    const w = world(4, 32, 1, { sustainMs: 60 * MINUTE }, ratesWith(32, 10, { 0: 50, 1: 30 }));
    w.run({ type: 'MemberUp', member: { node: 'heavy' as NodeId, incarnation: 'heavy#1' as never, joinedAt: 99, rack: 'r0', weight: 2 } });
    w.startCopies();
    const plain = validateDatasetConfig({ ref: 'plain', numShards: 4, minNumNodes: 1, source: { type: 'synthetic' } });
    if (!plain.ok) throw new Error(plain.error.message);
    w.run({ type: 'SetupDataset', config: plain.value, replyTo: adminReplyTo() });
    // No report yet: the view is incomplete, and no figure is exported.
    expect(loadRatios(w.state, w.now)).toEqual([]);
    w.advance(REPORT_MS);
    const ratios = loadRatios(w.state, w.now);
    const loads = w.nodeLoads();
    const weightOf = (n: NodeId) => (n === 'heavy' ? 2 : 1);
    const perWeight = [...loads.values()].reduce((a, b) => a + b, 0) / [...loads.keys()].reduce((a, n) => a + weightOf(n), 0);
    expect(ratios.map((r) => r.node).sort()).toEqual([...loads.keys()].sort());
    for (const r of ratios) {
      expect(r.dataset).toBe(ds);
      expect(r.ratio).toBeCloseTo(loads.get(r.node)! / (perWeight * weightOf(r.node)), 9);
    }
    // Figures older than staleMs do not count: the view is incomplete again.
    expect(loadRatios(w.state, w.now + 2 * MINUTE)).toEqual([]);
  });

  it('ExplainPlacement and SetLoadBalancing of a dataset placed by copy counts answer NotLoadAware', () => {
    const h = new Harness();
    h.addMember('a');
    h.setup(datasetRef('plain') as DatasetRef, 4, 1);
    expect(replyOf(h.run({ type: 'ExplainPlacement', dataset: datasetRef('plain'), replyTo: adminReplyTo() }))?.type).toBe('NotLoadAware');
    expect(replyOf(h.run({ type: 'SetLoadBalancing', dataset: datasetRef('plain'), paused: true, replyTo: adminReplyTo() }))?.type).toBe('NotLoadAware');
  });
});

const HISTORIES = Number(process.env.SHARDHERD_LOAD_HISTORIES ?? 100);
const AT_REST: readonly string[] = ['balanced', 'within-trigger', 'no-gain'];

describe('issue 37: random load histories on simulated time', () => {
  it(`${HISTORIES} histories of skewed rates turning hot and cooling: isolation always, never more moves in an hour than the limit, at rest within sustainMs of the last change`, () => {
    const failures: string[] = [];
    for (let seed = 1; seed <= HISTORIES; seed++) {
      const r = new SeededRandom(seed * 104_729);
      const shards = r.pick([16, 32, 64]);
      const rf = r.int(1, 2);
      const limit = r.int(4, 40);
      const sustainMs = r.int(1, 3) * MINUTE;
      const base = zipfRates(shards, r.pick([0, 0.8, 1.1, 1.5]), r).map((x) => x * 1000 * shards);
      const w = world(r.int(3, 8), shards, rf, { sustainMs, maxMovesPerHour: limit, shardCooldownMs: r.int(0, 10) * MINUTE }, base);
      const fail = (what: string) => failures.push(`seed ${seed} at ${w.now}: ${what}`);
      const rackOf = new Map(w.state.members.map((m) => [m.node as string, m.rack]));
      const check = () => {
        for (let s = 0; s < shards; s++) {
          const holders = w.mapper.nodesForShard(s);
          if (holders.length === 0 || holders.length > rf) fail(`shard ${s} has ${holders.length} copies at RF ${rf}`);
          if (new Set(holders.map((n) => rackOf.get(n))).size !== holders.length) fail(`shard ${s} has two copies in one rack: ${holders.join(',')}`);
        }
        if (w.copiesAddedInHourBefore(w.now) > limit) fail(`${w.copiesAddedInHourBefore(w.now)} copies moved in the hour, limit ${limit}`);
      };
      let rates = [...base];
      for (let phase = r.int(1, 4); phase > 0; phase--) {
        // A shard turns hot (2–20×), or every hot shard cools back.
        rates = r.chance(0.7) ? rates.map((x, s) => (s === r.int(0, shards - 1) ? x * r.int(2, 20) : x)) : [...base];
        w.rates = rates;
        for (let t = r.int(1, 30); t > 0; t--) {
          w.advance(MINUTE);
          check();
        }
      }
      // Nothing changes any more: the load round comes to rest within sustainMs, plus an hour for each hourly limit's worth of moves.
      const changedAt = w.now;
      const movedBefore = w.copiesAdded.length;
      let rest = w.explain().verdict;
      while (!AT_REST.includes(rest) && w.now - changedAt <= 6 * 60 * MINUTE) {
        w.advance(REPORT_MS);
        check();
        rest = w.explain().verdict;
      }
      const took = w.now - changedAt;
      const hours = Math.ceil((w.copiesAdded.length - movedBefore) / limit);
      if (!AT_REST.includes(rest)) fail(`not at rest 6 hours after the last change: ${rest}`);
      else if (took > sustainMs + 3 * REPORT_MS + hours * 60 * MINUTE) {
        fail(`at rest only ${took} ms after the last change (sustainMs ${sustainMs}, ${w.copiesAdded.length - movedBefore} moves at ${limit} an hour)`);
      }
    }
    expect(failures.slice(0, 10)).toEqual([]);
  }, 300_000);
});
