// The scripted story: the cluster comes up; a node that owns shards dies; the singleton dies; a
// poison record hits one shard. Every step waits until the subscribers' maps show every shard
// Active on a live node (or fails with what is still wrong), and returns what it measured. Time
// comes only from the Timeline, so the test runs this same code on a simulated clock.
import type { DatasetConfig } from '../../core/dataset-config.js';
import type { DatasetRef, NodeId } from '../../core/ids.js';
import type { ShardMapper } from '../../core/shard-mapper.js';
import type { ShardherdNode } from '../../actors/node-process.js';
import { endOffset, type DemoCluster } from './demo-cluster.js';
import type { Narrator } from './screen.js';
import type { ShardWatch } from './shard-watch.js';
import { plural, takeLedger, type Ledger } from './summary.js';
import type { Timeline } from './timeline.js';
import { converged, live, StoryFailure, waitConverged, waitFor } from './convergence.js';
import { ranges } from './view.js';

export { converged, StoryFailure };

export interface StoryContext {
  readonly demo: DemoCluster;
  readonly watch: ShardWatch;
  readonly timeline: Timeline;
  readonly narrator: Narrator;
  /** How long a step may take to converge. Default 20 s. */
  readonly convergeTimeoutMs?: number;
}

export interface BringUpResult {
  readonly singleton: NodeId;
  readonly subscriberHost: NodeId;
  /** From the first node starting to every shard Active. */
  readonly convergedMs: number;
}

export interface NodeKillResult {
  readonly victim: NodeId;
  /** The victim's shards per dataset when it died. */
  readonly shards: Readonly<Record<string, readonly number[]>>;
  /** Their owners once every shard was Active again. */
  readonly newOwners: Readonly<Record<string, Readonly<Record<number, NodeId>>>>;
  /** From the kill to the maps no longer giving it any shard. */
  readonly detectedMs: number;
  /** From the kill to every shard Active again. */
  readonly convergedMs: number;
}

export interface SingletonKillResult {
  readonly oldSingleton: NodeId;
  readonly newSingleton: NodeId | undefined;
  readonly epochBefore: Readonly<Record<string, number>>;
  readonly epochAfter: Readonly<Record<string, number>>;
  /** From the kill to every subscriber holding a map of the new epoch. */
  readonly takeoverMs: number;
  readonly convergedMs: number;
  /** Shards whose owner survived: how many kept that owner, and those that did not. */
  readonly kept: number;
  readonly changed: readonly { readonly dataset: string; readonly shard: number; readonly before: NodeId; readonly after: NodeId | undefined }[];
  /** Shards the old singleton's node owned, and where they went. */
  readonly movedFromKilled: readonly { readonly dataset: string; readonly shard: number; readonly to: NodeId | undefined }[];
  readonly datasetsBefore: readonly string[];
  readonly datasetsAfter: readonly string[];
}

export interface PoisonResult {
  readonly dataset: DatasetRef;
  readonly shard: number;
  readonly offset: number;
  /** Owners of the shard from the moment the record was poisoned, in order. */
  readonly owners: readonly NodeId[];
  readonly firstErrorMs: number | undefined;
  readonly secondErrorMs: number | undefined;
  /** How long the story watched the shard stay put after its second failure. */
  readonly heldMs: number;
  readonly finalStatus: string;
  readonly finalOwner: NodeId | undefined;
  /** When, from the end of the story step, the cooldown lets it move again (approximately). */
  readonly cooldownLeftMs: number;
}

export interface StoryResult {
  readonly bringUp: BringUpResult;
  readonly nodeKill: NodeKillResult;
  readonly singletonKill: SingletonKillResult;
  readonly poison: PoisonResult;
  readonly ledger: Ledger;
  readonly durationMs: number;
}

const secs = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

// ------------------------------------------------------------------ helpers

async function singleton(ctx: StoryContext): Promise<ShardherdNode | undefined> {
  return ctx.demo.cluster.singletonNode();
}

