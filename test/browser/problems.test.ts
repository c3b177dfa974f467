// The status page in a real headless Chromium shows what failed for good: a cluster whose bus
// cannot carry its dataset's map (a misconfiguration on purpose: the bus's message limit below the
// singleton's map limit) lists the refused record under its problems, and says why the dataset's
// shards cannot be shown, instead of showing an empty grid as if nothing were wrong.
import type { Browser, Page } from 'playwright-core';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EmbeddedCluster } from '../../src/embedded/embedded-cluster.js';
import { startNodeApi, type NodeApi } from '../../src/http/node-api.js';
import { openPage } from './page-probe.js';

let cluster: EmbeddedCluster;
let api: NodeApi;
let browser: Browser;
let page: Page;

beforeAll(async () => {
  cluster = new EmbeddedCluster({
    name: `problems-${Date.now()}`,
    nodes: ['n1', 'n2'],
    log: pino({ level: 'silent' }),
    sessionTimeoutMs: 1_500,
    heartbeatIntervalMs: 250,
    bus: { maxRecordBytes: 1024, maxMessageBytes: 4 * 1024, retainRecords: 10_000 },
    settings: { publishIntervalMs: 500, recoveryReplyTimeoutMs: 500, pollIntervalMs: 50, reportResendMs: 500 },
  });
  await cluster.start();
  await new Promise((r) => setTimeout(r, 500));
  expect((await cluster.setupDataset({ ref: 'wide', numShards: 512, minNumNodes: 1, source: { type: 'synthetic', recordsPerSecond: 1 } })).type).toBe(
    'DatasetVerified',
  );
  // The page is served by the singleton's node, whose problems the cluster description carries.
  api = await startNodeApi(cluster.node('n1'), { port: 0, token: 'page-test-token-0123456789', singletonTimeoutMs: 2_000, feed: { refreshMs: 1_000 } });
  ({ browser, page } = await openPage());
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await api?.close();
  await cluster?.stop();
});

describe('the status page of a cluster with a record its bus refuses', () => {
  it("lists the problem with its count, and says why the dataset's shards are not shown", async () => {
    await page.goto(`${api.url}/`);
    await page.waitForSelector('#problems:not([hidden])', { timeout: 30_000 });
    const problems = await page.$$eval('#problem-list li', (items) => items.map((li) => li.textContent ?? ''));
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(
      /^n1: bus\.record-refused — a map-snapshot record of the singleton cannot be sent: .*maxMessageBytes.* \(\d+ times?, last at \d{4}-\d\d-\d\dT/,
    );
    const dataset = await page.textContent('section[data-dataset="wide"]');
    expect(dataset).toMatch(/this node cannot show the map/);
    expect(await page.$$('section[data-dataset="wide"] .cell')).toHaveLength(0);
  }, 60_000);
});
