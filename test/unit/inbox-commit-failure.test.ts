// The singleton commits its inbox position at each tick. A commit that fails (Kafka answers "the
// coordinator is not aware of this member" while the group rebalances) used to crash the singleton,
// which then crash-looped (8 times in one run, issue 34). It now goes on and commits at the next tick.
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { inboxGroup } from '../../src/actors/inbox-group.js';
import { topicsFor } from '../../src/protocol/wire.js';
import type { Bus } from '../../src/cluster/bus.js';
import { SimulatedClock } from '../../src/cluster/clock.js';
import { EmbeddedCluster } from '../../src/embedded/embedded-cluster.js';
import { SimDriver } from '../../src/sim/driver.js';
import { MemoryMetaStore } from '../../src/store/memory-meta-store.js';

/** A cluster on a simulated clock whose singleton ticks every 500 ms. */
function cluster(name: string, nodes: string[], log = pino({ level: 'silent' })): EmbeddedCluster {
  return new EmbeddedCluster({
    name,
    clock: new SimulatedClock(0),
    nodes,
    metaStore: new MemoryMetaStore(),
    log,
    sessionTimeoutMs: 1_000,
    heartbeatIntervalMs: 250,
    settings: { publishIntervalMs: 500, recoveryReplyTimeoutMs: 500, pollIntervalMs: 250, retryInitialMs: 50, retryMaxMs: 400 },
  });
}

/** Commits on the inbox fail as `fault` says while it gives a failing commit, and reach the bus otherwise. */
function faultInboxCommits(c: EmbeddedCluster, fault: () => ((offset: number) => Promise<void>) | undefined): void {
  const inbox = topicsFor(c.topicPrefix).inbox;
  const subscribe = c.bus.subscribe.bind(c.bus) as Bus['subscribe'];
  c.bus.subscribe = (async (...args: Parameters<Bus['subscribe']>) => {
    const sub = await subscribe(...args);
    if (args[0] !== inbox) return sub;
    const commit = sub.commit.bind(sub);
    return { ...sub, close: sub.close.bind(sub), commit: (offset: number) => (fault() ?? commit)(offset) };
  }) as Bus['subscribe'];
}

/** Starts the nodes and waits for the singleton; its host and epoch. */
async function started(c: EmbeddedCluster) {
  const driver = new SimDriver(c);
  await c.startNodes();
  await driver.advance(1_000);
  const host = (await c.singletonNode())!;
  const epoch = host.actingSingletonEpoch!;
  expect(epoch).toBeDefined();
  return { driver, host, epoch, inbox: topicsFor(c.topicPrefix).inbox };
}

describe('an inbox commit that fails', () => {
  it('does not stop the singleton: it goes on, and commits at a later tick', async () => {
    const lines: { event?: string }[] = [];
    const c = cluster('commits', ['n1', 'n2', 'n3'], pino({ level: 'debug' }, { write: (line: string) => lines.push(JSON.parse(line) as { event?: string }) }));
    // Every commit on the inbox fails while `failing` is set, as Kafka's do during a rebalance.
    let failing = false;
    faultInboxCommits(c, () => (failing ? () => Promise.reject(new Error('The coordinator is not aware of this member')) : undefined));
    const { driver, host, epoch, inbox } = await started(c);

    failing = true;
    const during = c.setupDataset({ ref: 'alpha', numShards: 4, minNumNodes: 1, source: { type: 'synthetic', recordsPerSecond: 20 } }, 5_000);
    await driver.advance(3_000); // six ticks, six failed commits
    expect((await during).type).toBe('DatasetVerified');
    expect(host.actingSingletonEpoch).toBe(epoch);
    expect(lines.filter((l) => l.event === 'inbox.commit-failed').length).toBeGreaterThanOrEqual(4);
    const group = inboxGroup(inbox, epoch);
    const stuckAt = c.bus.committedPosition(inbox, group) ?? 0;
    expect(c.bus.topic(inbox).length).toBeGreaterThan(stuckAt); // records read since, not committed

    failing = false;
    await driver.advance(1_000);
    expect(host.actingSingletonEpoch).toBe(epoch);
    expect(lines.some((l) => l.event === 'inbox.commit-recovered')).toBe(true);
    expect(c.bus.committedPosition(inbox, group)).toBeGreaterThan(stuckAt);
    await c.stop();
  }, 60_000);
});

describe('an inbox commit that hangs', () => {
  it('does not hold the singleton: it goes on answering, and commits again once commits answer', async () => {
    const c = cluster('hangs', ['n1', 'n2']);
    // While `hanging`, a commit never answers, as one to a broker that froze and came back did.
    let hanging = false;
    faultInboxCommits(c, () => (hanging ? () => new Promise<void>(() => {}) : undefined));
    const { driver, host, epoch, inbox } = await started(c);
    hanging = true;
    await driver.advance(1_000);
    const during = c.setupDataset({ ref: 'alpha', numShards: 2, minNumNodes: 1, source: { type: 'synthetic', recordsPerSecond: 20 } }, 3_000);
    await driver.advance(1_000);
    expect((await during).type).toBe('DatasetVerified');
    const group = inboxGroup(inbox, epoch);
    const stuckAt = c.bus.committedPosition(inbox, group) ?? 0;
    hanging = false;
    await driver.advance(2_000);
    expect(host.actingSingletonEpoch).toBe(epoch);
    expect(c.bus.committedPosition(inbox, group)).toBeGreaterThan(stuckAt);
    await c.stop();
  }, 60_000);
});

describe('a record the bus fails to carry', () => {
  it('does not stop the singleton: a refusal it could not send is asked again, and the singleton answers', async () => {
    const c = cluster('sends', ['n1', 'n2']);
    const replies = topicsFor(c.topicPrefix).replies;
    let failing = false;
    const produce = c.bus.produce.bind(c.bus);
    c.bus.produce = (topic: string, value: unknown) => (failing && topic === replies ? Promise.reject(new Error('the broker is away')) : produce(topic, value));
    const { driver, host, epoch } = await started(c);
    // A config the singleton refuses (BadSchema) while its replies cannot be sent.
    failing = true;
    const lost = c.setupDataset({ ref: 'bad', numShards: 3, minNumNodes: 1, source: { type: 'synthetic', recordsPerSecond: 1 } } as never, 1_000).then(
      (r) => r.type,
      (e: unknown) => String(e),
    );
    await driver.advance(1_500);
    expect(await lost).toMatch(/no reply/);
    failing = false;
    const again = c.setupDataset({ ref: 'bad', numShards: 3, minNumNodes: 1, source: { type: 'synthetic', recordsPerSecond: 1 } } as never, 1_000);
    await driver.advance(500);
    expect((await again).type).toBe('BadSchema');
    expect(host.actingSingletonEpoch).toBe(epoch);
    await c.stop();
  }, 60_000);
});
