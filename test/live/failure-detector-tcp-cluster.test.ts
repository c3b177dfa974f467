// The failure detector over TCP on 127.0.0.1 in real time (docs/ARCHITECTURE.md §11), with nodes
// built as `shardherd node` builds them but on in-memory bus, membership and MetaStore: the
// endpoints advertise TCP addresses, leases are granted over TCP, and a crashed owner's shards move
// about ¾ of the suspicion timeout after the crash (its refused port is no proof), far inside the
// membership's session.
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { ShardherdNode, type ClusterServices } from '../../src/actors/node-process.js';
import { runtimeSettings } from '../../src/actors/settings.js';
import type { Request } from '../../src/protocol/wire.js';
import { RealClock } from '../../src/cluster/clock.js';
import { TcpDetectorTransport } from '../../src/cluster/failure-detector/tcp-transport.js';
import { MemoryBus } from '../../src/cluster/memory-bus.js';
import { MemoryMembershipService } from '../../src/cluster/memory-membership.js';
import { nodeId, type NodeId } from '../../src/core/ids.js';
import { ShardMapper } from '../../src/core/shard-mapper.js';
import { CountingSink } from '../../src/ingest/counting-sink.js';
import { SyntheticSource } from '../../src/ingest/synthetic-source.js';
import { MemoryMetaStore } from '../../src/store/memory-meta-store.js';

const SESSION_MS = 10_000;
const nodes: ShardherdNode[] = [];
afterEach(async () => {
  for (const n of nodes.splice(0).reverse()) await n.stop().catch(() => undefined);
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until(done: () => Promise<boolean>, maxMs: number): Promise<boolean> {
  for (const end = Date.now() + maxMs; Date.now() < end; await sleep(10)) if (await done()) return true;
  return done();
}

describe('failure detector over TCP', () => {
  it('grants leases over TCP and moves a crashed owner’s shards about ¾ of the suspicion timeout after the crash', async () => {
    const clock = new RealClock();
    const metaStore = new MemoryMetaStore();
    const membership = new MemoryMembershipService(clock, { sessionTimeoutMs: SESSION_MS, heartbeatIntervalMs: 1_000, onListenerError: () => {} });
    const services: ClusterServices = {
      clock,
      bus: new MemoryBus(clock),
      connectMembership: () => membership.connect(),
      metaStore,
      source: new SyntheticSource(clock),
      sink: new CountingSink(),
      settings: runtimeSettings({ publishIntervalMs: 1_000, recoveryReplyTimeoutMs: 500, pollIntervalMs: 50, failureDetector: { mode: 'heartbeat' } }),
      log: pino({ level: process.env.FD_LOG ?? 'silent' }),
      systemPrefix: `fd-tcp-${Math.random().toString(36).slice(2)}`,
      detector: { transport: (_owner, dropped) => new TcpDetectorTransport({ cluster: 'shardherd', dropped }), clock },
    };
    for (const name of ['n1', 'n2', 'n3']) {
      const n = new ShardherdNode(services, nodeId(name));
      nodes.push(n);
      await n.start();
    }
    // n2 and n3 joined after the singleton started: they are in their join grace until then.
    const graceOverAt = Date.now() + services.settings.failureDetector.joinGraceMs;
    expect(membership.view().members.map((m) => m.detector)).toEqual([
      expect.stringMatching(/^127\.0\.0\.1:\d+$/),
      expect.stringMatching(/^127\.0\.0\.1:\d+$/),
      expect.stringMatching(/^127\.0\.0\.1:\d+$/),
    ]);
    expect(await until(async () => (await nodes[0]!.singletonState())?.phase === 'active', 5_000)).toBe(true);
    const reply = await nodes[0]!.request(
      (replyTo) =>
        ({
          type: 'SetupDataset',
          config: { ref: 'alpha', numShards: 8, minNumNodes: 3, source: { type: 'synthetic', recordsPerSecond: 20 } },
          replyTo,
        }) as unknown as Request,
      5_000,
    );
    expect(reply.type).toBe('DatasetVerified');
    const map = async () => {
      const snap = (await metaStore.shardMaps()).find((m) => m.dataset === 'alpha');
      return snap ? ShardMapper.fromSnapshot(snap) : undefined;
    };
    const active = await until(async () => {
      const m = await map();
      return m !== undefined && [...Array(8).keys()].every((s) => m.statusForShard(s).type === 'Active');
    }, 10_000);
    expect(active).toBe(true);
    // Every node holds a lease granted over TCP.
    const holds = (n: ShardherdNode) => (n as unknown as { detector: { holds(): boolean } }).detector.holds();
    expect(await until(async () => nodes.every(holds), 2_000)).toBe(true);

    const victim = 'n3' as NodeId;
    expect((await map())!.shardsForNode(victim).length).toBeGreaterThan(0);
    await sleep(Math.max(0, graceOverAt - Date.now()));
    const crashedAt = Date.now();
    nodes[2]!.crash();
    expect(await until(async () => (await map())!.shardsForNode(victim).length === 0, 5_000)).toBe(true);
    const ms = Date.now() - crashedAt;
    expect(ms).toBeGreaterThanOrEqual(1_350 - 100); // ¾ of the timeout after its last heartbeat, at the least
    expect(ms).toBeLessThan(3_500); // and the majority's 1300 ms of failures, on a loaded machine; the session is 10 s
    expect(membership.view().members.map((m) => m.node)).toContain(victim); // the group has not noticed
  }, 30_000);
});
