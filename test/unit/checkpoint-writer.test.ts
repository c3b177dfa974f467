// A shard's checkpoints go out in the background: one write at a time, the latest offer winning,
// failures tried again with backoff unless a newer offer replaced them, refusals not tried again.
import { describe, expect, it } from 'vitest';
import { CheckpointWriter } from '../../src/actors/checkpoint-writer.js';
import { runtimeSettings } from '../../src/actors/settings.js';
import { SimulatedClock } from '../../src/cluster/clock.js';
import type { FencingToken } from '../../src/core/fencing-token.js';
import { CheckpointRefusedError, MetaStoreUnavailableError } from '../../src/store/meta-store.js';

const T: FencingToken = { epoch: 1, version: 2 };

/** A writer over a store whose writes settle when the test says; records every call. */
function harness() {
  const clock = new SimulatedClock(0);
  const calls: { offset: number; settle: (outcome?: unknown) => void }[] = [];
  const events: string[] = [];
  const writer = new CheckpointWriter({
    clock,
    retryInitialMs: 100,
    retryMaxMs: 400,
    write: (offset) => new Promise<void>((resolve, reject) => calls.push({ offset, settle: (e) => (e === undefined ? resolve() : reject(e)) })),
    written: (offset) => events.push(`written ${offset}`),
    refused: (_e, offset) => events.push(`refused ${offset}`),
    failed: (_e, offset, retryInMs) => events.push(`failed ${offset} retry ${retryInMs}`),
  });
  const flush = () => new Promise((resolve) => setImmediate(resolve));
  return { clock, calls, events, writer, flush };
}

describe('CheckpointWriter', () => {
  it('has one write in flight; offers meanwhile collapse to the latest', async () => {
    const { calls, events, writer, flush } = harness();
    writer.offer(10, T);
    writer.offer(20, T);
    writer.offer(30, T);
    writer.offer(25, T); // lower than offered: nothing to do
    expect(calls.map((c) => c.offset)).toEqual([10]);
    calls[0]!.settle();
    await flush();
    expect(calls.map((c) => c.offset)).toEqual([10, 30]);
    expect(writer.settled).toBe(10);
    calls[1]!.settle();
    await flush();
    expect(events).toEqual(['written 10', 'written 30']);
    expect(writer.settled).toBe(30);
    expect(writer.pending).toBe(false);
  });

  it('tries a failed write again with backoff, unless a newer offer replaced it', async () => {
    const { clock, calls, events, writer, flush } = harness();
    writer.offer(10, T);
    calls[0]!.settle(new MetaStoreUnavailableError('writeCheckpoint'));
    await flush();
    expect(events).toEqual(['failed 10 retry 100']);
    await clock.advance(99);
    expect(calls.length).toBe(1);
    await clock.advance(1);
    await flush();
    expect(calls.map((c) => c.offset)).toEqual([10, 10]);
    calls[1]!.settle(new MetaStoreUnavailableError('writeCheckpoint'));
    await flush();
    expect(events.at(-1)).toBe('failed 10 retry 200');
    // A newer offer goes at once, not after the backoff.
    writer.offer(50, T);
    await flush();
    expect(calls.map((c) => c.offset)).toEqual([10, 10, 50]);
    calls[2]!.settle();
    await flush();
    await clock.advance(1_000);
    expect(calls.length).toBe(3);
    expect(writer.settled).toBe(50);
  });

  it('a refused write is settled and not tried again; offsets before the start count as settled', async () => {
    const { clock, calls, events, writer, flush } = harness();
    writer.startFrom(99);
    expect(writer.settled).toBe(99);
    writer.offer(50, T); // before the start: nothing to write
    expect(calls.length).toBe(0);
    writer.offer(120, T);
    calls[0]!.settle(new CheckpointRefusedError('m', 0, 'n1', '0', 120, T, { offset: 500, token: { epoch: 2, version: 0 } }));
    await flush();
    await clock.advance(10_000);
    expect(events).toEqual(['refused 120']);
    expect(calls.length).toBe(1);
    expect(writer.settled).toBe(120);
  });
});

describe('maxUncheckpointedRecords', () => {
  it('defaults to 100 000 and refuses what is not a whole number >= 0, naming the key', () => {
    expect(runtimeSettings().maxUncheckpointedRecords).toBe(100_000);
    expect(runtimeSettings({ maxUncheckpointedRecords: 0 }).maxUncheckpointedRecords).toBe(0);
    for (const bad of [-1, 1.5, Number.NaN])
      expect(() => runtimeSettings({ maxUncheckpointedRecords: bad })).toThrow(/invalid runtime setting maxUncheckpointedRecords/);
    expect(() => runtimeSettings({ sinkTimeoutMs: -5 })).toThrow(/invalid runtime setting sinkTimeoutMs/);
  });
});
