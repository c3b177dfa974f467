/**
 * A node crashes: how long from the moment the membership drops it (detection) until every shard
 * it owned runs Active on another node, as a subscriber sees it. Twice: on a SimulatedClock driven
 * by SimDriver (simulated ms: the protocol's own latency, timers and intervals only, no CPU time) and
 * on a RealClock (wall ms). The detection delay itself (crash → view without the node) is reported too.
 */
import { SimulatedClock } from '../src/cluster/clock.js';
import type { MembershipView } from '../src/cluster/membership.js';
import type { DatasetRef } from '../src/core/ids.js';
import type { ShardherdNode } from '../src/actors/node-process.js';
import { ShardEventSubscriber } from '../src/client/shard-event-subscriber.js';
import { SimDriver } from '../src/sim/driver.js';
import { ms, quantile, register, type Table } from './harness.js';
import { ObservedCluster, waitFor } from './runtime-support.js';

const NODES = 10;
const DATASETS = 4;
const SHARDS = 64;
/** One spare's worth of headroom: every lost shard can move. */
const MIN_NUM_NODES = 9;
const SAMPLES = 7;
const SESSION_TIMEOUT_MS = 500;
const HEARTBEAT_MS = 100;
const RATE = 1;
const SETTINGS = { pollIntervalMs: 1_000 } as const;

interface Sample {
  readonly victim: string;
  readonly moved: number;
  /** Crash → the membership view without the victim. */
  readonly detectMs: number;
  /** Detection → the singleton's first record that re-places a lost shard (its reaction). */
  readonly reassignMs: number;
  /** Detection → every lost shard Active on another node, as subscribers on a surviving node see it. */
  readonly activeMs: number;
}

/** The clock a mode measures with, and how it waits. */
interface Mode {
  readonly name: string;
  readonly unit: string;
  readonly oc: ObservedCluster;
  now(): number;
  /** Lets the cluster run until `done` holds (simulated or wall time). */
  until(what: string, done: () => boolean | Promise<boolean>, maxMs: number): Promise<void>;
  /** Lets the cluster run until nothing is left to do. */
  calm(): Promise<void>;
  /** Lets `ms` of simulated time pass (no-op on the real clock, where the phase is random anyway). */
  shift(ms: number): Promise<void>;
}

const refs = Array.from({ length: DATASETS }, (_, i) => `ds${i}` as DatasetRef);

function cluster(name: string, clock?: SimulatedClock): ObservedCluster {
  return new ObservedCluster({
    name,
    nodes: NODES,
    ...(clock ? { clock } : {}),
    sessionTimeoutMs: SESSION_TIMEOUT_MS,
    heartbeatIntervalMs: HEARTBEAT_MS,
    settings: SETTINGS,
  });
}

function simMode(): Mode {
  const clock = new SimulatedClock(0);
  const oc = cluster('node-crash-sim', clock);
  const driver = new SimDriver(oc.cluster);
  return {
    name: 'SimulatedClock (SimDriver)',
    unit: 'simulated',
    oc,
    now: () => clock.now(),
    until: async (what, done, maxMs) => {
      if (!(await driver.until(done, maxMs, 10))) throw new Error(`no ${what} within ${maxMs} simulated ms`);
    },
    calm: () => driver.advance(1_000),
    shift: (ms) => driver.advance(ms),
  };
}

function realMode(): Mode {
  const oc = cluster('node-crash-real');
  return {
    name: 'RealClock',
    unit: 'wall',
    oc,
    now: () => performance.now(),
    until: (what, done, maxMs) => waitFor(what, done, maxMs),
    calm: () => oc.quiet(30_000),
    shift: async () => {},
  };
}

async function singleton(oc: ObservedCluster): Promise<ShardherdNode> {
  const s = await oc.cluster.singletonNode();
  if (!s) throw new Error('no singleton');
  return s;
}

async function allActive(oc: ObservedCluster): Promise<boolean> {
  const state = await (await oc.cluster.singletonNode())?.singletonState();
  if (!state || state.datasets.size !== DATASETS) return false;
  return [...state.datasets.values()].every((ds) => ds.mapper.activeShards().length === SHARDS);
}

