#!/usr/bin/env node
// `npm run sim -- [--from 1] [--seeds 100] [--seed N] [--verbose]`: runs the whole-cluster simulation
// for any number of seeds; prints each violation with its seed and step, and the history of a seed.
import { Command, InvalidArgumentError } from 'commander';
import { pino } from 'pino';
import { runSimulation } from '../sim/simulation.js';

const int = (name: string) => (v: string) => {
  const n = Number(v);
  if (!Number.isSafeInteger(n) || n < 0) throw new InvalidArgumentError(`${name} must be a non-negative integer`);
  return n;
};

const program = new Command('shardherd-sim')
  .description('deterministic whole-cluster simulation with fault injection and invariant checks')
  .option('--from <seed>', 'first seed', int('--from'), 1)
  .option('--seeds <count>', 'how many seeds', int('--seeds'), 100)
  .option('--seed <seed>', 'run this one seed (and print its history)', int('--seed'))
  .option('--steps <count>', 'fault steps per seed', int('--steps'), 25)
  .option('--verbose', 'print every seed’s history and the cluster logs of a single seed', false)
  .showHelpAfterError();

const o = program.parse().opts<{ from: number; seeds: number; seed?: number; steps: number; verbose: boolean }>();
const seeds = o.seed !== undefined ? [o.seed] : Array.from({ length: o.seeds }, (_, i) => o.from + i);
const log = o.seed !== undefined && o.verbose ? pino({ level: 'info' }, pino.destination(2)) : undefined;
const started = performance.now();
let failed = 0;
for (const seed of seeds) {
  const r = await runSimulation({ seed, steps: o.steps, ...(log ? { log } : {}) });
  if (r.violations.length > 0 || o.verbose || o.seed !== undefined) {
    process.stdout.write(`\nseed ${seed}: ${r.violations.length} violations; ${JSON.stringify(r.stats)}\n`);
    for (const v of r.violations) process.stdout.write(`  ${v.invariant} at step ${v.step} (${v.time} ms): ${v.message}\n`);
    for (const h of r.history) process.stdout.write(`    ${h}\n`);
  }
  if (r.violations.length > 0) failed += 1;
}
const secs = ((performance.now() - started) / 1000).toFixed(1);
process.stdout.write(`\n${seeds.length - failed} of ${seeds.length} seeds kept every invariant (${secs} s)\n`);
process.exitCode = failed > 0 ? 1 : 0;
