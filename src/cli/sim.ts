#!/usr/bin/env node
// `npm run sim -- [--from 1] [--seeds 100] [--workers N] [--seed N] [--verbose] [--fingerprint] [--journal F]`:
// runs the whole-cluster simulation for any range of seeds on worker threads; prints each violation
// with its seed and step and the history of that seed, and the seeds per second. `--fingerprint`
// prints a hash of each seed's whole report, to show that a change to the simulator left every
// seed's run as it was (diff the output of the two versions). A long run shows its progress on
// stderr (seeds done, seeds/s, violations so far, time left): a line rewritten each second on a
// terminal, else a line every `--progress` seconds. `--journal` records each finished seed in a file,
// and the same command run again goes on from there (a run of hours survives being stopped).
import { Command, InvalidArgumentError, Option } from 'commander';
import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';
import { pino } from 'pino';
import { runSeedsInParallel, type SeedResult } from '../sim/parallel-seeds.js';
import { fingerprintOf } from '../sim/fingerprint.js';
import { codeHash, JournalMismatch, RunJournal } from '../sim/run-journal.js';
import { RunProgress } from '../sim/run-progress.js';
import { runSimulation } from '../sim/simulation.js';
import { timestampWithIso } from './log-timestamp.js';

const int =
  (name: string, min = 0) =>
  (v: string) => {
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
  .option(
    '--no-world-faults',
    'with --detector: without the real world’s faults (sink failures and hangs, refusals and resets from live processes, stalls, slow joins), as seeds ran before them',
  )
  .option('--verbose', 'print every seed’s history, and the cluster logs of a single seed', false)
  .option('--progress <seconds>', 'when stderr is not a terminal: a progress line this often', int('--progress', 1), 30)
  .option('--fingerprint', 'print a hash of each seed’s history, violations and stats (`seed N: hash`), in seed order', false)
  .addOption(
    new Option('--journal <file>', 'record each finished seed in this file; run the same command again to go on where it stopped').conflicts([
      'seed',
      'fingerprint',
    ]),
  )
  .showHelpAfterError();

const o = program.parse().opts<{
  from: number;
  seeds: number;
  workers: number;
  seed?: number;
  steps: number;
  detector: boolean;
  worldFaults: boolean;
  verbose: boolean;
  progress: number;
  fingerprint: boolean;
  journal?: string;
}>();

function printViolations(violations: SeedResult['violations']): void {
  for (const v of violations) process.stdout.write(`  ${v.invariant} at step ${v.step} (${v.time} ms): ${v.message}\n`);
}

function print(r: SeedResult): void {
  process.stdout.write(`\nseed ${r.seed}: ${r.violations.length} violations; ${JSON.stringify(r.stats)}\n`);
  printViolations(r.violations);
  for (const h of r.history) process.stdout.write(`    ${h}\n`);
}

/** The journal named by `--journal`; a journal of another run is refused (exit 2) before any seed runs. */
function openJournal(path: string): RunJournal {
  const sources = fileURLToPath(new URL('..', import.meta.url));
  try {
    return RunJournal.open(path, {
      from: o.from,
      seeds: o.seeds,
      steps: o.steps,
      detector: o.detector,
      ...(o.detector ? { worldFaults: o.worldFaults } : {}),
      code: codeHash(sources),
    });
  } catch (error) {
    if (!(error instanceof JournalMismatch)) throw error;
    process.stderr.write(`shardherd-sim: ${error.message}\n`);
    process.exit(2);
  }
}

const started = performance.now();
/** Seeds run (here or, with a journal, before), and those that broke an invariant (a long run keeps no other result). */
let ran = 0;
let failed = 0;
/** Of `ran`, the seeds a resumed run read from its journal. */
let fromJournal = 0;
/** seed → fingerprint, with `--fingerprint`: printed in seed order at the end. */
const fingerprints = new Map<number, string>();
const count = (r: Pick<SeedResult, 'violations' | 'seed' | 'fingerprint'>) => {
  ran += 1;
  if (r.violations.length > 0) failed += 1;
  if (r.fingerprint !== undefined) fingerprints.set(r.seed, r.fingerprint);
};
if (o.seed !== undefined) {
  const log = o.verbose ? pino({ level: 'info', timestamp: timestampWithIso }, pino.destination(2)) : undefined;
  const r = await runSimulation({ seed: o.seed, steps: o.steps, detector: o.detector, worldFaults: o.worldFaults, ...(log ? { log } : {}) });
  count({ ...r, ...(o.fingerprint ? { fingerprint: fingerprintOf(r) } : {}) });
  print(r);
} else {
  const journal = o.journal === undefined ? undefined : openJournal(o.journal);
  for (const r of [...(journal?.earlier.values() ?? [])].sort((a, b) => a.seed - b.seed)) {
    count(r);
    fromJournal += 1;
    if (r.violations.length > 0) {
      process.stdout.write(`\nseed ${r.seed} (run before, from the journal): ${r.violations.length} violations\n`);
      printViolations(r.violations);
    }
  }
  if (journal) process.stderr.write(`${o.journal}: ${fromJournal} seeds run before, ${failed} with violations; running the other ${o.seeds - fromJournal}\n`);
  const progress = new RunProgress({
    total: o.seeds - fromJournal,
    write: (t) => process.stderr.write(t),
    inPlace: process.stderr.isTTY,
    everyMs: o.progress * 1000,
  });
  await runSeedsInParallel({
    from: o.from,
    count: o.seeds,
    steps: o.steps,
    detector: o.detector,
    worldFaults: o.worldFaults,
    workers: o.workers,
    fingerprint: o.fingerprint,
    keep: 'violations',
    ...(journal ? { skip: (seed: number) => journal.earlier.has(seed) } : {}),
    onResult: (r) => {
      journal?.record(r);
      count(r);
      if (r.violations.length > 0 || o.verbose) print(r);
      progress.seedDone(r.violations.length);
    },
  });
  progress.finish();
}
for (const [seed, fp] of [...fingerprints].sort(([a], [b]) => a - b)) process.stdout.write(`fingerprint seed ${seed}: ${fp}\n`);
const secs = (performance.now() - started) / 1000;
const ranHere = ran - fromJournal;
const range = o.seed !== undefined ? `seed ${o.seed}` : `seeds ${o.from}..${o.from + o.seeds - 1} on ${Math.min(o.workers, o.seeds)} workers`;
const before = fromJournal > 0 ? `, ${fromJournal} of them run before (the journal)` : '';
process.stdout.write(
  `\n${ran - failed} of ${ran} seeds kept every invariant (${range}${before}; ${ranHere} here in ${secs.toFixed(1)} s, ${(ranHere / secs).toFixed(1)} seeds/s)\n`,
);
process.exitCode = failed > 0 ? 1 : 0;
