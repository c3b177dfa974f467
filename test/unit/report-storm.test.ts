// A copy says its status once per assignment. A node used to restate every running copy that its
// map still showed as Assigned at each map or members message; while the singleton lagged behind
// its inbox, every such message sent every copy's status again, which made it lag more (a 16 384 ×
// 3 run received 6.4 million reports for 49 152 copies, issue 34).
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { topicsFor, type InboxMessage } from '../../src/protocol/wire.js';
import { SimulatedClock } from '../../src/cluster/clock.js';
import { EmbeddedCluster } from '../../src/embedded/embedded-cluster.js';
import { SimDriver } from '../../src/sim/driver.js';
import { MemoryMetaStore } from '../../src/store/memory-meta-store.js';

const SHARDS = 32;
const LAG_MS = 4_000;

describe('reports while the singleton lags', () => {
  it('each copy says it started once, however many members messages come before the singleton hears it', async () => {
    const clock = new SimulatedClock(0);
    let lagging = false;
    /** `node/shard` → IngestionStarted events the node sent for it while the singleton heard nothing. */
    const sentWhileLagging = new Map<string, number>();
    const inbox = topicsFor('shardherd').inbox;
    const cluster = new EmbeddedCluster({
      name: 'storm',
      clock,
      nodes: [
        { name: 'n1', rack: 'A' },
        { name: 'n2', rack: 'B' },
        { name: 'n3', rack: 'C' },
        { name: 'n4', rack: 'A' },
      ],
      metaStore: new MemoryMetaStore(),
      log: pino({ level: 'silent' }),
      sessionTimeoutMs: 1_000,
      heartbeatIntervalMs: 250,
      // While lagging, the singleton hears no report (as one far behind its inbox); the nodes' sends are counted.
      bus: {
        faults: (topic, value) => {
          const m = value as InboxMessage;
          if (!lagging || topic !== inbox || m.kind !== 'report') return { kind: 'deliver' };
          for (const e of m.events)
            if (e.type === 'IngestionStarted') sentWhileLagging.set(`${e.node}/${e.shard}`, (sentWhileLagging.get(`${e.node}/${e.shard}`) ?? 0) + 1);
          return { kind: 'drop' };
        },
      },
      // No resend within the lag: what is counted is what a node sends of its own accord.
      settings: {
        publishIntervalMs: 1_000,
        recoveryReplyTimeoutMs: 500,
        pollIntervalMs: 250,
        reportResendMs: LAG_MS + 1_000,
        retryInitialMs: 50,
        retryMaxMs: 400,
      },
    });
    const driver = new SimDriver(cluster);
    const n4 = cluster.node('n4');
    await Promise.all(cluster.nodes.filter((n) => n !== n4).map((n) => n.start()));
    await driver.advance(1_000);
    lagging = true;
    const reply = cluster.setupDataset({ ref: 'alpha', numShards: SHARDS, minNumNodes: 3, source: { type: 'synthetic', recordsPerSecond: 20 } }, 10_000);
    // While the singleton has heard nothing yet, the members change four times: n4 joins, leaves, joins, leaves.
    for (let i = 0; i < 4; i++) {
      await driver.advance(LAG_MS / 4);
      if (i % 2 === 0) await n4.start();
      else await n4.stop();
    }
    lagging = false;
    expect(sentWhileLagging.size).toBe(SHARDS);
    expect(Math.max(...sentWhileLagging.values())).toBe(1);
    // And what the singleton did not hear reaches it: every copy is Active in the end.
    await driver.advance(2 * LAG_MS);
    expect((await reply).type).toBe('DatasetVerified');
    const map = (await (await cluster.singletonNode())!.singletonState())!.datasets.get('alpha' as never)!.mapper;
    expect(Array.from({ length: SHARDS }, (_, shard) => map.statusForShard(shard).type)).toEqual(Array(SHARDS).fill('Active'));
    await cluster.stop();
  }, 60_000);
});
