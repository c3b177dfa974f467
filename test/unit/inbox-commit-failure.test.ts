// The singleton commits its inbox position at each tick. A commit that fails (Kafka answers "the
// coordinator is not aware of this member" while the group rebalances) used to crash the singleton,
// which then crash-looped (8 times in one run, issue 34). It now goes on and commits at the next tick.
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { inboxGroup } from '../../src/actors/inbox-group.js';
import { topicsFor } from '../../src/actors/wire.js';
import type { Bus } from '../../src/cluster/bus.js';
import { SimulatedClock } from '../../src/cluster/clock.js';
import { EmbeddedCluster } from '../../src/embedded/embedded-cluster.js';
import { SimDriver } from '../../src/sim/driver.js';
import { MemoryMetaStore } from '../../src/store/memory-meta-store.js';

describe('an inbox commit that fails', () => {
  it('does not stop the singleton: it goes on, and commits at a later tick', async () => {
    const clock = new SimulatedClock(0);
    const lines: { event?: string }[] = [];
    const cluster = new EmbeddedCluster({
      name: 'commits',
      clock,
      nodes: ['n1', 'n2', 'n3'],
      metaStore: new MemoryMetaStore(),
      log: pino({ level: 'debug' }, { write: (line: string) => lines.push(JSON.parse(line) as { event?: string }) }),
      sessionTimeoutMs: 1_000,
      heartbeatIntervalMs: 250,
      settings: { publishIntervalMs: 500, recoveryReplyTimeoutMs: 500, pollIntervalMs: 250, retryInitialMs: 50, retryMaxMs: 400 },
    });
    const inbox = topicsFor(cluster.topicPrefix).inbox;
    // Every commit on the inbox fails while `failing` is set, as Kafka's do during a rebalance.
    let failing = false;
    const subscribe = cluster.bus.subscribe.bind(cluster.bus) as Bus['subscribe'];
    cluster.bus.subscribe = (async (...args: Parameters<Bus['subscribe']>) => {
      const sub = await subscribe(...args);
      if (args[0] !== inbox) return sub;
      const commit = sub.commit.bind(sub);
      return { ...sub, close: sub.close.bind(sub), commit: (offset: number) => (failing ? Promise.reject(new Error('The coordinator is not aware of this member')) : commit(offset)) };
    }) as Bus['subscribe'];
    const driver = new SimDriver(cluster);
    await cluster.startNodes();
    await driver.advance(1_000);
    const host = (await cluster.singletonNode())!;
    const epoch = host.actingSingletonEpoch;
    expect(epoch).toBeDefined();

    failing = true;
    const during = cluster.setupDataset({ ref: 'alpha', numShards: 4, minNumNodes: 1, source: { type: 'synthetic', recordsPerSecond: 20 } }, 5_000);
    await driver.advance(3_000); // six ticks, six failed commits
    expect((await during).type).toBe('DatasetVerified');
    expect(host.actingSingletonEpoch).toBe(epoch);
    expect(lines.filter((l) => l.event === 'inbox.commit-failed').length).toBeGreaterThanOrEqual(4);
    const group = inboxGroup(inbox, epoch!);
    const stuckAt = cluster.bus.committedPosition(inbox, group) ?? 0;
    expect(cluster.bus.topic(inbox).length).toBeGreaterThan(stuckAt); // records read since, not committed

    failing = false;
    await driver.advance(1_000);
    expect(host.actingSingletonEpoch).toBe(epoch);
    expect(lines.some((l) => l.event === 'inbox.commit-recovered')).toBe(true);
    expect(cluster.bus.committedPosition(inbox, group)).toBeGreaterThan(stuckAt);
    await cluster.stop();
  }, 60_000);
});

