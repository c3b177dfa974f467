// The node coordinator runs what its map gives the node. A start sent again for a copy it already
// runs (a Leaving copy of a planned move included) must not restart that copy: a restart reports
// Recovery for its catch-up time, and a Leaving copy not Active while its successor catches up is a
// shard with no Active copy.
import { processPollTurns } from '../../src/actors/poll-turns.js';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { CheckpointLoader } from '../../src/actors/checkpoint-loader.js';
import { spawnNodeCoordinator, type CoordinatorMsg } from '../../src/actors/node-coordinator.js';
import type { NodeEnv } from '../../src/actors/node-env.js';
import { Problems } from '../../src/actors/problems.js';
import type { ReportSink } from '../../src/actors/reporter.js';
import { ActorRuntime, type ActorRef } from '../../src/actors/runtime.js';
import { runtimeSettings } from '../../src/actors/settings.js';
import { NO_TELEMETRY } from '../../src/actors/telemetry.js';
import { topicsFor } from '../../src/protocol/wire.js';
import { SimulatedClock } from '../../src/cluster/clock.js';
import { MemoryBus } from '../../src/cluster/memory-bus.js';
import { validateDatasetConfig, type DatasetConfig } from '../../src/core/dataset-config.js';
import { epoch, incarnation, nodeId, type ShardNum } from '../../src/core/ids.js';
import { ShardMapper } from '../../src/core/shard-mapper.js';
import { ShardEvents, type ShardEvent } from '../../src/core/status.js';
import { CountingSink } from '../../src/ingest/counting-sink.js';
import type { IngestionSource, RecordSink } from '../../src/ingest/ingestion-source.js';
import { SyntheticSource } from '../../src/ingest/synthetic-source.js';
import { MemoryMetaStore } from '../../src/store/memory-meta-store.js';

const me = nodeId('n1');
const other = nodeId('n2');
const inc = incarnation('n1#1');
const shard = 0 as ShardNum;

let runtime: ActorRuntime | undefined;
afterEach(() => {
  runtime?.shutdown();
  runtime = undefined;
});

function config(): DatasetConfig {
  const r = validateDatasetConfig({
    ref: 'ds',
    numShards: 1,
    minNumNodes: 1,
    replicationFactor: 2,
    strategy: 'balanced',
    source: { type: 'synthetic', recordsPerSecond: 100 },
  });
  if (!r.ok) throw new Error(r.error.message);
  return r.value;
}

/** A map built from events, one new mapper per version (the coordinator never changes one). */
function mapOf(events: readonly ShardEvent[]): ShardMapper {
  const m = new ShardMapper(1, config().ref);
  for (const e of events) {
    const r = m.updateFromEvent(e);
    if (!r.ok) throw new Error(r.error.message);
  }
  return m;
}

const flush = () => new Promise<void>((resolve) => setImmediate(resolve));

async function settle(clock: SimulatedClock, ms: number): Promise<void> {
  for (let t = 0; t < ms; t += 50) {
    clock.advance(50);
    for (let i = 0; i < 20; i++) await flush();
  }
}

/** A coordinator of node n1 (a member at epoch 1) on a simulated clock, with the reports it sends. */
function startCoordinator<S extends RecordSink = CountingSink>(
  sourceOf: (clock: SimulatedClock) => IngestionSource = (clock) => new SyntheticSource(clock),
  sink: S = new CountingSink() as RecordSink as S,
) {
  const clock = new SimulatedClock(0);
  const log = pino({ level: 'silent' });
  const rt = new ActorRuntime(`coordinator-${Math.floor(performance.now() * 1000)}`, log);
  runtime = rt;
  const metaStore = new MemoryMetaStore();
  const env: NodeEnv = {
    node: me,
    incarnation: inc,
    runtime: rt,
    clock,
    bus: new MemoryBus(clock),
    topics: topicsFor('test'),
    metaStore,
    lease: metaStore,
    source: sourceOf(clock),
    pollTurns: processPollTurns,
    sink,
    settings: runtimeSettings({ pollIntervalMs: 50, checkpointIntervalMs: 100, sinkTimeoutMs: 1_000 }),
    log,
    telemetry: NO_TELEMETRY,
    problems: new Problems(() => clock.now()),
    checkpoints: new CheckpointLoader(metaStore),
  };
  const reports: ShardEvent[] = [];
  const reporter: ReportSink = { report: (event) => reports.push(event) };
  const coordinator: ActorRef<CoordinatorMsg> = spawnNodeCoordinator(env, rt.system as never, reporter);
  const members = (at = 1) => rt.send(coordinator, { type: 'Members', members: { epoch: epoch(at), version: 1, members: [{ node: me, incarnation: inc }] } });
  members();
  return {
    /** The members said again (under a singleton's epoch, 1 unless said): the coordinator reconciles every whole map. */
    members,
    clock,
    sink,
    reports,
    send: (mapper: ShardMapper, at = 1) => rt.send(coordinator, { type: 'MapState', dataset: config().ref, epoch: epoch(at), mapper, config: config() }),
    running: () => new Promise<readonly { status: { type: string } }[]>((resolve) => rt.send(coordinator, { type: 'GetRunning', reply: resolve })),
  };
}

