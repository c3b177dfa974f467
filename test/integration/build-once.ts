// Builds `dist/` once before the integration tests, when the sources changed since the last build
// (scripts/build-if-changed.mjs): the node processes and the admin CLI they start run the built
// package, and `npm pack` (whose `prepack` builds the same way) then packs it without building
// again, so no file's pack removes `dist/` under another file's running processes.
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const REPO = fileURLToPath(new URL('../..', import.meta.url));

export default function setup(): void {
  const build = spawnSync(process.execPath, ['scripts/build-if-changed.mjs'], { cwd: REPO, stdio: 'inherit' });
  if (build.status !== 0) throw new Error(`building dist/ failed (exit ${String(build.status ?? build.signal)}): the integration tests run the built package`);
}
