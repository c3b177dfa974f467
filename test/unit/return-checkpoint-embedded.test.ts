// How much a node re-ingests when a shard comes back to it: an embedded cluster (real nodes, actors
// and core, simulated clock) where an operator moves one shard from A to B and back to A while
// records flow, every node writing one counting store. Declared `shared`, A resumes after B's last
// checkpoint; declared `per-copy` (what every sink was before the declaration), A resumes from its
// own old checkpoint and writes again everything B ingested meanwhile. Either way nothing is lost.
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { SimulatedClock } from '../../src/cluster/clock.js';
import type { DatasetConfigInput } from '../../src/core/dataset-config.js';
import type { DatasetRef, NodeId } from '../../src/core/ids.js';
import type { Reply } from '../../src/core/shard-manager/protocol.js';
import type { ShardMapper } from '../../src/core/shard-mapper.js';
import { EmbeddedCluster } from '../../src/embedded/embedded-cluster.js';
import { CountingSink } from '../../src/ingest/counting-sink.js';
import type { RecordSink, SinkStorage } from '../../src/ingest/ingestion-source.js';
import type { Request } from '../../src/protocol/wire.js';
import { storedMap } from '../support/racked-cluster.js';
import { startWithDataset } from '../support/dataset-setup.js';

const RATE = 50;
const DATASET = { ref: 'returns', numShards: 4, minNumNodes: 2, source: { type: 'synthetic', recordsPerSecond: RATE } } as const;
const ref = DATASET.ref as DatasetRef;

let cluster: EmbeddedCluster | undefined;
afterEach(async () => {
  await cluster?.stop();
  cluster = undefined;
});

/** What one node wrote of one shard into the shared store: records accepted, and those the store already held. */
interface Written {
  accepted: number;
  again: number;
}

/**
 * Every node writes the one `store`, through a wrapper that declares `storage` and counts, per node
 * and shard, the records the store already held when they came (what that node re-ingested).
 */
function countingNodes(store: CountingSink, storage: SinkStorage) {
  const written = new Map<string, Written>();
  const sinkOf = (node: NodeId): RecordSink => ({
    storage,
    accept: async (dataset, shard, records, token) => {
      // Read before the write: CountingSink applies a batch without awaiting, so nothing lands in between.
      const t = store.tally(dataset.ref, shard);
      const again = records.filter((r) => r.offset < t.covered || t.ahead.has(r.offset)).length;
      await store.accept(dataset, shard, records, token);
      const key = `${node}/${shard}`;
      const w = written.get(key) ?? { accepted: 0, again: 0 };
      w.accepted += records.length;
      w.again += again;
      written.set(key, w);
    },
  });
  const of = (node: string, shard: number): Written => ({ ...(written.get(`${node}/${shard}`) ?? { accepted: 0, again: 0 }) });
  return { sinkOf, of };
}

/** An embedded cluster of `names` on a simulated clock, every node writing `store` (declared `storage`), with `dataset` set up and ingesting for 5 s. */
async function startWith(names: readonly string[], storage: SinkStorage, dataset: DatasetConfigInput) {
  const store = new CountingSink();
  const nodes = countingNodes(store, storage);
  cluster = new EmbeddedCluster({
    name: `return-${storage}-${Math.floor(performance.now() * 1000)}`,
    clock: new SimulatedClock(0),
    nodes: names,
    sink: nodes.sinkOf,
    log: pino({ level: 'silent' }),
    sessionTimeoutMs: 1_000,
    heartbeatIntervalMs: 250,
    settings: { publishIntervalMs: 1_000, recoveryReplyTimeoutMs: 500, pollIntervalMs: 250, reportResendMs: 500, checkpointIntervalMs: 200 },
  });
  const w = cluster;
  const driver = await startWithDataset(w, dataset, 5_000);
  const request = async (build: (replyTo: unknown) => unknown): Promise<Reply> => {
    const reply = w.request((replyTo) => build(replyTo) as Request, 5_000);
    await driver.advance(100);
    return reply;
  };
  return { w, driver, store, nodes, request };
}

