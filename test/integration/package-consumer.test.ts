// The package as a user installs it: packed, installed from the registry into a fresh application
// outside the repository, compiled there in strict mode, and run through its public entry points
// only (an embedded cluster of three nodes). Also what the package weighs on an application: the
// files it ships, the engine warnings of its dependencies, the modules its root entry loads.
// Packing builds `dist/` only if the sources changed since the run's build (./build-once.ts): the
// node processes of the files beside it run that `dist/`.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compileApp, NODE_TYPES, packedApp, runInApp, STRICT_APP_OPTIONS, type PackedApp } from '../support/packed-app.js';

const TSCONFIG = {
  compilerOptions: {
    ...STRICT_APP_OPTIONS,
    // The package's own declarations are checked too: a broken .d.ts must fail here.
    skipLibCheck: false,
    outDir: 'out',
  },
  include: ['src'],
};

/** The embedded example: what a user writes after reading the README, through `shardherd` only. */
const MAIN = `
import { CountingSink, EmbeddedCluster, ShardMapper, datasetRef, nodeId, type NodeId, type Request } from 'shardherd';

const sinks = new Map<NodeId, CountingSink>();
const cluster = new EmbeddedCluster({
  name: 'consumer',
  nodes: ['n1', 'n2', 'n3'],
  sink: (node) => {
    const sink = new CountingSink();
    sinks.set(node, sink);
    return sink;
  },
});
await cluster.start();
const singleton = await cluster.singletonNode();

const ref = 'metrics';
const setup = await cluster.setupDataset({ ref, numShards: 8, minNumNodes: 3, replicationFactor: 2, strategy: 'balanced', source: { type: 'synthetic', recordsPerSecond: 200 } });
if (setup.type !== 'DatasetVerified') throw new Error('setup: ' + JSON.stringify(setup));
await cluster.whenConverged(ref, { timeoutMs: 30_000 });

const getMap = (replyTo: Parameters<Parameters<typeof cluster.request>[0]>[0]): Request => ({ type: 'GetShardMap', dataset: datasetRef(ref), replyTo });
const answer = await cluster.request(getMap);
if (answer.type !== 'CurrentShardSnapshot') throw new Error('map: ' + answer.type);
const map = ShardMapper.fromSnapshot(answer.snapshot);

// Records reach every node's own sink once its copies ingest.
const deadline = Date.now() + 10_000;
const received = () => ['n1', 'n2', 'n3'].map((n) => sinks.get(nodeId(n))?.total(ref).accepted ?? 0);
while (received().some((r) => r === 0) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));

console.log(JSON.stringify({
  singleton: singleton?.node ?? null,
  activeShards: map.activeShards().length,
  copiesPerNode: ['n1', 'n2', 'n3'].map((n) => map.shardsForNode(nodeId(n)).length),
  servingCopies: Array.from({ length: 8 }, (_, s) => map.servingNodes(s).length),
  recordsPerNode: received(),
}));
await cluster.stop();
`;

/** What applications must not reach: the node's internals, marked @internal and left out of the declarations. */
const USES_INTERNALS = `
import { EmbeddedCluster } from 'shardherd';
const cluster = new EmbeddedCluster({ nodes: ['n1'] });
const node = cluster.node('n1');
export const internals = [node.services, node.actors, node.cache(), cluster.services];
`;

/** A loader hook that writes every module URL the process resolves to the file named by SHARDHERD_LOADS. */
const RECORD_LOADS = `
import { register } from 'node:module';
register('./record-loads-hooks.mjs', import.meta.url);
`;
const RECORD_LOADS_HOOKS = `
import { appendFileSync } from 'node:fs';
export async function resolve(specifier, context, next) {
  const resolved = await next(specifier, context);
  appendFileSync(process.env.SHARDHERD_LOADS, resolved.url + '\\n');
  return resolved;
}
`;

const HEAVY = /\/node_modules\/(kafkajs|cassandra-driver|fastify|@fastify\/[^/]+)\//;

let app: PackedApp;

beforeAll(async () => {
  app = await packedApp({
    files: {
      'tsconfig.json': JSON.stringify(TSCONFIG, null, 2),
      'src/main.ts': MAIN,
      'tsconfig.internals.json': JSON.stringify({ ...TSCONFIG, include: ['internals'] }, null, 2),
      'internals/uses-internals.ts': USES_INTERNALS,
      'record-loads.mjs': RECORD_LOADS,
      'record-loads-hooks.mjs': RECORD_LOADS_HOOKS,
    },
    devDependencies: [NODE_TYPES],
  });
}, 600_000);

afterAll(() => app?.remove());

