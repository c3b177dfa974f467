/**
 * How long a new singleton takes to recover after the singleton's node crashes, on an embedded
 * cluster of 20 nodes on a real clock: from the moment the successor wins the lease (`takeLease`
 * resolved) to its first published shard map (`CurrentShardSnapshot` or desired state) under the
 * new epoch. Baseline, in the same run: the pure core alone, `ShardManager.decide(…, Recover)`, on
 * the data the runtime recovered from. `SHARDHERD_BENCH_DEBUG=1` prints progress and heap to stderr.
 */
import { getHeapStatistics } from 'node:v8';
import { runInNewContext } from 'node:vm';
import {
  type DatasetConfig,
  epoch as toEpoch,
  incarnation,
  type Member,
  nodeId,
  replyTo,
  ShardEvents,
  type ShardMapSnapshot,
  subscriberId,
  validateDatasetConfig,
} from '../src/index.js';
import { type RecoveryData, ShardManager, type ShardManagerState } from '../src/entries/core.js';
import { parseInboxMessage, WIRE_FORMAT } from '../src/protocol/wire.js';
import { ms, quantile, register, sample, type Table } from './harness.js';
import { type LeaseTaken, nodeName, ObservedCluster, waitFor } from './runtime-support.js';

const NODES = 20;
/** Two more nodes, the oldest, are crashed while the cluster is built (see `build`). */
const BOOT_NODES = 2;
const SHARDS = 256;
const DATASET_COUNTS = [10, 100] as const;
/**
 * The 100-dataset case peaks at ~2.2 GiB of heap (the memory bus keeps every record, and a burst
 * of map records is copied into every node's mailbox at once): below this limit it is skipped, not
 * crashed.
 */
const MIN_HEAP_FOR_100_MIB = 3_000;
const SAMPLES = 5;
const SESSION_TIMEOUT_MS = 500;
const HEARTBEAT_MS = 100;
const RECOVERY_REPLY_TIMEOUT_MS = 1_000;
/** Records per second per shard: low, so that ingestion does not dominate (and no shard has a backlog when it starts). */
const RATE = 0.05;
const SETTINGS = {
  recoveryReplyTimeoutMs: RECOVERY_REPLY_TIMEOUT_MS,
  // No periodic republish during a measurement, and a slow poll: with 25 600 shards, the default
  // 100 ms poll alone would be 256 000 actor messages a second on 2 cores.
  publishIntervalMs: 60_000,
  pollIntervalMs: 10_000,
  reportResendMs: 30_000,
} as const;
const DESIGN_GOAL_MS = 1_000;

const debug = (what: string, data?: unknown): void => {
  if (!process.env.SHARDHERD_BENCH_DEBUG) return;
  const used = process.memoryUsage().heapUsed;
  (runInNewContext('gc') as () => void)();
  const mib = (b: number) => `${(b / 2 ** 20).toFixed(0)} MiB`;
  console.error(`[${(performance.now() / 1000).toFixed(1)} s, heap ${mib(used)}, live ${mib(process.memoryUsage().heapUsed)}] ${what}`, data ?? '');
};

interface Sample {
  readonly victim: string;
  readonly victimShards: number;
  /** Crash → lease taken: failure detection (session timeout) and candidacy. */
  readonly takeoverMs: number;
  /** Lease → the last guardian answer produced. */
  readonly answersMs: number;
  /** Lease → the first snapshot or desired state under the new epoch: the recovery time. */
  readonly firstMs: number;
  /** Lease → every dataset's snapshot produced. */
  readonly allMs: number;
  /** From the singleton's `singleton.takeover` log line: answers used, members then. */
  readonly answered: number;
  readonly members: number;
  /** Recovery questions (`cluster-state-request`) the singleton sent. */
  readonly asks: number;
  /** Shard maps in the guardians' answers to this singleton (only maps newer than the MetaStore's are sent). */
  readonly answerMaps: number;
}

