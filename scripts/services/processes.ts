// Detached JVMs managed by PID file only: a PID is signalled only if the process still runs and
// (where /proc exists) its command line names the instance folder it was started for, so a PID
// reused by an unrelated process is never touched. Nothing here looks processes up by name.
import { spawn } from 'node:child_process';
import { closeSync, existsSync, openSync, readFileSync } from 'node:fs';
import { readFile, rm, writeFile } from 'node:fs/promises';

const hasProc = existsSync('/proc/self/cmdline');

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** True while `pid` runs (a zombie does not count). */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
  if (!hasProc) return true;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Field 3, after the parenthesised command name, is the state.
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}

/** True if `pid` runs and, where /proc exists, its command line contains `marker`. */
export function isOurs(pid: number, marker: string): boolean {
  if (!isAlive(pid)) return false;
  if (!hasProc) return true;
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(marker);
  } catch {
    return false;
  }
}

export async function readPidFile(file: string): Promise<number | undefined> {
  try {
    const pid = Number.parseInt((await readFile(file, 'utf8')).trim(), 10);
    return Number.isInteger(pid) && pid > 1 ? pid : undefined;
  } catch {
    return undefined;
  }
}

/** PIDs that must die with this process (an `exit` hook SIGKILLs them if nothing stopped them). */
const killOnExit = new Set<number>();
let exitHookInstalled = false;

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.once('exit', () => {
    for (const pid of killOnExit) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  });
}

export interface SpawnedJvm {
  readonly pid: number;
  /** Resolves with the exit code (or signal) when the JVM exits, if this process spawned it. */
  readonly exited: Promise<string>;
}

/**
 * Starts `java args` detached (its own process group, so a Ctrl-C in the terminal does not hit it
 * directly), with stdout and stderr appended to `logFile`, and writes its PID to `pidFile`.
 */
export async function spawnJvm(
  java: string,
  args: readonly string[],
  opts: { logFile: string; pidFile: string; cwd: string; dieWithThisProcess: boolean },
): Promise<SpawnedJvm> {
  const fd = openSync(opts.logFile, 'a');
  let child;
  try {
    child = spawn(java, args, { cwd: opts.cwd, detached: true, stdio: ['ignore', fd, fd] });
  } finally {
    closeSync(fd);
  }
  const exited = new Promise<string>((resolve) => {
    child.once('exit', (code, signal) => resolve(signal ?? `exit code ${String(code)}`));
    child.once('error', (err) => resolve(`spawn error: ${err.message}`));
  });
  const pid = child.pid;
  if (pid === undefined) {
    throw new Error(`could not start ${java} (${await exited}); is Java 17 installed (JAVA_HOME or java on PATH)?`);
  }
  child.unref();
  await writeFile(opts.pidFile, `${pid}\n`);
  if (opts.dieWithThisProcess) {
    killOnExit.add(pid);
    installExitHook();
  }
  return { pid, exited };
}

/** Runs `java args` to completion (used for Kafka's storage format), output appended to `logFile`. */
export async function runJava(java: string, args: readonly string[], logFile: string, timeoutMs: number): Promise<void> {
  const fd = openSync(logFile, 'a');
  let child;
  try {
    child = spawn(java, args, { stdio: ['ignore', fd, fd] });
  } finally {
    closeSync(fd);
  }
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  try {
    const result = await new Promise<string>((resolve) => {
      child.once('exit', (code, signal) => resolve(code === 0 ? 'ok' : (signal ?? `exit code ${String(code)}`)));
      child.once('error', (err) => resolve(`spawn error: ${err.message}`));
    });
    if (result !== 'ok') throw new Error(`${args.at(-1) ?? 'java'}: ${result}; see ${logFile}`);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Stops the process named by `pidFile` if it is ours: SIGTERM, then SIGKILL after `graceMs`.
 * Removes the PID file. Returns what it did, for logs.
 */
export async function stopByPidFile(pidFile: string, marker: string, graceMs = 20_000): Promise<string> {
  const pid = await readPidFile(pidFile);
  if (pid === undefined) return 'no PID file';
  let outcome: string;
  if (!isOurs(pid, marker)) {
    outcome = `PID ${pid} not running (or not ours)`;
  } else {
    signal(pid, 'SIGTERM');
    const deadline = Date.now() + graceMs;
    while (isAlive(pid) && Date.now() < deadline) await sleep(200);
    if (isAlive(pid)) {
      signal(pid, 'SIGKILL');
      const killDeadline = Date.now() + 10_000;
      while (isAlive(pid) && Date.now() < killDeadline) await sleep(100);
      outcome = isAlive(pid) ? `PID ${pid} survived SIGKILL` : `PID ${pid} killed (SIGKILL after ${graceMs / 1000} s)`;
    } else {
      outcome = `PID ${pid} stopped`;
    }
  }
  killOnExit.delete(pid);
  await rm(pidFile, { force: true });
  return outcome;
}

function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch {
    // gone in between
  }
}

/** The last `n` non-empty lines of a log file, for error messages. */
export async function tail(file: string, n = 20): Promise<string> {
  try {
    const lines = (await readFile(file, 'utf8')).split('\n').filter((l) => l.trim() !== '');
    return lines.slice(-n).join('\n');
  } catch {
    return `(no ${file})`;
  }
}
