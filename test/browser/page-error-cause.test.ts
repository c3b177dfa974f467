// The status page in a real headless Chromium says why a shard failed in text one reads at a
// glance (beside the shard in the list of shards not Active, in full under it, and in the panel
// of the selected shard), not only by the heat-map's colour and cross.
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EmbeddedCluster } from '../../src/embedded/embedded-cluster.js';
import { startNodeApi, type NodeApi } from '../../src/http/node-api.js';
import { liveCluster } from '../support/live-cluster.js';
import { cellCentre, openPage, paintedStatuses, until } from './page-probe.js';

let cluster: EmbeddedCluster;
let api: NodeApi;
let browser: Browser;
let page: Page;
const CAUSE = 'poison record at offset 20';

beforeAll(async () => {
  // Record 20 of shard 1 cannot be read: the shard fails, moves once, fails again and stays in Error.
  cluster = liveCluster('cause', ['n1', 'n2'], { source: { failAt: (_ds, shard, offset) => (shard === 1 && offset === 20 ? CAUSE : undefined) } });
  await cluster.start();
  await cluster.setupDataset({ ref: 'metrics', numShards: 4, minNumNodes: 2, source: { type: 'synthetic', recordsPerSecond: 400 } });
  api = await startNodeApi(cluster.node('n1'), { port: 0, token: 'page-test-token-0123456789', feed: { refreshMs: 1_000 } });
  ({ browser, page } = await openPage());
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await api?.close();
  await cluster?.stop();
});

describe('the status page of a shard in Error', () => {
  it('paints it Error and shows its cause as visible text', async () => {
    await page.goto(`${api.url}/`);
    await until(
      'shard 1 painted Error',
      () => paintedStatuses(page, 'metrics'),
      (p) => p[1] === 'Error',
      30_000,
    );
    const cell = page.locator('section[data-dataset="metrics"] .cell[data-shard="1"][data-status="Error"]');
    const cause = cell.locator('.e');
    expect(await cause.isVisible()).toBe(true);
    expect(await cause.innerText()).toBe(CAUSE);
    const listed = page.locator('section[data-dataset="metrics"] .failures li[data-shard="1"]');
    expect(await listed.isVisible()).toBe(true);
    expect(await listed.innerText()).toBe(`shard 1 failed: ${CAUSE}`);
    // The healthy shards show no cause.
    expect(await page.locator('section[data-dataset="metrics"] .cell[data-status="Active"] .e').count()).toBe(0);
    const { x, y } = await cellCentre(page, 'metrics', 1);
    await page.mouse.click(x, y);
    const panel = page.locator('section[data-dataset="metrics"] .inspector .cause');
    await panel.first().waitFor();
    expect(await panel.first().innerText()).toBe(`cause: ${CAUSE}`);
  }, 60_000);
});