describe('node coordinator: a start sent again', () => {
  it('keeps a running Leaving copy ingesting and Active: no second start, no Recovery, its status said again', async () => {
    const { clock, sink, reports, send, running, members } = startCoordinator();
    const ref = config().ref;
    const placed = [ShardEvents.assignmentStarted(ref, shard, me)];
    send(mapOf(placed));
    await settle(clock, 1_000);
    expect(reports.at(-1)?.type).toBe('IngestionStarted');
    const active = [...placed, ShardEvents.ingestionStarted(ref, shard, me)];

    // A planned move: n2 gets a copy, this node's is Leaving; then a start of this copy again.
    const moving = [...active, ShardEvents.copyAdded(ref, shard, other), ShardEvents.leaving(ref, shard, me)];
    send(mapOf(moving));
    await settle(clock, 500);
    const startedAgain = mapOf([...moving, ShardEvents.assignmentStarted(ref, shard, me)]);
    expect(startedAgain.copyOnNode(shard, me)).toMatchObject({ placement: 'Leaving', status: { type: 'Assigned' } });
    const before = sink.tally(ref, shard).accepted;
    const reported = reports.length;
    // As a new singleton that did not hear of the copy sends it: under its own epoch.
    members(2);
    send(startedAgain, 2);
    await settle(clock, 1_000);

    // Its status said again (Active, not Recovery), and ingestion went on: no replay from a checkpoint.
    expect(reports.slice(reported).map((e) => e.type)).toEqual(['IngestionStarted']);
    // Said once for that assignment: the same map and the members again say nothing more.
    send(startedAgain, 2);
    members(2);
    await settle(clock, 500);
    expect(reports.slice(reported).map((e) => e.type)).toEqual(['IngestionStarted']);
    const tally = sink.tally(ref, shard);
    expect(tally.accepted).toBeGreaterThan(before);
    expect(tally.duplicates).toBe(0);
    expect((await running()).map((r) => r.status.type)).toEqual(['Active']);
  });
});

describe('node coordinator: a copy that failed here', () => {
  // Seen on real processes: a copy's start failed (a transient Kafka error), the singleton took the
  // copy away and a balancing round gave it back before the node saw the removal. The node kept the
  // failed run and never started the copy again: Assigned in the map for ever, the cluster never settled.
  it('starts again when the map gives it back under a new assignment, even if the node never saw it taken away', async () => {
    let opens = 0;
    const { clock, reports, send, running } = startCoordinator((c) => {
      const synthetic = new SyntheticSource(c);
      return {
        open: async (ds, s) => {
          opens += 1;
          if (opens === 1) throw new Error('the topic offsets could not be read');
          return synthetic.open(ds, s);
        },
      };
    });
    const ref = config().ref;
    const placed = [ShardEvents.ingestionStarted(ref, shard, other), ShardEvents.copyAdded(ref, shard, me)];
    send(mapOf(placed));
    await settle(clock, 500);
    expect(reports.map((e) => e.type)).toContain('IngestionError');
    expect(await running()).toEqual([]);

    // The same assignment again (a republished map): the failed run is kept, nothing restarts.
    send(mapOf(placed));
    await settle(clock, 500);
    expect(opens).toBe(1);

    // Taken away for the error and given back, both in the one map the node sees.
    const givenBack = mapOf([
      ...placed,
      ShardEvents.ingestionError(ref, shard, me, 'the topic offsets could not be read'),
      ShardEvents.copyAdded(ref, shard, me),
    ]);
    expect(givenBack.copyOnNode(shard, me)).toMatchObject({ placement: 'Initializing', status: { type: 'Assigned' } });
    const reported = reports.length;
    send(givenBack);
    await settle(clock, 1_000);
    expect(opens).toBe(2);
    expect(reports.slice(reported).map((e) => e.type)).toContain('IngestionStarted');
    expect((await running()).map((r) => r.status.type)).toEqual(['Active']);
  });
});

