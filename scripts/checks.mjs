// The static checks before `npm test` runs vitest: the type check, ESLint and Prettier, side by side
// (each is mostly one core's work: one after another they took about 30 s on 2 cores, side by side 23-24).
// Each one's output is printed whole once it ends, so their lines do not interleave; the exit code is
// 1 when any of them failed, after all of them ended.
import { Buffer } from 'node:buffer';
import { spawn } from 'node:child_process';
import process from 'node:process';

const CHECKS = ['typecheck', 'lint:eslint', 'lint:format'];

function run(script) {
  return new Promise((resolve) => {
    const child = spawn('npm', ['run', '-s', script], { stdio: ['ignore', 'pipe', 'pipe'], shell: process.platform === 'win32' });
    const output = [];
    child.stdout.on('data', (chunk) => output.push(chunk));
    child.stderr.on('data', (chunk) => output.push(chunk));
    child.on('error', (err) => resolve({ script, ok: false, output: `${String(err)}\n` }));
    child.on('close', (code, signal) => resolve({ script, ok: code === 0, output: Buffer.concat(output).toString(), code: code ?? signal }));
  });
}

const results = await Promise.all(CHECKS.map(run));
for (const r of results) {
  if (r.output.length > 0) process.stdout.write(r.output.endsWith('\n') ? r.output : `${r.output}\n`);
  if (!r.ok) process.stdout.write(`npm run ${r.script} failed (${String(r.code)})\n`);
}
process.exitCode = results.every((r) => r.ok) ? 0 : 1;