function configs(count: number): DatasetConfig[] {
  return Array.from({ length: count }, (_, i) => {
    const r = validateDatasetConfig({
      ref: `ds${String(i).padStart(3, '0')}`,
      numShards: SHARDS,
      minNumNodes: NODES,
      source: { type: 'synthetic', recordsPerSecond: RATE },
    });
    if (!r.ok) throw new Error(r.error.message);
    return r.value;
  });
}

async function singletonState(oc: ObservedCluster): Promise<ShardManagerState | undefined> {
  return (await oc.cluster.singletonNode())?.singletonState();
}

async function activeShards(oc: ObservedCluster): Promise<number> {
  let n = 0;
  for (const ds of (await singletonState(oc))?.datasets.values() ?? []) n += ds.mapper.activeShards().length;
  return n;
}

/**
 * A running cluster of 20 nodes with every shard of every dataset Active. Built without 25 600
 * single shard events (each one a bus record for all 20 guardians: minutes of work on 2 cores):
 *
 * 1. 22 nodes start; `n01` is the first singleton. The datasets and their maps, computed by the
 *    core's own `SetupDataset` over those 22 members, are written to the MetaStore. With
 *    `minNumNodes` 20 and newest-first placement, the two oldest nodes get no shard.
 * 2. `n01` is crashed; `n02` recovers the maps and sends every node its desired state. Right after
 *    the last one, the store refuses shard-map writes, so `n02` stalls on the first report (it
 *    persists before it publishes) while the nodes start their shards.
 * 3. Once every node runs its shards Active, `n02` is crashed and writes are allowed again: `n03`
 *    recovers with every node's account of its shards, so one snapshot per dataset says Active.
 */
async function build(datasets: readonly DatasetConfig[]): Promise<ObservedCluster> {
  let blockMapWrites = false;
  const oc = new ObservedCluster({
    name: `recovery-${datasets.length}`,
    nodes: NODES + BOOT_NODES,
    sessionTimeoutMs: SESSION_TIMEOUT_MS,
    heartbeatIntervalMs: HEARTBEAT_MS,
    settings: SETTINGS,
    storeFaults: (op) => blockMapWrites && op === 'putShardMap',
    logLevel: 'info',
  });
  const { cluster } = oc;
  await cluster.start();
  await waitFor('the first singleton', async () => (await singletonState(oc)) !== undefined, 10_000);

  const manager = new ShardManager();
  const members = cluster.membership.view().members;
  const empty: RecoveryData = { epoch: toEpoch(1), datasets: [], maps: [], subscriptions: [], watchers: [], cooldowns: [], members, running: [] };
  let state = manager.decide(manager.initialState(), { type: 'Recover', recovery: empty }, cluster.clock.now()).state;
  for (const config of datasets) state = manager.decide(state, { type: 'SetupDataset', config, replyTo: replyTo('bench') }, cluster.clock.now()).state;
  for (const config of datasets) {
    await cluster.metaStore.putDataset(config, toEpoch(1));
    await cluster.metaStore.putShardMap(state.datasets.get(config.ref)!.mapper.toSnapshot(toEpoch(1)));
  }

  let desired = 0;
  oc.onProduce = (p) => {
    const v = p.value as { kind?: string; epoch?: number };
    if (v.kind === 'desired-state' && v.epoch === 2 && ++desired === datasets.length) blockMapWrites = true;
  };
  cluster.node(nodeName(0)).crash();
  const shardNodes = cluster.nodes.slice(BOOT_NODES);
  await waitFor(
    'every shard running on its node',
    async () => {
      let n = 0;
      for (const node of shardNodes) {
        const running = await node.running();
        if (running.some((r) => r.status.type !== 'Active')) return false;
        n += running.length;
      }
      return n === datasets.length * SHARDS;
    },
    60_000,
    50,
  );
  oc.onProduce = undefined;
  debug('every shard running');
  cluster.node(nodeName(1)).crash();
  blockMapWrites = false;
  await waitFor('a recovered cluster with every shard Active', async () => (await activeShards(oc)) === datasets.length * SHARDS, 60_000, 50);
  await oc.quiet(60_000);
  if (cluster.membership.view().members.length !== NODES) throw new Error(`the cluster should have ${NODES} members now`);
  debug('built');
  return oc;
}