/** Every offset the source held 1 s ago is in the store, with no gap, for each shard of `dataset`. */
function nothingLost(w: EmbeddedCluster, store: CountingSink, dataset: DatasetRef, shards: number, rate: number): void {
  const produced = Math.floor(((w.clock.now() - 1_000) * rate) / 1000);
  expect(produced).toBeGreaterThan(10 * rate);
  for (let s = 0; s < shards; s++) {
    const tally = store.tally(dataset, s);
    expect(tally.covered, `the store of shard ${s}`).toBeGreaterThanOrEqual(produced);
    expect(tally.ahead.size).toBe(0);
  }
}

/** Moves `shard` A → B → A (operator stops and starts) and returns what A wrote again after its return. */
async function returnTrip(storage: SinkStorage) {
  const { w, driver, store, nodes, request } = await startWith(['n1', 'n2', 'n3', 'n4'], storage, DATASET);
  const move = async (shard: number, to: string) => {
    expect(await request((replyTo) => ({ type: 'StopShards', dataset: ref, shards: [shard], replyTo }))).toEqual({ type: 'Success' });
    await driver.advance(1_000);
    expect(await request((replyTo) => ({ type: 'StartShards', dataset: ref, node: to, shards: [shard], replyTo }))).toEqual({ type: 'Success' });
  };

  const map = await storedMap(w, ref);
  const shard = 0;
  const a = map.nodeForShard(shard)!;
  // A node with room for one more shard (each holds at most numShards / minNumNodes).
  const b = ['n1', 'n2', 'n3', 'n4'].find((n) => n !== a && map.shardsForNode(n as NodeId).length < 2)!;
  expect(b).toBeDefined();

  // A → B: B holds the shard for 10 s of records.
  await move(shard, b);
  await driver.advance(10_000);
  // B → A: what the store holds when A takes the shard back is what A would write again.
  const aBefore = nodes.of(a, shard);
  await move(shard, a);
  await driver.advance(5_000);
  const aAfter = nodes.of(a, shard);
  expect((await storedMap(w, ref)).nodeForShard(shard)).toBe(a);

  nothingLost(w, store, ref, DATASET.numShards, RATE);
  return { again: aAfter.again - aBefore.again, acceptedOnReturn: aAfter.accepted - aBefore.accepted, bWroteAgain: nodes.of(b, shard).again };
}

const PLANNED = {
  ref: 'planned',
  numShards: 4,
  minNumNodes: 1,
  strategy: 'balanced',
  maxConcurrentMoves: 4,
  replacementDelayMs: 0,
  source: { type: 'synthetic', recordsPerSecond: RATE },
} as const;
const planned = PLANNED.ref as DatasetRef;

/**
 * Planned moves, with their handoff (the Leaving copy ingests until the new one caught up): n1 is
 * drained, its shards move to n2 and ingest there for 10 s, then n1 is undrained and the balanced
 * strategy moves half of them back. Returns what n1 wrote again of the shards it took back.
 */
