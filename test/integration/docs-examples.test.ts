// What the docs and examples show must be what a user can type and run. The package is packed and
// installed into a fresh application (as the consumer test does); there every TypeScript block of
// README.md and docs/*.md is compiled as a module of its own, strictly, against the installed
// declarations, the README's example (its first TypeScript block) is also compiled to JavaScript and
// run to the end, and the examples of examples/ are compiled and their embedded variants run to the end.
// In the integration project for its files run one at a time: packing rebuilds `dist/`.
import { readdirSync, readFileSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ingestionShard, queryShards } from '../../src/core/spread.js';
import { partitionKeyHash, shardKeyHash } from '../../src/core/hashing.js';
import { docBlocks, type DocBlock } from '../support/doc-blocks.js';
import { compileApp, NODE_TYPES, packedApp, runInApp, STRICT_APP_OPTIONS, type PackedApp } from '../support/packed-app.js';

const REPO = resolve(import.meta.dirname, '../..');

/** The docs' blocks: strict, no emit, ES modules resolved as Node does, top-level await allowed. */
const DOCS_TSCONFIG = {
  compilerOptions: {
    target: 'ES2022',
    module: 'NodeNext',
    moduleResolution: 'NodeNext',
    strict: true,
    noEmit: true,
    skipLibCheck: true,
    types: ['node'],
  },
  include: ['docs'],
};

/** The README's example, compiled to JavaScript to be run: the docs' options, with output. */
const README_TSCONFIG = {
  compilerOptions: { ...DOCS_TSCONFIG.compilerOptions, noEmit: false, rootDir: 'readme', outDir: 'out-readme' },
  include: ['readme'],
};

/** The examples: as strict as the repository's own code, compiled to JavaScript to be run. */
const EXAMPLES_TSCONFIG = {
  compilerOptions: {
    ...STRICT_APP_OPTIONS,
    skipLibCheck: true,
    rootDir: 'examples',
    outDir: 'out',
  },
  include: ['examples'],
};

const blocks = docBlocks(REPO);
const readmeExample = blocks.find((b) => b.file === 'README.md');
const examples = readdirSync(join(REPO, 'examples')).filter((f) => f.endsWith('.ts'));

let app: PackedApp;

beforeAll(async () => {
  const files: Record<string, string> = {
    'tsconfig.docs.json': JSON.stringify(DOCS_TSCONFIG, null, 2),
    'tsconfig.examples.json': JSON.stringify(EXAMPLES_TSCONFIG, null, 2),
    'tsconfig.readme.json': JSON.stringify(README_TSCONFIG, null, 2),
  };
  if (readmeExample) files['readme/example.ts'] = `${readmeExample.code}export {};\n`;
  // `export {}`: each block is a module of its own, so blocks do not share their names.
  for (const b of blocks) files[`docs/${b.moduleName}`] = `${b.code}export {};\n`;
  for (const f of examples) files[`examples/${f}`] = readFileSync(join(REPO, 'examples', f), 'utf8');
  app = await packedApp({ files, devDependencies: [NODE_TYPES] });
}, 600_000);

afterAll(() => app?.remove());