async function registeredDatasets(ctx: StoryContext): Promise<string[]> {
  const reply = await ctx.timeline.settle(
    ctx.demo.cluster.request((replyTo) => ({ type: 'ListRegisteredDatasets', replyTo })),
    15_000,
    'listing the datasets',
  );
  if (reply.type !== 'RegisteredDatasets') throw new StoryFailure(`listing the datasets: unexpected reply ${reply.type}`);
  return [...reply.datasets].sort();
}

function maps(ctx: StoryContext): Map<DatasetRef, ShardMapper> {
  return new Map(ctx.demo.datasets.map((d) => [d.ref, ctx.watch.map(d.ref)!.clone()]));
}

function shardsOf(ctx: StoryContext, node: NodeId): Record<string, number[]> {
  return Object.fromEntries(ctx.demo.datasets.map((d) => [d.ref, ctx.watch.map(d.ref)?.shardsForNode(node) ?? []]));
}

const describeShards = (shards: Readonly<Record<string, readonly number[]>>) =>
  Object.entries(shards)
    .filter(([, s]) => s.length > 0)
    .map(([ds, s]) => `${ds} ${ranges(s)}`)
    .join(', ') || 'no shards';

/** Restarts a killed node, as its supervisor (systemd, Kubernetes) would, and says what it got. */
async function restart(ctx: StoryContext, node: ShardherdNode): Promise<void> {
  await ctx.timeline.settle(node.restart(), 10_000, `restarting ${node.node}`);
  await waitFor(
    ctx,
    () => node.isMember,
    10_000,
    () => `${node.node} restarted but did not join the membership within 10 s`,
  );
  await ctx.timeline.sleep(500); // time for the singleton to hear of it
  const got = describeShards(shardsOf(ctx, node.node));
  ctx.narrator.say(
    got === 'no shards'
      ? `${node.node} is restarted as a new incarnation, as a supervisor would: it joins as a spare and gets no shard (none is free, and shardherd never moves a healthy one).`
      : `${node.node} is restarted as a new incarnation, as a supervisor would: it joins and gets ${got}.`,
  );
}

// ------------------------------------------------------------------ a. bring-up

/** Starts the cluster, sets the datasets up, subscribes, and waits until every shard is Active. */
export async function bringUp(ctx: StoryContext): Promise<BringUpResult> {
  const { demo, timeline, narrator, watch } = ctx;
  const { cluster } = demo;
  const start = timeline.now();
  await timeline.settle(cluster.start(), 15_000, 'starting the nodes');
  await waitFor(
    ctx,
    async () => (await singleton(ctx)) !== undefined,
    15_000,
    () => 'no singleton took the lease within 15 s',
  );
  const single = (await singleton(ctx))!;
  narrator.say(`${cluster.nodes.length} nodes joined; ${single.node} is the oldest member, so it hosts the singleton.`);
  for (const config of demo.datasets) {
    const reply = await timeline.settle(cluster.setupDataset(config, 15_000), 20_000, `setting up ${config.ref}`);
    if (reply.type !== 'DatasetVerified' && reply.type !== 'DatasetExists') {
      throw new StoryFailure(`setting up ${config.ref}: the singleton answered ${reply.type}${'message' in reply ? `: ${reply.message}` : ''}`);
    }
  }
  const first = demo.datasets[0]!;
  narrator.say(
    `${demo.datasets.length > 1 ? 'datasets' : 'dataset'} ${demo.datasets.map((d) => d.ref).join(', ')}: ${first.numShards} shards${demo.datasets.length > 1 ? ' each' : ''}, minNumNodes ${first.minNumNodes} ` +
      `(at most ${Math.ceil(first.numShards / first.minNumNodes)} shards per node), ${first.source.type === 'synthetic' ? first.source.recordsPerSecond : '?'} records/s per shard.`,
  );
  // Subscribe as a query router would, from a node that is not the singleton's.
  const host = cluster.nodes.find((n) => n !== single && n.state === 'running' && n.isMember) ?? single;
  watch.open(host);
  narrator.say(`a ShardEventSubscriber per dataset follows the maps from ${host.node}.`);
  await waitConverged(ctx, 'bringing the cluster up');
  const convergedMs = timeline.now() - start;
  narrator.say(`every shard is Active after ${secs(convergedMs)}.`);
  return { singleton: single.node, subscriberHost: host.node, convergedMs };
}

