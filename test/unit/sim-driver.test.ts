// The simulator's driver stops a seed whose simulated time no longer moves (a livelock: work re-armed
// for the instant it is at, for ever) with SimulationStuck, which the simulation reports as I14,
// instead of running it for ever; work that keeps time moving, however busy, is not stuck.
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { SimulatedClock } from '../../src/cluster/clock.js';
import { EmbeddedCluster } from '../../src/embedded/embedded-cluster.js';
import { SimDriver, SimulationStuck } from '../../src/sim/driver.js';

let cluster: EmbeddedCluster | undefined;
afterEach(async () => {
  await cluster?.stop();
  cluster = undefined;
});

function driverOnIdleCluster(): { driver: SimDriver; clock: SimulatedClock } {
  const clock = new SimulatedClock(0);
  cluster = new EmbeddedCluster({ name: 'driver-test', clock, metrics: false, nodes: ['n1'], log: pino({ level: 'silent' }) });
  return { driver: new SimDriver(cluster), clock };
}

/** A timer that re-arms itself `delayMs` later each time it fires, until `stop()`. */
function rearming(clock: SimulatedClock, delayMs: number): { fired: () => number; stop: () => void } {
  let fired = 0;
  let stopped = false;
  const arm = () =>
    clock.schedule(delayMs, () => {
      fired += 1;
      if (!stopped) setImmediate(arm); // re-armed a turn later, as an actor's message would
    });
  arm();
  return { fired: () => fired, stop: () => (stopped = true) };
}

describe('SimDriver', () => {
  it('reports a timer re-armed for the same instant for ever as stuck, naming the instant', async () => {
    const { driver, clock } = driverOnIdleCluster();
    await driver.advance(250);
    const loop = rearming(clock, 0);
    const error = await driver.advance(1_000).catch((e: unknown) => e);
    loop.stop();
    expect(error).toBeInstanceOf(SimulationStuck);
    expect((error as Error).message).toContain('stuck at 250 ms');
    expect(clock.now()).toBe(250);
  });

  it('lets a timer that re-arms a millisecond later run its thousand firings in one advance', async () => {
    const { driver, clock } = driverOnIdleCluster();
    const loop = rearming(clock, 1);
    await driver.advance(1_000);
    loop.stop();
    expect(loop.fired()).toBe(1_000);
    expect(clock.now()).toBe(1_000);
  });
});
