// A long simulation run's journal (src/sim/run-journal.ts) and `npm run sim -- --journal`: a run
// stopped part-way goes on where it was, running only the seeds the journal lacks; a journal of
// another run (other options or other code) is refused; a line cut short by a kill runs again.
import { spawnSync } from 'node:child_process';
import { appendFileSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { JournalMismatch, RunJournal, codeHash, type RunIdentity } from '../../src/sim/run-journal.js';
import type { SeedResult } from '../../src/sim/parallel-seeds.js';
import { tempDir } from '../support/temp-dir.js';

const SIM = resolve(import.meta.dirname, '../../src/cli/sim.ts');
const IDENTITY: RunIdentity = { from: 1, seeds: 10, steps: 25, detector: true, code: 'abc' };
const tempPath = () => join(tempDir('shardherd-journal-'), 'run.jsonl');

function result(seed: number, violations = 0): SeedResult {
  const v = Array.from({ length: violations }, () => ({ seed, step: 3, time: 3_000, invariant: 'I5' as const, message: 'lost' }));
  return { seed, violations: v, stats: {} as SeedResult['stats'], history: [] };
}

describe('RunJournal', () => {
  it('holds the seeds recorded before it was opened again, with their violations', () => {
    const path = tempPath();
    const first = RunJournal.open(path, IDENTITY);
    expect(first.earlier.size).toBe(0);
    first.record(result(1));
    first.record(result(3, 2));
    const again = RunJournal.open(path, IDENTITY);
    expect([...again.earlier.keys()]).toEqual([1, 3]);
    expect(again.earlier.get(3)!.violations.map((v) => v.invariant)).toEqual(['I5', 'I5']);
  });

  it('refuses a journal written by other options or other code, naming what differs', () => {
    const path = tempPath();
    RunJournal.open(path, IDENTITY).record(result(1));
    expect(() => RunJournal.open(path, { ...IDENTITY, steps: 30 })).toThrow(/its --steps was 25, this run's is 30/);
    expect(() => RunJournal.open(path, { ...IDENTITY, code: 'def' })).toThrow(/its code \(the sources changed since it was written\)/);
    const other = tempPath();
    writeFileSync(other, 'seed,violations\n');
    expect(() => RunJournal.open(other, IDENTITY)).toThrow(JournalMismatch);
  });

  it('drops a last line cut short by a kill (that seed runs again) and appends after it cleanly', () => {
    const path = tempPath();
    const j = RunJournal.open(path, IDENTITY);
    j.record(result(1));
    appendFileSync(path, '{"seed":2,"viol');
    const again = RunJournal.open(path, IDENTITY);
    expect([...again.earlier.keys()]).toEqual([1]);
    again.record(result(2));
    expect([...RunJournal.open(path, IDENTITY).earlier.keys()]).toEqual([1, 2]);
  });

  it('refuses a journal with a broken line before its end rather than guess', () => {
    const path = tempPath();
    RunJournal.open(path, IDENTITY).record(result(1));
    appendFileSync(path, 'garbage\n{"seed":2,"violations":[]}\n');
    expect(() => RunJournal.open(path, IDENTITY)).toThrow(/line 3 is not a seed's result/);
  });

  it('hashes the sources so that any change to a file changes it', () => {
    const dir = tempDir('shardherd-code-');
    writeFileSync(join(dir, 'a.ts'), 'export const a = 1;\n');
    const before = codeHash(dir);
    expect(codeHash(dir)).toBe(before);
    writeFileSync(join(dir, 'a.ts'), 'export const a = 2;\n');
    expect(codeHash(dir)).not.toBe(before);
  });
});

describe('npm run sim -- --journal', () => {
  const sim = (...args: string[]) =>
    spawnSync(process.execPath, ['--import', 'tsx', SIM, '--steps', '1', '--workers', '1', ...args], { encoding: 'utf8', timeout: 120_000 });

  it('runs only the seeds its journal lacks when run again, and counts all of them', () => {
    const path = tempPath();
    const first = sim('--from', '1', '--seeds', '2', '--journal', path);
    expect(first.status, first.stderr).toBe(0);
    // As if the run had been stopped after seed 1: seed 2's line is gone.
    const [header, seed1] = readFileSync(path, 'utf8')
      .split('\n')
      .filter((l) => l.includes('"seed":1,') || l.includes('format'));
    writeFileSync(path, `${header}\n${seed1}\n`);
    const resumed = sim('--from', '1', '--seeds', '2', '--journal', path);
    expect(resumed.status, resumed.stderr).toBe(0);
    expect(resumed.stderr).toContain('1 seeds run before, 0 with violations; running the other 1');
    expect(resumed.stdout).toMatch(/2 of 2 seeds kept every invariant \(seeds 1\.\.2 on 1 workers, 1 of them run before \(the journal\); 1 here in/);
    expect(
      readFileSync(path, 'utf8')
        .split('\n')
        .filter((l) => l.startsWith('{"seed"')),
    ).toHaveLength(2);
  }, 120_000);

  it('exits 2 on a journal of other options before running any seed', () => {
    const path = tempPath();
    expect(sim('--from', '1', '--seeds', '1', '--journal', path).status).toBe(0);
    const other = sim('--from', '2', '--seeds', '1', '--journal', path);
    expect(other.status).toBe(2);
    expect(other.stderr).toMatch(/was written by another run: its --from was 1, this run's is 2/);
    expect(other.stdout).toBe('');
  }, 120_000);
});
