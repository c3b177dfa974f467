// A walk through the coordinator core's decisions on a small simulated cluster. It drives
// ShardManager.decide directly (no actors, no I/O), so it shows what the singleton decides,
// not a running cluster.
import { validateDatasetConfig, type DatasetConfig } from '../core/dataset-config.js';
import { datasetRef, epoch, incarnation, nodeId, replyTo, type DatasetRef } from '../core/ids.js';
import type { Effect, Member, ShardManagerInput } from '../core/shard-manager/protocol.js';
import { ShardManager } from '../core/shard-manager/shard-manager.js';
import type { ShardManagerState } from '../core/shard-manager/step.js';
import { ShardEvents } from '../core/status.js';

type Print = (line: string) => void;

function dataset(ref: string, numShards: number, minNumNodes: number): DatasetConfig {
  const r = validateDatasetConfig({ ref, numShards, minNumNodes, source: { type: 'synthetic' } });
  if (!r.ok) throw new Error(r.error.message);
  return r.value;
}

export function runCoreDemo(print: Print): void {
  const manager = new ShardManager();
  let state: ShardManagerState = manager.initialState();
  let now = 0;
  const decide = (input: ShardManagerInput): readonly Effect[] => {
    const d = manager.decide(state, input, now);
    state = d.state;
    for (const e of d.effects) if (e.type === 'Notice' && e.notice.level !== 'debug') print(`  · ${e.notice.message}`);
    return d.effects;
  };
  const members: Member[] = ['node-1', 'node-2', 'node-3', 'node-4', 'node-5', 'node-6'].map((n, i) => ({
    node: nodeId(n),
    incarnation: incarnation(`${n}@1`),
    joinedAt: i,
  }));
  const show = (ref: DatasetRef) => {
    const m = state.datasets.get(ref)!.mapper;
    print(`\n  ${ref} (epoch ${state.epoch}, version ${m.version})`);
    for (const line of m.prettyPrint().split('\n')) print(`  ${line}`);
  };

  print('shardherd: the coordinator core deciding for a simulated cluster\n');
  decide({ type: 'Recover', recovery: { epoch: epoch(1), datasets: [], maps: [], subscriptions: [], watchers: [], cooldowns: [], members: members.slice(0, 4), running: [] } });
  const metrics = datasetRef('metrics');
  const logs = datasetRef('logs');
  decide({ type: 'SetupDataset', config: dataset(metrics, 32, 4), replyTo: replyTo('demo') });
  decide({ type: 'SetupDataset', config: dataset(logs, 8, 4), replyTo: replyTo('demo') });
  decide({ type: 'MemberUp', member: members[4]! });
  for (const ref of [metrics, logs]) {
    const m = state.datasets.get(ref)!.mapper;
    for (const s of m.assignedShards()) {
      const owner = m.nodeForShard(s)!;
      const member = state.members.find((x) => x.node === owner)!;
      decide({ type: 'NodeReport', node: owner, incarnation: member.incarnation, seq: s, events: [ShardEvents.ingestionStarted(ref, s, owner)] });
    }
  }
  show(metrics);
  show(logs);

  print('\nnode-2 fails; its shards go to the spare node-5:');
  decide({ type: 'MemberDown', node: members[1]!.node, incarnation: members[1]!.incarnation });
  show(metrics);

  print('\nnode-6 joins as a spare; then shard 0 of metrics hits an ingestion error: it moves once, then its cooldown holds it:');
  decide({ type: 'MemberUp', member: members[5]! });
  const owner = state.datasets.get(metrics)!.mapper.nodeForShard(0)!;
  const inc = state.members.find((x) => x.node === owner)!.incarnation;
  decide({ type: 'NodeReport', node: owner, incarnation: inc, seq: 1000, events: [ShardEvents.ingestionError(metrics, 0 as never, owner, 'poison record')] });
  now += 60_000;
  const next = state.datasets.get(metrics)!.mapper.nodeForShard(0)!;
  const inc2 = state.members.find((x) => x.node === next)!.incarnation;
  decide({ type: 'NodeReport', node: next, incarnation: inc2, seq: 1001, events: [ShardEvents.ingestionError(metrics, 0 as never, next, 'poison record')] });
  show(metrics);
  print('\nThe live embedded cluster (actors, synthetic ingestion, singleton failover) is not built yet;');
  print('this run shows the decisions of the coordinator core that it will run.');
}
