// The command's process drops kafkajs's negative-timeout warning (Node 24 prints one per broker
// connection) and prints every other warning as Node does: checked in a real process, with a
// negative timeout armed from a module at kafkajs's request queue's path and from anywhere else.
import { spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { tempDir } from '../support/temp-dir.js';

const WARNINGS = resolve(import.meta.dirname, '../../src/cli/process-warnings.ts');

/** A module at `path` under a fresh directory that arms a negative timeout when imported. */
function negativeTimeoutAt(path: string): string {
  const file = join(tempDir('shardherd-warnings-'), path);
  mkdirSync(resolve(file, '..'), { recursive: true });
  writeFileSync(file, 'setTimeout(() => {}, -1796003771877);\n');
  return file;
}

function stderrOf(script: string): string {
  const r = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { encoding: 'utf8', timeout: 30_000 });
  expect(r.status, r.stderr).toBe(0);
  return r.stderr;
}

describe('process warnings of the shardherd command', () => {
  it("drops kafkajs's negative timeout, and prints the same from elsewhere and every other warning", () => {
    const kafkajs = negativeTimeoutAt('node_modules/kafkajs/src/network/requestQueue/index.js');
    const elsewhere = negativeTimeoutAt('lib/queue.js');
    const quiet = stderrOf(`const w = await import(${JSON.stringify(WARNINGS)}); w.skipKafkajsNegativeTimeouts(); await import(${JSON.stringify(kafkajs)});`);
    expect(quiet).toBe('');
    const printed = stderrOf(
      `const w = await import(${JSON.stringify(WARNINGS)}); w.skipKafkajsNegativeTimeouts(); await import(${JSON.stringify(elsewhere)}); process.emitWarning('a warning of its own');`,
    );
    expect(printed).toMatch(/TimeoutNegativeWarning: -1796003771877 is a negative number/);
    expect(printed).toMatch(/Warning: a warning of its own/);
  });

  it('without it, the warning is printed (the probe arms what Node warns about)', () => {
    const kafkajs = negativeTimeoutAt('node_modules/kafkajs/src/network/requestQueue/index.js');
    expect(stderrOf(`await import(${JSON.stringify(kafkajs)});`)).toMatch(/TimeoutNegativeWarning/);
  });
});
