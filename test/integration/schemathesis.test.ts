// Schemathesis, a property-based checker of an API against its OpenAPI document, against a real
// node: three embedded nodes on the wall clock with dataset `metrics` converged, the API of n2 on
// 127.0.0.1 with a token. Every check of Schemathesis 4.32 (its configuration and the few
// per-operation exclusions, each with its reason, are in schemathesis.toml), a fixed seed and a
// bounded number of examples per operation; it must find nothing. On failure the assertion shows
// Schemathesis's own report.
//
// Two runs with the token, so the reads have a dataset to read all along: every operation but the
// one that removes a dataset, then that one with `GET /status`, whose answer names `metrics`, which
// Schemathesis then removes (it takes values for a path from the answers of other operations).
// Then a run without the token, over the operations that need it: Schemathesis's `ignored_auth`
// check tries an operation without the token only after it succeeded with it, which some never do
// with generated data (FiloDB's shard routes want members and shards that fit the cluster). Without
// the token every answer must refuse the token (401, or 403 for a token Schemathesis made up) or
// the method (405): the token is checked before anything else about a request.
import { spawn, type ChildProcess } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fetchSchemathesis } from '../../scripts/services/schemathesis.js';
import type { EmbeddedCluster } from '../../src/embedded/embedded-cluster.js';
import { startNodeApi, type NodeApi } from '../../src/http/node-api.js';
import { liveCluster } from '../support/live-cluster.js';
import { stopChild } from '../support/stop-child.js';
import { tempDir } from '../support/temp-dir.js';

const TOKEN = 'schemathesis-token-0123456789';
const CONFIG = fileURLToPath(new URL('./schemathesis.toml', import.meta.url));
const REMOVE_DATASET = 'DELETE /api/v1/datasets/{dataset}';
/** A run takes 10 to 30 s on the 2-core CI machine; this bounds one that hangs. */
const RUN_LIMIT_MS = 150_000;

let st: string;
let cluster: EmbeddedCluster | undefined;
let api: NodeApi | undefined;
let running: ChildProcess | undefined;
let workDir: string;

beforeAll(async () => {
  // Installed by `npm run services:fetch`; the first run on a machine without it installs it here.
  st = (await fetchSchemathesis((line) => process.stderr.write(`${line}\n`))).st;
  // Schemathesis writes nothing here (no examples database, no cache): its working directory anyway.
  workDir = tempDir('shardherd-schemathesis-');
  cluster = liveCluster('schemathesis', ['n1', 'n2', 'n3']);
  await cluster.start();
  await cluster.setupDataset({ ref: 'metrics', numShards: 8, minNumNodes: 2, source: { type: 'synthetic', recordsPerSecond: 100 } });
  await cluster.whenConverged('metrics', { timeoutMs: 30_000 });
  api = await startNodeApi(cluster.node('n2'), { host: '127.0.0.1', port: 0, token: TOKEN });
}, 180_000);

afterAll(async () => {
  await stopChild(running);
  await api?.close();
  await cluster?.stop();
});

/** What is read of Schemathesis's HAR report: every request it sent and its answer. */
interface HarLog {
  readonly log: {
    readonly entries: ReadonlyArray<{
      readonly request: { readonly method: string; readonly url: string };
      readonly response: { readonly status: number; readonly content: { readonly text?: string } };
    }>;
  };
}

interface Run {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly output: string;
}

/** `st run` against the node's document and base URL, with the token unless told, a fixed seed and `extra`. */
async function schemathesis(maxExamples: number, extra: readonly string[], { token = true } = {}): Promise<Run> {
  const url = api!.url;
  const args = [
    '--config-file',
    CONFIG,
    'run',
    `${url}/api/v1/openapi.json`,
    '--url',
    url,
    ...(token ? ['--header', `Authorization: Bearer ${TOKEN}`] : []),
    '--seed',
    '20261129',
    '--max-examples',
    String(maxExamples),
    '--generation-database',
    'none',
    '--request-timeout',
    '15',
    '--workers',
    '1',
    '--no-color',
    ...extra,
  ];
  const child = spawn(st, args, { cwd: workDir, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, NO_COLOR: '1' } });
  running = child;
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
  const limit = setTimeout(() => void stopChild(child), RUN_LIMIT_MS);
  try {
    return await new Promise<Run>((resolve, reject) => {
      child.once('error', reject);
      child.once('close', (code, signal) => resolve({ code, signal, output: `$ st ${args.join(' ').replace(TOKEN, '<token>')}\n${output}` }));
    });
  } finally {
    clearTimeout(limit);
    running = undefined;
  }
}

describe('Schemathesis against a node', () => {
  it('finds nothing in any operation but the removal of a dataset, with the dataset there', async () => {
    const run = await schemathesis(100, ['--exclude-name', REMOVE_DATASET]);
    expect(run.code, run.output).toBe(0);
    // It ran against the real node: the operations and their answers, not an empty selection.
    expect(run.output).toMatch(/Tested: 43\b/);
  }, 240_000);

  it('finds nothing in the removal of a dataset, and removes `metrics`', async () => {
    const run = await schemathesis(50, ['--include-name', 'GET /status', '--include-name', REMOVE_DATASET]);
    expect(run.code, run.output).toBe(0);
    expect(run.output).toMatch(/Tested: 2\b/);
    // A removal that succeeded was checked too (its answer, and `ignored_auth` after it), not only refusals.
    const { datasets } = (await (await fetch(`${api!.url}/api/v1/datasets`)).json()) as { datasets: Array<{ name: string }> };
    expect(datasets.map((d) => d.name)).not.toContain('metrics');
  }, 240_000);

  it('without the token, finds nothing in the operations that need it, and each answers 401, 403 or 405', async () => {
    const har = join(workDir, 'without-token.har');
    // The operations that change the cluster are its POSTs, PUTs and DELETEs, and only they need the token.
    const run = await schemathesis(30, ['--include-method-regex', '^(POST|PUT|DELETE)$', '--report', 'har', '--report-har-path', har], { token: false });
    expect(run.code, run.output).toBe(0);
    expect(run.output).toMatch(/Tested: 8\b/);
    const entries = (JSON.parse(await readFile(har, 'utf8')) as HarLog).log.entries;
    expect(entries.length).toBeGreaterThan(100);
    const others = entries
      .filter((e) => ![401, 403, 405].includes(e.response.status))
      .map((e) => `${e.request.method} ${e.request.url} -> ${e.response.status} ${e.response.content.text ?? ''}`);
    expect(others, others.join('\n')).toEqual([]);
  }, 240_000);
});
