// The simulator's driver settles a cluster exactly: it waits for every message that can run and
// every turn the runtime deferred work to, however long the chain, and not for work that waits on
// the clock. It stops a seed whose simulated time no longer moves (a livelock: work re-armed for the
// instant it is at, for ever) with SimulationStuck, which the simulation reports as I14, instead of
// running it for ever; work that keeps time moving, however busy, is not stuck.
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { ActorRuntime } from '../../src/actors/runtime.js';
import { SimulatedClock } from '../../src/cluster/clock.js';
import { nextTurn } from '../../src/cluster/turns.js';
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
      if (!stopped) nextTurn(arm); // re-armed a turn later, as a poll would
    });
  arm();
  return { fired: () => fired, stop: () => (stopped = true) };
}

const loopTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

describe('SimDriver', () => {
  it('waits for a chain of work deferred turn after turn to its end, with no message handled in between', async () => {
    const { driver } = driverOnIdleCluster();
    await driver.settle();
    let done = 0;
    const step = () => {
      if (++done < 200) nextTurn(step);
    };
    nextTurn(step);
    await driver.settle();
    expect(done).toBe(200);
  });

  it('does not wait for a message whose handler waits on the clock, and runs the messages behind it once the clock moves', async () => {
    const { driver, clock } = driverOnIdleCluster();
    await cluster!.startNodes();
    await driver.advance(5_000);
    const runtime = cluster!.nodes[0]!.actors!;
    const handled: string[] = [];
    const ref = runtime.spawn(
      runtime.system,
      'sleeper',
      async (_s: null, msg: string) => {
        if (msg === 'sleep') await new Promise<void>((resolve) => clock.schedule(1_000, resolve));
        handled.push(msg);
        return null;
      },
      { initialState: null },
    );
    runtime.send(ref, 'sleep');
    runtime.send(ref, 'after');
    await driver.settle();
    expect(handled).toEqual([]);
    expect(runtime.inFlight).toBe(2);
    await driver.advance(1_000);
    expect(handled).toEqual(['sleep', 'after']);
    expect(runtime.inFlight).toBe(0);
  });

  it('is told by the actor runtime what it will run next: a message to an idle actor, and a stopped actor until its afterStop ran', async () => {
    const runtime = new ActorRuntime('ready-test', pino({ level: 'silent' }));
    let stopped = 0;
    const ref = runtime.spawn(runtime.system, 'idle', (s: null) => s, { initialState: null, afterStop: () => void stopped++ });
    expect(runtime.ready).toBe(0);
    runtime.send(ref, 'a');
    runtime.send(ref, 'b');
    expect(runtime.ready).toBe(1);
    while (runtime.inFlight > 0) await loopTurn();
    expect(runtime.ready).toBe(0);
    runtime.stop(ref);
    expect(runtime.ready).toBe(1);
    while (stopped === 0) await loopTurn();
    expect(runtime.ready).toBe(0);
    runtime.shutdown();
  });

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
