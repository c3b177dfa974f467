// The purity rules of eslint.config.js: src/core may not read the clock, randomness, timers,
// process state or do I/O. Lints probe snippets through the ESLint Node API as if they lived in
// src/core, and the same clock read as if it lived in src/cli, where it is allowed.
import { fileURLToPath } from 'node:url';
import { ESLint } from 'eslint';
import { describe, expect, it } from 'vitest';

const repoRoot = fileURLToPath(new URL('../..', import.meta.url));
const PURITY_RULES = [
  'no-restricted-globals',
  'no-restricted-syntax',
  'no-restricted-properties',
  'no-restricted-imports',
  '@typescript-eslint/no-restricted-imports',
];
const eslint = new ESLint({ cwd: repoRoot });

/** The purity-rule errors for `code` linted as if it were the file `filePath` (relative to the repo root). */
async function purityErrors(code: string, filePath: string): Promise<string[]> {
  const [result] = await eslint.lintText(code, { filePath });
  if (!result) throw new Error('ESLint returned no result');
  const fatal = result.messages.filter((m) => m.fatal);
  if (fatal.length > 0) throw new Error(`probe did not parse: ${fatal.map((m) => m.message).join('; ')}`);
  return result.messages.filter((m) => m.severity === 2 && m.ruleId !== null && PURITY_RULES.includes(m.ruleId)).map((m) => m.ruleId!);
}

const CORE = 'src/core/__lint_probe__.ts';
const CLI = 'src/cli/__lint_probe__.ts';

describe('purity lint rules for src/core', { timeout: 30_000 }, () => {
  it('clean code in src/core has no purity errors (the probe itself is sound)', async () => {
    expect(await purityErrors('export const x = Math.max(1, 2);\n', CORE)).toEqual([]);
  });

  it.each([
    ['Date.now()', 'export const x = Date.now();\n', 'no-restricted-syntax'],
    ['Math.random()', 'export const x = Math.random();\n', 'no-restricted-syntax'],
    ['setTimeout', 'setTimeout(() => {}, 1);\n', 'no-restricted-globals'],
    ['process.env.X', 'export const x = process.env.X;\n', 'no-restricted-syntax'],
    ['new Date()', 'export const x = new Date();\n', 'no-restricted-syntax'],
    ['Date()', 'export const x = Date();\n', 'no-restricted-syntax'],
    ["import fs from 'node:fs'", "import fs from 'node:fs';\nexport const x = fs;\n", 'no-restricted-imports'],
  ])('%s is an error in src/core', async (_label, code, rule) => {
    expect(await purityErrors(code, CORE)).toContain(rule);
  });

  it.each([
    ['src/core/__lint_probe__.ts', '../http/api-error.js'],
    ['src/core/__lint_probe__.ts', '../client/shardherd-client.js'],
    ['src/core/__lint_probe__.ts', '../index.js'],
    ['src/core/shard-manager/__lint_probe__.ts', '../../actors/wire.js'],
    ['src/core/placement/__lint_probe__.ts', '../../protocol/routed-wire.js'],
    ['src/core/__lint_probe__.ts', 'fastify'],
  ])('%s may not import %s: it leaves the core', async (file, from) => {
    expect(await purityErrors(`import * as x from '${from}';\nexport const y = x;\n`, file)).toContain('no-restricted-imports');
  });

  it.each([
    ['src/core/shard-manager/__lint_probe__.ts', '../ids.js'],
    ['src/core/placement/__lint_probe__.ts', '../shard-manager/protocol.js'],
    ['src/core/__lint_probe__.ts', './ids.js'],
  ])('%s may import %s: it stays in the core', async (file, from) => {
    expect(await purityErrors(`import * as x from '${from}';\nexport const y = x;\n`, file)).toEqual([]);
  });

  it('formatting an instant the core was given is allowed: new Date(ms) reads no clock', async () => {
    expect(await purityErrors('export const iso = (ms: number) => new Date(ms).toISOString();\n', CORE)).toEqual([]);
  });

  it('the same Date.now() in src/cli has none of those errors', async () => {
    const code = 'export const x = Date.now();\n';
    expect(await purityErrors(code, CORE)).not.toEqual([]);
    expect(await purityErrors(code, CLI)).toEqual([]);
  });
});

