/**
 * A large cluster in one process (embedded: memory bus, membership and MetaStore, real clock):
 * `SHARDHERD_SCALE_NODES` nodes (default 1000) in 3 racks, `SHARDHERD_SCALE_DATASETS` balanced
 * datasets (default 100) of 1024 shards × RF 3, a synthetic source nearly idle. Measured:
 * - setup: every dataset set up and every copy Active;
 * - decision time of a membership change (a node down, a node up) on the singleton's own state,
 *   and the bus bytes of its records (the changes, compact, as they are produced); with no
 *   replacement delay nor settle window, so that each change runs its round then (the costly case);
 * - time until every node has applied one change (a shard stopped), from the record's produce;
 * - singleton recovery: from the new lease to the new singleton active, after its node crashed.
 */
import { pino } from 'pino';
import type { ShardherdNode } from '../src/actors/node-process.js';
import { encodeEvents } from '../src/core/map-codec.js';
import type { DatasetRef, Incarnation, NodeId } from '../src/core/ids.js';
import type { Effect } from '../src/core/shard-manager/protocol.js';
import { ShardManager } from '../src/core/shard-manager/shard-manager.js';
import { EmbeddedCluster } from '../src/embedded/embedded-cluster.js';
import { ms, quantile, register, type Table } from './harness.js';
import { waitFor } from './runtime-support.js';

const NODES = Number(process.env.SHARDHERD_SCALE_NODES ?? 1000);
const DATASETS = Number(process.env.SHARDHERD_SCALE_DATASETS ?? 100);
const SHARDS = 1024;
const RF = 3;

/** Bytes the changes and whole maps of some effects take as they are produced (compact JSON). */
function recordBytes(effects: readonly Effect[]): number {
  let bytes = 0;
  for (const e of effects) {
    if (e.type === 'PublishChanges') bytes += JSON.stringify({ dataset: e.dataset, base: e.base, changes: encodeEvents(e.events) }).length + 80;
    else if (e.type === 'PublishMembers') bytes += JSON.stringify(e.members).length + 60;
    else if (e.type === 'PublishMembersChange') bytes += JSON.stringify([e.joined, e.left]).length + 60;
  }
  return bytes;
}

async function allApplied(nodes: readonly ShardherdNode[], dataset: DatasetRef, version: number): Promise<boolean> {
  for (const n of nodes) {
    const f = (await n.cache())?.maps.get(dataset);
    if (!f || f.version < version) return false;
  }
  return true;
}

