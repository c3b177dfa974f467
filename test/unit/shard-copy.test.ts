// A shard copy is a plain object driven by its node (issue 34: an actor per copy cost ~7 KB of heap
// each). Checked here on its own, with a simulated clock: it starts and reports, polls an idle
// source on the node's shared timers, runs one step at a time, and a copy stopped at any point
// does nothing more and leaves no reader open.
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { CheckpointLoader } from '../../src/actors/checkpoint-loader.js';
import { CopyTimers } from '../../src/actors/copy-timers.js';
import type { NodeEnv } from '../../src/actors/node-env.js';
import { PollTurns } from '../../src/actors/poll-turns.js';
import { Problems } from '../../src/actors/problems.js';
import { ActorRuntime } from '../../src/actors/runtime.js';
import { runtimeSettings } from '../../src/actors/settings.js';
import { ShardCopy, type CopyHost } from '../../src/actors/shard-copy.js';
import { NO_TELEMETRY } from '../../src/actors/telemetry.js';
import { SimulatedClock } from '../../src/cluster/clock.js';
import { validateDatasetConfig, type DatasetConfig } from '../../src/core/dataset-config.js';
import type { ShardEvent, ShardStatus } from '../../src/core/status.js';
import type { IngestionSource, RecordSink, ShardReader, SourceRecord } from '../../src/ingest/ingestion-source.js';
import { MemoryMetaStore } from '../../src/store/memory-meta-store.js';
import type { NodeId, ShardNum } from '../../src/core/ids.js';

const config = (() => {
  const r = validateDatasetConfig({ ref: 'ds', numShards: 4, minNumNodes: 1, source: { type: 'synthetic', recordsPerSecond: 1 } });
  if (!r.ok) throw new Error('bad config');
  return r.value;
})();

/** A source whose shard holds `records` from the start; `open` waits for `opening` when given. */
function source(records: number, opening?: Promise<void>) {
  const readers: { closed: boolean; reads: number }[] = [];
  const src: IngestionSource = {
    async open(): Promise<ShardReader> {
      await opening;
      const state = { closed: false, reads: 0 };
      readers.push(state);
      return {
        earliestOffset: async () => 0,
        endOffset: async () => records,
        read: async (offset: number, max: number): Promise<SourceRecord[]> => {
          state.reads++;
          return Array.from({ length: Math.max(0, Math.min(max, records - offset)) }, (_, i) => ({
            offset: offset + i,
            key: String(offset + i),
            value: offset + i,
          }));
        },
        close: async () => {
          state.closed = true;
        },
      };
    },
  };
  return { src, readers };
}

function world(src: IngestionSource, sink: RecordSink = { accept: async () => {} }) {
  const clock = new SimulatedClock(1_000);
  const log = pino({ level: 'silent' });
  const metaStore = new MemoryMetaStore();
  const runtime = new ActorRuntime('copy-test', log);
  const turns: (() => void)[] = [];
  const env = {
    node: 'node-1' as NodeId,
    incarnation: 'i1',
    runtime,
    clock,
    metaStore,
    source: src,
    sink,
    settings: runtimeSettings({ pollIntervalMs: 100 }),
    log,
    telemetry: NO_TELEMETRY,
    problems: new Problems(() => clock.now()),
    checkpoints: new CheckpointLoader(metaStore),
    pollTurns: new PollTurns({ nextTurn: (fn) => turns.push(fn), now: () => clock.now() }),
  } as unknown as NodeEnv;
  const reports: ShardEvent[] = [];
  const statuses: ShardStatus[] = [];
  const timers = new CopyTimers(clock);
  const host: CopyHost = {
    env,
    reporter: { report: (e) => reports.push(e) },
    timers,
    statusChanged: (_copy, status) => statuses.push(status),
    tokenOf: () => ({ epoch: 1, version: 1 }) as never,
  };
  /** Runs what is due now: timers of this instant, turns of the event loop and the promises between them. */
  const settle = async () => {
    for (let i = 0; i < 50; i++) {
      clock.advance(0);
      await new Promise((resolve) => setImmediate(resolve));
      while (turns.length > 0) turns.shift()!();
    }
  };
  return { clock, env, host, reports, statuses, timers, runtime, settle };
}

const copyOf = (w: ReturnType<typeof world>, dataset: DatasetConfig = config) => new ShardCopy(w.host, dataset, 0 as ShardNum);

describe('a shard copy', () => {
  it('starts, catches up and reports once, then polls an idle source on one shared timer of the node, backing off', async () => {
    const { src, readers } = source(5);
    const accepted: number[] = [];
    const w = world(src, { accept: async (_d, _s, records) => void accepted.push(...records.map((r) => r.offset)) });
    copyOf(w);
    await w.settle();
    expect(w.reports.map((e) => e.type)).toEqual(['RecoveryInProgress', 'IngestionStarted']);
    expect(accepted).toEqual([0, 1, 2, 3, 4]);
    expect(w.runtime.inFlight).toBe(0);
    // Idle now: one timer of the copies, and the clock holds a single timer for them.
    expect(w.timers.size).toBe(1);
    const readsBefore = readers[0]!.reads;
    for (let i = 0; i < 30; i++) {
      w.clock.advance(100);
      await w.settle();
    }
    // 3 s of an idle source: backing off to 10 × 100 ms, about 7 reads, not 30.
    const idleReads = readers[0]!.reads - readsBefore;
    expect(idleReads).toBeGreaterThanOrEqual(4);
    expect(idleReads).toBeLessThanOrEqual(8);
    expect(w.reports).toHaveLength(2);
  });

  it('stopped while its reader opens: closes that reader, reports nothing and arms nothing', async () => {
    let open!: () => void;
    const { src, readers } = source(5, new Promise<void>((resolve) => (open = resolve)));
    const w = world(src);
    const copy = copyOf(w);
    await w.settle();
    copy.stop();
    open();
    await w.settle();
    expect(readers).toHaveLength(1);
    expect(readers[0]!.closed).toBe(true);
    expect(w.reports).toEqual([]);
    expect(w.timers.size).toBe(0);
    expect(w.runtime.inFlight).toBe(0);
  });

  it('stopped while the sink has a batch: that step ends, and nothing more is read, reported or armed', async () => {
    const { src, readers } = source(5);
    let release!: () => void;
    const w = world(src, { accept: () => new Promise<void>((resolve) => (release = resolve)) });
    const copy = copyOf(w);
    await w.settle();
    expect(w.reports.map((e) => e.type)).toEqual(['RecoveryInProgress']);
    expect(w.runtime.inFlight).toBe(1); // the step waiting for the sink counts as work in flight
    copy.stop();
    release();
    await w.settle();
    w.clock.advance(10_000);
    await w.settle();
    expect(readers[0]!.reads).toBe(1);
    expect(readers[0]!.closed).toBe(true);
    expect(w.reports.map((e) => e.type)).toEqual(['RecoveryInProgress']);
    expect(w.timers.size).toBe(0);
    expect(w.runtime.inFlight).toBe(0);
  });

  it('a sink that fails fails the copy once: one IngestionError, and no step after it', async () => {
    const { src, readers } = source(5);
    const w = world(src, {
      accept: async () => {
        throw new Error('disk full');
      },
    });
    copyOf(w);
    await w.settle();
    w.clock.advance(10_000);
    await w.settle();
    expect(w.reports.map((e) => e.type)).toEqual(['RecoveryInProgress', 'IngestionError']);
    expect(w.statuses.at(-1)?.type).toBe('Error');
    expect(readers[0]!.reads).toBe(1);
    expect(w.timers.size).toBe(0);
  });
});
