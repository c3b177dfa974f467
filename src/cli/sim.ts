#!/usr/bin/env node
// `npm run sim -- [--from 1] [--seeds 100] [--workers N] [--seed N] [--verbose] [--fingerprint]`:
// runs the whole-cluster simulation for any range of seeds on worker threads; prints each violation
// with its seed and step and the history of that seed, and the seeds per second. `--fingerprint`
// prints a hash of each seed's whole report, to show that a change to the simulator left every
// seed's run as it was (diff the output of the two versions).
import { Command, InvalidArgumentError } from 'commander';
import { availableParallelism } from 'node:os';
import { pino } from 'pino';
import { runSeedsInParallel, type SeedResult } from '../sim/parallel-seeds.js';
import { fingerprintOf } from '../sim/fingerprint.js';
import { runSimulation } from '../sim/simulation.js';
import { timestampWithIso } from './log-timestamp.js';

const int = (name: string, min = 0) => (v: string) => {
  const n = Number(v);
  if (!Number.isSafeInteger(n) || n < min) throw new InvalidArgumentError(`${name} must be an integer of at least ${min}`);
  return n;
};

const program = new Command('shardherd-sim')
  .description('deterministic whole-cluster simulation with fault injection and invariant checks')
  .option('--from <seed>', 'first seed', int('--from'), 1)
  .option('--seeds <count>', 'how many seeds', int('--seeds', 1), 100)
  .option('--workers <count>', 'worker threads (default: the available cores)', int('--workers', 1), availableParallelism())
  .option('--seed <seed>', 'run this one seed (and print its history)', int('--seed'))
  .option('--steps <count>', 'fault steps per seed', int('--steps'), 25)
  .option('--detector', 'run the failure detector (heartbeat mode) with its faults and invariants I10–I12', false)
  .option('--verbose', 'print every seed’s history, and the cluster logs of a single seed', false)
  .option('--fingerprint', 'print a hash of each seed’s history, violations and stats (`seed N: hash`), in seed order', false)
  .showHelpAfterError();

const o = program.parse().opts<{ from: number; seeds: number; workers: number; seed?: number; steps: number; detector: boolean; verbose: boolean; fingerprint: boolean }>();

function print(r: SeedResult): void {
  process.stdout.write(`\nseed ${r.seed}: ${r.violations.length} violations; ${JSON.stringify(r.stats)}\n`);
  for (const v of r.violations) process.stdout.write(`  ${v.invariant} at step ${v.step} (${v.time} ms): ${v.message}\n`);
  for (const h of r.history) process.stdout.write(`    ${h}\n`);
}

const started = performance.now();
let results: SeedResult[];
if (o.seed !== undefined) {
  const log = o.verbose ? pino({ level: 'info', timestamp: timestampWithIso }, pino.destination(2)) : undefined;
  const r = await runSimulation({ seed: o.seed, steps: o.steps, detector: o.detector, ...(log ? { log } : {}) });
  results = [{ ...r, ...(o.fingerprint ? { fingerprint: fingerprintOf(r) } : {}) }];
  print(r);
} else {
  let done = 0;
  let lastReport = started;
  results = await runSeedsInParallel({
    from: o.from,
    count: o.seeds,
    steps: o.steps,
    detector: o.detector,
    workers: o.workers,
    fingerprint: o.fingerprint,
    onResult: (r) => {
      done += 1;
      if (r.violations.length > 0 || o.verbose) print(r);
      const now = performance.now();
      if (process.stderr.isTTY && now - lastReport > 1_000) {
        lastReport = now;
        process.stderr.write(`\r${done} of ${o.seeds} seeds, ${((done * 1000) / (now - started)).toFixed(1)} seeds/s   `);
      }
    },
  });
  if (process.stderr.isTTY) process.stderr.write('\n');
}
if (o.fingerprint) for (const r of results) process.stdout.write(`fingerprint seed ${r.seed}: ${r.fingerprint}\n`);
const failed = results.filter((r) => r.violations.length > 0).length;
const secs = (performance.now() - started) / 1000;
const range = o.seed !== undefined ? `seed ${o.seed}` : `seeds ${o.from}..${o.from + o.seeds - 1} on ${Math.min(o.workers, o.seeds)} workers`;
process.stdout.write(`\n${results.length - failed} of ${results.length} seeds kept every invariant (${range}; ${secs.toFixed(1)} s, ${(results.length / secs).toFixed(1)} seeds/s)\n`);
process.exitCode = failed > 0 ? 1 : 0;
