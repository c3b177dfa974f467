// A flood of reports the singleton must refuse (events for copies the map does not give their
// node, as a node acting on an old map sends) keeps the singleton's queue bounded and its log
// readable, and it goes on answering: reports are refused with a count, never a crash (issue 34).
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { topicsFor, WIRE_FORMAT, type InboxMessage } from '../../src/protocol/wire.js';
import { SimulatedClock } from '../../src/cluster/clock.js';
import type { DatasetRef, ShardNum } from '../../src/core/ids.js';
import { ShardEvents } from '../../src/core/status.js';
import { EmbeddedCluster } from '../../src/embedded/embedded-cluster.js';
import { SimDriver } from '../../src/sim/driver.js';
import { MemoryMetaStore } from '../../src/store/memory-meta-store.js';

const FLOOD = 12_000;

describe('a flood of reports to refuse', () => {
  it('is refused in bounded lots with a few log lines, and the singleton goes on answering', async () => {
    const clock = new SimulatedClock(0);
    const lines: { event?: string; msg: string }[] = [];
    const cluster = new EmbeddedCluster({
      name: 'flood',
      clock,
      nodes: ['n1', 'n2'],
      metaStore: new MemoryMetaStore(),
      log: pino({ level: 'info' }, { write: (line: string) => lines.push(JSON.parse(line) as { msg: string }) }),
      sessionTimeoutMs: 10_000,
      heartbeatIntervalMs: 250,
      bus: { retainRecords: 2 * FLOOD + 10_000 },
      settings: { publishIntervalMs: 1_000, recoveryReplyTimeoutMs: 500, pollIntervalMs: 250, retryInitialMs: 50, retryMaxMs: 400 },
    });
    const driver = new SimDriver(cluster);
    await cluster.startNodes();
    await driver.advance(1_000);
    const dataset = 'alpha' as DatasetRef;
    const reply = cluster.setupDataset({ ref: 'alpha', numShards: 2, minNumNodes: 1, source: { type: 'synthetic', recordsPerSecond: 20 } }, 5_000);
    await driver.advance(1_000);
    expect((await reply).type).toBe('DatasetVerified');
    const host = (await cluster.singletonNode())!;
    const epoch = host.actingSingletonEpoch;
    const map = (await host.localSingletonState())!.datasets.get(dataset)!.mapper;
    // A node that holds no copy of shard 0 says it runs it, again and again.
    const liar = cluster.nodes.find((n) => !map.nodesForShard(0).includes(n.node))!;
    const from = lines.length;
    const inbox = topicsFor(cluster.topicPrefix).inbox;
    for (let seq = 1; seq <= FLOOD; seq++) {
      const report: InboxMessage = {
        format: WIRE_FORMAT,
        kind: 'report',
        node: liar.node,
        incarnation: liar.incarnation!,
        seq: 1_000_000 + seq,
        events: [ShardEvents.ingestionStarted(dataset, 0 as ShardNum, liar.node)],
      };
      await cluster.bus.produce(inbox, report);
    }
    await driver.advance(3_000);
    // Still the same singleton, answering.
    expect(host.actingSingletonEpoch).toBe(epoch);
    const ops = cluster.request((replyTo) => ({ type: 'GetNodeOperations', replyTo }), 5_000);
    await driver.advance(1_000);
    expect((await ops).type).toBe('NodeOperationsState');
    // The copy was never taken as the liar's.
    expect((await host.localSingletonState())!.datasets.get(dataset)!.mapper.nodesForShard(0)).not.toContain(liar.node);
    const said = lines.slice(from).filter((l) => l.event === 'report.rejected' || l.event === 'reports.dropped');
    expect(said.length).toBeGreaterThan(0);
    expect(said.length).toBeLessThanOrEqual(6);
    await cluster.stop();
  }, 120_000);
});
