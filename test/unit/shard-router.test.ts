// Routing with redirection: a node's checkShard answers (ok, ASK during a handoff, MOVED to a stale
// router, TRYAGAIN, unknown), and a ShardRouter whose map is several versions behind reaching the
// serving node through MOVED answers, without a new snapshot.
import { afterEach, describe, expect, it } from 'vitest';
import type { DatasetRef, NodeId, ShardNum } from '../../src/core/ids.js';
import { checkShard } from '../../src/core/shard-check.js';
import { ShardMapper } from '../../src/core/shard-mapper.js';
import { ShardEvents } from '../../src/core/status.js';
import { RoutingError, ShardRouter } from '../../src/client/shard-router.js';
import type { EmbeddedCluster } from '../../src/embedded/embedded-cluster.js';
import { rackedCluster } from '../support/racked-cluster.js';
import { CountingSink } from '../../src/ingest/counting-sink.js';
import { SimDriver } from '../../src/sim/driver.js';

const ds = 'replicated' as DatasetRef;
const n = (id: string) => id as NodeId;
const s0 = 0 as ShardNum;

/** Shard 0 served by a and b, then a handing its copy to c (c catching up). */
function handoffMap(): ShardMapper {
  const map = new ShardMapper(4, ds);
  for (const e of [
    ShardEvents.assignmentStarted(ds, s0, n('a')),
    ShardEvents.ingestionStarted(ds, s0, n('a')),
    ShardEvents.copyAdded(ds, s0, n('b')),
    ShardEvents.ingestionStarted(ds, s0, n('b')),
  ]) {
    const r = map.updateFromEvent(e);
    if (!r.ok) throw new Error(JSON.stringify(r.error));
  }
  return map;
}

function apply(map: ShardMapper, ...events: ReturnType<typeof ShardEvents.copyAdded>[]) {
  for (const e of events) {
    const r = map.updateFromEvent(e);
    if (!r.ok) throw new Error(JSON.stringify(r.error));
  }
}

describe('checkShard', () => {
  it('answers ok where the node serves, ASK from a copy still catching up, MOVED to an older router', () => {
    const map = handoffMap();
    const before = map.version;
    apply(map, ShardEvents.copyAdded(ds, s0, n('c')), ShardEvents.leaving(ds, s0, n('a')));
    const version = map.assignmentVersion(0);
    expect(version).toBeGreaterThan(before);
    // The leaving copy serves until it is removed.
    expect(checkShard(map, n('a'), 0, before)).toEqual({ type: 'ok', version });
    expect(checkShard(map, n('c'), 0, before)).toEqual({ type: 'ask', node: 'a', version });
    // The handoff completes: a's copy goes, c serves.
    apply(map, ShardEvents.ingestionStarted(ds, s0, n('c')), ShardEvents.left(ds, s0, n('a')));
    const after = map.assignmentVersion(0);
    expect(checkShard(map, n('a'), 0, before)).toEqual({ type: 'moved', nodes: ['b', 'c'], version: after });
    // A router already at that version is not sent elsewhere by this node: it may be this node that is stale.
    expect(checkShard(map, n('a'), 0, after)).toEqual({ type: 'tryagain', version: after });
    expect(checkShard(map, n('a'), 9, 0)).toMatchObject({ type: 'unknown' });
    expect(checkShard(undefined, n('a'), 0, 0)).toMatchObject({ type: 'unknown' });
  });
});

let cluster: EmbeddedCluster | undefined;
afterEach(async () => {
  await cluster?.stop();
  cluster = undefined;
});

