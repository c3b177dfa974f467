// A lost node's copies kept for its replacement delay, end to end: an embedded cluster at RF 2
// (real nodes, actors and core, simulated clock, a sink per node). A node that crashes and restarts
// within the delay takes its copies back (restarted from its own checkpoints, no copy created, every
// offset held); one that does not come back has its copies re-created after the delay.
import { afterEach, describe, expect, it } from 'vitest';
import type { DatasetRef } from '../../src/core/ids.js';
import type { ShardMapper } from '../../src/core/shard-mapper.js';
import { isServingCopy } from '../../src/core/shard-record.js';
import { EmbeddedCluster } from '../../src/embedded/embedded-cluster.js';
import { CountingSink } from '../../src/ingest/counting-sink.js';
import { startRackedWithDataset, storedMap } from '../support/racked-cluster.js';

const RATE = 20;
const NUM_SHARDS = 8;
const DELAY_MS = 10_000;
const DATASET = {
  ref: 'kept',
  numShards: NUM_SHARDS,
  minNumNodes: 1,
  replicationFactor: 2,
  strategy: 'balanced',
  replacementDelayMs: DELAY_MS,
  source: { type: 'synthetic', recordsPerSecond: RATE },
} as const;
const ref = DATASET.ref as DatasetRef;

let cluster: EmbeddedCluster | undefined;
afterEach(async () => {
  await cluster?.stop();
  cluster = undefined;
});

async function start() {
  const world = await startRackedWithDataset('kept', DATASET, { settleWindowMs: 500 });
  cluster = world.cluster;
  return world;
}

type World = Awaited<ReturnType<typeof start>>;

const stored = (w: World): Promise<ShardMapper> => storedMap(w.cluster, ref);

/** Advances in 50 ms ticks for `ms`, or until `done`; checks at every tick that every shard has a serving copy. */
async function run(w: World, ms: number, done?: (map: ShardMapper) => boolean): Promise<ShardMapper> {
  for (let t = 50; t <= ms; t += 50) {
    await w.driver.advance(50);
    const map = await stored(w);
    for (let s = 0; s < NUM_SHARDS; s++)
      expect(map.recordForShard(s).assignments.some(isServingCopy), `shard ${s} has no serving copy at ${w.cluster.clock.now()} ms`).toBe(true);
    if (done?.(map)) return map;
  }
  if (done) throw new Error(`not done within ${ms} ms of simulated time`);
  return stored(w);
}

const copies = (map: ShardMapper): string[] =>
  Array.from({ length: NUM_SHARDS }, (_, s) => map.nodesForShard(s).map((n) => `${s}/${n}`))
    .flat()
    .sort();

/** Every shard has two Active, Available copies. */
const settled = (map: ShardMapper): boolean =>
  Array.from({ length: NUM_SHARDS }, (_, s) => map.recordForShard(s).assignments).every(
    (cs) => cs.length === 2 && cs.every((c) => c.placement === 'Available' && c.status.type === 'Active'),
  );

describe('a lost node within its replacement delay (RF 2, a sink per node)', () => {
  it('restarted within the delay, it takes its copies back: no copy created, each resumes from its own checkpoint and holds every offset', async () => {
    const w = await start();
    const n2 = w.cluster.node('n2');
    const before = await stored(w);
    const mine = before.shardsForNode(n2.node);
    expect(mine.length).toBeGreaterThan(0);

    n2.crash();
    // The membership notices (session 1 s); its copies stay in the map, Down, the others serve.
    const kept = await run(w, 5_000, (map) => map.copiesForNode(n2.node).every((c) => c.copy.status.type === 'Down'));
    expect(kept.shardsForNode(n2.node)).toEqual(mine);
    await run(w, 2_000);

    await n2.start(); // same id, a new incarnation, 8 s after the crash
    const back = await run(w, 10_000, settled);
    expect(copies(back)).toEqual(copies(before));

    await w.driver.advance(DELAY_MS); // the delay the node beat changes nothing when it would have ended
    const map = await run(w, 1_000);
    expect(copies(map)).toEqual(copies(before));
    const produced = Math.floor(((w.cluster.clock.now() - 1_000) * RATE) / 1000);
    for (const s of mine) {
      const tally = (w.cluster.sinkOf(n2.node) as CountingSink).tally(ref, s);
      expect(tally.covered, `n2's copy of shard ${s} holds every offset, its downtime's too`).toBeGreaterThanOrEqual(produced);
      expect(tally.ahead.size).toBe(0);
    }
  }, 120_000);

  it('not back within the delay, its copies are re-created in its rack', async () => {
    const w = await start();
    const n2 = w.cluster.node('n2');
    const mine = (await stored(w)).shardsForNode(n2.node);
    n2.crash();
    const kept = await run(w, DELAY_MS - 2_000);
    expect(kept.shardsForNode(n2.node)).toEqual(mine);
    const after = await run(w, 10_000, (map) => map.shardsForNode(n2.node).length === 0 && settled(map));
    for (const s of mine) expect(after.nodesForShard(s)).toContain('n4');
  }, 120_000);

  // Restarting nodes in the order they started restarts the singleton's host at every step: the
  // singleton moves to the next oldest, which must carry on its predecessor's absences (and keep
  // the copies of its own host, lost while no singleton ran) instead of re-creating them.
  it.each([
    ["in start order, the singleton's host first each time", ['n1', 'n2', 'n3', 'n4']],
    ['in reverse order', ['n4', 'n3', 'n2', 'n1']],
    ['in a mixed order', ['n3', 'n1', 'n4', 'n2']],
  ])(
    'a rolling restart %s creates no copy and moves none',
    async (_, order) => {
      const w = await start();
      const before = await stored(w);
      const created = new Set<string>();
      const watch = (map: ShardMapper) => {
        for (const c of copies(map)) if (!copies(before).includes(c)) created.add(c);
      };
      for (const name of order) {
        const node = w.cluster.node(name);
        await node.stop();
        watch(await run(w, 2_000));
        await node.start();
        const back = await run(w, 15_000, (map) => {
          watch(map);
          return settled(map);
        });
        expect(copies(back), `after restarting ${name}`).toEqual(copies(before));
      }
      expect([...created]).toEqual([]);
    },
    180_000,
  );
});
