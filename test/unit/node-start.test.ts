// A process's first start (`ShardherdNode.startPatiently`): an error that says retrying can help is
// tried again with backoff and logged; any other error, or one past the patience, is thrown.
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { ShardherdNode, type ClusterServices } from '../../src/actors/node-process.js';
import { runtimeSettings } from '../../src/actors/settings.js';
import type { Bus } from '../../src/cluster/bus.js';
import { RealClock } from '../../src/cluster/clock.js';
import { MemoryBus } from '../../src/cluster/memory-bus.js';
import type { Membership } from '../../src/cluster/membership.js';
import { MemoryMembershipService } from '../../src/cluster/memory-membership.js';
import { incarnation, nodeId } from '../../src/core/ids.js';
import { CountingSink } from '../../src/ingest/counting-sink.js';
import { SyntheticSource } from '../../src/ingest/synthetic-source.js';
import { MemoryMetaStore } from '../../src/store/memory-meta-store.js';

/** A subscribe failure like Kafka's while a new topic's leader settles. */
class NotLeaderYet extends Error {
  readonly retriable = true;
}

/** A memory bus whose first `failures` subscribes throw `error()`. */
function flakyBus(clock: RealClock, failures: number, error: () => Error): Bus & { attempts: number } {
  const bus = new MemoryBus(clock);
  const flaky = Object.assign(Object.create(bus) as MemoryBus, { attempts: 0 });
  flaky.subscribe = (...args: Parameters<MemoryBus['subscribe']>) => {
    flaky.attempts += 1;
    return flaky.attempts <= failures ? Promise.reject(error()) : bus.subscribe(...args);
  };
  return flaky;
}

describe('the first start of a node', () => {
  const nodes: ShardherdNode[] = [];
  afterEach(async () => {
    await Promise.all(nodes.splice(0).map((n) => n.stop()));
  });

  const node = (bus: Bus, logs: Record<string, unknown>[], connectMembership?: (service: MemoryMembershipService) => Membership) => {
    const clock = new RealClock();
    const membership = new MemoryMembershipService(clock, { sessionTimeoutMs: 3_000, heartbeatIntervalMs: 500, onListenerError: () => {} });
    const services: ClusterServices = {
      clock,
      bus,
      connectMembership: () => (connectMembership ? connectMembership(membership) : membership.connect()),
      metaStore: new MemoryMetaStore(),
      source: new SyntheticSource(clock),
      sink: new CountingSink(),
      settings: runtimeSettings({ retryInitialMs: 20, retryMaxMs: 80 }),
      log: pino({ level: 'info' }, { write: (line: string) => void logs.push(JSON.parse(line) as Record<string, unknown>) }),
      systemPrefix: `node-start-${Math.random().toString(36).slice(2)}`,
    };
    const n = new ShardherdNode(services, nodeId('n1'));
    nodes.push(n);
    return n;
  };

  it('tries again after errors that may pass, says so in its log, and then runs', async () => {
    const logs: Record<string, unknown>[] = [];
    const bus = flakyBus(new RealClock(), 3, () => new NotLeaderYet('This server is not the leader for that topic-partition'));
    const n = node(bus, logs);
    await n.startPatiently(5_000);
    expect(n.state).toBe('running');
    const failed = logs.filter((l) => l.event === 'node.start-failed');
    expect(failed.map((l) => l.attempt)).toEqual([1, 2, 3]);
    expect(failed.map((l) => l.retryInMs)).toEqual([20, 40, 80]);
    expect(logs.filter((l) => l.event === 'node.started')).toHaveLength(1);
  });

  it('throws at once an error that retrying cannot help', async () => {
    const logs: Record<string, unknown>[] = [];
    const bus = flakyBus(new RealClock(), 1, () => new Error('topic shardherd.inbox does not exist'));
    const n = node(bus, logs);
    await expect(n.startPatiently(5_000)).rejects.toThrow(/does not exist/);
    expect(bus.attempts).toBe(1);
    expect(n.state).toBe('stopped');
  });

  it('gives up after its patience, with the last error', async () => {
    const logs: Record<string, unknown>[] = [];
    const bus = flakyBus(new RealClock(), Infinity, () => new NotLeaderYet('not the leader'));
    const n = node(bus, logs);
    const started = Date.now();
    await expect(n.startPatiently(300)).rejects.toThrow(/not the leader/);
    expect(Date.now() - started).toBeLessThan(2_000);
    expect(bus.attempts).toBeGreaterThan(2);
    expect(n.state).toBe('stopped');
  });

  // Seen in the simulator (seed 10430): another node joined between the group's answer to this
  // node's join and the moment `join` resolved, so the listener delivered the newer view first and
  // the view `join` resolved with came last. A singleton that recovered with that older view fenced
  // the other node, a member, and moved its shards.
  it('keeps the newest view when the one its join resolved with comes after a newer one', async () => {
    const n = node(new MemoryBus(new RealClock()), [], (service) => {
      const handle = service.connect();
      const join = handle.join.bind(handle);
      handle.join = async (self) => {
        const joined = await join(self);
        await service.connect().join({ node: nodeId('n2'), incarnation: incarnation('n2#1') });
        return joined;
      };
      return handle;
    });
    await n.startPatiently(5_000);
    expect(n.view?.members.map((m) => m.node)).toEqual(['n1', 'n2']);
  });
});