describe('node coordinator: a copy that failed under a token its map had moved on to', () => {
  // Seen in the simulator (seed 12142): a running copy's token moved on while it ran (another copy
  // of the shard changed), then its sink call timed out. The singleton moved the shard; before the
  // node heard of it, a Members message made it reconcile the whole map it had, which still gave it
  // the copy under the token it failed under. It restarted the copy on that token and wrote beside
  // the new owner: a failed copy restarts only under a newer token.
  it('does not start again on the token it failed under, and does on a newer one', async () => {
    let opens = 0;
    let failFirstOpen: ((e: Error) => void) | undefined;
    const { clock, reports, send, members, running } = startCoordinator((c) => {
      const synthetic = new SyntheticSource(c);
      return {
        open: async (ds, s) => {
          opens += 1;
          if (opens === 1) return new Promise<never>((_, reject) => (failFirstOpen = reject));
          return synthetic.open(ds, s);
        },
      };
    });
    const ref = config().ref;
    const placed = [ShardEvents.copyAdded(ref, shard, me)];
    send(mapOf(placed));
    await settle(clock, 200);
    expect(opens).toBe(1);

    // The shard's copies change (a second copy): this node's copy keeps running under the newer token.
    const moved = mapOf([...placed, ShardEvents.copyAdded(ref, shard, other)]);
    expect(moved.assignmentVersion(shard)).toBeGreaterThan(mapOf(placed).assignmentVersion(shard));
    send(moved);
    await settle(clock, 200);
    expect(opens).toBe(1);
    failFirstOpen!(new Error('the topic offsets could not be read'));
    await settle(clock, 200);
    expect(reports.map((e) => e.type)).toContain('IngestionError');

    // Whole reconciles on the map it failed under: nothing restarts.
    members();
    send(moved);
    await settle(clock, 500);
    expect(opens).toBe(1);
    expect(await running()).toEqual([]);

    // Taken away and given back: a newer token, a new start.
    send(
      mapOf([
        ...placed,
        ShardEvents.copyAdded(ref, shard, other),
        ShardEvents.ingestionError(ref, shard, me, 'the topic offsets could not be read'),
        ShardEvents.copyAdded(ref, shard, me),
      ]),
    );
    await settle(clock, 1_000);
    expect(opens).toBe(2);
    expect((await running()).map((r) => r.status.type)).toEqual(['Active']);
  });
});

describe('node coordinator: a copy whose sink call timed out, started again under a new singleton', () => {
  // Seen in the simulator (seeds 14945, 29584): a sink call timed out under epoch 1, and the failure
  // waited for the call to end before it was reported. Meanwhile a new singleton (epoch 2) sent the
  // same assignment under its epoch, a newer token, and the node started the copy again. The report
  // then left with the token of that moment, the new run's, and the singleton moved the shard while
  // the new run wrote: two writers. The report speaks of the run that failed: its token is the one
  // of the moment it failed, which the new singleton sees as a former assignment and ignores.
  it('reports the failure under the token it failed under, not the one of the run started since', async () => {
    let calls = 0;
    let endHungCall: (() => void) | undefined;
    const sink: RecordSink = {
      accept: async () => {
        calls += 1;
        if (calls === 1) await new Promise<void>((resolve) => (endHungCall = resolve));
      },
    };
    const { clock, reports, send, members, running } = startCoordinator(undefined, sink);
    const ref = config().ref;
    const placed = mapOf([ShardEvents.copyAdded(ref, shard, me)]);
    send(placed);
    await settle(clock, 1_500); // the first call hangs past the 1 s sink timeout
    expect(reports.map((e) => e.type)).not.toContain('IngestionError'); // reported once the call ends

    // A new singleton: the same assignment under epoch 2, a newer token; the copy starts again.
    members(2);
    send(placed, 2);
    await settle(clock, 300);
    expect((await running()).map((r) => r.status.type)).toEqual(['Active']);

    endHungCall!();
    await settle(clock, 200);
    const error = reports.find((e) => e.type === 'IngestionError');
    expect(error).toMatchObject({ token: { epoch: 1, version: placed.assignmentVersion(shard) } });
    expect(calls).toBeGreaterThan(1); // the new run writes
    // The old run's failure is not the new run's: the node still says it runs the copy (to a
    // recovering singleton, say), Active.
    expect((await running()).map((r) => r.status.type)).toEqual(['Active']);
  });
});
