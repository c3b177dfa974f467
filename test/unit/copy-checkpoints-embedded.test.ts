// Every copy holds every record: an embedded cluster at RF 2 (real nodes, actors and core, simulated
// clock) where each node has its own sink. A node crashes and restarts, its copies are re-created
// elsewhere and later move back, another node is drained: every copy in the final map has received
// every offset from the earliest one, and during the planned moves every shard always has a serving
// copy.
import { afterEach, describe, expect, it } from 'vitest';
import type { DatasetRef } from '../../src/core/ids.js';
import type { Reply } from '../../src/core/shard-manager/protocol.js';
import type { ShardMapper } from '../../src/core/shard-mapper.js';
import { isServingCopy } from '../../src/core/shard-record.js';
import { EmbeddedCluster } from '../../src/embedded/embedded-cluster.js';
import { CountingSink } from '../../src/ingest/counting-sink.js';
import type { Request } from '../../src/protocol/wire.js';
import { startRackedWithDataset, storedMap } from '../support/racked-cluster.js';

const RATE = 20;
const NUM_SHARDS = 8;
// No replacement delay: the crashed node's copies are re-created elsewhere at once, which is what
// this test follows (a restart within the delay is replacement-delay-embedded.test.ts's).
const DATASET = {
  ref: 'copies',
  numShards: NUM_SHARDS,
  minNumNodes: 1,
  replicationFactor: 2,
  strategy: 'balanced',
  maxConcurrentMoves: 2,
  replacementDelayMs: 0,
  source: { type: 'synthetic', recordsPerSecond: RATE },
} as const;
const ref = DATASET.ref as DatasetRef;

let cluster: EmbeddedCluster | undefined;
afterEach(async () => {
  await cluster?.stop();
  cluster = undefined;
});

async function start() {
  const world = await startRackedWithDataset('copies', DATASET);
  cluster = world.cluster;
  return world;
}

type World = Awaited<ReturnType<typeof start>>;

const stored = (w: World): Promise<ShardMapper> => storedMap(w.cluster, ref);

/** Advances in 50 ms ticks until `done`; with `serving`, checks at every tick that every shard has a serving copy. */
async function until(w: World, done: (map: ShardMapper) => boolean, serving: boolean): Promise<void> {
  for (let tick = 1; tick <= 600; tick++) {
    await w.driver.advance(50);
    const map = await stored(w);
    if (serving) {
      for (let s = 0; s < NUM_SHARDS; s++)
        expect(map.recordForShard(s).assignments.some(isServingCopy), `shard ${s} has no serving copy at tick ${tick}`).toBe(true);
    }
    if (done(map)) return;
  }
  throw new Error('not done within 30 s of simulated time');
}

/** Every shard has two Active copies and no move is in flight. */
const settled = (map: ShardMapper): boolean =>
  Array.from({ length: NUM_SHARDS }, (_, s) => map.recordForShard(s).assignments).every(
    (copies) => copies.length === 2 && copies.every((c) => c.placement === 'Available' && c.status.type === 'Active'),
  );

describe('every copy holds every record (RF 2, a sink per node)', () => {
  it('after a crash, a restart that moves copies back and a drain, each copy has every offset; planned moves never leave a shard unserved', async () => {
    const w = await start();
    const n2 = w.cluster.node('n2');
    const before = await stored(w);
    expect(before.shardsForNode(n2.node).length).toBeGreaterThan(0);

    // A crash: n2's copies are re-created on n4 (the only other node of its rack). The other copy of
    // each shard keeps serving meanwhile.
    n2.crash();
    await until(w, (map) => map.shardsForNode(n2.node).length === 0 && settled(map), true);

    // The same node restarts (a new incarnation, the same id): the balanced strategy moves its share
    // back, as planned moves; each of its copies resumes from its own checkpoint.
    await n2.start();
    await until(w, (map) => map.shardsForNode(n2.node).length > 0 && settled(map), true);

    // A drain: planned moves off n3.
    const drained = w.cluster.request((replyTo) => ({ type: 'RemoveNode', node: 'n3', replyTo }) as unknown as Request, 5_000);
    await w.driver.advance(100);
    expect((await drained) as Reply).toMatchObject({ type: 'NodeOperationAccepted' });
    await until(w, (map) => w.cluster.node('n3').isDrained && settled(map), true);
    await w.driver.advance(3_000);

    const map = await stored(w);
    // Everything the source held 1 s ago: a copy that skipped any offset has a gap below it.
    const produced = Math.floor(((w.cluster.clock.now() - 1_000) * RATE) / 1000);
    expect(produced).toBeGreaterThan(100);
    let copies = 0;
    for (let s = 0; s < NUM_SHARDS; s++) {
      for (const node of map.nodesForShard(s)) {
        const tally = (w.cluster.sinkOf(node) as CountingSink).tally(ref, s);
        copies += 1;
        expect(tally.covered, `${node}'s copy of shard ${s}: every offset from 0 (lost: ${Math.max(0, produced - tally.covered)})`).toBeGreaterThanOrEqual(
          produced,
        );
        expect(tally.ahead.size, `${node}'s copy of shard ${s} has no gap`).toBe(0);
      }
    }
    expect(copies).toBe(2 * NUM_SHARDS);
    // n2 took copies back after its restart: they hold the records of its downtime too.
    expect(map.shardsForNode(n2.node).length).toBeGreaterThan(0);
  }, 120_000);
});