async function setUp(mode: Mode): Promise<void> {
  const { cluster: c } = mode.oc;
  await c.startNodes();
  await mode.until(
    'singleton',
    async () => (await c.singletonNode())?.isMember === true && (await (await c.singletonNode())!.singletonState()) !== undefined,
    10_000,
  );
  const replies = refs.map((ref) =>
    c.setupDataset({ ref, numShards: SHARDS, minNumNodes: MIN_NUM_NODES, source: { type: 'synthetic', recordsPerSecond: RATE } }),
  );
  let answered = 0;
  for (const r of replies) void r.then(() => (answered += 1));
  await mode.until('dataset replies', () => answered === DATASETS, 10_000);
  for (const r of await Promise.all(replies)) if (r.type !== 'DatasetVerified') throw new Error(`SetupDataset: ${r.type}`);
  await mode.until('every shard Active', () => allActive(mode.oc), 30_000);
  await mode.calm();
}

/** Crashes the newest member that owns shards (never the singleton's node) and times what follows. */
async function crashOne(mode: Mode, host: ShardherdNode): Promise<Sample> {
  const { oc } = mode;
  const c = oc.cluster;
  const s = await singleton(oc);
  const state = (await s.singletonState())!;
  const owners = state.members.filter((m) => m.node !== s.node && [...state.datasets.values()].some((ds) => ds.mapper.numShardsForNode(m.node) > 0));
  const victimMember = owners[owners.length - 1]!;
  const victim = c.node(victimMember.node);
  const lost = new Map<DatasetRef, number[]>([...state.datasets].map(([ref, ds]) => [ref, ds.mapper.shardsForNode(victimMember.node)]));
  const moved = [...lost.values()].reduce((a, l) => a + l.length, 0);

  let detectedAt: number | undefined;
  let reassignedAt: number | undefined;
  let activeAt: number | undefined;
  const handle = c.membership.connect();
  const stopListening = handle.onChange((view: MembershipView) => {
    if (detectedAt === undefined && !view.members.some((m) => m.node === victimMember.node && m.incarnation === victimMember.incarnation))
      detectedAt = mode.now();
  });
  const lostKeys = new Set([...lost].flatMap(([ref, shards]) => shards.map((sh) => `${ref}/${sh}`)));
  oc.onProduce = (p) => {
    if (detectedAt === undefined || reassignedAt !== undefined) return;
    const v = p.value as { kind?: string; message?: { type?: string; event?: { type?: string; dataset?: string; shard?: number; node?: string } } };
    const e = v.kind === 'publish' && v.message?.type === 'StampedShardEvent' ? v.message.event : undefined;
    if (e?.type === 'ShardAssignmentStarted' && e.node !== victimMember.node && lostKeys.has(`${e.dataset}/${e.shard}`)) reassignedAt = mode.now();
  };
  const subscribers: ShardEventSubscriber[] = [];
  const done = (): boolean =>
    subscribers.length === DATASETS &&
    subscribers.every((sub) => {
      const map = sub.map;
      return (
        map !== undefined &&
        lost
          .get(sub.dataset)!
          .every((sh) => map.nodeForShard(sh) !== undefined && map.nodeForShard(sh) !== victimMember.node && map.statusForShard(sh).type === 'Active')
      );
    });
  const check = () => {
    if (activeAt === undefined && detectedAt !== undefined && done()) activeAt = mode.now();
  };
  for (const ref of refs) subscribers.push(new ShardEventSubscriber(host, ref, check));
  await mode.until('subscribers’ first snapshots', () => subscribers.every((sub) => sub.map !== undefined), 5_000);

  const crashedAt = mode.now();
  victim.crash();
  await mode.until('every lost shard Active elsewhere', () => activeAt !== undefined, 30_000);
  stopListening();
  void handle.close();
  oc.onProduce = undefined;
  for (const sub of subscribers) sub.close();

  await victim.restart(); // a new, empty incarnation: the next sample crashes another owner
  await mode.until('the restarted node', () => c.membership.view().members.some((m) => m.node === victim.node && m.incarnation === victim.incarnation), 5_000);
  await mode.until('every shard Active', () => allActive(oc), 30_000);
  await mode.calm();
  return { victim: victim.node, moved, detectMs: detectedAt! - crashedAt, reassignMs: (reassignedAt ?? NaN) - detectedAt!, activeMs: activeAt! - detectedAt! };
}