async function drainAndUndrain(storage: SinkStorage) {
  const { w, driver, store, nodes, request } = await startWith(['n1', 'n2'], storage, PLANNED);
  const n1 = w.node('n1');
  const until = async (done: (map: ShardMapper) => boolean) => {
    for (let tick = 0; tick < 600; tick++) {
      await driver.advance(50);
      if (done(await storedMap(w, planned))) return;
    }
    throw new Error('not done within 30 s of simulated time');
  };
  const settled = (map: ShardMapper) =>
    Array.from({ length: PLANNED.numShards }, (_, s) => map.recordForShard(s).assignments).every(
      (c) => c.length === 1 && c[0]!.placement === 'Available' && c[0]!.status.type === 'Active',
    );
  const heldBefore = (await storedMap(w, planned)).shardsForNode(n1.node);
  expect(heldBefore.length).toBeGreaterThan(0);

  expect(await request((replyTo) => ({ type: 'RemoveNode', node: 'n1', replyTo }))).toMatchObject({ type: 'NodeOperationAccepted' });
  await until((map) => n1.isDrained && settled(map));
  await driver.advance(10_000);
  const before = Array.from({ length: PLANNED.numShards }, (_, s) => nodes.of('n1', s));
  const duplicatesBefore = Array.from({ length: PLANNED.numShards }, (_, s) => store.tally(planned, s).duplicates);
  expect(await request((replyTo) => ({ type: 'AddNode', node: 'n1', replyTo }))).toMatchObject({ type: 'NodeOperationAccepted' });
  await until((map) => map.shardsForNode(n1.node).length > 0 && settled(map));
  await driver.advance(3_000);

  const back = (await storedMap(w, planned)).shardsForNode(n1.node).filter((s) => heldBefore.includes(s));
  expect(back.length).toBeGreaterThan(0);
  nothingLost(w, store, planned, PLANNED.numShards, RATE);
  const sum = (f: (s: number) => number) => back.reduce((total, s) => total + f(s), 0);
  return {
    shards: back.length,
    again: sum((s) => nodes.of('n1', s).again - before[s]!.again),
    // Every record the store got twice for those shards since the undrain, the Leaving copy's
    // writes during the handoff included.
    duplicates: sum((s) => store.tally(planned, s).duplicates - duplicatesBefore[s]!),
  };
}

describe('a shard back on a node it left (one store for all copies)', () => {
  it('with a shared sink the node re-ingests nothing B ingested; with a per-copy one, everything since its own checkpoint', async () => {
    const shared = await returnTrip('shared');
    await cluster?.stop();
    cluster = undefined;
    const perCopy = await returnTrip('per-copy');

    // Measured: shared 0 records re-ingested on the return (B 0 on its start), per-copy 560 (B 275).
    // Per-copy: A replays from its old checkpoint, all of B's ~10 s of records (RATE per second) and more.
    expect(perCopy.again, `per-copy re-ingested ${perCopy.again}`).toBeGreaterThan(8 * RATE);
    // Shared: A resumes after B's last checkpoint, which B wrote when it stopped.
    expect(shared.again, `shared re-ingested ${shared.again}`).toBeLessThanOrEqual(RATE / 5);
    expect(shared.again * 20).toBeLessThan(perCopy.again);
    // B, placed with no checkpoint of its own: per-copy from the earliest offset (all of A's records
    // again), shared after A's checkpoint.
    expect(perCopy.bWroteAgain).toBeGreaterThan(4 * RATE);
    expect(shared.bWroteAgain).toBeLessThanOrEqual(RATE / 5);
    // Both kept ingesting after the return.
    expect(shared.acceptedOnReturn).toBeGreaterThan(3 * RATE);
  }, 120_000);

  it('through a drain and an undrain (planned moves with handoff), the node re-ingests only the handoff overlap with a shared sink', async () => {
    const shared = await drainAndUndrain('shared');
    await cluster?.stop();
    cluster = undefined;
    const perCopy = await drainAndUndrain('per-copy');
    // Measured: shared 0 records re-ingested (0 duplicates in the store, the handoff's included) on
    // the 2 shards n1 took back; per-copy 1 010 (about 505 a shard: the 10 s on n2 and the drain).
    expect(perCopy.again, `per-copy re-ingested ${perCopy.again}`).toBeGreaterThan(perCopy.shards * 8 * RATE);
    // At most a batch or two a shard (the records written between the Leaving copy's last
    // checkpoint and its stop), nothing like the per-copy replay.
    expect(shared.duplicates, `shared: ${shared.duplicates} duplicates`).toBeLessThanOrEqual(shared.shards * (RATE / 2));
    expect(shared.again * 20).toBeLessThan(perCopy.again);
  }, 120_000);
});
