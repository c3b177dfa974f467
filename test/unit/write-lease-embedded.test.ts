// One writer per RF-1 shard when the node is alive but its lease or its sink is slow (an embedded
// cluster on a simulated clock, heartbeat mode; docs/ARCHITECTURE.md §11.4, §12.2):
// - a lease that lapses because the detector link is slow pauses writes: nothing fails, nothing
//   moves, and the shards write again when grants arrive in time (the lease wait is not sink time);
// - a sink call that times out fails the shard, but the shard is reported failed, and so moved,
//   only once that call has ended: the next owner's first call starts after it.
import { afterEach, describe, expect, it } from 'vitest';
import { SimulatedClock } from '../../src/cluster/clock.js';
import type { FailureDetectorOptions } from '../../src/cluster/failure-detector/settings.js';
import type { DatasetConfig } from '../../src/core/dataset-config.js';
import type { NodeId, ShardNum } from '../../src/core/ids.js';
import { EmbeddedCluster } from '../../src/embedded/embedded-cluster.js';
import type { RecordSink, SourceRecord } from '../../src/ingest/ingestion-source.js';
import { startDetectorCluster } from '../support/detector-cluster.js';

const HEARTBEAT: FailureDetectorOptions = { mode: 'heartbeat', heartbeatIntervalMs: 100, suspicionTimeoutMs: 1_800, leaseMs: 500 };
const SINK_TIMEOUT_MS = 1_000;

/** Every sink call as the sink saw it: node, shard, start and end on the simulated clock. */
interface Call {
  readonly node: string;
  readonly shard: number;
  readonly start: number;
  end: number | undefined;
}

class CallLog {
  readonly calls: Call[] = [];
  /** Per node and shard: how long its next call takes (once). */
  readonly slowOnce = new Map<string, number>();
  constructor(private readonly clock: SimulatedClock) {}
  sink(node: NodeId): RecordSink {
    return {
      accept: async (_ds: DatasetConfig, shard: ShardNum, records: readonly SourceRecord[]) => {
        if (records.length === 0) return;
        const call: Call = { node, shard, start: this.clock.now(), end: undefined };
        this.calls.push(call);
        const slow = this.slowOnce.get(`${node}/${shard}`);
        if (slow !== undefined) {
          this.slowOnce.delete(`${node}/${shard}`);
          await new Promise<void>((resolve) => this.clock.schedule(slow, resolve));
        }
        call.end = this.clock.now();
      },
    };
  }
  by(node: string, shard: number): Call[] {
    return this.calls.filter((c) => c.node === node && c.shard === shard);
  }
}

let cluster: EmbeddedCluster | undefined;
afterEach(async () => {
  await cluster?.stop();
  cluster = undefined;
});

async function start(delayed: { node: string | undefined; ms: number }) {
  let log: CallLog | undefined;
  const started = await startDetectorCluster({
    failureDetector: HEARTBEAT,
    sink: (node, clock) => (log ??= new CallLog(clock)).sink(node),
    settings: { sinkTimeoutMs: SINK_TIMEOUT_MS },
    detector: {
      // Every frame to or from the delayed node's endpoint takes `ms` more, while `node` is set.
      faults: (from, to) => {
        const at = delayed.node && cluster?.membership.view().members.find((m) => m.node === delayed.node)?.detector;
        return at && (from === at || to === at) ? { kind: 'delay', ms: delayed.ms } : { kind: 'deliver' };
      },
    },
  });
  cluster = started.cluster;
  return { ...started, log: log! };
}

describe('the lease gates writes; it never fails them', () => {
  it("a detector link slowed past the lease pauses the node's writes for as long as it lasts; nothing fails or moves", async () => {
    const delayed: { node: string | undefined; ms: number } = { node: undefined, ms: 300 };
    const w = await start(delayed);
    const shards = (await w.map()).shardsForNode('n3' as NodeId);
    expect(shards.length).toBeGreaterThan(0);
    const from = w.clock.now();
    // 300 ms each way: every grant arrives after the 500 ms lease it carries has run out.
    delayed.node = 'n3';
    await w.driver.advance(1_000);
    const lease = w.cluster.node('n3').writeLease!;
    expect(lease.held).toBe(false);
    expect(lease.waitingShards).toBe(shards.length);
    await w.driver.advance(9_000); // nine sink timeouts' worth
    const slowedUntil = w.clock.now();
    delayed.node = undefined;
    await w.driver.advance(3_000);

    const map = await w.map();
    expect(map.shardsForNode('n3' as NodeId)).toEqual(shards); // nothing moved
    for (const shard of shards) {
      expect(map.statusForShard(shard).type, `shard ${shard}`).toBe('Active'); // nothing failed
      const during = w.log.by('n3', shard).filter((c) => c.start > from + 1_000 && c.start < slowedUntil);
      expect(during, `shard ${shard}: no write without a lease`).toEqual([]);
      expect(
        w.log.by('n3', shard).some((c) => c.start > slowedUntil),
        `shard ${shard} writes again`,
      ).toBe(true);
      expect(
        w.log.calls.some((c) => c.shard === shard && c.node !== 'n3' && c.start > from),
        `shard ${shard}: nobody else wrote it`,
      ).toBe(false);
    }
    expect(w.cluster.node('n3').writeLease).toEqual({ held: true, waitingShards: 0, longestWaitMs: 0 });
  });

  it('a sink call that times out moves the shard only once the call has ended: the next owner writes after it', async () => {
    const w = await start({ node: undefined, ms: 0 });
    const shard = (await w.map()).shardsForNode('n3' as NodeId)[0]!;
    // Past its timeout, within the second `sinkTimeoutMs` the node waits for a call to end.
    w.log.slowOnce.set(`n3/${shard}`, SINK_TIMEOUT_MS + 600);
    await w.driver.until(async () => (await w.map()).nodeForShard(shard) !== 'n3', 10_000, 20);
    const slow = w.log.by('n3', shard).find((c) => c.end !== undefined && c.end - c.start > SINK_TIMEOUT_MS);
    expect(slow, 'the slow call ended').toBeDefined();
    // The failure was reported when the call ended, not when it timed out.
    expect(w.clock.now()).toBeGreaterThanOrEqual(slow!.end!);
    await w.driver.advance(2_000);
    const next = w.log.calls.filter((c) => c.shard === shard && c.node !== 'n3');
    expect(next.length, 'another node writes the shard').toBeGreaterThan(0);
    expect(Math.min(...next.map((c) => c.start))).toBeGreaterThanOrEqual(slow!.end!);
    expect(
      w.log.by('n3', shard).filter((c) => c.start > slow!.start),
      'n3 wrote no more',
    ).toEqual([]);
  });

  it('a sink call that never ends is given up one more sinkTimeoutMs after its timeout: the shard does not wait for ever', async () => {
    const w = await start({ node: undefined, ms: 0 });
    const shard = (await w.map()).shardsForNode('n3' as NodeId)[0]!;
    w.log.slowOnce.set(`n3/${shard}`, 3_600_000);
    await w.driver.until(async () => (await w.map()).nodeForShard(shard) !== 'n3', 10_000, 20);
    const hung = w.log.by('n3', shard).find((c) => c.end === undefined)!;
    expect(hung).toBeDefined();
    const movedAfter = w.clock.now() - hung.start;
    expect(movedAfter).toBeGreaterThanOrEqual(2 * SINK_TIMEOUT_MS);
    expect(movedAfter).toBeLessThan(2 * SINK_TIMEOUT_MS + 1_000);
  });
});