describe('an inbox commit that hangs', () => {
  it('does not hold the singleton: it goes on answering, and commits again once commits answer', async () => {
    const clock = new SimulatedClock(0);
    const cluster = new EmbeddedCluster({
      name: 'hangs',
      clock,
      nodes: ['n1', 'n2'],
      metaStore: new MemoryMetaStore(),
      log: pino({ level: 'silent' }),
      sessionTimeoutMs: 1_000,
      heartbeatIntervalMs: 250,
      settings: { publishIntervalMs: 500, recoveryReplyTimeoutMs: 500, pollIntervalMs: 250, retryInitialMs: 50, retryMaxMs: 400 },
    });
    const inbox = topicsFor(cluster.topicPrefix).inbox;
    // While `hanging`, a commit never answers, as one to a broker that froze and came back did.
    let hanging = false;
    const subscribe = cluster.bus.subscribe.bind(cluster.bus) as Bus['subscribe'];
    cluster.bus.subscribe = (async (...args: Parameters<Bus['subscribe']>) => {
      const sub = await subscribe(...args);
      if (args[0] !== inbox) return sub;
      const commit = sub.commit.bind(sub);
      return { ...sub, close: sub.close.bind(sub), commit: (offset: number) => (hanging ? new Promise<void>(() => {}) : commit(offset)) };
    }) as Bus['subscribe'];
    const driver = new SimDriver(cluster);
    await cluster.startNodes();
    await driver.advance(1_000);
    const host = (await cluster.singletonNode())!;
    const epoch = host.actingSingletonEpoch!;
    hanging = true;
    await driver.advance(1_000);
    const during = cluster.setupDataset({ ref: 'alpha', numShards: 2, minNumNodes: 1, source: { type: 'synthetic', recordsPerSecond: 20 } }, 3_000);
    await driver.advance(1_000);
    expect((await during).type).toBe('DatasetVerified');
    const group = inboxGroup(inbox, epoch);
    const stuckAt = cluster.bus.committedPosition(inbox, group) ?? 0;
    hanging = false;
    await driver.advance(2_000);
    expect(host.actingSingletonEpoch).toBe(epoch);
    expect(cluster.bus.committedPosition(inbox, group)).toBeGreaterThan(stuckAt);
    await cluster.stop();
  }, 60_000);
});

describe('a record the bus fails to carry', () => {
  it('does not stop the singleton: a refusal it could not send is asked again, and the singleton answers', async () => {
    const clock = new SimulatedClock(0);
    const cluster = new EmbeddedCluster({
      name: 'sends',
      clock,
      nodes: ['n1', 'n2'],
      metaStore: new MemoryMetaStore(),
      log: pino({ level: 'silent' }),
      sessionTimeoutMs: 1_000,
      heartbeatIntervalMs: 250,
      settings: { publishIntervalMs: 500, recoveryReplyTimeoutMs: 500, pollIntervalMs: 250, retryInitialMs: 50, retryMaxMs: 400 },
    });
    const replies = topicsFor(cluster.topicPrefix).replies;
    let failing = false;
    const produce = cluster.bus.produce.bind(cluster.bus);
    cluster.bus.produce = (topic: string, value: unknown) => (failing && topic === replies ? Promise.reject(new Error('the broker is away')) : produce(topic, value));
    const driver = new SimDriver(cluster);
    await cluster.startNodes();
    await driver.advance(1_000);
    const host = (await cluster.singletonNode())!;
    const epoch = host.actingSingletonEpoch;
    // A config the singleton refuses (BadSchema) while its replies cannot be sent.
    failing = true;
    const lost = cluster.setupDataset({ ref: 'bad', numShards: 3, minNumNodes: 1, source: { type: 'synthetic', recordsPerSecond: 1 } } as never, 1_000).then(
      (r) => r.type,
      (e: unknown) => String(e),
    );
    await driver.advance(1_500);
    expect(await lost).toMatch(/no reply/);
    failing = false;
    const again = cluster.setupDataset({ ref: 'bad', numShards: 3, minNumNodes: 1, source: { type: 'synthetic', recordsPerSecond: 1 } } as never, 1_000);
    await driver.advance(500);
    expect((await again).type).toBe('BadSchema');
    expect(host.actingSingletonEpoch).toBe(epoch);
    await cluster.stop();
  }, 60_000);
});
