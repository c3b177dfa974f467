// A long simulation run's journal: one line per finished seed, appended as it finishes, so that a
// run of 100 000 seeds (hours on two cores) stopped part-way goes on where it was instead of
// starting again. The first line says what the run is (its options and a hash of the code it ran);
// a journal is resumed only by the same run of the same code, so the seeds it holds and the seeds
// run after the resume are one run, as if it had never stopped.
import { createHash } from 'node:crypto';
import { appendFileSync, existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import type { SeedResult } from './parallel-seeds.js';
import type { Violation } from './simulation.js';

/** What a run is: a journal written by one identity is resumed only by the same. */
export interface RunIdentity {
  readonly from: number;
  readonly seeds: number;
  readonly steps: number;
  readonly detector: boolean;
  /** With `detector`: whether the real world's faults ran (`SimulationOptions.worldFaults`). */
  readonly worldFaults?: boolean;
  /** `codeHash` of the sources the run ran. */
  readonly code: string;
}

/** A seed the journal holds: its violations (the history stays in the output of the run that ran it). */
export interface JournalledSeed {
  readonly seed: number;
  readonly violations: readonly Violation[];
}

/** The journal exists but belongs to another run, or is not a journal. */
export class JournalMismatch extends Error {}

const FORMAT = 'shardherd-sim-journal/1';

/**
 * A hash of every file under `dir` (paths and contents, in path order): the simulator, the cluster
 * it simulates and everything they import live under one source directory, so any change to what
 * a seed runs changes this hash.
 */
export function codeHash(dir: string): string {
  const hash = createHash('sha256');
  const walk = (d: string): string[] => readdirSync(d, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? walk(join(d, e.name)) : [join(d, e.name)]));
  for (const file of walk(dir).sort()) {
    hash.update(relative(dir, file)).update('\0').update(readFileSync(file)).update('\0');
  }
  return hash.digest('hex').slice(0, 16);
}

export class RunJournal {
  private constructor(
    private readonly path: string,
    /** Seeds finished before this process opened the journal. */
    readonly earlier: ReadonlyMap<number, JournalledSeed>,
  ) {}

  /**
   * Opens the journal at `path` for the run `identity`: a new one when there is no file, else the
   * seeds it holds, if it was written by the same run. A last line cut short (the process was killed
   * while writing it) is dropped: that seed runs again.
   */
  static open(path: string, identity: RunIdentity): RunJournal {
    if (!existsSync(path)) {
      writeFileSync(path, `${JSON.stringify({ format: FORMAT, ...identity })}\n`);
      return new RunJournal(path, new Map());
    }
    const lines = readFileSync(path, 'utf8').split('\n');
    const header = parseLine(lines[0] ?? '');
    if (header?.format !== FORMAT) throw new JournalMismatch(`${path} is not a simulation journal (its first line is not a ${FORMAT} header)`);
    for (const key of Object.keys(identity) as (keyof RunIdentity)[]) {
      if (header[key] !== identity[key]) {
        const what = key === 'code' ? 'code (the sources changed since it was written)' : `--${key}`;
        throw new JournalMismatch(
          `${path} was written by another run: its ${what} was ${JSON.stringify(header[key])}, this run's is ${JSON.stringify(identity[key])}; resume it with the same options and code, or name a new journal`,
        );
      }
    }
    const earlier = new Map<number, JournalledSeed>();
    let complete = lines.slice(1);
    if (complete.at(-1) !== '') complete = complete.slice(0, -1); // cut short: its seed runs again
    for (const [i, line] of complete.entries()) {
      if (line === '') continue;
      const entry = parseLine(line);
      if (typeof entry?.seed !== 'number' || !Array.isArray(entry.violations)) throw new JournalMismatch(`${path}: line ${i + 2} is not a seed's result`);
      earlier.set(entry.seed, { seed: entry.seed, violations: entry.violations as Violation[] });
    }
    // The file ends with a newline again, so the next seed starts a line of its own.
    if (lines.at(-1) !== '') writeFileSync(path, `${[lines[0], ...complete.filter((l) => l !== '')].join('\n')}\n`);
    return new RunJournal(path, earlier);
  }

  /** Appends a finished seed (synchronously: a run killed after this loses nothing of it). */
  record(r: SeedResult): void {
    appendFileSync(this.path, `${JSON.stringify({ seed: r.seed, violations: r.violations })}\n`);
  }
}

function parseLine(line: string): Record<string, unknown> | undefined {
  try {
    const v: unknown = JSON.parse(line);
    return typeof v === 'object' && v !== null ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}
