// Drives an embedded cluster on a simulated clock: time moves only when told, and between moves
// the actors run until nothing more happens. Same inputs, same run.
import { SimulatedClock } from '../cluster/clock.js';
import type { EmbeddedCluster } from '../embedded/embedded-cluster.js';

const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

export class SimDriver {
  readonly clock: SimulatedClock;

  constructor(readonly cluster: EmbeddedCluster) {
    if (!(cluster.clock instanceof SimulatedClock)) throw new Error('SimDriver needs a cluster on a SimulatedClock');
    this.clock = cluster.clock;
  }

  /** A measure of progress: messages handled and in flight on running nodes, bus work pending. */
  private activity(): string {
    let handled = 0;
    let inFlight = 0;
    for (const n of this.cluster.nodes) {
      if (!n.actors) continue;
      handled += n.actors.handled;
      if (n.state === 'running') inFlight += n.actors.inFlight;
    }
    return `${handled}/${inFlight}/${this.cluster.bus.pending()}`;
  }

  /**
   * Lets the actors run until nothing changes for a few turns of the event loop (paused and dead
   * nodes may hold work forever; they do not count as activity).
   */
  async settle(maxTurns = 100_000): Promise<void> {
    let last = this.activity();
    let quiet = 0;
    for (let i = 0; i < maxTurns; i++) {
      await nextTurn();
      const now = this.activity();
      if (now === last) {
        if (++quiet >= 3) return;
      } else {
        quiet = 0;
        last = now;
      }
    }
    throw new Error(`the cluster did not settle within ${maxTurns} turns`);
  }

  /** Moves simulated time forward by `ms`, firing timers one instant at a time and settling after each. */
  async advance(ms: number): Promise<void> {
    const target = this.clock.now() + ms;
    await this.settle();
    for (;;) {
      const next = this.clock.nextTimerAt();
      if (next === undefined || next > target) break;
      this.clock.advanceTo(next);
      await this.settle();
    }
    this.clock.advanceTo(target);
    await this.settle();
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