async function ingesting(ctx: StoryContext, ms: number): Promise<void> {
  const before = ctx.demo.sink.total();
  await ctx.timeline.sleep(ms);
  const after = ctx.demo.sink.total();
  const n = after.accepted - after.duplicates - (before.accepted - before.duplicates);
  ctx.narrator.say(
    `ingesting: ${(after.accepted - after.duplicates).toLocaleString('en-US')} records so far, ${Math.round((n * 1000) / ms).toLocaleString('en-US')}/s.`,
  );
}

// ------------------------------------------------------------------ b. a node dies

export async function killNode(ctx: StoryContext): Promise<NodeKillResult> {
  const { demo, timeline, narrator, watch } = ctx;
  const single = await singleton(ctx);
  const counts = new Map<ShardherdNode, number>();
  for (const n of demo.cluster.nodes) {
    if (n === single || n === watch.host || !live(demo, n.node)) continue;
    const owned = Object.values(shardsOf(ctx, n.node)).reduce((a, s) => a + s.length, 0);
    if (owned > 0) counts.set(n, owned);
  }
  const victim = [...counts].sort((a, b) => b[1] - a[1])[0]?.[0];
  if (!victim) throw new StoryFailure('no node other than the singleton and the subscribers owns a shard: nothing to kill');
  const shards = shardsOf(ctx, victim.node);
  narrator.say(`killing ${victim.node} (a crash: no goodbye). It owns ${describeShards(shards)}.`);
  const start = timeline.now();
  victim.crash();
  const detectedMs = await waitFor(
    ctx,
    () => demo.datasets.every((d) => (watch.map(d.ref)?.numShardsForNode(victim.node) ?? 0) === 0),
    ctx.convergeTimeoutMs ?? 20_000,
    () => `the maps still give ${victim.node} shards ${secs(timeline.now() - start)} after it died`,
  );
  narrator.say(`after ${secs(detectedMs)} the membership dropped ${victim.node} (session timeout) and the singleton reassigned its shards.`);
  await waitConverged(ctx, `after killing ${victim.node}`);
  const convergedMs = timeline.now() - start;
  const newOwners: Record<string, Record<number, NodeId>> = {};
  const by = new Map<string, string[]>();
  for (const d of demo.datasets) {
    const map = watch.map(d.ref)!;
    newOwners[d.ref] = {};
    for (const s of shards[d.ref] ?? []) {
      const owner = map.nodeForShard(s)!;
      newOwners[d.ref]![s] = owner;
      by.set(owner, [...(by.get(owner) ?? []), `${d.ref}/${s}`]);
    }
  }
  narrator.say(`its shards were Active again ${secs(convergedMs)} after the kill, on ${[...by].map(([n, s]) => `${n} (${s.length})`).join(', ')}.`);
  await narrator.snapshot();
  await restart(ctx, victim);
  return { victim: victim.node, shards, newOwners, detectedMs, convergedMs };
}

// ------------------------------------------------------------------ c. the singleton dies