/** Crashes the singleton's node and follows its successor until it has published every map. */
async function failover(oc: ObservedCluster, datasetCount: number): Promise<Sample> {
  const { cluster } = oc;
  const victim = (await cluster.singletonNode())!;
  const before = (await victim.singletonState())!;
  let victimShards = 0;
  for (const ds of before.datasets.values()) victimShards += ds.mapper.numShardsForNode(victim.node);

  let lease: LeaseTaken | undefined;
  let first: number | undefined;
  let all: number | undefined;
  let lastAnswer: number | undefined;
  let asks = 0;
  let answerMaps = 0;
  let takeover: { answered: number; members: number } | undefined;
  const published = new Set<string>();
  oc.onLease = (t) => {
    if (t.lease.epoch > before.epoch && !lease) lease = t;
  };
  oc.onProduce = (p) => {
    if (!lease) return;
    const v = p.value as { kind?: string; epoch?: number; requestId?: string; maps?: unknown[]; message?: { type?: string; snapshot?: ShardMapSnapshot } };
    if (v.kind === 'cluster-state' && v.requestId === `recovery-${lease.lease.epoch}-${lease.lease.node}` && first === undefined) {
      lastAnswer = p.at;
      answerMaps += v.maps?.length ?? 0;
    }
    if (v.epoch !== lease.lease.epoch) return;
    if (v.kind === 'cluster-state-request') asks += 1;
    const snapshot = v.kind === 'publish' && v.message?.type === 'CurrentShardSnapshot' ? v.message.snapshot : undefined;
    if (first === undefined && (snapshot || v.kind === 'desired-state')) first = p.at;
    if (snapshot && all === undefined && published.add(snapshot.dataset).size === datasetCount) all = p.at;
  };
  oc.onLog = (line) => {
    if (line.event === 'singleton.takeover' && typeof line.answered === 'number' && line.epoch === lease?.lease.epoch) {
      takeover = { answered: line.answered, members: line.members as number };
    }
  };
  const crashedAt = performance.now();
  victim.crash();
  await waitFor('the new singleton to publish every map', () => all !== undefined && takeover !== undefined, 60_000);
  oc.onProduce = undefined;
  oc.onLease = undefined;
  oc.onLog = undefined;
  const t0 = lease!.at;
  return {
    victim: victim.node,
    victimShards,
    takeoverMs: t0 - crashedAt,
    answersMs: lastAnswer === undefined ? NaN : lastAnswer - t0,
    firstMs: first! - t0,
    allMs: all! - t0,
    answered: takeover!.answered,
    members: takeover!.members,
    asks,
    answerMaps,
  };
}

/**
 * Builds a cluster and crashes its singleton's node `SAMPLES` times; each successor is the next
 * oldest node, and the cluster shrinks by one node each time. Then crashes every node.
 */
async function measure(datasets: readonly DatasetConfig[]): Promise<{ samples: Sample[]; buildS: number }> {
  const t0 = performance.now();
  const oc = await build(datasets);
  const buildS = (performance.now() - t0) / 1000;
  const samples: Sample[] = [];
  for (let i = 0; i < SAMPLES; i++) {
    if (i > 0) {
      await oc.quiet(60_000);
      debug('quiet');
    }
    samples.push(await failover(oc, datasets.length));
    debug('failover', samples.at(-1));
  }
  for (const n of oc.cluster.nodes) n.crash();
  return { samples, buildS };
}

/**
 * The first measured takeover's input, built without a cluster from the same layout: 22 members
 * joined in order, maps placed by the core's `SetupDataset` (`minNumNodes` 20, so the two oldest
 * get nothing), every shard Active; the singleton `n03` has crashed. The data: the MetaStore's
 * datasets and maps, and from each of the 19 other nodes the guardian's answer (no map, since
 * none is newer than the store's; the subscriptions with the 20 guardians as watchers; its node's
 * running shards). Each copy is its own object, as if read from the bus.
 */
