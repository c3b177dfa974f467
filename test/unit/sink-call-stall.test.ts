// The sink timeout times the sink, not the node's own stalls: a timer that fires well after it was
// due (the process did not run: a pause, a busy event loop) starts the wait over, a few times at
// most; one that fires on time fails the call. A clock whose timers the test fires itself, late or
// on time, as a stalled event loop would.
import { describe, expect, it } from 'vitest';
import type { Clock } from '../../src/cluster/clock.js';
import type { DatasetConfig } from '../../src/core/dataset-config.js';
import type { ShardNum } from '../../src/core/ids.js';
import { callSink, SinkTimeoutError } from '../../src/actors/sink-call.js';
import type { RecordSink } from '../../src/ingest/ingestion-source.js';
import { RunGaps } from '../../src/actors/run-gaps.js';

class HandClock implements Clock {
  current = 0;
  readonly timers: { at: number; fn: () => void; cancelled: boolean }[] = [];
  now(): number {
    return this.current;
  }
  schedule(delayMs: number, fn: () => void): () => void {
    const t = { at: this.current + delayMs, fn, cancelled: false };
    this.timers.push(t);
    return () => (t.cancelled = true);
  }
  /** Fires the next live timer `lateMs` after it was due. */
  fireNext(lateMs: number): void {
    const t = this.timers.filter((x) => !x.cancelled).sort((a, b) => a.at - b.at)[0]!;
    this.timers.splice(this.timers.indexOf(t), 1);
    this.current = t.at + lateMs;
    t.fn();
  }
}

const DS = { ref: 'ds' } as unknown as DatasetConfig;
const TOKEN = { epoch: 1, version: 1 };
const hanging: RecordSink = { accept: () => new Promise<void>(() => {}) };

describe("the sink timeout and the node's own stalls", () => {
  it('fails a call whose timer fired on time', async () => {
    const clock = new HandClock();
    const call = callSink(hanging, clock, 1_000, DS, 0 as ShardNum, [], TOKEN);
    clock.fireNext(10);
    await expect(call).rejects.toBeInstanceOf(SinkTimeoutError);
  });

  it('starts the wait over when the timer fired late (the process did not run), and the call that then ends is accepted', async () => {
    const clock = new HandClock();
    let finish: () => void = () => {};
    const sink: RecordSink = { accept: () => new Promise<void>((resolve) => (finish = resolve)) };
    const call = callSink(sink, clock, 1_000, DS, 0 as ShardNum, [], TOKEN);
    clock.fireNext(400); // a 400 ms stall past the deadline: not the sink's time
    expect(clock.timers.filter((t) => !t.cancelled)).toHaveLength(1); // the wait started over
    finish();
    await expect(call).resolves.toEqual({ kind: 'accepted' });
  });

  it('gives up starting over after a few late timers: a hung sink on a node whose timers are always late still fails', async () => {
    const clock = new HandClock();
    const call = callSink(hanging, clock, 1_000, DS, 0 as ShardNum, [], TOKEN);
    for (let i = 0; i < 3; i++) clock.fireNext(400);
    clock.fireNext(400);
    await expect(call).rejects.toBeInstanceOf(SinkTimeoutError);
  });

  it('starts the wait over when the process paused just after the call began (its timer fires nearly on time at resume)', async () => {
    const clock = new HandClock();
    const gaps = new RunGaps(clock);
    gaps.start();
    let finish: () => void = () => {};
    const sink: RecordSink = { accept: () => new Promise<void>((resolve) => (finish = resolve)) };
    const call = callSink(sink, clock, 1_000, DS, 0 as ShardNum, [], TOKEN, gaps);
    // Paused from 10 ms to 1 010 ms: the ticker due at 200 ms runs at resume, then the sink timer
    // (due at 1 000 ms) only 10 ms late: the process ran for 20 ms of the wait.
    clock.fireNext(810);
    clock.fireNext(10);
    expect(gaps.stalledSince(0)).toBe(810);
    expect(clock.timers.filter((t) => !t.cancelled && t.at >= 2_000)).toHaveLength(1); // the wait started over
    finish();
    await expect(call).resolves.toEqual({ kind: 'accepted' });
    gaps.stop();
  });

  it('counts only the gaps since the call began', () => {
    const clock = new HandClock();
    const gaps = new RunGaps(clock);
    gaps.start();
    clock.fireNext(300); // a 300 ms gap ending at 500 ms
    clock.fireNext(0);
    clock.fireNext(0);
    expect(gaps.stalledSince(0)).toBe(300);
    expect(gaps.stalledSince(400)).toBe(100);
    expect(gaps.stalledSince(600)).toBe(0);
    gaps.stop();
    expect(clock.timers.filter((t) => !t.cancelled)).toHaveLength(0);
  });
});
