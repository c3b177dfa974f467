// The status page in a real headless Chromium says why a shard failed in text one reads at a
// glance (in the shard's cell and in full under the grid), not only in a tooltip.
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EmbeddedCluster } from '../../src/embedded/embedded-cluster.js';
import { startNodeApi, type NodeApi } from '../../src/http/node-api.js';
import { liveCluster } from '../support/live-cluster.js';
import { CHROMIUM } from './global-setup.js';

let cluster: EmbeddedCluster;
let api: NodeApi;
let browser: Browser;
let page: Page;

beforeAll(async () => {
  // Record 20 of shard 1 cannot be read: the shard fails, moves once, fails again and stays in Error.
  cluster = liveCluster('causes', ['n1', 'n2'], { source: { failAt: (_ds, shard, offset) => (shard === 1 && offset === 20 ? 'poison record at offset 20' : undefined) } });
  await cluster.start();
  await cluster.setupDataset({ ref: 'metrics', numShards: 4, minNumNodes: 2, source: { type: 'synthetic', recordsPerSecond: 400 } });
  api = await startNodeApi(cluster.node('n1'), { port: 0, token: 'page-test-token-0123456789', feed: { refreshMs: 1_000 } });
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] });
  page = await browser.newPage({ viewport: { width: 1200, height: 900 } });
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await api?.close();
  await cluster?.stop();
});

describe('the status page of a shard in Error', () => {
  it('shows the ingestion error as visible text in its cell and in full under the grid', async () => {
    await page.goto(`${api.url}/`);
    const cell = page.locator('section[data-dataset="metrics"] .cell[data-shard="1"][data-status="Error"]');
    await cell.waitFor({ timeout: 30_000 });
    const cause = cell.locator('.e');
    expect(await cause.isVisible()).toBe(true);
    expect(await cause.innerText()).toBe('poison record at offset 20');
    const listed = page.locator('section[data-dataset="metrics"] .failures li[data-shard="1"]');
    expect(await listed.isVisible()).toBe(true);
    expect(await listed.innerText()).toBe('shard 1 failed: poison record at offset 20');
    // The healthy shards show no cause.
    expect(await page.locator('section[data-dataset="metrics"] .cell[data-status="Active"] .e').count()).toBe(0);
  }, 60_000);
});