function equivalentRecovery(datasets: readonly DatasetConfig[]): { recovery: RecoveryData; answers: unknown[] } {
  const all: Member[] = Array.from({ length: NODES + BOOT_NODES }, (_, i) => ({
    node: nodeId(nodeName(i)),
    incarnation: incarnation(`bench-${i}`),
    joinedAt: i + 1,
  }));
  const manager = new ShardManager();
  const empty: RecoveryData = { epoch: toEpoch(3), datasets: [], maps: [], subscriptions: [], watchers: [], cooldowns: [], members: all, running: [] };
  let state = manager.decide(manager.initialState(), { type: 'Recover', recovery: empty }, 0).state;
  for (const config of datasets) state = manager.decide(state, { type: 'SetupDataset', config, replyTo: replyTo('bench') }, 0).state;
  const maps: ShardMapSnapshot[] = datasets.map((c) => {
    const mapper = state.datasets.get(c.ref)!.mapper.clone();
    for (const shard of mapper.assignedShards()) mapper.updateFromEvent(ShardEvents.ingestionStarted(c.ref, shard, mapper.nodeForShard(shard)!));
    return mapper.toSnapshot(toEpoch(3));
  });
  const shardNodes = all.slice(BOOT_NODES);
  const survivors = shardNodes.slice(1);
  const watchers = shardNodes.map((m) => subscriberId(`${m.node}@${m.incarnation}/guardian`));
  const subscriptions = datasets.map((c) => ({ dataset: c.ref, subscribers: watchers }));
  const runningOf = (m: Member) =>
    maps.flatMap((snap) => snap.shards.flatMap((r, shard) => (r.assignments[0]?.node === m.node ? [{ dataset: snap.dataset, shard, status: r.status }] : [])));
  const answers = survivors.map((m) =>
    structuredClone({
      format: WIRE_FORMAT,
      kind: 'cluster-state',
      requestId: `recovery-4-${survivors[0]!.node}`,
      epoch: 4,
      node: m.node,
      incarnation: m.incarnation,
      maps: [],
      subscriptions,
      watchers,
      running: runningOf(m),
    }),
  );
  const copies = <T>(value: T): T[] => [value, ...survivors.map(() => value)].map((v) => structuredClone(v));
  const recovery: RecoveryData = {
    epoch: toEpoch(4),
    datasets: structuredClone(datasets),
    maps: structuredClone(maps),
    subscriptions: copies(subscriptions).flat(),
    watchers: copies(watchers).flat(),
    cooldowns: [],
    members: survivors,
    running: survivors.map((m) => ({ node: m.node, incarnation: m.incarnation, shards: runningOf(m) })),
  };
  return { recovery, answers };
}

