// A new singleton reads the inbox from where its predecessor committed, so it reads again reports
// the predecessor already applied. A report written before the takeover is never applied by the
// new singleton: it was applied and persisted already, or it was never acknowledged and its node
// sends its events again. Without this, a replayed report of a member that did not answer the
// recovery (paused, or dead but not yet evicted) turned the state back (sim seeds 9250, 13878: a
// replayed IngestionStarted completed a handoff whose successor was still catching up).
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { topicsFor, type InboxMessage } from '../../src/protocol/wire.js';
import { SimulatedClock } from '../../src/cluster/clock.js';
import type { MemoryBusOptions } from '../../src/cluster/memory-bus.js';
import type { DatasetRef } from '../../src/core/ids.js';
import { EmbeddedCluster } from '../../src/embedded/embedded-cluster.js';
import { SimDriver } from '../../src/sim/driver.js';
import { MemoryMetaStore } from '../../src/store/memory-meta-store.js';

const SESSION_MS = 3_000;
const dataset = 'alpha' as DatasetRef;

interface Options {
  readonly failAt?: (dataset: string, shard: number, offset: number) => string | undefined;
  readonly faults?: MemoryBusOptions['faults'];
}

async function startCluster({ failAt, faults }: Options = {}) {
  const clock = new SimulatedClock(0);
  const lines: { event?: string; reports?: number }[] = [];
  const log = pino({ level: 'info' }, { write: (line: string) => lines.push(JSON.parse(line) as { event?: string }) });
  const cluster = new EmbeddedCluster({
    name: 'takeover',
    clock,
    nodes: [
      { name: 'n1', rack: 'A' },
      { name: 'n2', rack: 'B' },
      { name: 'n3', rack: 'C' },
    ],
    metaStore: new MemoryMetaStore(),
    log,
    sessionTimeoutMs: SESSION_MS,
    ...(failAt ? { source: { failAt } } : {}),
    ...(faults ? { bus: { faults } } : {}),
    heartbeatIntervalMs: 250,
    settings: { publishIntervalMs: 1_000, recoveryReplyTimeoutMs: 500, pollIntervalMs: 250, reportResendMs: 500, retryInitialMs: 50, retryMaxMs: 400 },
  });
  const driver = new SimDriver(cluster);
  await cluster.startNodes();
  await driver.advance(500);
  const reply = cluster.setupDataset({ ref: 'alpha', numShards: 4, minNumNodes: 1, source: { type: 'synthetic', recordsPerSecond: 20 } }, 5_000);
  await driver.advance(500);
  expect((await reply).type).toBe('DatasetVerified');
  await driver.advance(3_000);
  return { cluster, driver, lines, clock };
}

async function singletonMap(node: EmbeddedCluster['nodes'][number]) {
  return (await node.localSingletonState())!.datasets.get(dataset)!.mapper;
}

/** Waits until a node other than `old` acts as the singleton. */
async function successorOf(cluster: EmbeddedCluster, driver: SimDriver, old: EmbeddedCluster['nodes'][number]) {
  for (let waited = 0; waited < SESSION_MS + 3_000; waited += 100) {
    const successor = cluster.nodes.find((n) => n !== old && n.actingSingletonEpoch !== undefined);
    if (successor) return successor;
    await driver.advance(100);
  }
  throw new Error('no successor took over');
}

const inboxReports = (cluster: EmbeddedCluster) =>
  cluster.bus
    .topic(topicsFor(cluster.topicPrefix).inbox)
    .map((r) => r.value as InboxMessage)
    .filter((m) => m.kind === 'report');

describe('a new singleton and the reports written before it took over', () => {
  it('does not apply a replayed report of a member that did not answer its recovery', async () => {
    const { cluster, driver, lines } = await startCluster();
    const host = (await cluster.singletonNode())!;
    const epoch = host.actingSingletonEpoch!;
    const map = await singletonMap(host);
    // A member that does not host the singleton, with a shard it ingests.
    const victim = cluster.nodes.find((n) => n !== host && map.shardsForNode(n.node).length > 0)!;
    const shard = map.shardsForNode(victim.node)[0]!;
    expect(map.statusForShard(shard).type).toBe('Active');
    // The report that said the copy was recovering: applied long ago.
    const old = inboxReports(cluster).find(
      (m) => m.incarnation === victim.incarnation && m.events.some((e) => e.shard === shard && e.type === 'RecoveryInProgress'),
    );
    expect(old).toBeDefined();

    host.crash();
    // The inbox replays it to the next singleton (as one its predecessor read but never committed).
    await cluster.bus.produce(topicsFor(cluster.topicPrefix).inbox, old!);
    // The victim does not run while the next singleton recovers; within its session it stays a member.
    await driver.advance(SESSION_MS - 500);
    victim.pause();
    const successor = await successorOf(cluster, driver, host);
    expect(successor.actingSingletonEpoch).toBeGreaterThan(epoch);
    await driver.advance(800); // past the recovery deadline: it went on without the victim's answer
    expect(victim.isMember).toBe(true);
    const recovered = await singletonMap(successor);
    expect(recovered.nodeForShard(shard)).toBe(victim.node);
    // The copy ingests: the replayed report did not turn it back to recovering.
    expect(recovered.statusForShard(shard).type).toBe('Active');
    expect(lines.some((l) => l.event === 'recovery.reports-before-takeover' && (l.reports ?? 0) >= 1)).toBe(true);
    victim.resume();
    await cluster.stop();
  }, 60_000);

  it.each([
    { lost: 0, what: 'its node sends it again' },
    { lost: 1, what: 'even when the takeover record is lost on the bus: it is written again' },
  ])(
    'still applies what a node reported while no singleton ran: $what',
    async ({ lost }) => {
      const poison: { at?: { shard: number; offset: number } } = {};
      let toLose = 0;
      const { cluster, driver, clock, lines } = await startCluster({
        failAt: (_, shard, offset) => (poison.at?.shard === shard && poison.at.offset === offset ? 'a record it cannot read' : undefined),
        faults: (_, value) => ((value as InboxMessage).kind === 'takeover' && toLose-- > 0 ? { kind: 'drop' } : { kind: 'deliver' }),
      });
      toLose = lost;
      const host = (await cluster.singletonNode())!;
      const map = await singletonMap(host);
      const victim = cluster.nodes.find((n) => n !== host && map.shardsForNode(n.node).length > 0)!;
      const shard = map.shardsForNode(victim.node)[0]!;
      host.crash();
      // The victim's copy fails half a second later (20 records a second), long before a successor takes over.
      poison.at = { shard, offset: Math.ceil((clock.now() * 20) / 1_000) + 10 };
      await driver.advance(1_000);
      expect(inboxReports(cluster).some((m) => m.node === victim.node && m.events.some((e) => e.shard === shard && e.type === 'IngestionError'))).toBe(true);
      const successor = await successorOf(cluster, driver, host);
      await driver.advance(2_000);
      // The failure reached the new singleton: the shard left the node it failed on.
      expect((await singletonMap(successor)).nodeForShard(shard)).not.toBe(victim.node);
      expect(lines.some((l) => l.event === 'shard.reassigned')).toBe(true);
      expect(lines.filter((l) => l.event === 'recovery.takeover-record-again')).toHaveLength(lost);
      await cluster.stop();
    },
    60_000,
  );
});