export async function killSingleton(ctx: StoryContext): Promise<SingletonKillResult> {
  const { demo, timeline, narrator, watch } = ctx;
  const old = await singleton(ctx);
  if (!old) throw new StoryFailure('there is no singleton to kill');
  if (watch.host === old) watch.ensureHost([old]);
  const before = maps(ctx);
  const epochBefore = Object.fromEntries(demo.datasets.map((d) => [d.ref, watch.epoch(d.ref)]));
  const datasetsBefore = await registeredDatasets(ctx);
  narrator.say(`killing ${old.node}, the singleton's node (epoch ${Object.values(epochBefore)[0]}). It owns ${describeShards(shardsOf(ctx, old.node))}.`);
  const start = timeline.now();
  old.crash();
  const takeoverMs = await waitFor(
    ctx,
    () => demo.datasets.every((d) => watch.epoch(d.ref) > epochBefore[d.ref]!),
    ctx.convergeTimeoutMs ?? 20_000,
    () =>
      `no new singleton published maps within ${secs(ctx.convergeTimeoutMs ?? 20_000)} of the kill (epochs still ${demo.datasets.map((d) => `${d.ref} ${watch.epoch(d.ref)}`).join(', ')})`,
  );
  const next = await singleton(ctx);
  const epochAfter = Object.fromEntries(demo.datasets.map((d) => [d.ref, watch.epoch(d.ref)]));
  narrator.say(
    `${next?.node ?? 'a new node'} took the lease and recovered from the MetaStore and the nodes: the subscribers saw epoch ${Object.values(epochAfter)[0]} after ${secs(takeoverMs)}.`,
  );
  await waitConverged(ctx, `after killing the singleton's node ${old.node}`);
  const convergedMs = timeline.now() - start;
  const after = maps(ctx);
  let kept = 0;
  const changed: SingletonKillResult['changed'][number][] = [];
  const movedFromKilled: SingletonKillResult['movedFromKilled'][number][] = [];
  for (const [ds, b] of before) {
    const a = after.get(ds)!;
    for (let s = 0; s < b.numShards; s++) {
      const was = b.nodeForShard(s);
      const now = a.nodeForShard(s);
      if (was === old.node) movedFromKilled.push({ dataset: ds, shard: s, to: now });
      else if (was !== undefined && was === now) kept += 1;
      else if (was !== undefined) changed.push({ dataset: ds, shard: s, before: was, after: now });
    }
  }
  const datasetsAfter = await registeredDatasets(ctx);
  narrator.say(
    `no state lost: ${plural(kept, 'shard')} whose owner survived kept it (${changed.length} changed); datasets before [${datasetsBefore.join(', ')}], after [${datasetsAfter.join(', ')}].`,
  );
  if (movedFromKilled.length > 0) {
    narrator.say(
      `the ${plural(movedFromKilled.length, 'shard')} of ${old.node} moved to ${[...new Set(movedFromKilled.map((m) => m.to))].join(', ')}; every shard Active ${secs(convergedMs)} after the kill.`,
    );
  } else {
    narrator.say(`every shard Active ${secs(convergedMs)} after the kill.`);
  }
  await narrator.snapshot();
  await restart(ctx, old);
  return {
    oldSingleton: old.node,
    newSingleton: next?.node,
    epochBefore,
    epochAfter,
    takeoverMs,
    convergedMs,
    kept,
    changed,
    movedFromKilled,
    datasetsBefore,
    datasetsAfter,
  };
}

// ------------------------------------------------------------------ d. a poison record

