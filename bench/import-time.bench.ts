/**
 * Import time of each entry point of the built package (`npm run build` first): fresh `node`
 * processes that import one entry and exit, against the same processes importing nothing
 * (`node -e ''`). Entries are run round-robin so a noisy spell on the machine hits them all alike.
 * Goal: the root entry (`shardherd`: the embedded mode, maps, routing) under 150 ms per process.
 *
 * Two figures per entry: the process's wall time (spawn to exit, what a CLI or a test pays) and,
 * inside the process, the time from Node's start to the end of the import (`performance.now()`).
 */
import { spawnSync } from 'node:child_process';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { quantile, register, type Table } from './harness.js';

const REPO = resolve(import.meta.dirname, '..');
const PROCESSES = 15;

/** Each entry point of `package.json`'s exports, and the file it maps to. */
const ENTRIES: readonly { readonly name: string; readonly file: string | undefined }[] = [
  { name: "baseline (node -e '')", file: undefined },
  { name: 'shardherd', file: 'dist/index.js' },
  { name: 'shardherd/core', file: 'dist/entries/core.js' },
  { name: 'shardherd/sim', file: 'dist/entries/sim.js' },
  { name: 'shardherd/kafka', file: 'dist/entries/kafka.js' },
  { name: 'shardherd/cassandra', file: 'dist/entries/cassandra.js' },
  { name: 'shardherd/http', file: 'dist/entries/http.js' },
  { name: 'shardherd/node', file: 'dist/entries/node.js' },
];

/** One fresh process: wall time, and Node's own clock at the end of the import. */
function once(file: string | undefined): { wallMs: number; inProcessMs: number } {
  const script =
    file === undefined
      ? 'console.log(performance.now())'
      : `await import(${JSON.stringify(pathToFileURL(resolve(REPO, file)).href)}); console.log(performance.now())`;
  const t0 = performance.now();
  const child = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' });
  const wallMs = performance.now() - t0;
  if (child.status !== 0) throw new Error(`importing ${file ?? 'nothing'} failed: ${child.stderr}`);
  return { wallMs, inProcessMs: Number(child.stdout.trim()) };
}

function run(): Table {
  const build = spawnSync('npm', ['run', 'build', '--silent'], { cwd: REPO, encoding: 'utf8' });
  if (build.status !== 0) throw new Error(`npm run build failed: ${build.stdout}${build.stderr}`);
  const samples = ENTRIES.map(() => ({ wall: [] as number[], inProcess: [] as number[] }));
  for (let i = 0; i < PROCESSES; i++) {
    ENTRIES.forEach((entry, k) => {
      const r = once(entry.file);
      samples[k]!.wall.push(r.wallMs);
      samples[k]!.inProcess.push(r.inProcessMs);
    });
  }
  const median = (xs: readonly number[]) => quantile(xs, 0.5);
  const baseWall = median(samples[0]!.wall);
  const baseIn = median(samples[0]!.inProcess);
  return {
    title: `Import time of each entry point, ${PROCESSES} fresh node processes each (median)`,
    columns: ['entry', 'process wall ms', 'p90 wall ms', 'above baseline ms', 'in-process ms', 'in-process above baseline ms'],
    rows: ENTRIES.map((entry, k) => {
      const s = samples[k]!;
      return [
        entry.name,
        median(s.wall).toFixed(0),
        quantile(s.wall, 0.9).toFixed(0),
        entry.file === undefined ? '-' : (median(s.wall) - baseWall).toFixed(0),
        median(s.inProcess).toFixed(0),
        entry.file === undefined ? '-' : (median(s.inProcess) - baseIn).toFixed(0),
      ];
    }),
    notes: [
      'Goal: `shardherd` (the root) under 150 ms of process wall time.',
      'In-process: `performance.now()` once the import resolved, i.e. since Node started.',
    ],
  };
}

register({ name: 'import-time', run });
