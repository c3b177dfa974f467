// Turns to poll a shard, handed out a bounded number per event-loop turn. A node of tens of
// thousands of copies (or an embedded cluster of several nodes in one process) has as many poll
// timers; left alone, every due poll runs in the same turn of the event loop, and a turn of
// 65 536 polls keeps the process from reading its sockets for seconds: the singleton's answers,
// the membership heartbeats and the HTTP API all wait behind ingestion. Here due polls queue, and
// each turn of the event loop starts at most `perTurn` of them; the rest wait their turn (a copy
// that waits reads a bigger batch when its turn comes, so ingestion keeps up in records while
// the control plane keeps its latency). `perTurn` adapts: halved when a turn of the event loop
// took longer than `targetTurnMs`, raised step by step while turns stay short.
import { MonotonicClock, RealClock, type Cancel, type Clock } from '../cluster/clock.js';
import { nextTurn } from '../cluster/turns.js';

export interface PollTurnsOptions {
  /** A turn of the event loop longer than this halves the polls started per turn. */
  readonly targetTurnMs: number;
  readonly minPerTurn: number;
  readonly maxPerTurn: number;
  /** Runs `fn` on the next turn of the event loop (the counted `nextTurn`; a test may pass its own). */
  readonly nextTurn?: (fn: () => void) => void;
  /** Monotonic milliseconds (`performance.now`; a test may pass its own). */
  readonly now?: () => number;
}

const DEFAULTS: PollTurnsOptions = { targetTurnMs: 8, minPerTurn: 16, maxPerTurn: 1024 };

export class PollTurns {
  /** Waiting polls, oldest first (`head` is the next one; the array is compacted as it drains). */
  private queue: ({ run: (() => void) | undefined } | undefined)[] = [];
  private head = 0;
  private scheduled = false;
  private lastTurnAt: number | undefined;
  private readonly options: Required<PollTurnsOptions>;
  /** Polls started per turn of the event loop now. */
  perTurn: number;

  constructor(options: Partial<PollTurnsOptions> = {}) {
    this.options = {
      ...DEFAULTS,
      nextTurn,
      now: () => performance.now(),
      ...options,
    };
    this.perTurn = this.options.minPerTurn * 4;
  }

  /** Polls waiting for their turn. */
  get waiting(): number {
    return this.queue.length - this.head;
  }

  /** Runs `run` in a coming turn of the event loop, after the polls queued before it. The cancel drops it. */
  enqueue(run: () => void): Cancel {
    const entry: { run: (() => void) | undefined } = { run };
    this.queue.push(entry);
    this.schedule();
    return () => {
      entry.run = undefined;
    };
  }

  /** Resolves in a coming turn of the event loop, after the polls queued before it. */
  next(): Promise<void> {
    return new Promise((resolve) => this.enqueue(resolve));
  }

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    this.options.nextTurn(() => this.turn());
  }

  private turn(): void {
    this.scheduled = false;
    this.adapt();
    let started = 0;
    while (started < this.perTurn && this.head < this.queue.length) {
      const run = this.queue[this.head]?.run;
      this.queue[this.head++] = undefined;
      if (run === undefined) continue; // cancelled
      started++;
      run();
    }
    if (this.head >= this.queue.length) {
      this.queue = [];
      this.head = 0;
      this.lastTurnAt = undefined;
    } else {
      if (this.head > 4096 && this.head * 2 > this.queue.length) {
        this.queue = this.queue.slice(this.head);
        this.head = 0;
      }
      this.schedule();
    }
  }

  /** AIMD on the length of the event loop's last turn (the time since the previous `turn`). */
  private adapt(): void {
    const now = this.options.now();
    if (this.lastTurnAt !== undefined) {
      const { targetTurnMs, minPerTurn, maxPerTurn } = this.options;
      const took = now - this.lastTurnAt;
      this.perTurn = took > targetTurnMs ? Math.max(minPerTurn, Math.floor(this.perTurn / 2)) : Math.min(maxPerTurn, this.perTurn + minPerTurn);
    }
    this.lastTurnAt = now;
  }
}

/**
 * The process's poll turns: one event loop, one queue, whatever number of nodes run in it (an
 * embedded cluster runs several).
 */
export const processPollTurns = new PollTurns();

/**
 * The poll turns of a node on `clock`: the process's on a real clock. On a simulated clock each node
 * has its own, timed by that clock, whose turns take no time: how many polls start per turn then
 * never depends on how fast the machine runs, and a simulated seed replays the same way every time.
 */
export function pollTurnsFor(clock: Clock): PollTurns {
  return clock instanceof RealClock || clock instanceof MonotonicClock ? processPollTurns : new PollTurns({ now: () => clock.now() });
}
