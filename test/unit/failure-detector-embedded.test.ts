// The failure detector wired into an embedded cluster (real nodes, actors and core, the in-process
// detector network, a simulated clock; docs/ARCHITECTURE.md §11): a crashed owner's shards move
// about a lease after the crash, not a session; a pause shorter than three quarters of the suspicion
// timeout evicts nobody, a longer one does and the node comes back as a new incarnation; a node cut
// off from the singleton stops writing before its shards are written elsewhere; `session-only`
// starts none of it.
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { SimulatedClock } from '../../src/cluster/clock.js';
import type { DatasetConfig } from '../../src/core/dataset-config.js';
import type { NodeId, ShardNum } from '../../src/core/ids.js';
import { ShardMapper } from '../../src/core/shard-mapper.js';
import { EmbeddedCluster } from '../../src/embedded/embedded-cluster.js';
import type { RecordSink, SourceRecord } from '../../src/ingest/ingestion-source.js';
import { SimDriver } from '../../src/sim/driver.js';
import type { FailureDetectorOptions } from '../../src/cluster/failure-detector/settings.js';

const SESSION_MS = 10_000; // a Kafka-like session: the detector must beat it by far
const DATASET = { ref: 'alpha', numShards: 8, minNumNodes: 2, source: { type: 'synthetic', recordsPerSecond: 50 } } as const;

/** Every write, by node and time: who wrote which shard when. */
class WriteLog {
  readonly writes: { node: string; shard: number; at: number }[] = [];
  constructor(private readonly clock: SimulatedClock) {}
  sink(node: NodeId): RecordSink {
    return {
      accept: async (_ds: DatasetConfig, shard: ShardNum, records: readonly SourceRecord[]) => {
        if (records.length > 0) this.writes.push({ node, shard, at: this.clock.now() });
      },
    };
  }
  lastBy(node: string, shard: number): number {
    return Math.max(-Infinity, ...this.writes.filter((w) => w.node === node && w.shard === shard).map((w) => w.at));
  }
  firstByOtherAfter(node: string, shard: number, after: number): number {
    return Math.min(Infinity, ...this.writes.filter((w) => w.node !== node && w.shard === shard && w.at > after).map((w) => w.at));
  }
}

let cluster: EmbeddedCluster | undefined;
afterEach(async () => {
  await cluster?.stop();
  cluster = undefined;
});

async function start(failureDetector: FailureDetectorOptions, reachable?: (from: string, to: string) => boolean) {
  const clock = new SimulatedClock(0);
  const log = new WriteLog(clock);
  cluster = new EmbeddedCluster({
    name: `fd-${Math.random().toString(36).slice(2)}`,
    clock,
    metrics: false,
    nodes: ['n1', 'n2', 'n3', 'n4'],
    sessionTimeoutMs: SESSION_MS,
    heartbeatIntervalMs: 1_000,
    sink: (node) => log.sink(node),
    log: pino({ level: 'silent' }),
    settings: { publishIntervalMs: 1_000, recoveryReplyTimeoutMs: 500, pollIntervalMs: 50, reportResendMs: 500, retryInitialMs: 50, retryMaxMs: 400, failureDetector },
    detector: { pick: () => 0, ...(reachable ? { reachable } : {}) },
  });
  const driver = new SimDriver(cluster);
  await cluster.startNodes();
  await driver.advance(500);
  const reply = cluster.setupDataset(DATASET, 5_000);
  await driver.advance(100);
  expect((await reply).type).toBe('DatasetVerified');
  await driver.advance(2_000);
  const c = cluster;
  const mapper = async () => ShardMapper.fromSnapshot((await c.metaStore.shardMaps()).find((m) => m.dataset === DATASET.ref)!);
  /** The singleton's stored map, asked by node name. */
  const map = async () => {
    const m = await mapper();
    return { shardsForNode: (node: string) => m.shardsForNode(node as NodeId) };
  };
  return { cluster: c, clock, driver, log, map };
}

const HEARTBEAT: FailureDetectorOptions = { mode: 'heartbeat', heartbeatIntervalMs: 100, suspicionTimeoutMs: 1_800, leaseMs: 500 };

