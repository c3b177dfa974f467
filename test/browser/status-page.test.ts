// The status page in a real headless Chromium: it shows an embedded cluster's shard grid, and when
// a node is killed the grid shows its shards move to the survivors, live (server-sent events).
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EmbeddedCluster } from '../../src/embedded/embedded-cluster.js';
import { liveCluster } from '../support/live-cluster.js';
import { startNodeApi, type NodeApi } from '../../src/http/node-api.js';
import { CHROMIUM } from './global-setup.js';

let cluster: EmbeddedCluster;
let api: NodeApi;
let browser: Browser;
let page: Page;
let dir: string;

interface Cell {
  readonly shard: number;
  readonly status: string;
  readonly owners: string[];
}

const cells = (dataset: string): Promise<Cell[]> =>
  page.$$eval(`section[data-dataset="${dataset}"] .cell`, (els) => els.map((e) => ({
    shard: Number(e.getAttribute('data-shard')),
    status: e.getAttribute('data-status') ?? '',
    owners: (e.getAttribute('data-owners') ?? '').split(',').filter(Boolean),
  })));

async function until<T>(what: string, probe: () => Promise<T>, ok: (v: T) => boolean, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: T;
  do {
    last = await probe();
    if (ok(last)) return last;
    await new Promise((r) => setTimeout(r, 100));
  } while (Date.now() < deadline);
  throw new Error(`${what}: not within ${timeoutMs} ms; last seen ${JSON.stringify(last)}`);
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'shardherd-page-'));
  cluster = liveCluster('page', [{ name: 'n1', rack: 'rack-a' }, { name: 'n2', rack: 'rack-b' }, { name: 'n3', rack: 'rack-a' }, { name: 'n4', rack: 'rack-b' }]);
  await cluster.start();
  await cluster.setupDataset({ ref: 'metrics', numShards: 16, minNumNodes: 2, source: { type: 'synthetic', recordsPerSecond: 200 } });
  api = await startNodeApi(cluster.node('n2'), { port: 0, token: 'page-test-token-0123456789', feed: { refreshMs: 1_000 } });
  try {
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] });
  } catch (e) {
    throw new Error(`could not start headless Chromium at ${CHROMIUM}: ${e instanceof Error ? e.message : String(e)}`, { cause: e });
  }
  page = await browser.newPage({ viewport: { width: 1200, height: 900 } });
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await api?.close();
  await cluster?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('the status page', () => {
  it('shows every shard Active with its owner, the members with racks and the singleton', async () => {
    await page.goto(`${api.url}/`);
    const grid = await until('all 16 shards Active on the page', () => cells('metrics'), (c) => c.length === 16 && c.every((x) => x.status === 'Active' && x.owners.length === 1));
    expect(new Set(grid.flatMap((c) => c.owners)).size).toBeGreaterThanOrEqual(2);
    const members = await page.$$eval('#members tbody tr', (rows) => rows.map((r) => r.textContent ?? ''));
    expect(members).toHaveLength(4);
    expect(members.find((m) => m.includes('singleton'))).toMatch(/^n1/);
    expect(members.join(' ')).toContain('rack-b');
    expect(await page.textContent('#singleton')).toMatch(/^n1 \(epoch 1\)$/);
    expect(await page.textContent('#connection')).toBe('live');
  });

  it('shows the shards of a killed node move to the survivors, without a reload', async () => {
    const before = await cells('metrics');
    const victim = 'n3';
    const moved = before.filter((c) => c.owners.includes(victim)).map((c) => c.shard);
    expect(moved.length).toBeGreaterThan(0);
    const loadedAt = await page.evaluate(() => performance.timeOrigin);
    cluster.node(victim).crash();
    const after = await until(
      `the shards of ${victim} shown Active elsewhere`,
      () => cells('metrics'),
      (c) => c.length === 16 && c.every((x) => x.status === 'Active' && x.owners.length === 1 && !x.owners.includes(victim)),
    );
    for (const shard of moved) expect(after[shard]!.owners[0]).not.toBe(victim);
    await until('the killed node gone from the members', () => page.$$eval('#members tbody tr', (rows) => rows.map((r) => r.getAttribute('data-node'))), (nodes) => !nodes.includes(victim));
    expect(await page.evaluate(() => performance.timeOrigin)).toBe(loadedAt); // the same page: it updated itself
    const shot = join(dir, 'status-page.png');
    await page.screenshot({ path: shot, fullPage: true });
    // `UPDATE_SCREENSHOT=1 npm test` refreshes the one kept in docs/.
    if (process.env.UPDATE_SCREENSHOT === '1') copyFileSync(shot, join(import.meta.dirname, '../../docs/status-page.png'));
  }, 40_000);
});