export async function poisonShard(ctx: StoryContext, cooldownMs: number, holdMs: number): Promise<PoisonResult> {
  const { demo, timeline, narrator, watch } = ctx;
  const config: DatasetConfig = demo.datasets[0]!;
  const ds = config.ref;
  const map = watch.map(ds)!;
  const shard = map.activeShards().find((s) => live(demo, map.nodeForShard(s)));
  if (shard === undefined) throw new StoryFailure(`${ds} has no Active shard to poison`);
  const firstOwner = map.nodeForShard(shard)!;
  const rate = config.source.type === 'synthetic' ? config.source.recordsPerSecond : 100;
  const end = await timeline.settle(endOffset(demo, config, shard), 5_000, 'reading the end offset');
  const offset = end + rate; // about a second ahead: not read yet
  const armedAt = timeline.now();
  demo.poison.arm({ dataset: ds, shard, offset });
  narrator.say(`record ${offset} of ${ds}/${shard} (owned by ${firstOwner}; the stream is at ${end}) becomes a poison record: reading it throws.`);
  const key = `${ds}/${shard}`;
  const status = () => watch.map(ds)!.recordForShard(shard);
  const errors = () => watch.changes.filter((c) => c.at >= armedAt && c.dataset === ds && c.shard === shard && c.status === 'Error');
  await waitFor(
    ctx,
    () => errors().length >= 2 && status().status.type === 'Error' && status().assignments.length === 0,
    ctx.convergeTimeoutMs ?? 20_000,
    () =>
      `${key} did not fail twice: its owners since the poison were [${[firstOwner, ...watch.ownersSince(ds, shard, armedAt)].join(', ')}], status now ${status().status.type}`,
  );
  const ownersNow = () => [firstOwner, ...watch.ownersSince(ds, shard, armedAt)].filter((n, i, all) => i === 0 || n !== all[i - 1]);
  const owners = ownersNow();
  const [e1, e2] = errors();
  narrator.say(`${key} failed on ${owners[0]} at offset ${offset} and moved once, to ${owners[1] ?? '?'}; the same record failed there too.`);
  // It must now stay put: unassigned and in Error until its cooldown ends.
  const heldFrom = timeline.now();
  await waitFor(
    ctx,
    () => timeline.now() - heldFrom >= holdMs,
    holdMs + 1_000,
    () => 'the hold did not end',
  );
  await waitConverged(ctx, `after poisoning ${key}`, new Set([key]));
  const heldMs = timeline.now() - heldFrom;
  const final = status();
  const ownersAfter = ownersNow();
  const cooldownLeftMs = e1 ? Math.max(0, e1.at + cooldownMs - timeline.now()) : cooldownMs;
  if (ownersAfter.length !== owners.length || final.status.type !== 'Error' || final.assignments.length > 0) {
    narrator.say(`${key} did not stay put: owners [${ownersAfter.join(', ')}], status ${final.status.type}.`);
  } else {
    narrator.say(
      `${secs(heldMs)} later it is still unassigned, in Error: inside its cooldown it does not move a second time (it may move again in about ${secs(cooldownLeftMs)}).`,
    );
  }
  await narrator.snapshot();
  return {
    dataset: ds,
    shard,
    offset,
    owners: ownersAfter,
    firstErrorMs: e1 ? e1.at - armedAt : undefined,
    secondErrorMs: e2 ? e2.at - armedAt : undefined,
    heldMs,
    finalStatus: final.status.type === 'Error' ? `Error(${final.status.message})` : final.status.type,
    finalOwner: final.assignments[0]?.node,
    cooldownLeftMs,
  };
}

// ------------------------------------------------------------------ the whole story

export interface StoryOptions {
  /** The cluster's reassignment cooldown, to say when the poisoned shard may move again. */
  readonly cooldownMs: number;
  /** How long to watch the poisoned shard stay put. */
  readonly holdMs: number;
}

export async function runStory(ctx: StoryContext, options: StoryOptions): Promise<StoryResult> {
  const { narrator, timeline } = ctx;
  const start = timeline.now();
  narrator.step('a. the cluster comes up and ingests');
  const up = await bringUp(ctx);
  await ingesting(ctx, 2_000);
  await narrator.snapshot();

  narrator.step('b. a node that owns shards is killed');
  const nodeKill = await killNode(ctx);

  narrator.step("c. the singleton's node is killed");
  const singletonKill = await killSingleton(ctx);

  narrator.step('d. a poison record: the shard moves once, then its cooldown holds it');
  const poison = await poisonShard(ctx, options.cooldownMs, options.holdMs);

  narrator.step('e. counting every record');
  const ledger = await takeLedger(ctx, { dataset: poison.dataset, shard: poison.shard, offset: poison.offset });
  return { bringUp: up, nodeKill, singletonKill, poison, ledger, durationMs: timeline.now() - start };
}
