#!/usr/bin/env node
// The `shardherd` command: the embedded cluster demo, or `shardherd node` (see `shardherd --help`).
// Exit codes of the demo: 0 the story ran (or Ctrl-C stopped the demo cleanly), 1 the story failed,
// 2 a bad command line (a --port in use included), 130 a second Ctrl-C while the cluster was stopping. `node`: see node-command.ts;
// `topics create`: see topics-command.ts; the admin commands (status, shards, dataset, ...): see admin/run-admin.ts.
import { pino } from 'pino';
import { runDemo } from './demo/run.js';
import { runAdmin } from './admin/run-admin.js';
import { runNodeCommand } from './node-command.js';
import { runTopicsCreate } from './topics-command.js';
import { parseCommandLine } from './options.js';
import { timestampWithIso } from './log-timestamp.js';
import { skipKafkajsNegativeTimeouts } from './process-warnings.js';

async function main(): Promise<number> {
  skipKafkajsNegativeTimeouts();
  const parsed = parseCommandLine(process.argv.slice(2));
  if (parsed.kind === 'exit') {
    process.stdout.write(parsed.stdout);
    process.stderr.write(parsed.stderr);
    return parsed.code;
  }
  if (parsed.kind === 'node') {
    // Everything is stopped and closed by now; a client library's leftover timer (kafkajs leaves
    // some behind) must not keep a stopped node alive until its supervisor SIGKILLs it.
    process.exit(await runNodeCommand(parsed.configPath, parsed.logLevel));
  }
  if (parsed.kind === 'topics-create') {
    // As for a node: kafkajs leaves timers behind that would keep the command from ending.
    process.exit(
      await runTopicsCreate(parsed.configPath, parsed.datasets, parsed.logLevel, {
        stdout: (s) => process.stdout.write(s),
        stderr: (s) => process.stderr.write(s),
      }),
    );
  }
  if (parsed.kind === 'admin') {
    return runAdmin(parsed.command, {
      stdout: (s) => process.stdout.write(s),
      stderr: (s) => process.stderr.write(s),
      env: process.env,
      stdin: async () => {
        let text = '';
        for await (const chunk of process.stdin) text += String(chunk);
        return text;
      },
    });
  }
  const { options } = parsed;
  // Logs go to stderr, so they never tear the live view on stdout.
  const log = pino({ level: options.logLevel, base: null, timestamp: timestampWithIso }, pino.destination({ dest: 2, sync: true }));
  const abort = new AbortController();
  process.on('SIGINT', () => {
    if (abort.signal.aborted) {
      process.stdout.write('\x1b[?25h');
      process.exit(130);
    }
    abort.abort();
  });
  process.on('SIGTERM', () => abort.abort());
  return runDemo(options, { stdout: process.stdout, stderr: (s) => process.stderr.write(s), signal: abort.signal, log });
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (e: unknown) => {
    process.stderr.write(`shardherd: ${e instanceof Error ? e.message : String(e)}\n`);
    process.exitCode = 1;
  },
);