/** The compiler's errors, each at its place in the Markdown file: `README.md:131:7 error TS2304: ...`. */
function inMarkdown(output: string, of: readonly DocBlock[]): string[] {
  const byModule = new Map(of.map((b) => [`docs/${b.moduleName}`, b]));
  const errors: string[] = [];
  for (const line of output.split('\n')) {
    const m = /^(docs\/[^(]+)\((\d+),(\d+)\): (.*)$/.exec(line.trim());
    if (!m) {
      if (/error TS/.test(line)) errors.push(line.trim());
      continue;
    }
    const block = byModule.get(m[1]!);
    errors.push(block ? `${block.file}:${block.line + Number(m[2])}:${m[3]} ${m[4]}` : line.trim());
  }
  return errors;
}

describe('the docs, against the installed package', () => {
  it('has TypeScript blocks in the README and docs/ to check', () => {
    // The README keeps one example; the reference material, with its blocks, is in docs/.
    expect(blocks.filter((b) => b.file === 'README.md').length).toBeGreaterThanOrEqual(1);
    expect(blocks.some((b) => b.file.startsWith('docs/'))).toBe(true);
  });

  it('compiles every TypeScript block of README.md and docs/ strictly, each as a module of its own', async () => {
    const compiled = await compileApp(app, 'tsconfig.docs.json');
    expect(inMarkdown(compiled.output, blocks)).toEqual([]);
    expect(compiled.ok, compiled.output).toBe(true);
  }, 180_000);
});

describe("the README's example, against the installed package", () => {
  it('compiles and runs to the end: a request to one shard and a fan-out over the spread, all answered', async () => {
    const compiled = await compileApp(app, 'tsconfig.readme.json');
    expect(compiled.ok, compiled.output).toBe(true);
    const run = await runInApp(app, ['out-readme/example.js'], 90_000);
    expect(run.code, run.text).toBe(0);
    // What its last comment says it prints.
    expect(run.text).toMatch(/^\{ shard: 3, rows: 2 \} 4 0$/m);
  }, 180_000);
});

describe('the examples, against the installed package', () => {
  let compiled: { ok: boolean; output: string };
  beforeAll(async () => {
    compiled = await compileApp(app, 'tsconfig.examples.json');
  }, 180_000);

  it('compile strictly, importing only the package entry points (and pino, the logger a real node takes)', () => {
    expect(compiled.output).toBe('');
    expect(compiled.ok).toBe(true);
    for (const f of examples) {
      const text = readFileSync(join(REPO, 'examples', f), 'utf8');
      const imports = [...text.matchAll(/\bfrom '([^']+)'|import\('([^']+)'\)/g)].map((m) => m[1] ?? m[2]!);
      const foreign = imports.filter((s) => !/^(shardherd(\/(core|kafka|cassandra|node|http|sim))?|pino|node:[a-z/_]+|\.\/[a-z-]+\.js)$/.test(s));
      expect(foreign, f).toEqual([]);
    }
  });

  it("router: a request by key reaches the key's shard, a fan-out every shard of the key, errors per shard", async () => {
    const r = await runExample('router');
    const key = { _ws_: 'demo', _ns_: 'api', _metric_: 'http_requests' };
    const series = { host: 'h1', path: '/login' };
    const expectedShard = ingestionShard(8, shardKeyHash(key), partitionKeyHash(series), 2);
    expect(r).toMatch(new RegExp(`^request by key: shard ${expectedShard} answered by n[123]`, 'm'));
    const fanned = queryShards(8, shardKeyHash(key), 2).join(',');
    const fanOuts = [...r.matchAll(/^fan-out (.+): answers from shards \[([\d,]*)\], errors \[(.*)\]$/gm)];
    expect(fanOuts.map((m) => m[1])).toEqual(['with every node up', 'after n1 crashed', 'with a query the handler refuses']);
    // Every shard of the key answered, also with a node down: each shard has a second copy.
    expect(fanOuts[0]![2]).toBe(fanned);
    expect(fanOuts[0]![3]).toBe('');
    expect(fanOuts[1]![2]).toBe(fanned);
    expect(fanOuts[1]![3]).toBe('');
    // The handler's refusal reaches the router per shard, as HANDLER_FAILED.
    expect(fanOuts[2]![2]).toBe('');
    expect(fanOuts[2]![3]).toBe(
      fanned
        .split(',')
        .map((s) => `${s}: HANDLER_FAILED`)
        .join(', '),
    );
  }, 120_000);

  it('ingestion worker: every shard answers with the records its node ingested, and its sink wrote them', async () => {
    const r = await runExample('ingestion-worker');
    const answers = [...r.matchAll(/^shard (\d+) on (n[123]): (\d+) records, last offset (\d+)$/gm)];
    expect(answers.map((m) => Number(m[1]))).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    for (const m of answers) expect(Number(m[3])).toBeGreaterThan(0);
    const lines = /^sinks wrote (\d+) records to (.+)$/m.exec(r);
    expect(lines, r).not.toBeNull();
    const written = readFileSync(lines![2]!, 'utf8')
      .split('\n')
      .filter((l) => l !== '');
    expect(written.length).toBe(Number(lines![1]));
    // What the handlers answered is what the sinks had written by then (they go on ingesting).
    const answered = answers.reduce((sum, m) => sum + Number(m[3]), 0);
    expect(written.length).toBeGreaterThanOrEqual(answered);
    const first = JSON.parse(written[0]!) as { node: string; shard: number; offset: number };
    expect(['n1', 'n2', 'n3']).toContain(first.node);
    rmSync(lines![2]!, { force: true });
  }, 120_000);

  it('gateway: each record is written to the shard its keys choose', async () => {
    const r = await runExample('gateway');
    const written = [...r.matchAll(/^host (h\d+) metric (\w+) -> shard (\d+) \(stored by (n[123]), (\d+) there\)$/gm)];
    expect(written.length).toBe(12);
    for (const m of written) {
      const shard = ingestionShard(8, shardKeyHash({ _ws_: 'demo', _ns_: 'app', _metric_: m[2]! }), partitionKeyHash({ host: m[1]! }), 1);
      expect(Number(m[3]), m[0]).toBe(shard);
    }
    expect(r).toMatch(/^12 records written to \d+ shards$/m);
  }, 120_000);

  async function runExample(name: string): Promise<string> {
    expect(compiled.ok, compiled.output).toBe(true);
    const run = await runInApp(app, ['out/main.js', name], 90_000);
    expect(run.code, run.text).toBe(0);
    return run.text;
  }
});
