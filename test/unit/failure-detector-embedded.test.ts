// The failure detector wired into an embedded cluster (real nodes, actors and core, the in-process
// detector network, a simulated clock; docs/ARCHITECTURE.md §11): a crashed owner's shards move
// about ¾ of the suspicion timeout after the crash (its refused port proves nothing), not a session;
// a pause shorter than three quarters of the suspicion timeout evicts nobody, a longer one does and
// the node comes back as a new incarnation; a node cut off from the singleton stops writing before
// its shards are written elsewhere; a crashed singleton is replaced after its lease, never sooner; a
// singleton whose store hangs stops by its own clock and is shown by nobody's /status after;
// `session-only` starts none of it.
import { afterEach, describe, expect, it } from 'vitest';
import { SimulatedClock } from '../../src/cluster/clock.js';
import type { DatasetConfig } from '../../src/core/dataset-config.js';
import type { NodeId, ShardNum } from '../../src/core/ids.js';
import { EmbeddedCluster } from '../../src/embedded/embedded-cluster.js';
import type { RecordSink, SourceRecord } from '../../src/ingest/ingestion-source.js';
import { SESSION_MS, startDetectorCluster } from '../support/detector-cluster.js';
import { failureDetectorSettings, readGraceMs, type FailureDetectorOptions } from '../../src/cluster/failure-detector/settings.js';
import { MemoryMetaStore } from '../../src/store/memory-meta-store.js';
import type { MetaStore } from '../../src/store/meta-store.js';

/** The store calls a blackholed path to it would hang (the renewals and the singleton's writes); reads and takeovers still answer. */
const HANGING = new Set([
  'renewLease',
  'putShardMap',
  'putDataset',
  'deleteDataset',
  'putSubscriptions',
  'putNodeOperations',
  'putAppliedRequests',
  'putCooldown',
]);

/** A memory store whose writes hang from `hang()` until `release()`, when they go through. */
function hangingStore() {
  const inner = new MemoryMetaStore();
  let hanging = false;
  let held: (() => void)[] = [];
  const store = new Proxy(inner, {
    get(target, prop, receiver) {
      const v: unknown = Reflect.get(target, prop, receiver);
      if (typeof v !== 'function') return v;
      const f = v as (...args: unknown[]) => Promise<unknown>;
      if (!HANGING.has(String(prop))) return f.bind(target);
      return (...args: unknown[]) =>
        hanging ? new Promise((resolve, reject) => held.push(() => void f.apply(target, args).then(resolve, reject))) : f.apply(target, args);
    },
  });
  return {
    store: store as MetaStore,
    hang: () => (hanging = true),
    release: () => {
      hanging = false;
      const h = held;
      held = [];
      for (const go of h) go();
    },
  };
}

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

