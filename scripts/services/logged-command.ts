// A setup command (mvn, python3, pip) run with its output appended to a log file: the fetch of the
// services' jars and the install of Schemathesis both report a failure with the log's last lines.
import { spawn } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { tail } from './processes.js';

export interface LoggedRun {
  /** The exit code; null when it could not be started (`error` says why). */
  readonly code: number | null;
  readonly error?: Error;
  readonly stdout: string;
}

/** Runs `command` with a `$ command args` line, its stdout and its stderr appended to `logFile`. */
export async function runLogged(command: string, args: readonly string[], logFile: string): Promise<LoggedRun> {
  const out = createWriteStream(logFile, { flags: 'a' });
  await new Promise<void>((resolve, reject) => out.once('open', () => resolve()).once('error', reject));
  out.write(`$ ${command} ${args.join(' ')}\n`);
  let stdout = '';
  const result = await new Promise<{ code: number | null; error?: Error }>((resolve) => {
    const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString('utf8');
      out.write(chunk);
    });
    child.stderr.pipe(out, { end: false });
    child.once('error', (error) => resolve({ code: null, error }));
    child.once('close', (code) => resolve({ code }));
  });
  await new Promise<void>((resolve) => out.end(resolve));
  return { ...result, stdout };
}

/** The log's last 25 non-empty lines, for the error of a failed command. */
export const lastLines = (logFile: string): Promise<string> => tail(logFile, 25);
