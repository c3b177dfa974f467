// What a simulation run is asked to do and what it reports: shared by the run's parts
// (`world.ts`, `faults.ts`, `invariants.ts`, `statistics.ts`) and the driver (`simulation.ts`).
import type { Logger } from 'pino';
import type { DetectorInvariant } from './detector-world.js';
import type { SinkCall } from './sink-calls.js';

export type Invariant = 'I1' | 'I2' | 'I3' | 'I4' | 'I5' | 'I6' | 'I7' | 'I8' | 'I9' | 'I13' | 'I14' | 'I15' | 'I16' | DetectorInvariant;

export interface Violation {
  readonly seed: number;
  readonly step: number;
  readonly time: number;
  readonly invariant: Invariant;
  readonly message: string;
}

export interface SimulationOptions {
  readonly seed: number;
  /** Default 4. */
  readonly nodes?: number;
  /** Steps with faults, then `quietSteps` without, then the final checks. Default 25. */
  readonly steps?: number;
  readonly quietSteps?: number;
  /** Simulated time per step, ms. Default 1000. */
  readonly stepMs?: number;
  /** Off: a run with no faults at all (a baseline). Default on. */
  readonly faults?: boolean;
  /**
   * A broken sink for testing the checker itself: records for which it returns false are
   * silently dropped, which the simulation must report as lost (I5).
   */
  readonly sinkDrops?: (dataset: string, shard: number, offset: number) => boolean;
  /**
   * A sink that ignores fencing tokens, for testing the checker itself: the late writes it lets
   * through must show up as I13 violations.
   */
  readonly unfencedSink?: boolean;
  /**
   * Runs the failure detector (`failureDetector.mode: 'heartbeat'`, docs/ARCHITECTURE.md §11) with
   * a Kafka-like 6 s membership session behind it, its own faults (message loss and delay, one-way
   * cuts, isolated nodes, 1 s pauses), drifting clocks and the invariants I10–I12. Default off: the
   * run is then exactly the session-only one.
   */
  readonly detector?: boolean;
  /**
   * With `detector`: the faults real processes meet, each chosen per seed from a random source of
   * its own (`real-world.ts`). Default on; off, a seed runs as it did before they existed (the
   * regression seeds found before them replay so).
   */
  readonly worldFaults?: boolean;
  /** Return every sink call of the run in the report (for looking into an I15 violation). Default off. */
  readonly keepSinkCalls?: boolean;
  readonly log?: Logger;
}

export interface SimulationReport {
  readonly seed: number;
  readonly steps: number;
  readonly simulatedMs: number;
  /** What happened, step by step (the fault schedule as it ran). */
  readonly history: readonly string[];
  readonly violations: readonly Violation[];
  /** With `keepSinkCalls`: every sink call, in the order they began. */
  readonly sinkCalls?: readonly SinkCall[];
  readonly stats: {
    readonly failovers: number;
    readonly crashes: number;
    readonly restarts: number;
    readonly pauses: number;
    readonly poisoned: number;
    readonly nodeOperations: number;
    readonly recordsIngested: number;
    /** Records ingested twice in single-copy datasets (a replicated one ingests each record once per copy). */
    readonly duplicates: number;
    readonly finalEpoch: number;
    /** Messages the bus carried in several chunks (each chunk subject to the faults). */
    readonly chunkedMessages: number;
    /** With `detector`: members the detector evicted, departures it held until the lease ran out, links it saw cut. */
    readonly evictions: number;
    readonly departures: number;
    readonly cuts: number;
    /** Sink calls under way when their node paused, landed after it resumed; and those the sink's fence refused. */
    readonly lateWrites: number;
    readonly lateWritesRefused: number;
    /** With the real world's faults: event-loop stalls, refusal/reset windows, slow joins, sink calls failed and slow, sink calls made. */
    readonly stalls: number;
    readonly resets: number;
    readonly slowJoins: number;
    readonly sinkFailures: number;
    readonly slowSinkCalls: number;
    readonly sinkCalls: number;
  };
}
