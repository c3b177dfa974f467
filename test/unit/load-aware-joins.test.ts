// Issue 37: a load-aware dataset's rounds before its load is known. Nodes that join before any
// load was measured get their share of copies by count (stale or missing reports fall back to copy
// counts, never to nothing); a new singleton, whose view is empty until the nodes report, does not
// even counts out and undo the load's placement: it defers a join's round until the reports are in,
// then places by load. Judged from the map and the rates the test sets.
import { describe, expect, it } from 'vitest';
import type { NodeId } from '../../src/core/ids.js';
import { LOAD_REPORT_MS, LoadWorld } from '../../src/sim/load-world.js';

const MINUTE = 60_000;

describe('issue 37: a load-aware dataset before its load is known', () => {
  it('nodes that join before any load is measured get their share of copies by count', () => {
    const w = new LoadWorld({ nodes: 2, shards: 32, replicationFactor: 1, loadBalance: {}, rates: Array<number>(32).fill(10) });
    expect(w.copiesOf('n0').length + w.copiesOf('n1').length).toBe(32);
    w.join('n2');
    w.join('n3');
    for (const n of ['n0', 'n1', 'n2', 'n3']) expect(w.copiesOf(n)).toHaveLength(8);
  });

  it('nodes that join an idle dataset (every figure 0) get their share of copies by count', () => {
    const w = new LoadWorld({ nodes: 2, shards: 32, replicationFactor: 2, loadBalance: {}, rates: Array<number>(32).fill(0) });
    w.advance(MINUTE);
    expect(w.explain().measured).toBe(32);
    w.join('n2');
    w.join('n3');
    for (const n of ['n0', 'n1', 'n2', 'n3']) expect(w.copiesOf(n)).toHaveLength(16);
  });

  it('after a failover, a join waits for the reports, then is placed by load; the load placement is not evened out by counts', () => {
    // Shard 0 carries 300 of 610 records/s: hot, alone on its node; the other 31 shards spread by load.
    const rates = Array.from({ length: 32 }, (_, s) => (s === 0 ? 300 : 10));
    const w = new LoadWorld({ nodes: 4, shards: 32, replicationFactor: 1, loadBalance: { sustainMs: MINUTE }, rates });
    w.advance(10 * MINUTE);
    const hotNode = w.mapper.nodesForShard(0)[0]!;
    expect(w.copiesOf(hotNode)).toEqual([0]);

    w.failover();
    w.join('n4');
    // The new singleton has no figures yet: the join's round waits for them rather than evening copy counts.
    expect(w.copiesOf(hotNode)).toEqual([0]);
    expect(w.copiesOf('n4')).toHaveLength(0);

    w.advance(LOAD_REPORT_MS);
    // The reports are in: the deferred round placed by load. The hot shard stays alone; n4 took its share of the rest.
    expect(w.copiesOf(hotNode)).toEqual([0]);
    const others = ['n0', 'n1', 'n2', 'n3', 'n4'].filter((n) => n !== hotNode);
    const loads = others.map((n) => w.copiesOf(n).reduce((sum, s) => sum + rates[s]!, 0));
    const mean = loads.reduce((a, b) => a + b, 0) / loads.length;
    for (const l of loads) expect(Math.abs(l / mean - 1)).toBeLessThanOrEqual(0.1);
    expect(w.copiesOf('n4').length).toBeGreaterThan(0);
  });

  it('a lost node’s copies are placed by load, but the round moves no other copy than the copy-count strategy would: the imbalance waits for the load round', () => {
    const w = new LoadWorld({ nodes: 4, shards: 64, replicationFactor: 1, loadBalance: { sustainMs: 60 * MINUTE }, rates: Array<number>(64).fill(100) });
    w.advance(MINUTE);
    // Half of n0's 16 shards 4× hotter: n0 at 2.5 × the others, held back by the hour's sustainMs.
    const hot = w.copiesOf('n0').slice(0, 8);
    w.rates = Array.from({ length: 64 }, (_, s) => (hot.includes(s) ? 400 : 100));
    w.advance(2 * MINUTE);
    expect(w.explain().verdict).toBe('waiting');
    const held = ['n0', 'n1', 'n2'].map((n) => w.copiesOf(n));
    const lost = w.state.members.find((m) => m.node === 'n3')!;
    const orphans = w.copiesOf('n3');
    w.run({ type: 'MemberDown', node: lost.node, incarnation: lost.incarnation });
    w.advance(3 * MINUTE);
    // Its 16 shards have a copy again, placed by load (none on the hot n0); by copy count the three
    // others would take 5 or 6 each and move nothing else, so nothing else moved: every node kept its
    // copies, n0 is still over its band, and the load round still waits for its sustainMs.
    for (const s of orphans) expect(w.mapper.nodesForShard(s)).toHaveLength(1);
    expect(orphans.filter((s) => w.mapper.nodesForShard(s).includes('n0' as NodeId))).toEqual([]);
    ['n0', 'n1', 'n2'].forEach((n, i) => expect(w.copiesOf(n)).toEqual(expect.arrayContaining(held[i]!)));
    expect(w.copiesOf('n0')).toHaveLength(16);
    expect(w.explain().verdict).toBe('waiting');
  });

  it('a new singleton keeps to the hourly limit and the shard cooldowns its predecessor started (persisted with the node operations)', () => {
    // Half of n0's shards 4× hotter: more to move than the hour allows (3).
    const w = new LoadWorld({
      nodes: 4,
      shards: 64,
      replicationFactor: 1,
      loadBalance: { sustainMs: MINUTE, maxMovesPerHour: 3 },
      rates: Array<number>(64).fill(100),
    });
    const onN0 = w.copiesOf('n0');
    w.rates = Array.from({ length: 64 }, (_, s) => (onN0.slice(0, 8).includes(s) ? 400 : 100));
    w.advance(5 * MINUTE);
    expect(w.copiesAddedInHourBefore(w.now)).toBe(3);
    expect(w.explain().movesLastHour).toBe(3);
    w.failover();
    // The successor counts the same three moves, and moves nothing more within the hour.
    expect(w.explain().movesLastHour).toBe(3);
    w.advance(30 * MINUTE);
    expect(w.copiesAddedInHourBefore(w.now)).toBe(3);
    w.advance(40 * MINUTE);
    expect(w.copiesAddedInHourBefore(w.now)).toBeGreaterThan(0);
    for (let t = w.now - 70 * MINUTE; t <= w.now; t += MINUTE) expect(w.copiesAddedInHourBefore(t)).toBeLessThanOrEqual(3);
  });
});
