// Records fetched before a fence and refused by the node (it is no longer a member) are refusals the
// design expects: logged once per shard at info with their count, never as "ingestion failed"
// errors, and the shard reports no IngestionError for them. In a real process the membership's
// news arrives while reads are in flight (every fence used to log four such errors); here the node's
// refusal is played by the sink, the same typed error at the same place.
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { NotMemberError } from '../../src/actors/sink-call.js';
import { SimulatedClock } from '../../src/cluster/clock.js';
import { EmbeddedCluster } from '../../src/embedded/embedded-cluster.js';
import { CountingSink } from '../../src/ingest/counting-sink.js';
import type { RecordSink } from '../../src/ingest/ingestion-source.js';
import { SimDriver } from '../../src/sim/driver.js';

describe('records refused because the node was fenced', () => {
  it('are logged once per shard at info with a count, not as errors, and the shard goes on', async () => {
    const lines: { level: number; event?: string; msg: string; cause?: string; refused?: number; shard?: number }[] = [];
    const log = pino({ level: 'debug' }, { write: (line: string) => void lines.push(JSON.parse(line)) });
    const clock = new SimulatedClock(0);
    const inner = new CountingSink();
    const refusedSoFar = new Map<number, number>();
    const sink: RecordSink = {
      accept: async (ds, shard, records, token) => {
        const n = refusedSoFar.get(shard) ?? 0;
        if (n < 4) {
          refusedSoFar.set(shard, n + 1);
          throw new NotMemberError('n1');
        }
        return inner.accept(ds, shard, records, token);
      },
    };
    const cluster = new EmbeddedCluster({
      clock,
      nodes: ['n1'],
      metrics: false,
      sink,
      log,
      settings: { pollIntervalMs: 50, publishIntervalMs: 1_000, retryInitialMs: 50, retryMaxMs: 400 },
    });
    const driver = new SimDriver(cluster);
    await cluster.startNodes();
    await driver.advance(500);
    const reply = cluster.setupDataset({ ref: 'm', numShards: 2, minNumNodes: 1, source: { type: 'synthetic', recordsPerSecond: 100 } });
    await driver.advance(200);
    expect((await reply).type).toBe('DatasetVerified');
    await driver.advance(4_000);
    const map = (await (await cluster.singletonNode())!.singletonState())!.datasets.get('m' as never)!.mapper;
    await cluster.stop();

    expect(lines.filter((l) => l.level >= 50).map((l) => l.msg)).toEqual([]);
    const runs = lines.filter((l) => l.event === 'sink.write-refused' && l.level === 30);
    expect(runs.map((r) => [r.shard, r.cause, r.refused]).sort()).toEqual([
      [0, 'not-a-member', 4],
      [1, 'not-a-member', 4],
    ]);
    for (let shard = 0; shard < 2; shard++) {
      expect(map.recordForShard(shard).status.type).toBe('Active');
      expect(inner.tally('m', shard).covered).toBeGreaterThan(300);
      expect(inner.tally('m', shard).duplicates).toBe(0);
    }
  });
});
