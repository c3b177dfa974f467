import { MonotonicClock, RealClock, type Clock } from './clock.js';
import { aTurn, nextTurn } from './turns.js';

// A long run of work made of many short steps (records of a fetched batch, each handled in a
// microtask) gives the event loop no turn until it ends: kafkajs hands a subscription a whole
// batch with awaits that never leave the microtask queue, so a node reading megabytes of map
// changes parsed them all in one task and its timers, HTTP answers and heartbeats waited (stalls
// of over a second in a 65 536 × 3 join wave, issue 34). A slice counts the time since the event
// loop last had a turn and gives it one once that passes `sliceMs`.

/** Gives the event loop a turn between steps once a run of them has taken `sliceMs`. */
export class EventLoopSlice {
  /** When the current run began (performance.now()); undefined: the loop had a turn since. */
  private since: number | undefined;

  constructor(
    private readonly sliceMs: number,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /**
   * Called before each step: resolves at once while the run is within its slice, else after the
   * event loop had a turn (`setImmediate`). Costs one `setImmediate` per turn of the loop at most.
   */
  async yieldIfSpent(): Promise<void> {
    if (this.since === undefined) {
      this.since = this.now();
      // Fires at the loop's next turn, whoever gives it: a run that waited on I/O starts afresh.
      nextTurn(() => (this.since = undefined));
      return;
    }
    if (this.now() - this.since < this.sliceMs) return;
    await aTurn();
  }
}

/** The slice of sliced work (a fetched batch, a map applied or encoded, a decision) between two turns of the event loop. */
export const PROCESS_SLICE_MS = 20;

let processSlice: EventLoopSlice | undefined;

/**
 * The process's one slice, shared by every run of sliced work in it: the event loop is the
 * process's, and so is the budget between its turns. With one slice per node (five in the embedded
 * demo) and per subscription, each turn ran a slice of every run under way, 100–200 ms, and an HTTP
 * answer needs several turns (a synchronous /healthz took 350–510 ms while the demo applied a
 * 65 536-shard map). Runs that share it take turns: one spends the slice, the others wait a turn.
 */
export function processEventLoopSlice(): EventLoopSlice {
  return (processSlice ??= new EventLoopSlice(PROCESS_SLICE_MS));
}

/**
 * The pause between slices of long work for a process on `clock`: a turn of the event loop once a
 * slice is spent, on real time; none in a simulated world, whose time is the simulator's and whose
 * runs must stay the same (there the work runs whole, as it is decided).
 */
export function slicePauseFor(clock: Clock): (() => Promise<void>) | undefined {
  if (!(clock instanceof RealClock || clock instanceof MonotonicClock)) return undefined;
  const slice = processEventLoopSlice();
  return () => slice.yieldIfSpent();
}