async function start(failureDetector: FailureDetectorOptions, reachable?: (from: string, to: string) => boolean, metaStore?: MetaStore) {
  let log: WriteLog | undefined;
  const started = await startDetectorCluster({
    failureDetector,
    sink: (node, clock) => (log ??= new WriteLog(clock)).sink(node),
    ...(reachable ? { detector: { reachable } } : {}),
    ...(metaStore ? { metaStore } : {}),
  });
  cluster = started.cluster;
  /** The singleton's stored map, asked by node name. */
  const map = async () => {
    const m = await started.map();
    return { shardsForNode: (node: string) => m.shardsForNode(node as NodeId) };
  };
  return { cluster: started.cluster, clock: started.clock, driver: started.driver, log: log!, map };
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

  it('moves a crashed owner’s shards about ¾ of the suspicion timeout after the crash, not a session', async () => {
    const w = await start(HEARTBEAT);
    const victim = 'n3';
    expect((await w.map()).shardsForNode(victim).length).toBeGreaterThan(0);
    const crashedAt = w.clock.now();
    w.cluster.node(victim).crash();
    let goneAt: number | undefined;
    await w.driver.until(
      async () => {
        if ((await w.map()).shardsForNode(victim).length === 0) goneAt ??= w.clock.now();
        return goneAt !== undefined;
      },
      5_000,
      10,
    );
    expect(goneAt).toBeDefined();
    const ms = goneAt! - crashedAt;
    // Its refused port is no proof: it is evicted as a silent node is, ¾ of the 1800 ms timeout after
    // its last heartbeat (up to 100 ms before the crash) at the least, once a majority failed 1300 ms.
    expect(ms).toBeGreaterThanOrEqual(1_350 - 100);
    expect(ms).toBeLessThan(2_500); // and far from the 10 s session
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
    // Its writes stopped with its lease; its answers to reads go on for the read grace (a failover
    // of the singleton must not stop every read), then stop too.
    const answersReads = () => (w.cluster.node('n3') as unknown as { detector: { answersReads(): boolean } }).detector.answersReads();
    expect(answersReads()).toBe(true);
    await w.driver.advance(readGraceMs(failureDetectorSettings(HEARTBEAT)) - 4_000 + 500);
    expect(answersReads()).toBe(false);
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

  it('replaces a crashed singleton after its singleton lease, never sooner, not a session, and ingestion goes on', async () => {
    const w = await start(HEARTBEAT);
    const before = (await activeSingleton(w))!;
    expect(before.node).toBe('n1'); // the oldest member stood first
    const owned = { n3: (await w.map()).shardsForNode('n3'), n4: (await w.map()).shardsForNode('n4') };
    const crashedAt = w.clock.now();
    w.cluster.node(before.node).crash();
    let after: { node: string; epoch: number } | undefined;
    await w.driver.until(async () => (after = await activeSingleton(w)) !== undefined && after.epoch > before.epoch, 9_000, 10);
    const replacedMs = w.clock.now() - crashedAt;
    expect(after!.node).toBe('n2'); // the next in line
    // Its refused port proves nothing (a middlebox answers the same): the successor waits out the
    // lease, 5102 ms after it first saw the last renewal (sent up to 1250 ms before the crash).
    expect(replacedMs).toBeGreaterThanOrEqual(5_102 - 1_250);
    expect(replacedMs).toBeLessThan(7_500);
    expect(w.cluster.membership.view().members.some((m) => m.node === before.node)).toBe(true); // the group has not noticed yet
    // The owners kept their shards, and write again under the new singleton's leases.
    const replacedAt = w.clock.now();
    await w.driver.advance(1_000);
    for (const [node, shards] of Object.entries(owned)) {
      expect((await w.map()).shardsForNode(node)).toEqual(shards);
      for (const shard of shards)
        expect(w.log.firstByOtherAfter('nobody', shard, replacedAt), `shard ${shard} written after the takeover`).toBeLessThan(Infinity);
    }
  });

  it("a graceful stop of the singleton's host hands the role over: the next in line acts after a node lease, not a singleton lease, and no shard has two writers", async () => {
    const w = await start(HEARTBEAT);
    const before = (await activeSingleton(w))!;
    expect(before.node).toBe('n1');
    const owned = (await w.map()).shardsForNode(before.node);
    const stoppedAt = w.clock.now();
    const stopping = w.cluster.node(before.node).stop();
    let after: { node: string; epoch: number } | undefined;
    await w.driver.until(async () => (after = await activeSingleton(w)) !== undefined && after.epoch > before.epoch, 9_000, 10);
    // It waited out its grants (511 ms), released the lease, and the next in line looked within a
    // heartbeat: not the 5102 ms of a lease left to run out.
    expect(w.clock.now() - stoppedAt).toBeGreaterThanOrEqual(511);
    expect(w.clock.now() - stoppedAt).toBeLessThan(1_500);
    expect(after!.node).toBe('n2');
    await w.driver.advance(2_000);
    await stopping;
    for (const shard of owned) {
      const last = w.log.lastBy(before.node, shard);
      const next = w.log.firstByOtherAfter(before.node, shard, stoppedAt);
      expect(next, `shard ${shard} was written by another node`).toBeLessThan(Infinity);
      expect(last, `shard ${shard}: the stopped node's last write precedes the next owner's first`).toBeLessThan(next);
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

  it('a singleton whose store hangs stops by its own clock at its lease’s end, though its actor is blocked: no two singletons on /status, nothing published after', async () => {
    const hs = hangingStore();
    const w = await start(HEARTBEAT, undefined, hs.store);
    const before = (await activeSingleton(w))!;
    expect(before.node).toBe('n1');
    const old = w.cluster.node('n1');
    const events = () =>
      w.cluster.bus.topic(`${w.cluster.topicPrefix}.events`).filter((r) => {
        const v = typeof r.value === 'string' ? (JSON.parse(r.value) as { epoch?: number }) : (r.value as { epoch?: number });
        return v.epoch === before.epoch;
      }).length;
    hs.hang();
    const hungAt = w.clock.now();
    // A crash makes the old singleton change the map: its actor blocks on the hanging write.
    w.cluster.node('n4').crash();
    let oldStoppedAt: number | undefined;
    let eventsAtStop = 0;
    let took: number | undefined;
    // What each node's /status shows, as it answers: it may wait a few simulated ms for a busy actor,
    // so it is asked at every step and read when it answered (awaiting it here would stop the clock).
    const shownBy = new Map<string, boolean>();
    const ask = () => {
      for (const n of w.cluster.nodes) void n.localSingletonState().then((st) => shownBy.set(n.node, n.state === 'running' && st !== undefined));
    };
    const showing = () => [...shownBy].filter(([, shown]) => shown).map(([node]) => node);
    await w.driver.until(
      async () => {
        ask();
        const shown = showing();
        expect(shown.length, `singletons on /status at ${w.clock.now()}: ${shown.join(', ')}`).toBeLessThanOrEqual(1);
        if (oldStoppedAt === undefined && shownBy.has('n1') && !shown.includes('n1')) {
          oldStoppedAt = w.clock.now();
          eventsAtStop = events();
        }
        // The memory store's read answers at once (it does not hang): no simulated time is needed.
        if (took === undefined && ((await w.cluster.metaStore.readLease())?.epoch ?? 0) > before.epoch) took = w.clock.now();
        return took !== undefined;
      },
      9_000,
      10,
    );
    // Its last landed renewal was sent at most 1250 ms before the hang: it stopped within its
    // 5000 ms lease of it, by its own timer (the actor still waits on the store), before the takeover.
    expect(oldStoppedAt).toBeDefined();
    expect(oldStoppedAt! - hungAt).toBeLessThanOrEqual(5_000 + 20);
    expect(took!).toBeGreaterThan(oldStoppedAt!);
    // The store answers again: the old singleton's blocked write returns, and it does nothing more.
    hs.release();
    await w.driver.advance(3_000);
    expect(events()).toBe(eventsAtStop);
    expect(await old.singletonState()).toBeUndefined();
    ask();
    await w.driver.advance(100);
    expect(showing()).toEqual(['n2']);
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
