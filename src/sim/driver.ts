// Drives an embedded cluster on a simulated clock: time moves only when told, and between moves
// the actors run until nothing more happens. Same inputs, same run.
import { SimulatedClock } from '../cluster/clock.js';
import { turnsScheduled } from '../cluster/turns.js';
import type { EmbeddedCluster } from '../embedded/embedded-cluster.js';

/** A turn of the event loop for the driver itself: not counted among the cluster's own turns. */
const loopTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

/**
 * Simulated time stopped moving: the cluster kept working without ever waiting on the clock (turns
 * without end) or kept arming timers for the instant it was at. Either is a livelock; the simulator
 * reports it as a broken invariant of its seed rather than running that seed for ever.
 */
export class SimulationStuck extends Error {}

/**
 * Rounds of timers at one simulated instant before the driver calls it a livelock. A round after
 * the first exists only when work done at that instant armed a timer for that same instant (a zero
 * delay) after the cluster settled: a chain of that length is no burst but a loop, and it is reached
 * within seconds.
 */
const MAX_ROUNDS_AT_ONE_INSTANT = 20_000;

export class SimDriver {
  readonly clock: SimulatedClock;

  constructor(readonly cluster: EmbeddedCluster) {
    if (!(cluster.clock instanceof SimulatedClock)) throw new Error('SimDriver needs a cluster on a SimulatedClock');
    this.clock = cluster.clock;
  }

  /**
   * What the cluster will do in a coming turn of the event loop without the clock moving: actors
   * with a message to start, stopped actors still to be finished, and turns the runtime asked for
   * (polls, batched reads). Microtasks (the bus's deliveries, a port's answers) run before any turn.
   */
  private ready(): number {
    let n = turnsScheduled();
    for (const node of this.cluster.nodes) if (node.actors) n += node.actors.ready;
    return n;
  }

  /**
   * Lets the cluster run until nothing is left that does not wait for the clock: every message in
   * flight waits on a timer, a paused or dead node, or nothing at all. Exact, not a guess at "a few
   * quiet turns": each deferral of work to a coming turn is counted (`ready`).
   */
  async settle(maxTurns = 100_000): Promise<void> {
    for (let i = 0; i < maxTurns; i++) {
      await loopTurn();
      if (this.ready() === 0) return;
    }
    throw new SimulationStuck(`the cluster did not settle within ${maxTurns} turns at ${this.clock.now()} ms`);
  }

  /** Moves simulated time forward by `ms`, firing timers one instant at a time and settling after each. */
  async advance(ms: number): Promise<void> {
    const target = this.clock.now() + ms;
    await this.settle();
    let roundsHere = 0;
    for (;;) {
      const next = this.clock.nextTimerAt();
      if (next === undefined || next > target) break;
      roundsHere = next === this.clock.now() ? roundsHere + 1 : 0;
      if (roundsHere > MAX_ROUNDS_AT_ONE_INSTANT) {
        throw new SimulationStuck(`simulated time stuck at ${next} ms: ${MAX_ROUNDS_AT_ONE_INSTANT} rounds of timers fell due at that instant`);
      }
      this.clock.advanceTo(next);
      await this.settle();
    }
    this.clock.advanceTo(target);
    await this.settle();
  }

  /**
   * Advances in steps of `stepMs` until `p` settles, and gives what it settled with: a request made
   * from outside the cluster (over HTTP, say) is answered as simulated time moves. Fails when `maxMs`
   * of simulated time pass first.
   */
  async whenSettled<T>(p: Promise<T>, maxMs = 60_000, stepMs = 50): Promise<T> {
    let settled = false;
    p.then(
      () => (settled = true),
      () => (settled = true),
    );
    for (let t = 0; !settled; t += stepMs) {
      if (t > maxMs) throw new Error(`not settled within ${maxMs} ms of simulated time (at ${this.clock.now()} ms)`);
      await this.advance(stepMs);
    }
    return p;
  }

  /** Advances in steps of `stepMs` until `done()` holds or `maxMs` passed; returns whether it held. */
  async until(done: () => boolean | Promise<boolean>, maxMs: number, stepMs = 100): Promise<boolean> {
    for (let t = 0; t <= maxMs; t += stepMs) {
      if (await done()) return true;
      await this.advance(stepMs);
    }
    return done();
  }
}