async function singletonRecovery(): Promise<Table> {
  const manager = new ShardManager();
  // Baselines first, in a process with no cluster in it yet.
  const baselines = DATASET_COUNTS.map((count) => {
    const { recovery, answers } = equivalentRecovery(configs(count));
    const core = sample(() => manager.decide(manager.initialState(), { type: 'Recover', recovery }, 0), {
      warmup: 3,
      warmupMs: 500,
      minSamples: 5,
      maxSamples: 50,
      budgetMs: 1_000,
      capMs: 10_000,
    });
    if (core.last.state.phase !== 'active' || core.last.state.datasets.size !== count) throw new Error('the core did not recover every dataset');
    const parse = sample(() => answers.map((a) => parseInboxMessage(a)), { warmup: 1, minSamples: 5, maxSamples: 20, budgetMs: 1_000, capMs: 10_000 });
    if (!parse.last.every((r) => r.ok)) throw new Error('an answer did not parse');
    return { core: quantile(core.times, 0.5), parse: quantile(parse.times, 0.5), answers: answers.length, maps: recovery.maps.length };
  });

  const rows: (string | number)[][] = [];
  const notes: string[] = [];
  const heapMiB = getHeapStatistics().heap_size_limit / 2 ** 20;
  for (const [i, count] of DATASET_COUNTS.entries()) {
    if (count === 100 && heapMiB < MIN_HEAP_FOR_100_MIB) {
      notes.push(`${count} datasets: skipped, the heap limit is ${heapMiB.toFixed(0)} MiB; run with NODE_OPTIONS=--max-old-space-size=6144.`);
      continue;
    }
    const { samples: s, buildS } = await measure(configs(count));
    const base = baselines[i]!;
    const first = s.map((x) => x.firstMs);
    const med = (f: (x: Sample) => number) => quantile(s.map(f), 0.5);
    rows.push([
      count,
      count * SHARDS,
      ms(quantile(first, 0.5)),
      ms(quantile(first, 0.9)),
      ms(Math.min(...first)),
      ms(Math.max(...first)),
      s.length,
      s.map((x) => `${x.answered}/${x.members}`).join(' '),
      ms(med((x) => x.answersMs)),
      ms(med((x) => x.firstMs - x.answersMs)),
      ms(med((x) => x.allMs)),
      ms(med((x) => x.takeoverMs)),
      ms(base.core),
      `${(quantile(first, 0.5) / base.core).toFixed(0)}×`,
      `${ms(base.parse)} (${base.answers})`,
      quantile(first, 0.5) < DESIGN_GOAL_MS ? 'yes' : 'no',
    ]);
    notes.push(
      `${count} datasets: cluster built in ${buildS.toFixed(1)} s; singleton nodes crashed: ${s.map((x) => `${x.victim} (${x.victimShards} shards)`).join(', ')}; ` +
        `recovery questions per takeover: ${s.map((x) => x.asks).join(', ')}; maps in the guardians’ answers per takeover: ${s.map((x) => x.answerMaps).join(', ')}; core input: ${base.maps} maps.`,
    );
  }
  return {
    title: 'Runtime: singleton recovery after its node crashes (embedded cluster, 20 nodes, RealClock)',
    columns: [
      'datasets',
      'shards',
      'recovery median ms',
      'p90 ms',
      'min ms',
      'max ms',
      'samples',
      'answered',
      'lease → last answer ms',
      'last answer → first map ms',
      'lease → all maps ms',
      'crash → lease ms',
      'core Recover median ms',
      'runtime / core',
      'parse answers ms (n)',
      `under ${DESIGN_GOAL_MS / 1000} s`,
    ],
    rows,
    notes: [
      'recovery = from the new singleton’s `takeLease` resolving (MetaStore proxy) to its first `CurrentShardSnapshot` publish or desired state under the new epoch (bus produce hook), wall ms. Columns after `answered` are medians.',
      'lease → last answer = until the last guardian answer used was produced; last answer → first map = the singleton validating the answers, `Recover`, and persisting every map; lease → all maps = until the last dataset’s `CurrentShardSnapshot` was produced; crash → lease = failure detection (session timeout 500 ms, heartbeat 100 ms) and candidacy.',
      `answered = guardians whose answers the singleton used / members then (its own included), per sample, from its \`singleton.takeover\` log line; recoveryReplyTimeoutMs ${RECOVERY_REPLY_TIMEOUT_MS}. The cluster shrinks by one node per sample (the crashed one does not come back).`,
      "core Recover = `new ShardManager().decide(initialState, { type: 'Recover', recovery }, now)` alone (harness `sample`, median), timed before any cluster exists on the data of the first takeover rebuilt with the core and `ShardMapper`: the same 22-member layout, every shard Active, `n03` gone; the store’s maps (the guardians’ copies are no newer, so their answers carry none), the 19 guardians’ subscriptions (20 watchers) and running shards. runtime / core = recovery median / core median.",
      'parse answers = `parseInboxMessage` (the wire validation the singleton runs on each answer) over those 19 answers as plain data, median.',
      `Datasets: ${SHARDS} shards, minNumNodes ${NODES}, synthetic source at ${RATE} records/s per shard; pollIntervalMs ${SETTINGS.pollIntervalMs}, publishIntervalMs ${SETTINGS.publishIntervalMs}, reportResendMs ${SETTINGS.reportResendMs}.`,
      ...notes,
    ],
  };
}

register({ name: 'runtime/singleton-recovery', run: singletonRecovery });
