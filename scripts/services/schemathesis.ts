// Installs Schemathesis, the OpenAPI checker of test/integration/schemathesis.test.ts, into a Python
// venv of the cache: `python3 -m venv`, then the venv's pip installs schemathesis-requirements.txt
// (every package pinned by version and hash) with `--require-hashes`. A complete install is reused
// as it is: it is complete when its record (written last) names this version and these requirements.
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { SCHEMATHESIS_MIN_PYTHON, SCHEMATHESIS_VERSION, cacheRoot, schemathesisDir, schemathesisVenv } from './config.js';
import type { Log } from './fetch.js';
import { lastLines, runLogged } from './logged-command.js';

/** The pinned requirements, beside this file. */
export const SCHEMATHESIS_REQUIREMENTS = fileURLToPath(new URL('./schemathesis-requirements.txt', import.meta.url));

const RECORD = 'installed.json';

interface InstallRecord {
  readonly version: string;
  /** sha256 of the requirements file it was installed from. */
  readonly requirements: string;
}

export interface SchemathesisInstall {
  readonly version: string;
  /** The `st` command of the venv. */
  readonly st: string;
  readonly venv: string;
  /** False when the cache already held a complete install. */
  readonly downloaded: boolean;
  readonly ms: number;
}

/** The `st` command of the venv in the cache (which `fetchSchemathesis` installs). */
export function schemathesisCommand(root = cacheRoot()): string {
  return join(schemathesisVenv(root), 'bin', 'st');
}

/** Schemathesis in the cache's venv; installs it when the cache holds no complete install of this version. */
export async function fetchSchemathesis(log: Log = () => {}, root = cacheRoot()): Promise<SchemathesisInstall> {
  const started = Date.now();
  const dir = schemathesisDir(root);
  const venv = schemathesisVenv(root);
  const st = schemathesisCommand(root);
  const requirements = await readRequirements();
  if (await isComplete(dir, st, requirements.sha256)) {
    return { version: SCHEMATHESIS_VERSION, st, venv, downloaded: false, ms: Date.now() - started };
  }
  await mkdir(dir, { recursive: true });
  // The record is removed first and written last: a venv without it is a partial install, made again.
  await rm(join(dir, RECORD), { force: true });
  await rm(venv, { recursive: true, force: true });
  const logFile = join(dir, 'install.log');
  await writeFile(logFile, '');
  log(`schemathesis: installing ${SCHEMATHESIS_VERSION} (pinned by hash in ${SCHEMATHESIS_REQUIREMENTS}) into a venv at ${venv}`);
  await checkPython(logFile);
  await run('python3', ['-m', 'venv', venv], logFile, 'python3 -m venv (on Debian and Ubuntu it needs the python3-venv package)');
  await run(
    join(venv, 'bin', 'python'),
    ['-m', 'pip', 'install', '--require-hashes', '--no-deps', '--no-input', '--disable-pip-version-check', '-r', SCHEMATHESIS_REQUIREMENTS],
    logFile,
    `pip install of schemathesis==${SCHEMATHESIS_VERSION} and its pinned dependencies (from PyPI, or the index pip is configured with)`,
  );
  const printed = await run(st, ['--version'], logFile, `${st} --version`);
  if (!printed.includes(SCHEMATHESIS_VERSION)) {
    throw new Error(`schemathesis: ${st} --version printed ${JSON.stringify(printed.trim())}, not version ${SCHEMATHESIS_VERSION}; see ${logFile}`);
  }
  const record: InstallRecord = { version: SCHEMATHESIS_VERSION, requirements: requirements.sha256 };
  await writeFile(join(dir, RECORD), `${JSON.stringify(record, null, 2)}\n`);
  const ms = Date.now() - started;
  log(`schemathesis: ${SCHEMATHESIS_VERSION} installed in ${(ms / 1000).toFixed(1)} s`);
  return { version: SCHEMATHESIS_VERSION, st, venv, downloaded: true, ms };
}

async function readRequirements(): Promise<{ sha256: string }> {
  const text = await readFile(SCHEMATHESIS_REQUIREMENTS, 'utf8');
  if (!new RegExp(`^schemathesis==${SCHEMATHESIS_VERSION.replaceAll('.', '\\.')} `, 'm').test(text)) {
    throw new Error(
      `${SCHEMATHESIS_REQUIREMENTS} does not pin schemathesis==${SCHEMATHESIS_VERSION} (SCHEMATHESIS_VERSION in config.ts): regenerate it as its header says`,
    );
  }
  return { sha256: createHash('sha256').update(text).digest('hex') };
}

async function isComplete(dir: string, st: string, requirements: string): Promise<boolean> {
  let record: InstallRecord;
  try {
    record = JSON.parse(await readFile(join(dir, RECORD), 'utf8')) as InstallRecord;
  } catch {
    return false;
  }
  return record.version === SCHEMATHESIS_VERSION && record.requirements === requirements && existsSync(st);
}

/** python3 on PATH, new enough for this Schemathesis. */
async function checkPython(logFile: string): Promise<void> {
  const [major, minor] = SCHEMATHESIS_MIN_PYTHON;
  const printed = await run(
    'python3',
    ['-c', 'import sys; print("%d.%d" % sys.version_info[:2])'],
    logFile,
    `python3 (Python ${major}.${minor} or newer, with venv and pip, must be on PATH to install Schemathesis)`,
  );
  const [m, n] = printed.trim().split('.').map(Number);
  if (m === undefined || n === undefined || m < major || (m === major && n < minor)) {
    throw new Error(`schemathesis: python3 on PATH is Python ${printed.trim()}; Schemathesis ${SCHEMATHESIS_VERSION} needs ${major}.${minor} or newer`);
  }
}

/** Runs `command`, its output appended to `logFile`; resolves with its stdout, rejects naming `what` when it fails. */
async function run(command: string, args: readonly string[], logFile: string, what: string): Promise<string> {
  const { code, error, stdout } = await runLogged(command, args, logFile);
  if (error) throw new Error(`schemathesis: cannot run ${what}: ${error.message}`);
  if (code !== 0) throw new Error(`schemathesis: ${what} failed (exit code ${String(code)}); last lines of ${logFile}:\n${await lastLines(logFile)}`);
  return stdout;
}
