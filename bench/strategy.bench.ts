/**
 * The default assignment strategy (FiloDB's), driven through `ShardManager.decide` exactly as users
 * run it: one `SetupDataset` on a cluster of N members, then one `MemberDown`.
 */
import { type DatasetConfig, epoch, incarnation, type Member, nodeId, replyTo, type ShardMapper, validateDatasetConfig } from '../src/index.js';
import { type Decision, ShardManager, type ShardManagerState } from '../src/entries/core.js';
import { ScanningFiloDbStrategy } from './baseline-strategy.js';
import { ms, quantile, register, sample, type SampleOptions, type Table } from './harness.js';

const SHARD_COUNTS = [256, 4096, 65536] as const;
const NODE_COUNTS = [32, 300, 1000] as const;
const NOW = 1_700_000_000_000;
/** ~2 s of timed work per case; the largest (~1 s a call) gets the minimum of 5 samples. */
const TIMING: SampleOptions = { warmup: 3, warmupMs: 500, minSamples: 5, maxSamples: 200, budgetMs: 1_500, capMs: 30_000 };

const manager = new ShardManager();
/** The same decisions with FiloDB's scan-per-call strategy: the baseline of the speed-up column. */
const baseline = new ShardManager({ strategy: new ScanningFiloDbStrategy() });

function membersOf(n: number): Member[] {
  return Array.from({ length: n }, (_, i) => ({
    node: nodeId(`node-${String(i).padStart(4, '0')}`),
    incarnation: incarnation('inc-1'),
    joinedAt: i + 1,
  }));
}

/** A recovered singleton with `members` and no dataset. */
function activeState(members: readonly Member[]): ShardManagerState {
  const recovery = { epoch: epoch(1), datasets: [], maps: [], subscriptions: [], watchers: [], cooldowns: [], members, running: [] };
  const { state } = manager.decide(manager.initialState(), { type: 'Recover', recovery }, NOW);
  if (state.phase !== 'active' || state.members.length !== members.length) throw new Error('recovery did not produce an active state');
  return state;
}

function datasetConfig(numShards: number, minNumNodes: number): DatasetConfig {
  const r = validateDatasetConfig({ ref: 'bench', numShards, minNumNodes, source: { type: 'synthetic' } });
  if (!r.ok) throw new Error(`bad config: ${r.error.message}`);
  return r.value;
}

function setupDataset(state: ShardManagerState, config: DatasetConfig, m: ShardManager = manager): Decision {
  const d = m.decide(state, { type: 'SetupDataset', config, replyTo: replyTo('bench') }, NOW);
  if (!d.effects.some((e) => e.type === 'Reply' && e.reply.type === 'DatasetVerified')) throw new Error('SetupDataset was not verified');
  return d;
}

function mapperOf(state: ShardManagerState, config: DatasetConfig): ShardMapper {
  const ds = state.datasets.get(config.ref);
  if (!ds) throw new Error(`no dataset ${config.ref}`);
  return ds.mapper;
}

/** Shards per member, in member order (members with none included). */
const loads = (mapper: ShardMapper, members: readonly Member[]): number[] => members.map((m) => mapper.numShardsForNode(m.node));
const balance = (counts: readonly number[]): number => Math.max(...counts) - Math.min(...counts);

function* cases(): Generator<{ numShards: number; nodes: number }> {
  for (const numShards of SHARD_COUNTS) for (const nodes of NODE_COUNTS) yield { numShards, nodes };
}

