// `npm test` starts with scripts/checks.mjs: the type check, ESLint and Prettier side by side. A
// failure of any of them must fail `npm test` (so CI), after all of them ended, with each one's
// output printed whole. Run here against a package of stand-in scripts, not the real checks.
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { tempDir } from '../support/temp-dir.js';

const CHECKS = resolve(import.meta.dirname, '../../scripts/checks.mjs');

/** A script printing two lines `delayMs` apart, then exiting with `code`. */
function script(name: string, delayMs: number, code: number): string {
  return `node -e "console.log('${name} 1'); setTimeout(() => { console.log('${name} 2'); process.exit(${code}); }, ${delayMs})"`;
}

function runChecks(codes: { typecheck: number; eslint: number; format: number }): { status: number | null; lines: string[] } {
  const dir = tempDir('shardherd-checks-');
  const scripts = {
    typecheck: script('typecheck', 300, codes.typecheck),
    'lint:eslint': script('eslint', 200, codes.eslint),
    'lint:format': script('format', 100, codes.format),
  };
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'checks-probe', private: true, scripts }));
  const r = spawnSync(process.execPath, [CHECKS], { cwd: dir, encoding: 'utf8', timeout: 30_000 });
  return { status: r.status, lines: r.stdout.split('\n').filter((l) => l.length > 0) };
}

describe('scripts/checks.mjs', () => {
  it('exits 0 when every check passes, each one’s lines together', () => {
    const r = runChecks({ typecheck: 0, eslint: 0, format: 0 });
    expect(r.status).toBe(0);
    expect(r.lines).toEqual(['typecheck 1', 'typecheck 2', 'eslint 1', 'eslint 2', 'format 1', 'format 2']);
  });

  it('exits 1 when one check fails, after the others ran to their end, naming the one that failed', () => {
    const r = runChecks({ typecheck: 0, eslint: 0, format: 3 });
    expect(r.status).toBe(1);
    expect(r.lines).toEqual(['typecheck 1', 'typecheck 2', 'eslint 1', 'eslint 2', 'format 1', 'format 2', 'npm run lint:format failed (3)']);
  });

  it('names every check that failed', () => {
    const r = runChecks({ typecheck: 2, eslint: 1, format: 0 });
    expect(r.status).toBe(1);
    expect(r.lines.filter((l) => l.endsWith('failed (2)') || l.endsWith('failed (1)'))).toEqual([
      'npm run typecheck failed (2)',
      'npm run lint:eslint failed (1)',
    ]);
  });
});