/** A racked cluster on the simulated clock with `ds` (8 shards, RF 2, balanced) set up and running. */
async function startWithDataset(name: string): Promise<{ driver: SimDriver; running: EmbeddedCluster }> {
  const running = rackedCluster(name, new CountingSink());
  cluster = running;
  const driver = new SimDriver(running);
  await running.startNodes();
  await driver.advance(500);
  const setup = running.setupDataset(
    { ref: ds, numShards: 8, minNumNodes: 1, replicationFactor: 2, strategy: 'balanced', source: { type: 'synthetic', recordsPerSecond: 20 } },
    5_000,
  );
  await driver.advance(100);
  expect((await setup).type).toBe('DatasetVerified');
  await driver.advance(3_000);
  return { driver, running };
}

describe('ShardRouter', () => {
  it('a router several map versions behind reaches the serving nodes through MOVED, without a new snapshot', async () => {
    const { driver, running } = await startWithDataset('router');

    const stale = new ShardRouter(running.node('n2'), ds);
    const fresh = new ShardRouter(running.node('n4'), ds);
    await driver.advance(2_000);
    const staleVersion = stale.version;
    expect(staleVersion).toBeGreaterThan(0);
    // The stale router stops hearing the singleton; its map stays as it was.
    stale.close();

    const drained = stale.nodesFor(0)[0]!;
    const drain = running.request((replyTo) => ({ type: 'RemoveNode', node: drained, replyTo }) as never, 5_000);
    await driver.advance(100);
    expect((await drain).type).toBe('NodeOperationAccepted');
    await driver.advance(5_000);
    expect(fresh.version).toBeGreaterThan(staleVersion + 2);
    expect(fresh.nodesFor(0)).not.toContain(drained);
    expect(stale.nodesFor(0)).toContain(drained);

    // Each request asks a node with the router's version, as a real router would over its own RPC.
    const visited: string[] = [];
    const send = async (node: NodeId, routerVersion: number) => {
      visited.push(node);
      const check = cluster!.node(node).checkShard(ds, 0, routerVersion);
      await driver.advance(10);
      const answer = await check;
      return { check: answer, value: answer.type === 'ok' ? node : undefined };
    };
    const servedBy = await stale.request(0, send);
    expect(fresh.nodesFor(0)).toContain(servedBy);
    expect(visited[0]).toBe(drained);
    // Learned from the MOVED answer: the next request goes straight to a serving node.
    expect(stale.nodesFor(0)).toEqual([...fresh.nodesFor(0)].sort());
    visited.length = 0;
    await stale.request(0, send);
    expect(visited).toHaveLength(1);
    expect(visited[0]).not.toBe(drained);
    fresh.close();
  });

  it('fails over to the next serving copy when send throws, and gives up with a typed error, never looping', async () => {
    const { driver, running } = await startWithDataset('router-failover');
    const router = new ShardRouter(running.node('n1'), ds, { spread: 'first' });
    await driver.advance(2_000);
    const [first, second] = router.nodesFor(0);
    expect(second).toBeDefined();
    // The first copy's transport fails: the second answers, in the same request.
    const asked: string[] = [];
    const value = await router.request(0, async (node) => {
      asked.push(node);
      if (node === first) throw new Error('connection refused');
      return { check: { type: 'ok', version: 0 }, value: node };
    });
    expect(value).toBe(second);
    expect(asked).toEqual([first, second]);
    // Every copy fails: asked again in rounds until the retry budget is spent (before the deadline
    // here), then a typed RoutingError, no endless loop.
    let sends = 0;
    const failing = router
      .request(0, async () => {
        sends += 1;
        return Promise.reject(new Error('down'));
      })
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    await driver.advance(5_000);
    expect(await failing).toMatchObject({ reason: 'overloaded', code: 'OVERLOADED' });
    expect(sends).toBeGreaterThan(2);
    // The first, then what the retry budget allows (a reserve of 10 per second), not a round every
    // 80 ms for the whole 5 s (about 130 sends).
    expect(sends).toBeLessThanOrEqual(20);
    // A redirection loop: given up after maxHops.
    await expect(router.request(0, async (node) => ({ check: { type: 'ask', node, version: 0 } }))).rejects.toBeInstanceOf(RoutingError);
    router.close();
  });
});
