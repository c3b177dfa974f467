// The node coordinator runs what its map gives the node. A start sent again for a copy it already
// runs (a Leaving copy of a planned move included) must not restart that copy: a restart reports
// Recovery for its catch-up time, and a Leaving copy not Active while its successor catches up is a
// shard with no Active copy.
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { CheckpointLoader } from '../../src/actors/checkpoint-loader.js';
import { spawnNodeCoordinator, type CoordinatorMsg } from '../../src/actors/node-coordinator.js';
import type { NodeEnv } from '../../src/actors/node-env.js';
import { Problems } from '../../src/actors/problems.js';
import type { ReporterMsg } from '../../src/actors/reporter.js';
import { ActorRuntime, type ActorRef } from '../../src/actors/runtime.js';
import { runtimeSettings } from '../../src/actors/settings.js';
import { NO_TELEMETRY } from '../../src/actors/telemetry.js';
import { topicsFor } from '../../src/actors/wire.js';
import { SimulatedClock } from '../../src/cluster/clock.js';
import { MemoryBus } from '../../src/cluster/memory-bus.js';
import { validateDatasetConfig, type DatasetConfig } from '../../src/core/dataset-config.js';
import { epoch, incarnation, nodeId, type ShardNum } from '../../src/core/ids.js';
import { ShardMapper } from '../../src/core/shard-mapper.js';
import { ShardEvents, type ShardEvent } from '../../src/core/status.js';
import { CountingSink } from '../../src/ingest/counting-sink.js';
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
  const r = validateDatasetConfig({ ref: 'ds', numShards: 1, minNumNodes: 1, replicationFactor: 2, strategy: 'balanced', source: { type: 'synthetic', recordsPerSecond: 100 } });
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

describe('node coordinator: a start sent again', () => {
  it('keeps a running Leaving copy ingesting and Active: no second start, no Recovery, its status said again', async () => {
    const clock = new SimulatedClock(0);
    const log = pino({ level: 'silent' });
    runtime = new ActorRuntime(`coordinator-${Math.floor(performance.now() * 1000)}`, log);
    const metaStore = new MemoryMetaStore();
    const sink = new CountingSink();
    const env: NodeEnv = {
      node: me,
      incarnation: inc,
      runtime,
      clock,
      bus: new MemoryBus(clock),
      topics: topicsFor('test'),
      metaStore,
      lease: metaStore,
      source: new SyntheticSource(clock),
      sink,
      settings: runtimeSettings({ pollIntervalMs: 50, checkpointIntervalMs: 100 }),
      log,
      telemetry: NO_TELEMETRY,
      problems: new Problems(() => clock.now()),
      checkpoints: new CheckpointLoader(metaStore),
    };
    const reports: ShardEvent[] = [];
    const reporter = runtime.spawn<undefined, ReporterMsg>(runtime.system, 'reporter', (s, msg) => {
      if (msg.type === 'Report') reports.push(msg.event);
      return s;
    }, { initialState: undefined });
    const coordinator: ActorRef<CoordinatorMsg> = spawnNodeCoordinator(env, runtime.system as never, reporter);
    const ref = config().ref;
    const send = (mapper: ShardMapper) => runtime!.send(coordinator, { type: 'MapState', dataset: ref, epoch: epoch(1), mapper, config: config() });

    runtime.send(coordinator, { type: 'Members', members: { epoch: epoch(1), version: 1, members: [{ node: me, incarnation: inc }] } });
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
    send(startedAgain);
    await settle(clock, 1_000);

    // Its status said again (Active, not Recovery), and ingestion went on: no replay from a checkpoint.
    expect(reports.slice(reported).map((e) => e.type)).toEqual(['IngestionStarted']);
    const tally = sink.tally(ref, shard);
    expect(tally.accepted).toBeGreaterThan(before);
    expect(tally.duplicates).toBe(0);
    const running = await new Promise<readonly { status: { type: string } }[]>((resolve) => runtime!.send(coordinator, { type: 'GetRunning', reply: resolve }));
    expect(running.map((r) => r.status.type)).toEqual(['Active']);
  });
});
