// A read request (the datasets, a map, the cluster's description, the node operations) is
// answered as it arrives, from the last state whose store writes are done, not behind the decision
// under way: reads waited seconds behind a 65 536-shard setup, and every operator route with them
// (issue 34). A read never shows a change that is not stored yet.
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { SimulatedClock } from '../../src/cluster/clock.js';
import type { DatasetConfig } from '../../src/core/dataset-config.js';
import { datasetRef, type Epoch } from '../../src/core/ids.js';
import type { ReadRequest, Reply } from '../../src/core/shard-manager/protocol.js';
import { EmbeddedCluster } from '../../src/embedded/embedded-cluster.js';
import { SimDriver } from '../../src/sim/driver.js';
import { MemoryMetaStore } from '../../src/store/memory-meta-store.js';
import { adminReplyTo, ds1, ds2, Harness } from '../support/manager-harness.js';

/** A MetaStore whose dataset writes wait while `held` is set: a store that answers late. */
class HeldDatasetWrites extends MemoryMetaStore {
  private waiting: (() => void)[] = [];
  held = false;

  override async putDataset(config: DatasetConfig, epoch: Epoch): Promise<void> {
    while (this.held) await new Promise<void>((resolve) => this.waiting.push(resolve));
    return super.putDataset(config, epoch);
  }

  release(): void {
    this.held = false;
    for (const resume of this.waiting.splice(0)) resume();
  }
}

/** Whether `p` has settled, and its value. */
function watch<T>(p: Promise<T>): { done: () => boolean; value: () => T | undefined } {
  let settled = false;
  let value: T | undefined;
  p.then(
    (v) => {
      settled = true;
      value = v;
    },
    () => {
      settled = true;
    },
  );
  return { done: () => settled, value: () => value };
}

const datasetsIn = (r: Reply | undefined) => (r?.type === 'RegisteredDatasets' ? r.datasets : undefined);

describe('read requests', () => {
  it('are answered while a decision waits on the store, and show only what is stored', async () => {
    const store = new HeldDatasetWrites();
    const c = new EmbeddedCluster({
      name: 'reads',
      clock: new SimulatedClock(0),
      nodes: ['n1', 'n2'],
      metaStore: store,
      log: pino({ level: 'silent' }),
      sessionTimeoutMs: 1_000,
      heartbeatIntervalMs: 250,
      settings: { publishIntervalMs: 500, recoveryReplyTimeoutMs: 500, pollIntervalMs: 250 },
    });
    const driver = new SimDriver(c);
    await c.startNodes();
    await driver.advance(1_000);
    expect(await c.singletonNode()).toBeDefined();

    store.held = true;
    const creating = watch(c.setupDataset({ ref: 'alpha', numShards: 4, minNumNodes: 1, source: { type: 'synthetic', recordsPerSecond: 20 } }, 20_000));
    await driver.advance(500);
    expect(creating.done()).toBe(false); // the singleton waits on the store

    const listing = watch(c.request((replyTo) => ({ type: 'ListRegisteredDatasets', replyTo }), 20_000));
    const describing = watch(c.request((replyTo) => ({ type: 'DescribeCluster', replyTo }), 20_000));
    const operations = watch(c.request((replyTo) => ({ type: 'GetNodeOperations', replyTo }), 20_000));
    await driver.advance(500);
    expect(listing.done() && describing.done() && operations.done()).toBe(true);
    expect(datasetsIn(listing.value())).toEqual([]); // alpha is not stored yet
    expect(describing.value()?.type).toBe('ClusterDescription');
    expect(operations.value()?.type).toBe('NodeOperationsState');
    expect(creating.done()).toBe(false);

    store.release();
    await driver.advance(1_000);
    expect(creating.value()?.type).toBe('DatasetVerified');
    // Once a change is acknowledged, every read sent after it sees it.
    const after = watch(c.request((replyTo) => ({ type: 'ListRegisteredDatasets', replyTo }), 20_000));
    const map = watch(c.request((replyTo) => ({ type: 'GetShardMap', dataset: 'alpha', replyTo }) as never, 20_000));
    await driver.advance(500);
    expect(datasetsIn(after.value())).toEqual(['alpha']);
    expect(map.value()?.type).toBe('CurrentShardSnapshot');
    await c.stop();
  }, 60_000);
});

describe('ShardManager.answer', () => {
  it('answers a read exactly as decide does, with its reply alone', () => {
    const h = new Harness({ reassignmentCooldownMs: 60_000 });
    for (const n of ['a', 'b', 'c']) h.addMember(n);
    h.setup(ds1, 8, 2);
    h.setup(ds2, 4, 1);
    h.stopShards(ds2, [1]);
    h.run({ type: 'RemoveNode', node: 'c', replyTo: adminReplyTo() }); // a drain in flight
    const reads: ReadRequest[] = [
      { type: 'ListRegisteredDatasets', replyTo: adminReplyTo() },
      { type: 'GetShardMap', dataset: ds1, replyTo: adminReplyTo() },
      { type: 'GetShardMap', dataset: datasetRef('unknown'), replyTo: adminReplyTo() },
      { type: 'GetNodeOperations', replyTo: adminReplyTo() },
      { type: 'DescribeCluster', replyTo: adminReplyTo() },
      { type: 'DescribeCluster', dataset: ds2, replyTo: adminReplyTo() },
    ];
    const state = h.state;
    for (const read of reads) {
      const answered = h.manager.answer(state, read, h.now);
      expect(answered.map((e) => e.type)).toEqual(['Reply']);
      const decided = h.manager.decide(state, read, h.now).effects.filter((e) => e.type === 'Reply');
      expect(answered).toEqual(decided);
    }
  });
});

describe('DescribeCluster', () => {
  it("counts each dataset's shards per status and copies per node, as its map says: a summary needs no map", () => {
    const h = new Harness();
    for (const n of ['a', 'b', 'c']) h.addMember(n);
    h.setup(ds1, 8, 2);
    h.stopShards(ds1, [1, 2]);
    h.removeMember('c');
    const [reply] = h.manager.answer(h.state, { type: 'DescribeCluster', dataset: ds1, replyTo: adminReplyTo() }, h.now);
    if (reply?.type !== 'Reply' || reply.reply.type !== 'ClusterDescription') throw new Error(`not a description: ${JSON.stringify(reply)}`);
    const [d] = reply.reply.datasets;
    const map = h.mapper(ds1);
    const counts: Record<string, number> = {};
    const copies: Record<string, number> = {};
    for (let shard = 0; shard < 8; shard++) {
      const r = map.recordForShard(shard);
      counts[r.status.type] = (counts[r.status.type] ?? 0) + 1;
      for (const a of r.assignments) copies[a.node] = (copies[a.node] ?? 0) + 1;
    }
    expect(d?.counts).toEqual(counts);
    expect(d?.copies).toEqual(copies);
    expect(Object.keys(counts).length).toBeGreaterThan(1); // stopped shards and assigned ones
  });
});