describe('failure detector in an embedded cluster', () => {
  it('advertises an endpoint per member in heartbeat mode, and none in session-only mode', async () => {
    const w = await start({ mode: 'session-only' });
    expect(w.cluster.membership.view().members.map((m) => m.detector)).toEqual([undefined, undefined, undefined, undefined]);
    await w.cluster.stop();
    const h = await start(HEARTBEAT);
    expect(h.cluster.membership.view().members.every((m) => m.detector?.startsWith('mem-'))).toBe(true);
    expect(h.cluster.nodes.every((n) => (h.cluster.node(n.node) as unknown as { detector?: { holds(): boolean } }).detector?.holds())).toBe(true);
  });

  it('moves a crashed owner’s shards about a lease after the crash, not a session', async () => {
    const w = await start(HEARTBEAT);
    const victim = 'n3';
    expect((await w.map()).shardsForNode(victim).length).toBeGreaterThan(0);
    const crashedAt = w.clock.now();
    w.cluster.node(victim).crash();
    let goneAt: number | undefined;
    await w.driver.until(async () => {
      if ((await w.map()).shardsForNode(victim).length === 0) goneAt ??= w.clock.now();
      return goneAt !== undefined;
    }, 5_000, 10);
    expect(goneAt).toBeDefined();
    const ms = goneAt! - crashedAt;
    expect(ms).toBeGreaterThanOrEqual(500); // never before the lease has run out
    expect(ms).toBeLessThan(1_000); // and far from the 10 s session
    expect(w.cluster.membership.view().members.some((m) => m.node === victim)).toBe(true); // the group has not noticed yet
  });

  it('survives a 1 s pause; a 2.5 s pause is evicted and the node comes back as a new incarnation', async () => {
    const w = await start(HEARTBEAT);
    const node = w.cluster.node('n3');
    const first = node.incarnation;
    node.pause();
    await w.driver.advance(1_000);
    node.resume();
    await w.driver.advance(3_000);
    expect(node.incarnation).toBe(first);
    expect((await w.map()).shardsForNode('n3').length).toBeGreaterThan(0);

    node.pause();
    await w.driver.advance(2_500);
    expect((await w.map()).shardsForNode('n3')).toEqual([]); // evicted while paused
    node.resume();
    await w.driver.advance(2_000);
    expect(node.incarnation).not.toBe(first);
    expect(node.state).toBe('running');
    expect(node.isMember).toBe(true);
  });

  it('stops a node cut off from the singleton before another node writes its shards', async () => {
    let cut = false;
    const w = await start(HEARTBEAT, (from, to) => {
      if (!cut) return true;
      const n3 = w.cluster.membership.view().members.find((m) => m.node === 'n3')?.detector;
      return from !== n3 && to !== n3;
    });
    const shards = (await w.map()).shardsForNode('n3');
    expect(shards.length).toBeGreaterThan(0);
    const cutAt = w.clock.now();
    cut = true;
    await w.driver.advance(4_000);
    expect((await w.map()).shardsForNode('n3')).toEqual([]); // evicted, though the group still lists it
    for (const shard of shards) {
      const last = w.log.lastBy('n3', shard);
      const next = w.log.firstByOtherAfter('n3', shard, cutAt);
      expect(last, `shard ${shard}: n3 wrote until its lease ran out`).toBeLessThan(cutAt + 500);
      expect(next, `shard ${shard} was written by another node`).toBeLessThan(Infinity);
      expect(last, `shard ${shard}: n3's last write precedes the next owner's first`).toBeLessThan(next);
    }
  });

  it('applies a graceful stop at once: the goodbye releases the lease', async () => {
    const w = await start(HEARTBEAT);
    const shards = (await w.map()).shardsForNode('n4');
    expect(shards.length).toBeGreaterThan(0);
    const stopping = w.cluster.node('n4').stop();
    await w.driver.advance(5);
    await stopping;
    const at = w.clock.now();
    await w.driver.until(async () => (await w.map()).shardsForNode('n4').length === 0, 2_000, 10);
    expect(w.clock.now() - at).toBeLessThan(300); // not the 511 ms lease wait
  });

  /** The singleton's node and epoch now, once one is active (its state answers). */
  async function activeSingleton(w: Awaited<ReturnType<typeof start>>): Promise<{ node: string; epoch: number } | undefined> {
    const lease = await w.cluster.metaStore.readLease();
    const n = await w.cluster.singletonNode();
    if (!lease || !n || (await n.singletonState()) === undefined) return undefined;
    return { node: n.node, epoch: lease.epoch };
  }

  it('replaces a crashed singleton well within one singleton lease, not a session, and ingestion goes on', async () => {
    const w = await start(HEARTBEAT);
    const before = (await activeSingleton(w))!;
    expect(before.node).toBe('n1'); // the oldest member stood first
    const owned = { n3: (await w.map()).shardsForNode('n3'), n4: (await w.map()).shardsForNode('n4') };
    const crashedAt = w.clock.now();
    w.cluster.node(before.node).crash();
    let after: { node: string; epoch: number } | undefined;
    await w.driver.until(async () => (after = await activeSingleton(w)) !== undefined && after.epoch > before.epoch, 5_000, 10);
    const replacedMs = w.clock.now() - crashedAt;
    expect(after!.node).toBe('n2'); // the next in line
    // Its process refused the successor's probe: no wait for the singleton lease, only for the node
    // leases it may have granted (511 ms) before recovery ends.
    expect(replacedMs).toBeGreaterThanOrEqual(511);
    expect(replacedMs).toBeLessThan(1_000);
    expect(w.cluster.membership.view().members.some((m) => m.node === before.node)).toBe(true); // the group has not noticed yet
    // The owners kept their shards, and write again under the new singleton's leases.
    const replacedAt = w.clock.now();
    await w.driver.advance(1_000);
    for (const [node, shards] of Object.entries(owned)) {
      expect((await w.map()).shardsForNode(node)).toEqual(shards);
      for (const shard of shards) expect(w.log.firstByOtherAfter('nobody', shard, replacedAt), `shard ${shard} written after the takeover`).toBeLessThan(Infinity);
    }
  });

  it('a paused singleton loses its role to the next in line after its lease, and stops when it wakes: one singleton at a time', async () => {
    const w = await start(HEARTBEAT);
    const before = (await activeSingleton(w))!;
    const old = w.cluster.node(before.node);
    old.pause();
    const pausedAt = w.clock.now();
    let after: { node: string; epoch: number } | undefined;
    await w.driver.until(async () => (after = await activeSingleton(w)) !== undefined && after.epoch > before.epoch, 9_000, 10);
    // The process still listens (paused, not dead): the successor waits a whole singleton lease
    // (5102 ms after it first saw the last renewal, renewed every 1250 ms) and the predecessor's node leases.
    expect(w.clock.now() - pausedAt).toBeGreaterThanOrEqual(5_102 - 1_250);
    expect(w.clock.now() - pausedAt).toBeLessThan(7_500);
    expect(after!.node).toBe('n2');
    old.resume();
    await w.driver.advance(1_000);
    expect(await old.singletonState()).toBeUndefined(); // its lease was taken: it stopped
    expect((await w.cluster.metaStore.readLease())!.epoch).toBe(after!.epoch);
    expect((await activeSingleton(w))!.node).toBe('n2');
  });

  it('a singleton cut off from the other nodes gives way to one the majority reaches', async () => {
    let cut = false;
    const w = await start(HEARTBEAT, (from, to) => {
      if (!cut) return true;
      const n1 = w.cluster.membership.view().members.find((m) => m.node === 'n1')?.detector;
      return from !== n1 && to !== n1;
    });
    const before = (await activeSingleton(w))!;
    expect(before.node).toBe('n1');
    cut = true;
    let after: { node: string; epoch: number } | undefined;
    await w.driver.until(async () => (after = await activeSingleton(w)) !== undefined && after.epoch > before.epoch, 6_000, 10);
    expect(after!.node).toBe('n2');
    expect(await w.cluster.node('n1').singletonState()).toBeUndefined();
    // n1 still runs but the others cannot reach it: the new singleton evicts it and moves its shards.
    await w.driver.advance(3_000);
    expect((await w.map()).shardsForNode('n1')).toEqual([]);
  });

  it('in session-only mode detects a crash only when the session runs out, as before', async () => {
    const w = await start({ mode: 'session-only' });
    expect((await w.map()).shardsForNode('n3').length).toBeGreaterThan(0);
    w.cluster.node('n3').crash();
    // Its last membership heartbeat was up to 1 s before the crash: the session ends 9 to 10 s after it.
    await w.driver.advance(SESSION_MS - 1_500);
    expect((await w.map()).shardsForNode('n3').length).toBeGreaterThan(0);
    await w.driver.advance(2_000);
    expect((await w.map()).shardsForNode('n3')).toEqual([]);
  });
});
