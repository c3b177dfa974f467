// What one node's copies ingest and what their sinks spend, summed over a report window and taken
// as per-second figures at its end (docs/PLACEMENT.md, "Load reports"). Counting is a few additions
// per sink call; a window's figures go to the singleton as one record per dataset.
import type { DatasetRef } from '../core/ids.js';

/** One copy's sums in the current window. */
interface CopySums {
  /** The copy counted (a copy started in its place replaces it; the old one's close then does nothing). */
  readonly owner: object;
  records: number;
  bytes: number;
  sinkMs: number;
}

/** A dataset's copies on this node, per second over the window that ended (lists by position). */
export interface WindowFigures {
  readonly shards: number[];
  readonly records: number[];
  readonly bytes: number[];
  readonly sinkMs: number[];
  /** The node's own figure per copy (`LoadMeter`'s `weightOf`), when it has a hook. */
  readonly weights?: number[];
}

/** A node's own figure for a copy (CPU, series count...), read at the end of each window. */
export type LoadWeightHook = (dataset: DatasetRef, shard: number) => number;

export class LoadMeter {
  private readonly copies = new Map<DatasetRef, Map<number, CopySums>>();
  private windowStart: number;

  constructor(
    now: number,
    private readonly weightOf?: LoadWeightHook,
  ) {
    this.windowStart = now;
  }

  /** `owner`, a copy, started ingesting here: it is reported from now on (an idle copy reports zeros, not nothing). */
  open(dataset: DatasetRef, shard: number, owner: object): void {
    let byShard = this.copies.get(dataset);
    if (!byShard) this.copies.set(dataset, (byShard = new Map()));
    byShard.set(shard, { owner, records: 0, bytes: 0, sinkMs: 0 });
  }

  /** `owner` stopped here: its figures go with it. */
  close(dataset: DatasetRef, shard: number, owner: object): void {
    const byShard = this.copies.get(dataset);
    if (byShard?.get(shard)?.owner !== owner) return;
    byShard.delete(shard);
    if (byShard.size === 0) this.copies.delete(dataset);
  }

  /** A sink call of the copy took `records` records (`bytes` of them as fetched) in `sinkMs`. */
  ingested(dataset: DatasetRef, shard: number, records: number, bytes: number, sinkMs: number): void {
    const sums = this.copies.get(dataset)?.get(shard);
    if (!sums) return;
    sums.records += records;
    sums.bytes += bytes;
    sums.sinkMs += sinkMs;
  }

  /** The hook's figure; a hook that throws gives NaN, which the singleton refuses and counts. */
  private weightFor(dataset: DatasetRef, shard: number): number {
    try {
      return this.weightOf!(dataset, shard);
    } catch {
      return Number.NaN;
    }
  }

  /** Ends the window at `now`: each dataset's figures per second, and a new window starts with zeros. */
  takeWindow(now: number): { readonly windowMs: number; readonly datasets: ReadonlyMap<DatasetRef, WindowFigures> } {
    const windowMs = Math.max(1, now - this.windowStart);
    this.windowStart = now;
    const perSecond = (x: number) => (x * 1000) / windowMs;
    const datasets = new Map<DatasetRef, WindowFigures>();
    for (const [dataset, byShard] of this.copies) {
      const shards = [...byShard.keys()].sort((a, b) => a - b);
      const sums = shards.map((s) => byShard.get(s)!);
      datasets.set(dataset, {
        shards,
        records: sums.map((c) => perSecond(c.records)),
        bytes: sums.map((c) => perSecond(c.bytes)),
        sinkMs: sums.map((c) => perSecond(c.sinkMs)),
        ...(this.weightOf === undefined ? {} : { weights: shards.map((s) => this.weightFor(dataset, s)) }),
      });
      for (const c of sums) c.records = c.bytes = c.sinkMs = 0;
    }
    return { windowMs, datasets };
  }
}
