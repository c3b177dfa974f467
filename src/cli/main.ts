#!/usr/bin/env node
// The `shardherd` command. Today it runs the coordinator-core walk-through; the embedded cluster
// demo and `shardherd node --config <file>` come with the runtime.
import { runCoreDemo } from './core-demo.js';

function main(): number {
  try {
    runCoreDemo((line) => process.stdout.write(`${line}\n`));
    return 0;
  } catch (e) {
    process.stderr.write(`shardherd: ${e instanceof Error ? e.stack ?? e.message : String(e)}\n`);
    return 1;
  }
}

process.exitCode = main();
