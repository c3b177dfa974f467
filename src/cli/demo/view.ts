// The live view: what the cluster looks like now, gathered into plain data, then drawn as lines of
// text (the same lines in a terminal frame and in a plain snapshot).
import type { DatasetRef } from '../../core/ids.js';
import type { DemoCluster } from './demo-cluster.js';
import type { ShardWatch } from './shard-watch.js';

export interface NodeView {
  readonly name: string;
  /** up: a running member; joining: running, not yet in the view; killed: crashed; stopped. */
  readonly state: 'up' | 'joining' | 'killed' | 'stopped' | 'paused';
  readonly singleton: boolean;
  readonly hostsSubscribers: boolean;
}

export interface DatasetView {
  readonly name: DatasetRef;
  readonly numShards: number;
  readonly epoch: number;
  readonly version: number;
  /** Grid rows as `ShardMapper.prettyPrint` draws them; empty before the first map. */
  readonly grid: readonly string[];
  /** Owner → its shards, compressed into ranges (`0-3, 8`). */
  readonly owners: readonly { readonly node: string; readonly shards: string; readonly state: NodeView['state'] | 'unknown' }[];
  readonly ingested: number;
  readonly duplicates: number;
}

export interface ClusterView {
  readonly elapsedMs: number;
  readonly nodes: readonly NodeView[];
  readonly singletonEpoch: number | undefined;
  readonly datasets: readonly DatasetView[];
}

/** `[0,1,2,3,8,10,11]` → `0-3, 8, 10-11`. */
export function ranges(shards: readonly number[]): string {
  const out: string[] = [];
  for (let i = 0; i < shards.length;) {
    let j = i;
    while (j + 1 < shards.length && shards[j + 1] === shards[j]! + 1) j += 1;
    out.push(i === j ? `${shards[i]}` : `${shards[i]}-${shards[j]}`);
    i = j + 1;
  }
  return out.join(', ');
}

export async function gatherView(demo: DemoCluster, watch: ShardWatch, elapsedMs: number): Promise<ClusterView> {
  const { cluster } = demo;
  const lease = await cluster.metaStore.readLease().catch(() => undefined);
  const singleton = await cluster.singletonNode().catch(() => undefined);
  const nodes: NodeView[] = cluster.nodes.map((n) => ({
    name: n.node,
    state: n.state === 'running' ? (n.isMember ? 'up' : 'joining') : n.state === 'crashed' ? 'killed' : n.state === 'paused' ? 'paused' : 'stopped',
    singleton: singleton === n,
    hostsSubscribers: watch.host === n,
  }));
  const datasets = demo.datasets.map((config): DatasetView => {
    const map = watch.map(config.ref);
    const total = demo.sink.total(config.ref);
    const owners = map
      ? [...map.allNodes()]
          .sort((a, b) => a.localeCompare(b, 'en', { numeric: true }))
          .map((node) => ({ node, shards: ranges(map.shardsForNode(node)), state: nodes.find((n) => n.name === node)?.state ?? ('unknown' as const) }))
      : [];
    return {
      name: config.ref,
      numShards: config.numShards,
      epoch: watch.epoch(config.ref),
      version: watch.version(config.ref),
      grid: map
        ? map
            .prettyPrint()
            .split('\n')
            .slice(0, Math.ceil(map.numShards / 16))
        : [],
      owners,
      ingested: total.accepted - total.duplicates,
      duplicates: total.duplicates,
    };
  });
  return { elapsedMs, nodes, singletonEpoch: singleton ? lease?.epoch : undefined, datasets };
}

const fmt = (n: number) => n.toLocaleString('en-US');

/** The view as lines of text, no colours, no cursor codes. */
export function renderView(v: ClusterView): string[] {
  const lines: string[] = [];
  const nodeText = v.nodes
    .map((n) => {
      const marks = `${n.singleton ? '*' : ''}${n.hostsSubscribers ? '@' : ''}`;
      return `${n.name}${marks} ${n.state}`;
    })
    .join('   ');
  lines.push(`nodes  ${nodeText}`);
  const singleton = v.nodes.find((n) => n.singleton);
  lines.push(
    `       * singleton: ${singleton ? `${singleton.name} (epoch ${v.singletonEpoch ?? '?'})` : 'none (a new one is taking over)'}` +
      `   @ subscribers: ${v.nodes.find((n) => n.hostsSubscribers)?.name ?? 'none'}`,
  );
  for (const d of v.datasets) {
    lines.push('');
    const stamp = d.epoch >= 0 ? `epoch ${d.epoch} / version ${d.version}` : 'no map yet';
    lines.push(
      `${d.name.padEnd(8)} ${d.numShards} shards   ${stamp}   ingested ${fmt(d.ingested)} records${d.duplicates > 0 ? ` (+${fmt(d.duplicates)} twice)` : ''}`,
    );
    for (const row of d.grid) lines.push(`  ${row}`);
    // An owner that is not up still shows its shards until the singleton hears of it: say so.
    if (d.owners.length > 0) lines.push(`    owners  ${d.owners.map((o) => `${o.node}${o.state === 'up' ? '' : ` (${o.state})`}: ${o.shards}`).join('   ')}`);
  }
  lines.push('');
  lines.push('A Active  R Recovery  N Assigned  E Error  D Down  S Stopped  . Unassigned');
  return lines;
}
