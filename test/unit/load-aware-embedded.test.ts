// Issue 37, end to end: an embedded cluster (real nodes, actors, bus and core; simulated clock; a
// sink per node) ingesting a synthetic dataset whose shards run at skewed rates. The nodes measure
// what their sinks take and report it; the singleton moves copies by load. Judged from outside:
// each node's records per second as its own sink counted them, and a serving copy for every shard
// at every tick.
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { SimulatedClock } from '../../src/cluster/clock.js';
import { nodeId, type DatasetRef } from '../../src/core/ids.js';
import { BalancedPlacementStrategy } from '../../src/core/placement/balanced-strategy.js';
import { isServingCopy } from '../../src/core/shard-record.js';
import { EmbeddedCluster } from '../../src/embedded/embedded-cluster.js';
import { CountingSink } from '../../src/ingest/counting-sink.js';
import { startWithDataset } from '../support/dataset-setup.js';
import { storedMap } from '../support/racked-cluster.js';

const SHARDS = 16;
const RATE = 20;
const NODES = [
  { name: 'n1', rack: 'rackA' },
  { name: 'n2', rack: 'rackB' },
  { name: 'n3', rack: 'rackA' },
  { name: 'n4', rack: 'rackB' },
];
const ref = 'hot' as DatasetRef;

let cluster: EmbeddedCluster | undefined;
afterEach(async () => {
  await cluster?.stop();
  cluster = undefined;
});

/** Half of n1's shards in the first placement (the copy-count strategy's, from nothing: what the singleton places first) run 8× faster. */
function hotShards(): Set<number> {
  const placed = new BalancedPlacementStrategy().place({
    numShards: SHARDS,
    replicationFactor: 1,
    nodes: NODES.map((n) => ({ id: nodeId(n.name), group: n.rack, weight: 1 })),
    current: Array.from({ length: SHARDS }, () => []),
  });
  if (!placed.ok) throw new Error(placed.error.message);
  const onN1 = placed.value.flatMap((ids, s) => (ids.includes(nodeId('n1')) ? [s] : []));
  return new Set(onN1.slice(0, Math.ceil(onN1.length / 2)));
}

describe('issue 37: load-aware placement on an embedded cluster', () => {
  it('nodes report what their sinks take; the singleton moves copies until every node ingests within ±10 % of the mean, never leaving a shard unserved', async () => {
    const hot = hotShards();
    const sinks = new Map<string, CountingSink>();
    cluster = new EmbeddedCluster({
      name: `load-${Math.floor(performance.now() * 1000)}`,
      clock: new SimulatedClock(0),
      nodes: NODES,
      sink: (node) => {
        const sink = new CountingSink();
        sinks.set(node, sink);
        return sink;
      },
      source: { shardRates: (_d, s) => (hot.has(s) ? 8 : 1) },
      log: pino({ level: 'silent' }),
      sessionTimeoutMs: 1_000,
      heartbeatIntervalMs: 250,
      settings: { publishIntervalMs: 1_000, recoveryReplyTimeoutMs: 500, pollIntervalMs: 100, reportResendMs: 500, loadReportIntervalMs: 2_000 },
    });
    const driver = await startWithDataset(
      cluster,
      {
        ref,
        numShards: SHARDS,
        minNumNodes: 1,
        strategy: 'balanced',
        loadBalance: { sustainMs: 10_000, staleMs: 10_000 },
        source: { type: 'synthetic', recordsPerSecond: RATE },
      },
      3_000,
    );
    /** Records per second each node's sink took over the next `ms`, checking every shard is served at each tick. */
    const rates = async (ms: number): Promise<Map<string, number>> => {
      const before = new Map([...sinks].map(([n, s]) => [n, s.total().accepted]));
      for (let t = 0; t < ms; t += 500) {
        await driver.advance(500);
        const map = await storedMap(cluster!, ref);
        for (let s = 0; s < SHARDS; s++)
          expect(map.recordForShard(s).assignments.some(isServingCopy), `shard ${s} unserved at ${cluster!.clock.now()}`).toBe(true);
      }
      return new Map([...sinks].map(([n, s]) => [n, ((s.total().accepted - before.get(n)!) * 1000) / ms]));
    };
    const spread = (r: Map<string, number>) => {
      const xs = [...r.values()];
      const mean = xs.reduce((a, b) => a + b, 0) / xs.length;
      return Math.max(...xs.map((x) => Math.abs(x / mean - 1)));
    };
    const before = await rates(4_000);
    // n1 ingests its hot half at 8×: far above the mean before anything moves.
    expect(spread(before)).toBeGreaterThan(0.3);
    await rates(40_000);
    const after = await rates(10_000);
    expect(spread(after)).toBeLessThanOrEqual(0.1);
    // Nothing lost through the moves, as the sinks saw it: for every shard, some node's sink holds
    // every offset up to within two seconds of what the source has produced by now.
    const now = cluster.clock.now();
    for (let s = 0; s < SHARDS; s++) {
      const perSecond = RATE * (hot.has(s) ? 8 : 1);
      const produced = Math.floor((now * perSecond) / 1000);
      const covered = Math.max(...[...sinks.values()].map((sink) => sink.tally(ref, s).covered));
      expect(covered, `shard ${s}`).toBeGreaterThanOrEqual(produced - 2 * perSecond);
    }
    const reply = await cluster.request((replyTo) => ({ type: 'ExplainPlacement', dataset: ref, replyTo }));
    // At rest: within the band, or within the trigger band where records per shard are too coarse for ±5 %.
    expect(reply.type === 'PlacementExplanation' && ['balanced', 'within-trigger'].includes(reply.explanation.verdict)).toBe(true);
    expect(reply.type === 'PlacementExplanation' && reply.explanation.measured).toBe(SHARDS);
  }, 120_000);
});
