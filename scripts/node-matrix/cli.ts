// npm run test:nodes: the unit, simulator and real-service smoke projects on each Node of
// ./versions.ts besides the one `npm test` runs on. Each Node is installed once, from the npm
// registry, into the services cache (`<cache>/node-<version>`), then vitest runs on it: its test
// processes, worker threads and the node processes they start all run that Node
// (`process.execPath`), with fewer random simulator seeds than `npm test` (./versions.ts). Exits
// non-zero when a run fails; each run ends with its `N passed, N failed`.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { lastLines, runLogged } from '../services/logged-command.js';
import { cacheRoot } from '../services/config.js';
import { MATRIX_PROJECTS, MATRIX_SIM_SEEDS, OTHER_NODES } from './versions.js';

const REPO = fileURLToPath(new URL('../..', import.meta.url));
const VITEST = join(REPO, 'node_modules', 'vitest', 'vitest.mjs');

function say(line: string): void {
  process.stderr.write(`[nodes] ${line}\n`);
}

/** The `node` binary of `version`, installed from the npm registry when missing. */
async function nodeBinary(version: string): Promise<string> {
  const dir = join(cacheRoot(), `node-${version}`);
  const bin = join(dir, 'node_modules', 'node', 'bin', 'node');
  if (!existsSync(bin)) {
    mkdirSync(dir, { recursive: true });
    say(`installing Node ${version} from the npm registry into ${dir} ...`);
    const log = join(dir, 'install.log');
    // The `node` package's install script fetches the build for this platform (also from the registry).
    const run = await runLogged('npm', ['install', '--prefix', dir, '--no-save', '--no-package-lock', '--no-audit', '--no-fund', `node@${version}`], log);
    if (run.code !== 0 || !existsSync(bin)) throw new Error(`installing Node ${version} failed (see ${log}):\n${await lastLines(log)}`);
  }
  const reported = spawnSync(bin, ['--version'], { encoding: 'utf8' }).stdout.trim();
  if (reported !== `v${version}`) throw new Error(`${bin} says it is ${reported}, not v${version}: remove ${dir} and run again`);
  return bin;
}

async function main(): Promise<number> {
  let failed = 0;
  for (const version of OTHER_NODES) {
    const node = await nodeBinary(version);
    say(`Node ${version}: vitest run ${MATRIX_PROJECTS.map((p) => `--project ${p}`).join(' ')}`);
    const run = spawnSync(node, [VITEST, 'run', ...MATRIX_PROJECTS.flatMap((p) => ['--project', p])], {
      cwd: REPO,
      stdio: 'inherit',
      env: { ...process.env, SHARDHERD_SMOKE: '1', ...MATRIX_SIM_SEEDS },
    });
    if (run.status !== 0) {
      say(`Node ${version}: failed (exit ${String(run.status ?? run.signal)})`);
      failed += 1;
    }
  }
  return failed === 0 ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (e: unknown) => {
    say(e instanceof Error ? e.message : String(e));
    process.exit(1);
  },
);
