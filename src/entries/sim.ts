/**
 * `shardherd/sim`: the whole-cluster simulator (real nodes over the in-memory adapters on a
 * simulated clock, with a seeded fault schedule and invariants) and the driver that moves its clock.
 */
export type { Invariant, SimulationOptions, SimulationReport, Violation } from '../sim/simulation.js';
export { runSimulation } from '../sim/simulation.js';
export { SimDriver } from '../sim/driver.js';