register({
  name: 'scale-embedded',
  run: async (): Promise<Table> => {
    const lines: { event?: string; recoveryMs?: number; answered?: number; members?: number }[] = [];
    const log = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line) as never) });
    const racks = ['a', 'b', 'c'];
    const cluster = new EmbeddedCluster({
      nodes: Array.from({ length: NODES }, (_, i) => ({ name: `node-${String(i + 1).padStart(4, '0')}`, rack: racks[i % 3]! })),
      metrics: false,
      log,
      sessionTimeoutMs: 10_000,
      heartbeatIntervalMs: 1_000,
      settings: { publishIntervalMs: 5_000, pollIntervalMs: 200, reportResendMs: 5_000, recoveryReplyTimeoutMs: 5_000 },
      // A bus of a thousand nodes' reports and maps keeps more than the default 2 000 records.
      bus: { retainRecords: 50_000 },
    });
    const t0 = performance.now();
    await cluster.start();
    const joinedMs = performance.now() - t0;
    const datasets = Array.from({ length: DATASETS }, (_, i) => `ds${i}` as DatasetRef);
    const t1 = performance.now();
    for (const ref of datasets) {
      const r = await cluster.setupDataset(
        {
          ref,
          numShards: SHARDS,
          minNumNodes: 1,
          replicationFactor: RF,
          strategy: 'balanced',
          replacementDelayMs: 0,
          source: { type: 'synthetic', recordsPerSecond: 0.001 },
        },
        600_000,
      );
      if (r.type !== 'DatasetVerified') throw new Error(`setup of ${ref}: ${JSON.stringify(r)}`);
    }
    const setupMs = performance.now() - t1;
    const singletonNode = (await cluster.singletonNode())!;
    await waitFor(
      'every copy Active',
      async () => {
        const state = await singletonNode.singletonState();
        if (!state) return false;
        for (const ds of state.datasets.values())
          for (let s = 0; s < SHARDS; s++) if (ds.mapper.recordForShard(s).assignments.filter((a) => a.status.type === 'Active').length < RF) return false;
        return true;
      },
      600_000,
      1_000,
    );
    const activeMs = performance.now() - t1;

    // Decisions on the singleton's own state, as its next inputs would be.
    const state = (await singletonNode.singletonState())!;
    const manager = new ShardManager({ settleWindowMs: 0 });
    const down = state.members.at(-1)!;
    const downTimes: number[] = [];
    const upTimes: number[] = [];
    let downBytes = 0;
    let upBytes = 0;
    for (let i = 0; i < 5; i++) {
      let t = performance.now();
      const d = manager.decide(state, { type: 'MemberDown', node: down.node, incarnation: down.incarnation }, Date.now());
      downTimes.push(performance.now() - t);
      downBytes = recordBytes(d.effects);
      t = performance.now();
      const u = manager.decide(
        d.state,
        { type: 'MemberUp', member: { node: 'node-new' as NodeId, incarnation: 'x' as Incarnation, joinedAt: Date.now(), rack: 'a' } },
        Date.now(),
      );
      upTimes.push(performance.now() - t);
      upBytes = recordBytes(u.effects);
    }

    // One change, applied by every node.
    const running = cluster.nodes.filter((n) => n.state === 'running');
    const target = datasets[0]!;
    const before = state.datasets.get(target)!.mapper.version;
    const produced: number[] = [];
    const produce = cluster.bus.produce.bind(cluster.bus);
    cluster.bus.produce = (topic, value) => {
      if ((value as { kind?: string; dataset?: string }).kind === 'map-changes' && (value as { dataset?: string }).dataset === target)
        produced.push(performance.now());
      return produce(topic, value);
    };
    const stop = await cluster.request((replyTo) => ({ type: 'StopShards', dataset: target, shards: [0], replyTo }), 600_000);
    if (stop.type !== 'Success') throw new Error(`StopShards: ${JSON.stringify(stop)}`);
    await waitFor('every node applying the change', () => allApplied(running, target, before + 1), 60_000, 2);
    const appliedMs = performance.now() - produced[0]!;
    cluster.bus.produce = produce;

    // Singleton recovery after its node crashed.
    const epoch = (await cluster.metaStore.readLease())!.epoch;
    singletonNode.crash();
    await waitFor(
      'a new singleton',
      async () => ((await cluster.metaStore.readLease())?.epoch ?? 0) > epoch && (await cluster.singletonNode()) !== undefined,
      120_000,
      100,
    );
    await waitFor(
      'its recovery',
      () => lines.some((l) => l.event === 'singleton.takeover' && l.recoveryMs !== undefined && (l as { singleton?: number }).singleton === epoch + 1),
      120_000,
      100,
    );
    const recovered = lines.find(
      (l) => l.event === 'singleton.takeover' && l.recoveryMs !== undefined && (l as { singleton?: number }).singleton === epoch + 1,
    )!;
    const recoveryMs = recovered.recoveryMs!;
    const rssMiB = process.memoryUsage().rss / 2 ** 20;
    await cluster.stop();
    return {
      title: `A large embedded cluster: ${NODES} nodes in 3 racks, ${DATASETS} datasets × ${SHARDS} shards × RF ${RF} (${DATASETS * SHARDS * RF} copies), one process`,
      columns: ['measure', 'value'],
      rows: [
        ['every node joined', ms(joinedMs)],
        ['every dataset set up (one after the other)', ms(setupMs)],
        ['every copy Active, from the first setup', ms(activeMs)],
        ['decision: a node down (median of 5)', `${quantile(downTimes, 0.5).toFixed(1)} ms`],
        ['its records (changes of every dataset it touched, the members)', `${(downBytes / 1024).toFixed(1)} KiB`],
        ['decision: a node up (median of 5)', `${quantile(upTimes, 0.5).toFixed(1)} ms`],
        ['its records', `${(upBytes / 1024).toFixed(1)} KiB`],
        ['one change applied by every node, from its produce', ms(appliedMs)],
        ['singleton recovery (lease → active), after its node crashed', `${ms(recoveryMs)} (${recovered.answered} of ${recovered.members} members answered)`],
        ['process memory (RSS)', `${rssMiB.toFixed(0)} MiB`],
      ],
      notes: [
        "Decisions are timed on the singleton's own state through `ShardManager.decide`, as its next input would be; their bytes are the compact records they produce (the bus adds a small envelope).",
        'Every node of the process applies every change: the time is until the last of them holds the new version (polled every 2 ms).',
      ],
    };
  },
});
