// A sink that records every call as the sink sees it, around another sink (`{"type":"recorded"}` in
// a node config): one JSON line per call in a history file, with the wall-clock times just before
// and just after the wrapped sink's write, its outcome and which offsets it carried. A checker of
// the whole cluster's history reads these files back (every node process on one machine, so their
// clocks compare): did two nodes write a shard at the same time, did an older token land after a
// newer one, did every acknowledged record reach some accepted call.
import { appendFileSync, existsSync, rmSync } from 'node:fs';
import type { DatasetConfig } from '../core/dataset-config.js';
import { StaleTokenError, type FencingToken } from '../core/fencing-token.js';
import type { ShardNum } from '../core/ids.js';
import type { RecordSink, SourceRecord } from './ingestion-source.js';

/**
 * A test hook: while a file exists at `triggerPath`, the next call removes it and waits `delayMs`
 * before handing its batch to the wrapped sink (a sink that hangs, then writes), so a test can make
 * one chosen call slower than `sinkTimeoutMs` at a moment of its choosing.
 */
export interface SlowCallHook {
  readonly triggerPath: string;
  readonly delayMs: number;
}

/** One line of a history file. Times are ms since the Unix epoch, with sub-ms precision. */
export interface SinkCallRecord {
  readonly node: string;
  readonly dataset: string;
  readonly shard: number;
  /** The fencing token `[epoch, version]`; null for a call without one (the three-argument API). */
  readonly token: readonly [number, number] | null;
  /** Just before the wrapped sink was called (before the hook's delay, if any: the sink as a whole was slow). */
  readonly start: number;
  /** Just after the wrapped sink's promise settled. */
  readonly end: number;
  readonly firstOffset: number | null;
  readonly lastOffset: number | null;
  readonly count: number;
  /** The batch's offsets as inclusive runs `[from, to]`: exact, and short for a log's consecutive offsets. */
  readonly offsets: readonly (readonly [number, number])[];
  /** `ok`: the wrapped sink accepted the batch; `refused`: it threw `StaleTokenError`; `failed`: anything else. */
  readonly outcome: 'ok' | 'refused' | 'failed';
  readonly error?: string;
  /** Set when the slow-call hook held this call back. */
  readonly delayedMs?: number;
}

/** Wall-clock ms with the monotonic clock's resolution (`Date.now()` has whole ms only). */
const wallNow = (): number => performance.timeOrigin + performance.now();

/** Consecutive offsets as inclusive runs. */
export function offsetRuns(records: readonly SourceRecord[]): [number, number][] {
  const runs: [number, number][] = [];
  for (const { offset } of records) {
    const last = runs.at(-1);
    if (last && offset === last[1] + 1) last[1] = offset;
    else runs.push([offset, offset]);
  }
  return runs;
}

export class HistorySink implements RecordSink {
  constructor(
    private readonly inner: RecordSink,
    private readonly historyPath: string,
    private readonly node: string,
    private readonly slowCall?: SlowCallHook,
  ) {}

  async accept(dataset: DatasetConfig, shard: ShardNum, records: readonly SourceRecord[], token?: FencingToken): Promise<void> {
    const delayMs = this.takeSlowCall();
    const start = wallNow();
    let outcome: SinkCallRecord['outcome'] = 'ok';
    let error: string | undefined;
    try {
      if (delayMs !== undefined) await new Promise((resolve) => setTimeout(resolve, delayMs));
      await this.inner.accept(dataset, shard, records, token);
    } catch (e) {
      outcome = e instanceof StaleTokenError ? 'refused' : 'failed';
      error = e instanceof Error ? e.message : String(e);
      throw e;
    } finally {
      const end = wallNow();
      const line: SinkCallRecord = {
        node: this.node,
        dataset: dataset.ref,
        shard,
        token: token ? [token.epoch, token.version] : null,
        start,
        end,
        firstOffset: records[0]?.offset ?? null,
        lastOffset: records.at(-1)?.offset ?? null,
        count: records.length,
        offsets: offsetRuns(records),
        outcome,
        ...(error === undefined ? {} : { error }),
        ...(delayMs === undefined ? {} : { delayedMs: delayMs }),
      };
      // Synchronous: the line is the kernel's before the call returns, so a SIGKILL right after a
      // call loses no line of it (an asynchronous stream would lose what it still buffered).
      appendFileSync(this.historyPath, `${JSON.stringify(line)}\n`);
    }
  }

  /** The hook's delay when its trigger file exists (consumed: one file, one slow call). */
  private takeSlowCall(): number | undefined {
    const hook = this.slowCall;
    if (!hook || !existsSync(hook.triggerPath)) return undefined;
    rmSync(hook.triggerPath, { force: true });
    return hook.delayMs;
  }
}