async function run(mode: Mode): Promise<Sample[]> {
  await setUp(mode);
  const host = await singleton(mode.oc); // the subscribers live on the singleton's node, never crashed here
  const samples: Sample[] = [];
  for (let i = 0; i < SAMPLES; i++) {
    // Crash at different points of the heartbeat cycle: the detection delay depends on it.
    await mode.shift(Math.round((i * HEARTBEAT_MS) / SAMPLES));
    samples.push(await crashOne(mode, host));
  }
  for (const n of mode.oc.cluster.nodes) n.crash();
  return samples;
}

async function nodeCrash(): Promise<Table> {
  const rows: (string | number)[][] = [];
  const notes: string[] = [];
  const sim = simMode();
  const simClock = sim.oc.cluster.clock as SimulatedClock;
  const t0 = performance.now();
  const simSamples = await run(sim);
  const simWall = (performance.now() - t0) / 1000;
  const real = realMode();
  const realSamples = await run(real);
  for (const [mode, samples] of [
    [sim, simSamples],
    [real, realSamples],
  ] as const) {
    const detect = samples.map((s) => s.detectMs);
    const active = samples.map((s) => s.activeMs);
    rows.push([
      mode.name,
      `${mode.unit} ms`,
      samples.length,
      samples[0]!.moved,
      ms(quantile(detect, 0.5)),
      ms(Math.min(...detect)),
      ms(Math.max(...detect)),
      ms(
        quantile(
          samples.map((s) => s.reassignMs),
          0.5,
        ),
      ),
      ms(quantile(active, 0.5)),
      ms(quantile(active, 0.9)),
      ms(Math.min(...active)),
      ms(Math.max(...active)),
      ms(
        quantile(
          samples.map((s) => s.detectMs + s.activeMs),
          0.5,
        ),
      ),
    ]);
    notes.push(`${mode.name}: crashed ${samples.map((s) => `${s.victim} (${s.moved})`).join(', ')}.`);
  }
  notes.push(`The simulated run took ${simWall.toFixed(1)} s of wall time for ${(simClock.now() / 1000).toFixed(1)} simulated s.`);
  return {
    title: `Runtime: node crash → its shards Active elsewhere (${NODES} nodes, ${DATASETS} × ${SHARDS} shards, minNumNodes ${MIN_NUM_NODES})`,
    columns: [
      'clock',
      'unit',
      'samples',
      'shards moved',
      'detection median',
      'min',
      'max',
      'detected → reassigned median',
      'detected → all Active median',
      'p90',
      'min',
      'max',
      'crash → all Active median',
    ],
    rows,
    notes: [
      'detection = crash (`ShardherdNode.crash()`) → the first membership view without the node (a handle from `cluster.membership.connect()`); session timeout 500 ms, heartbeat 100 ms.',
      'detected → reassigned = → the singleton’s first `ShardAssignmentStarted` for a lost shard on another node, as produced on the bus. detected → all Active = → every shard the node owned is Active on another node in the maps of `ShardEventSubscriber`s (one per dataset) on the singleton’s node.',
      `Synthetic source ${RATE} record/s per shard, pollIntervalMs ${SETTINGS.pollIntervalMs}, other settings default (publishIntervalMs 5000, reportResendMs 2000). The victim is the newest member owning shards; it then restarts as a new, empty incarnation and the cluster settles before the next sample.`,
      'Simulated samples crash at different points of the heartbeat cycle (0–90 ms apart); the simulated clock counts only timer delays, so a figure of 0 means “within the same instant”: no timer lies on that path.',
      ...notes,
    ],
  };
}

register({ name: 'runtime/node-crash', run: nodeCrash });