function assignFromScratch(): Table {
  const rows: (string | number)[][] = [];
  for (const { numShards, nodes } of cases()) {
    const members = membersOf(nodes);
    const state = activeState(members);
    const config = datasetConfig(numShards, nodes);
    const base = sample(() => setupDataset(state, config, baseline), TIMING);
    const { times, last } = sample(() => setupDataset(state, config), TIMING);
    const mapper = mapperOf(last.state, config);
    if (!mapper.equals(mapperOf(base.last.state, config))) throw new Error('baseline and default strategy disagree');
    const counts = loads(mapper, members);
    rows.push([
      numShards,
      nodes,
      ms(quantile(times, 0.5)),
      ms(quantile(times, 0.9)),
      times.length,
      ms(quantile(base.times, 0.5)),
      `${(quantile(base.times, 0.5) / quantile(times, 0.5)).toFixed(1)}×`,
      mapper.numAssignedShards,
      mapper.numAssignedNodes,
      Math.min(...counts),
      Math.max(...counts),
      balance(counts),
    ]);
  }
  return {
    title: 'Default strategy: assign from scratch (one SetupDataset, minNumNodes = N)',
    columns: ['shards', 'nodes N', 'median ms', 'p90 ms', 'samples', 'baseline median ms', 'speed-up', 'assigned', 'owners', 'min/node', 'max/node', 'balance'],
    rows,
    notes: [
      'balance = max − min shards per node over all N members, members with 0 shards included.',
      'baseline = the same SetupDataset with FiloDB’s scan-per-call strategy (bench/baseline-strategy.ts), in the same run; speed-up = baseline median / median. Both produce the same map (checked).',
    ],
  };
}

/** The member owning the most shards; among equals, the newest (members are oldest first). */
function mostLoaded(mapper: ShardMapper, members: readonly Member[]): Member {
  let pick = members[0]!;
  for (const m of members) if (mapper.numShardsForNode(m.node) >= mapper.numShardsForNode(pick.node)) pick = m;
  return pick;
}

function nodeRemoval(spare: boolean): Table {
  const rows: (string | number)[][] = [];
  for (const { numShards, nodes } of cases()) {
    const members = membersOf(nodes);
    const config = datasetConfig(numShards, spare ? nodes - 1 : nodes);
    const before = setupDataset(activeState(members), config).state;
    const beforeMap = mapperOf(before, config);
    const victim = mostLoaded(beforeMap, members);
    const input = { type: 'MemberDown', node: victim.node, incarnation: victim.incarnation } as const;
    const base = sample(() => baseline.decide(before, input, NOW), TIMING);
    const { times, last } = sample(() => manager.decide(before, input, NOW), TIMING);
    const afterMap = mapperOf(last.state, config);
    if (!afterMap.equals(mapperOf(base.last.state, config))) throw new Error('baseline and default strategy disagree');
    const survivors = last.state.members;
    if (survivors.length !== nodes - 1) throw new Error('MemberDown did not remove the member');
    let moved = 0;
    let replaced = 0;
    for (let s = 0; s < numShards; s++) {
      const owner = afterMap.nodeForShard(s);
      if (owner === beforeMap.nodeForShard(s)) continue;
      moved++;
      if (owner !== undefined) replaced++;
    }
    rows.push([
      numShards,
      nodes,
      config.minNumNodes,
      beforeMap.numUnassignedShards,
      beforeMap.numShardsForNode(victim.node),
      ms(quantile(times, 0.5)),
      ms(quantile(times, 0.9)),
      times.length,
      ms(quantile(base.times, 0.5)),
      `${(quantile(base.times, 0.5) / quantile(times, 0.5)).toFixed(1)}×`,
      balance(loads(afterMap, survivors)),
      moved,
      replaced,
      afterMap.numUnassignedShards,
    ]);
  }
  return {
    title: spare
      ? 'Default strategy: one node removal, dataset sized for N − 1 nodes (one spare)'
      : 'Default strategy: one node removal, dataset sized for N nodes (no spare)',
    columns: [
      'shards',
      'nodes N',
      'minNumNodes',
      'unassigned before',
      'victim’s shards',
      'median ms',
      'p90 ms',
      'samples',
      'baseline median ms',
      'speed-up',
      'balance after',
      'moved',
      're-placed',
      'unassigned after',
    ],
    rows,
    notes: [
      'victim = the member owning the most shards (the newest among equals); one MemberDown decide call is timed.',
      'moved = shards whose owner differs before/after (nodeForShard on every shard); re-placed = moved shards that have a new owner.',
      'balance after = max − min shards per node over the N − 1 remaining members.',
      'baseline = the same MemberDown with FiloDB’s scan-per-call strategy, in the same run; speed-up = baseline median / median.',
    ],
  };
}

register(
  { name: 'strategy/assign-from-scratch', run: assignFromScratch },
  { name: 'strategy/node-removal', run: () => nodeRemoval(false) },
  { name: 'strategy/node-removal-spare', run: () => nodeRemoval(true) },
);
