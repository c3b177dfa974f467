// A run's statistics: the counters the faults and the checks keep as the run goes, and the report's
// stats gathered from them and from the world's parts at the end.
import type { SimulationReport } from './report.js';
import { FILODB_DATASETS, type SimWorld } from './world.js';

/** What the run counts as it goes: the faults it injected, and the failovers the checks saw. */
export interface RunCounters {
  failovers: number;
  crashes: number;
  restarts: number;
  pauses: number;
  poisoned: number;
  nodeOperations: number;
}

export function newCounters(): RunCounters {
  return { failovers: 0, crashes: 0, restarts: 0, pauses: 0, poisoned: 0, nodeOperations: 0 };
}

/** The report's stats: the counters, then what the world's parts counted; `finalEpoch` is the lease's at the end. */
export function statsOf(counters: RunCounters, w: SimWorld, finalEpoch: number): SimulationReport['stats'] {
  const { sink, detector: world, late, real, sinkFaults, sinkCalls } = w;
  const totals = sink.total();
  return {
    ...counters,
    recordsIngested: totals.accepted,
    // Replicas ingest every record once per copy: only single-copy datasets count as duplicates.
    duplicates: FILODB_DATASETS.reduce((n, d) => n + sink.total(d.ref).duplicates, 0),
    finalEpoch,
    chunkedMessages: w.chunkedMessages,
    evictions: world?.stats.evictions ?? 0,
    departures: world?.stats.departures ?? 0,
    cuts: world?.stats.cuts ?? 0,
    lateWrites: late.stats.landedAfterPause,
    lateWritesRefused: late.stats.refusedAfterPause,
    stalls: real.stats.stalls,
    resets: real.stats.resets,
    slowJoins: real.stats.slowJoins,
    sinkFailures: sinkFaults?.stats.failed ?? 0,
    slowSinkCalls: sinkFaults?.stats.slow ?? 0,
    sinkCalls: sinkCalls.calls.length,
  };
}