// The layers of src/ (eslint.config.js, docs/ARCHITECTURE.md §3): no import runs up a layer.
describe('layer rules for src/', { timeout: 30_000 }, () => {
  const importing = (from: string) => `import * as x from '${from}';\nexport const y = x;\n`;

  it.each([
    ['src/protocol/__lint_probe__.ts', '../actors/node-process.js'],
    ['src/client/__lint_probe__.ts', '../actors/node-process.js'],
    ['src/client/__lint_probe__.ts', '../serving/dataset-server.js'],
    ['src/cluster/kafka-bus/__lint_probe__.ts', '../../protocol/wire.js'],
    ['src/store/__lint_probe__.ts', '../actors/telemetry.js'],
    ['src/actors/__lint_probe__.ts', '../metrics/node-metrics.js'],
    ['src/actors/__lint_probe__.ts', '../http/api-error.js'],
    ['src/http/__lint_probe__.ts', '../cli/main.js'],
  ])('%s may not import %s: it is above it', async (file, from) => {
    expect(await purityErrors(importing(from), file)).toContain('no-restricted-imports');
  });

  it.each([
    ['src/actors/__lint_probe__.ts', '../protocol/wire.js'],
    ['src/client/__lint_probe__.ts', '../protocol/followed-maps.js'],
    ['src/cluster/kafka-bus/__lint_probe__.ts', '../bus.js'],
    ['src/metrics/__lint_probe__.ts', '../actors/telemetry.js'],
    ['src/http/__lint_probe__.ts', '../embedded/embedded-cluster.js'],
    ['src/cli/__lint_probe__.ts', '../http/node-api.js'],
  ])('%s may import %s', async (file, from) => {
    expect(await purityErrors(importing(from), file)).toEqual([]);
  });
});

// An actor's pure reducer (src/actors/reducer.ts): its step, state and effects modules are held to
// the core's purity, and use values of the core, the protocol and their own folder only.
describe("purity rules for an actor's step", { timeout: 30_000 }, () => {
  const STEP = 'src/actors/__probe__/step.ts';
  const SHELL = 'src/actors/__probe__/shell.ts';
  const importing = (from: string, typeOnly = false) => `import ${typeOnly ? 'type ' : ''}* as x from '${from}';\nexport type Y = typeof x;\n`;

  it.each([
    ['Date.now()', 'export const x = Date.now();\n'],
    ['Math.random()', 'export const x = Math.random();\n'],
    ['setTimeout', 'setTimeout(() => {}, 1);\n'],
    ['process.env.X', 'export const x = process.env.X;\n'],
  ])('%s is an error in a step, and allowed in its shell', async (_label, code) => {
    expect(await purityErrors(code, STEP)).not.toEqual([]);
    expect(await purityErrors(code, SHELL)).toEqual([]);
  });

  it.each([['../../cluster/bus.js'], ['../runtime.js'], ['../../store/meta-store.js'], ['pino'], ['node:fs']])(
    'a step may not import the value %s',
    async (from) => {
      expect(await purityErrors(importing(from), STEP)).toContain('@typescript-eslint/no-restricted-imports');
    },
  );

  it.each([['../../cluster/bus.js'], ['../runtime.js']])('a step may import the types of %s', async (from) => {
    expect(await purityErrors(importing(from, true), STEP)).toEqual([]);
  });

  it.each([['../../core/ids.js'], ['../../protocol/wire.js'], ['./effects.js']])('a step may import %s', async (from) => {
    expect(await purityErrors(importing(from), STEP)).toEqual([]);
  });
});

// Work deferred to a coming turn of the event loop is counted (src/cluster/turns.ts), or the
// simulator would move the clock while it is still to run.
describe('turns of the event loop in the runtime', { timeout: 30_000 }, () => {
  it.each([['src/actors/__probe__.ts'], ['src/cluster/__probe__.ts'], ['src/embedded/__probe__.ts']])('setImmediate is an error in %s', async (file) => {
    expect(await purityErrors('setImmediate(() => {});\n', file)).toEqual(['no-restricted-globals']);
  });

  it('nextTurn is how it defers, and the CLI may use setImmediate', async () => {
    expect(await purityErrors("import { nextTurn } from '../cluster/turns.js';\nnextTurn(() => {});\n", 'src/actors/__probe__.ts')).toEqual([]);
    expect(await purityErrors('setImmediate(() => {});\n', CLI)).toEqual([]);
  });
});

describe('sleeps in unit tests', { timeout: 30_000 }, () => {
  it('setTimeout is an error in test/unit, and allowed in test/live', async () => {
    const sleep = 'export const sleep = () => new Promise((r) => setTimeout(r, 100));\n';
    expect(await purityErrors(sleep, 'test/unit/__probe__.test.ts')).toEqual(['no-restricted-globals']);
    expect(await purityErrors(sleep, 'test/live/__probe__.test.ts')).toEqual([]);
  });
});

describe('mocks in unit tests', { timeout: 30_000 }, () => {
  it.each(["vi.mock('node:fs');\n", "vi.stubGlobal('fetch', () => 1);\n", "vi.stubEnv('X', '1');\n"])(
    '%s is an error in test/unit, whose files share modules, and allowed in test/live',
    async (code) => {
      const probe = `import { vi } from 'vitest';\n${code}`;
      expect(await purityErrors(probe, 'test/unit/__probe__.test.ts')).toEqual(['no-restricted-properties']);
      expect(await purityErrors(probe, 'test/live/__probe__.test.ts')).toEqual([]);
    },
  );
});

describe("Node's module cache in the package", { timeout: 30_000 }, () => {
  it('require.cache is an error in src', async () => {
    const probe = "import { createRequire } from 'node:module';\nconst require = createRequire(import.meta.url);\ndelete require.cache['/x.js'];\n";
    expect(await purityErrors(probe, 'src/ingest/__probe__.ts')).toEqual(['no-restricted-properties']);
  });
});
