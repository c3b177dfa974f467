// A deterministic whole-cluster simulation: the real nodes, actors and core over in-memory adapters,
// a simulated clock, a seeded random fault schedule (crashes, restarts, singleton crashes, also in
// the middle of a reassignment or a handoff, pauses, lost/duplicated/delayed bus records, MetaStore
// write failures, poison records, subscribers that come and go, drains, undrains, replacements, and
// drained nodes that stop), nodes in racks, a replicated `balanced` dataset beside FiloDB's, and
// docs/ARCHITECTURE.md §9's invariants I1–I9 checked after every step. With `detector`, the cluster
// runs the failure detector (§11) on a network that loses, delays and cuts (one direction at a time)
// its messages, on drifting clocks, with I10–I12 (`detector-world.ts`); and, chosen per seed, the
// faults real processes meet (`real-world.ts`: sink failures and hangs, refusals and resets from
// live processes, stalled event loops, slow joins), with every sink call recorded and I15 checked
// on them (`sink-calls.ts`). A violation names the seed and the step, so
// `npm run sim -- --seed N [--detector]` replays it.
import { FaultSchedule } from './faults.js';
import { InvariantChecker } from './invariants.js';
import { MapWatch } from './map-watch.js';
import type { SimulationOptions, SimulationReport } from './report.js';
import { newCounters, statsOf } from './statistics.js';
import { SimulationStuck } from './driver.js';
import { SimWorld } from './world.js';

export type { Invariant, SimulationOptions, SimulationReport, Violation } from './report.js';

/** At most this many quiet steps more while the cluster still recovers (a few cooldowns, or a takeover, worth). */
const MAX_EXTRA_QUIET_STEPS = 20;

/**
 * Runs one seed: builds the world (`world.ts`), then a step at a time injects the faults
 * (`faults.ts`), lets simulated time pass and checks the invariants (`invariants.ts`); reports the
 * history, the violations and the statistics (`statistics.ts`).
 */
export async function runSimulation(options: SimulationOptions): Promise<SimulationReport> {
  const faultsOn = options.faults ?? true;
  const steps = options.steps ?? 25;
  const quietSteps = options.quietSteps ?? 8;
  const stepMs = options.stepMs ?? 1_000;
  const w = new SimWorld(options);
  const { cluster, clock, metaStore, driver, record, detector: world } = w;
  const counters = newCounters();
  const maps = new MapWatch(w);
  maps.install();
  const checker = new InvariantChecker(w, maps, counters);
  const faults = new FaultSchedule(w, counters);
  let quietSince = 0;
  let lastMembers = '';
  /** The lease's epoch at the last step's end (a takeover since is not quiet). */
  let epochAtLastStep = 0;

  await w.start();
  checker.noteMembers();
  try {
    // A shard that failed again on its retry waits out one more cooldown each time, and a singleton
    // that gave way at the end of the faults (its lease, a backoff, a recovery: 10 s or more) leaves
    // every lease lapsed until its successor acts: the quiet steps go on (a bounded number more)
    // until the cluster is at rest and no shard waits, so I5 judges a lost record, not a retry due
    // or a takeover under way.
    let lastStep = steps + quietSteps;
    for (record.step = 1; record.step <= lastStep; record.step++) {
      const step = record.step;
      const faultStep = faultsOn && step <= steps;
      if (step === steps + 1) w.setLossy(false);
      if (world && step === steps + 1) await faults.restartTheCrashed(world);
      const noted = record.history.length;
      const preCrash = faultStep ? await faults.injectFault() : undefined;
      if (faultStep && world && w.real.any) await faults.worldFaults(world);
      if (record.history.length > noted) quietSince = step;
      await driver.advance(stepMs);
      // A member coming or going is not quiet either (a fenced node rejoining long after its fault).
      const membersNow = cluster.membership
        .view()
        .members.map((m) => `${m.node}@${m.incarnation}`)
        .join(' ');
      if (membersNow !== lastMembers) quietSince = step;
      lastMembers = membersNow;
      if (world) {
        // Nor is a singleton's takeover: with the detector a dead singleton's successor waits out its
        // lease (5 s when its process did not refuse a probe), and then recovers.
        const epochNow = (await metaStore.readLease())?.epoch ?? 0;
        // Nor a singleton that stopped by its own clock (its lease ran out during a stall) and whose
        // successor has not taken over yet: nobody places anything meanwhile.
        if (epochNow !== epochAtLastStep || (await cluster.singletonNode())?.actingSingletonEpoch !== epochNow) quietSince = step;
        epochAtLastStep = epochNow;
      }
      await checker.noteStepEnd();
      record.log?.info({ step, at: clock.now() }, 'sim: checks');
      await checker.checkEveryStep(preCrash);
      // With the detector's 6 s session, the group may still list a dead node (or an evicted
      // incarnation) steps after it is gone for the singleton: not at rest until it no longer does.
      const settled =
        !world ||
        cluster.membership.view().members.every((m) => {
          const n = cluster.node(m.node);
          return n.state === 'running' && n.incarnation === m.incarnation && !world.wasRemoved(`${m.node}@${m.incarnation}`);
        });
      const quiet = step - quietSince >= 3 && w.paused().length === 0 && settled;
      if (quiet) await checker.checkAtRest();
      const recovering = !quiet || (await checker.shardsWaitingForCooldown());
      if (step === lastStep && lastStep < steps + quietSteps + MAX_EXTRA_QUIET_STEPS && recovering) lastStep++;
    }
    await checker.checkAtEnd();
  } catch (error) {
    // I14: a livelock stops the seed where it is, reported like any broken invariant (the checks
    // after it would judge a cluster stopped mid-step).
    if (!(error instanceof SimulationStuck)) throw error;
    record.violate('I14', error.message);
  }
  checker.checkOneWriter();
  const finalEpoch = (await metaStore.readLease())?.epoch ?? 0;
  await cluster.stop();
  return {
    seed: w.seed,
    steps: record.step - 1,
    simulatedMs: clock.now(),
    history: record.history,
    violations: record.violations,
    ...(options.keepSinkCalls ? { sinkCalls: w.sinkCalls.calls } : {}),
    stats: statsOf(counters, w, finalEpoch),
  };
}