describe('the packed package, installed into a fresh application', () => {
  it('ships the built package only: no tests, benchmarks, scripts, sources or images', () => {
    expect(app.packedFiles).toContain('package.json');
    expect(app.packedFiles).toContain('dist/index.js');
    expect(app.packedFiles).toContain('dist/index.d.ts');
    expect(app.packedFiles).toContain('dist/cli/main.js');
    expect(app.packedFiles).toContain('dist/http/status-page.html');
    const unwanted = app.packedFiles.filter(
      (f) => /^(test|bench|scripts|src|docs|config|\.github)\//.test(f) || /\.(png|map|ts)$/.test(f.replace(/\.d\.ts$/, '')),
    );
    expect(unwanted).toEqual([]);
  });

  it('installs on this Node without engine warnings from its dependencies', () => {
    expect(app.installOutput).not.toMatch(/EBADENGINE/);
  });

  it('compiles a strict TypeScript application against its declarations', async () => {
    const compiled = await compileApp(app);
    expect(compiled.output).toBe('');
    expect(compiled.ok).toBe(true);
  }, 180_000);

  it("keeps the node's internals (services, actors, cache) out of the declarations", async () => {
    const compiled = await compileApp(app, 'tsconfig.internals.json');
    expect(compiled.ok).toBe(false);
    for (const name of ['services', 'actors', 'cache']) expect(compiled.output).toContain(`Property '${name}' does not exist on type 'ShardherdNode'`);
    expect(compiled.output).toContain(`Property 'services' does not exist on type 'EmbeddedCluster'`);
  }, 180_000);

  it('runs an embedded cluster of three nodes to convergence through the root entry', async () => {
    const r = await runInApp(app, ['out/main.js'], 120_000);
    expect(r.code, r.text).toBe(0);
    const lastLine = r.text.trim().split('\n').at(-1)!;
    const report = JSON.parse(lastLine) as {
      singleton: string | null;
      activeShards: number;
      copiesPerNode: number[];
      servingCopies: number[];
      recordsPerNode: number[];
    };
    // `start()` resolved with a singleton in place.
    expect(['n1', 'n2', 'n3']).toContain(report.singleton);
    // `whenConverged` resolved only once every shard had both its copies serving.
    expect(report.activeShards).toBe(8);
    expect(report.servingCopies).toEqual(new Array(8).fill(2));
    expect(report.copiesPerNode.reduce((a, b) => a + b, 0)).toBe(16);
    for (const copies of report.copiesPerNode) expect(copies).toBeGreaterThanOrEqual(5);
    // Each node's own sink got records.
    for (const records of report.recordsPerNode) expect(records).toBeGreaterThan(0);
  }, 180_000);

  it('loads from CommonJS with require() too (Node loads ES modules with require since 20.19)', async () => {
    const r = await runInApp(
      app,
      [
        '--input-type=commonjs',
        '-e',
        `const { EmbeddedCluster, ShardMapper } = require('shardherd'); console.log(typeof EmbeddedCluster, typeof ShardMapper);`,
      ],
      60_000,
    );
    expect(r.code, r.text).toBe(0);
    expect(r.text.trim()).toBe('function function');
  }, 60_000);

  it('installs the shardherd command, which runs from the installed package', async () => {
    const r = await runInApp(app, ['node_modules/.bin/shardherd', 'node', '--help'], 60_000);
    expect(r.code, r.text).toBe(0);
    expect(r.text).toMatch(/--config/);
  }, 60_000);

  it('loads neither kafkajs, cassandra-driver nor fastify from its root entry; the Kafka entry does load kafkajs', async () => {
    const root = await loadedPackages('shardherd');
    // The recording sees what the root does load.
    expect(root).toEqual(expect.arrayContaining(['nact', 'shardherd', 'zod']));
    expect(root.filter((p) => HEAVY.test(`/node_modules/${p}/`))).toEqual([]);
    // The same check sees kafkajs where it is loaded: it would see it in the root too.
    expect(await loadedPackages('shardherd/kafka')).toContain('kafkajs');
  }, 120_000);
});

/** The packages under node_modules whose modules a fresh process resolves while importing `entry`. */
async function loadedPackages(entry: string): Promise<string[]> {
  const file = join(app.dir, `loads-${entry.replace(/\W/g, '_')}.txt`);
  const r = await runInApp(app, ['--import', './record-loads.mjs', '--input-type=module', '-e', `await import(${JSON.stringify(entry)});`], 60_000, {
    SHARDHERD_LOADS: file,
  });
  expect(r.code, r.text).toBe(0);
  const urls = readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l !== '');
  const packages = new Set<string>();
  for (const url of urls) {
    const m = /\/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url);
    if (m) packages.add(m[1]!);
  }
  return [...packages].sort();
}
