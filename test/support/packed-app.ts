// The package as a user gets it: `npm pack` of this repository (which builds it first), installed
// from the registry into a fresh application in the system's temporary directory, where Node's
// resolution cannot reach this repository's node_modules. The consumer test runs an example there;
// the type-check of the docs' code blocks compiles against the same installed package.
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
const REPO = resolve(import.meta.dirname, '../..');
/** The repository's own compiler: the app compiles with it, against the app's node_modules. */
const TSC = join(REPO, 'node_modules/typescript/bin/tsc');
/** The same Node types as the repository's, for apps whose code or whose dependencies' types use Node's. */
export const NODE_TYPES = '@types/node@20.19.43';

/** The compiler options of an application as strict as this repository's own code (NodeNext, ES2022). */
export const STRICT_APP_OPTIONS = {
  target: 'ES2022',
  module: 'NodeNext',
  moduleResolution: 'NodeNext',
  strict: true,
  noUncheckedIndexedAccess: true,
  exactOptionalPropertyTypes: true,
  verbatimModuleSyntax: true,
  types: ['node'],
} as const;

export interface PackedApp {
  /** The application's directory (outside the repository). */
  readonly dir: string;
  /** The tarball `npm pack` made. */
  readonly tarball: string;
  /** Every path inside the tarball, without the leading `package/`. */
  readonly packedFiles: readonly string[];
  /** What `npm install` printed (stdout and stderr), for its warnings. */
  readonly installOutput: string;
  /** Removes the application and the tarball. */
  remove(): void;
}

/** A child's output, stdout and stderr, whether it succeeded or failed. */
async function output(
  command: string,
  args: readonly string[],
  options: { cwd: string; timeoutMs: number; env?: NodeJS.ProcessEnv },
): Promise<{ code: number; text: string }> {
  try {
    const { stdout, stderr } = await run(command, args, {
      cwd: options.cwd,
      timeout: options.timeoutMs,
      maxBuffer: 64 * 2 ** 20,
      env: options.env ?? process.env,
    });
    return { code: 0, text: `${stdout}${stderr}` };
  } catch (e) {
    const failed = e as { code?: number | string; stdout?: string; stderr?: string; message: string };
    return { code: typeof failed.code === 'number' ? failed.code : 1, text: `${failed.stdout ?? ''}${failed.stderr ?? ''}${failed.message}` };
  }
}

async function mustSucceed(command: string, args: readonly string[], options: { cwd: string; timeoutMs: number; env?: NodeJS.ProcessEnv }): Promise<string> {
  const r = await output(command, args, options);
  if (r.code !== 0) throw new Error(`${command} ${args.join(' ')} failed (${r.code}) in ${options.cwd}:\n${r.text}`);
  return r.text;
}

/**
 * The environment of the nested npm: without what `npm test` exported about this repository
 * (`npm_package_*`, `npm_lifecycle_*`), which would otherwise describe the wrong package.
 */
function npmEnv(): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('npm_package_') && !k.startsWith('npm_lifecycle_')));
}

/**
 * Packs the repository and installs the tarball into a new application with the given files
 * (`package.json` is written here: ESM, private). `devDependencies` are installed beside it.
 */
export async function packedApp(
  options: { readonly files?: Readonly<Record<string, string>>; readonly devDependencies?: readonly string[] } = {},
): Promise<PackedApp> {
  const root = mkdtempSync(join(tmpdir(), 'shardherd-consumer-'));
  const packDir = join(root, 'pack');
  const dir = join(root, 'app');
  mkdirSync(packDir);
  mkdirSync(dir);
  const env = npmEnv();
  // `prepack` builds `dist/` from the sources first, as it does for a publish.
  await mustSucceed('npm', ['pack', '--pack-destination', packDir, '--silent'], { cwd: REPO, timeoutMs: 240_000, env });
  const tgz = readdirSync(packDir).filter((f) => f.endsWith('.tgz'));
  if (tgz.length !== 1) throw new Error(`npm pack made ${tgz.length} tarballs: ${tgz.join(', ')}`);
  const tarball = join(packDir, tgz[0]!);
  const packedFiles = (await mustSucceed('tar', ['-tzf', tarball], { cwd: root, timeoutMs: 30_000 }))
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => l.replace(/^package\//, ''));

  writeFileSync(join(dir, 'package.json'), `${JSON.stringify({ name: 'shardherd-consumer', private: true, type: 'module' }, null, 2)}\n`);
  for (const [path, text] of Object.entries(options.files ?? {})) {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    writeFileSync(join(dir, path), text);
  }
  const installOutput = await mustSucceed('npm', ['install', '--no-audit', '--no-fund', tarball], { cwd: dir, timeoutMs: 300_000, env });
  const devDependencies = options.devDependencies ?? [];
  const devOutput =
    devDependencies.length === 0
      ? ''
      : await mustSucceed('npm', ['install', '--no-audit', '--no-fund', '--save-dev', ...devDependencies], { cwd: dir, timeoutMs: 300_000, env });
  return {
    dir,
    tarball,
    packedFiles,
    installOutput: installOutput + devOutput,
    remove: () => rmSync(root, { recursive: true, force: true }),
  };
}

/** Compiles the app with the repository's TypeScript and the app's `tsconfig.json`; returns the compiler's output on failure. */
export async function compileApp(app: PackedApp, project = 'tsconfig.json'): Promise<{ ok: boolean; output: string }> {
  const r = await output(process.execPath, [TSC, '-p', project], { cwd: app.dir, timeoutMs: 120_000 });
  return { ok: r.code === 0, output: r.text };
}

/** Runs Node in the app's directory with `args` (and extra environment); returns its exit code and output. */
export function runInApp(app: PackedApp, args: readonly string[], timeoutMs = 120_000, env: NodeJS.ProcessEnv = {}): Promise<{ code: number; text: string }> {
  return output(process.execPath, args, { cwd: app.dir, timeoutMs, env: { ...process.env, ...env } });
}
