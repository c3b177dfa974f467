// `npm start` and `npm run example` build first, but only when something the build reads changed:
// a full build takes a minute on a busy 2-core machine, and most runs follow no change at all.
// The stamp is dist/.build-stamp, whose modification time is when its build began; a build runs
// when the stamp is missing (a fresh clone, a deleted dist/, or a dist/ that `npm run build` made
// without it) or when anything under src/ (status-page.html included: the build copies it), a
// tsconfig, package.json or the lockfile was modified after that. A directory's own time counts
// too, so a deleted or renamed source file rebuilds. The build itself is `npm run build`: dist/ is
// removed first, so no output of a deleted source survives.
// Plain JavaScript with explicit imports, so it runs before anything is compiled.
import { spawnSync } from 'node:child_process';
import { closeSync, existsSync, openSync, readdirSync, statSync, utimesSync } from 'node:fs';
import { join } from 'node:path';
import process from 'node:process';

const STAMP = join('dist', '.build-stamp');
const INPUTS = ['src', 'tsconfig.json', 'tsconfig.build.json', 'package.json', 'package-lock.json'];

/** The newest modification time (ms) of a file, or of a directory and everything in it. */
function newest(path) {
  if (!existsSync(path)) return 0;
  const stat = statSync(path);
  if (!stat.isDirectory()) return stat.mtimeMs;
  let latest = stat.mtimeMs;
  for (const entry of readdirSync(path)) latest = Math.max(latest, newest(join(path, entry)));
  return latest;
}

const stamp = existsSync(STAMP) ? statSync(STAMP).mtimeMs : undefined;
const changed = INPUTS.reduce((latest, p) => Math.max(latest, newest(p)), 0);
if (stamp !== undefined && changed <= stamp) process.exit(0);

// Taken before the build, so a source saved while it runs is newer than the stamp: the next run builds again.
const began = new Date();
process.stderr.write(stamp === undefined ? 'building dist/ (no build stamp yet)\n' : 'building dist/ (sources changed since the last build)\n');
const build = spawnSync('npm', ['run', 'build', '--silent'], { stdio: 'inherit', shell: process.platform === 'win32' });
if (build.status !== 0) process.exit(build.status ?? 1);
closeSync(openSync(STAMP, 'w'));
utimesSync(STAMP, began, began);
