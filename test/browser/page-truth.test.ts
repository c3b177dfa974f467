// The status page tells the truth as a user reads it: the shard panel follows the shard however it
// was opened (keyboard focus or click), the header says "live" only while views arrive (a singleton
// outage, a lost connection and a silent one each say so), and the page fits a 420 px wide phone
// without horizontal scrolling.
import { pino } from 'pino';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EmbeddedCluster } from '../../src/embedded/embedded-cluster.js';
import { startNodeApi, type NodeApi } from '../../src/http/node-api.js';
import { cellCentre, horizontalFit, openPage, paintedStatuses, until } from './page-probe.js';

let cluster: EmbeddedCluster;
let api: NodeApi;
let browser: Browser;
let page: Page;
const TOKEN = 'page-truth-token-0123456789';

beforeAll(async () => {
  // A session far longer than the outage the test makes: a paused singleton stays the singleton,
  // so nobody takes over and the page has no view for as long as it is paused.
  cluster = new EmbeddedCluster({
    name: `page-truth-${Date.now()}`,
    nodes: [
      { name: 'n1', rack: 'rack-a' },
      { name: 'n2', rack: 'rack-b' },
      { name: 'n3', rack: 'rack-a' },
    ],
    log: pino({ level: 'silent' }),
    sessionTimeoutMs: 60_000,
    heartbeatIntervalMs: 250,
    settings: { publishIntervalMs: 500, recoveryReplyTimeoutMs: 500, pollIntervalMs: 50, reportResendMs: 500 },
  });
  await cluster.start();
  await cluster.setupDataset({ ref: 'metrics', numShards: 16, minNumNodes: 2, source: { type: 'synthetic', recordsPerSecond: 200 } });
  await cluster.setupDataset({
    ref: 'logs-with-a-rather-long-dataset-name',
    numShards: 64,
    minNumNodes: 2,
    source: { type: 'synthetic', recordsPerSecond: 50 },
  });
  api = await startNodeApi(cluster.node('n2'), { port: 0, token: TOKEN, singletonTimeoutMs: 500, feed: { refreshMs: 500 } });
  ({ browser, page } = await openPage());
  await page.goto(`${api.url}/`);
  await until(
    'every shard painted Active',
    () => paintedStatuses(page, 'metrics'),
    (p) => p.length === 16 && p.every((s) => s === 'Active'),
  );
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await api?.close();
  await cluster?.stop();
});

const panelTitle = (dataset: string) => page.locator(`section[data-dataset="${dataset}"] .inspector h3`).first().textContent();

/** Every shard panel whose visible title says a status other than its map paints for that shard. */
async function panelsAgainstMaps(): Promise<string[]> {
  const wrong: string[] = [];
  for (const dataset of ['metrics', 'logs-with-a-rather-long-dataset-name']) {
    const panel = page.locator(`section[data-dataset="${dataset}"] .inspector h3`).first();
    if (!(await panel.isVisible())) continue;
    const said = /^\S+ shard (\d+): (\w+?)(?:selected)?$/.exec((await panel.textContent()) ?? '');
    if (!said) continue;
    const painted = (await paintedStatuses(page, dataset))[Number(said[1])];
    if (painted !== said[2]) wrong.push(`${dataset}: the panel says shard ${said[1]} is ${said[2]}, the map paints it ${painted}`);
  }
  return wrong;
}

async function stopShard(dataset: string, shard: number): Promise<void> {
  const res = await fetch(`${api.url}/api/v1/cluster/${dataset}/stopshards`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ shardList: [shard] }),
  });
  expect(res.status).toBe(200);
}

describe('the status page tells the truth', () => {
  it('keeps the panel of a shard focused by keyboard (not clicked) current as the shard stops', async () => {
    // The pointer away from the map: only the keyboard opens the panel.
    await page.mouse.move(0, 0);
    await page.locator('section[data-dataset="metrics"] canvas.heatmap').focus();
    await page.keyboard.press('ArrowRight');
    await until(
      'shard 1 in the panel, Active',
      () => panelTitle('metrics'),
      (t) => t === 'metrics shard 1: Active',
    );
    await stopShard('metrics', 1);
    await until(
      'shard 1 painted Stopped',
      () => paintedStatuses(page, 'metrics'),
      (p) => p[1] === 'Stopped',
    );
    // The map and the panel show the same moment: the panel has had every update the map had.
    await until(
      'the panel says Stopped',
      () => panelTitle('metrics'),
      (t) => t === 'metrics shard 1: Stopped',
      3_000,
    );
    expect(await page.locator('section[data-dataset="metrics"] .inspector').textContent()).toContain('no copy');
  });

  it('leaves no panel showing a shard as it was: the map left for another map, its panel does not say Active of a Stopped shard', async () => {
    await page.mouse.move(0, 0);
    await page.locator('section[data-dataset="metrics"] canvas.heatmap').focus();
    await page.keyboard.press('Home');
    for (let k = 0; k < 3; k++) await page.keyboard.press('ArrowRight');
    await until(
      'shard 3 in the panel, Active',
      () => panelTitle('metrics'),
      (t) => t === 'metrics shard 3: Active',
    );
    // The keyboard goes on to the next map: the first map's panel no longer follows a selection.
    await page.locator('section[data-dataset="logs-with-a-rather-long-dataset-name"] canvas.heatmap').focus();
    await until(
      "the other map's shard 0 in its panel",
      () => panelTitle('logs-with-a-rather-long-dataset-name'),
      (t) => (t ?? '').startsWith('logs-with-a-rather-long-dataset-name shard 0: '),
    );
    await stopShard('metrics', 3);
    await until(
      'shard 3 painted Stopped',
      () => paintedStatuses(page, 'metrics'),
      (p) => p[3] === 'Stopped',
    );
    await new Promise((r) => setTimeout(r, 1_000));
    expect(await panelsAgainstMaps()).toEqual([]);

    // The same when the shard was clicked (kept selected) before the keyboard went on.
    const { x, y } = await cellCentre(page, 'metrics', 4);
    await page.mouse.click(x, y);
    await until(
      'shard 4 selected, Active',
      () => panelTitle('metrics'),
      (t) => t === 'metrics shard 4: Activeselected',
    );
    await page.mouse.move(0, 0);
    await page.locator('section[data-dataset="logs-with-a-rather-long-dataset-name"] canvas.heatmap').focus();
    await page.keyboard.press('ArrowRight');
    await stopShard('metrics', 4);
    await until(
      'shard 4 painted Stopped',
      () => paintedStatuses(page, 'metrics'),
      (p) => p[4] === 'Stopped',
    );
    await new Promise((r) => setTimeout(r, 1_000));
    expect(await panelsAgainstMaps()).toEqual([]);
  });

  it('keeps the panel of a clicked shard current too', async () => {
    await page.locator('section[data-dataset="metrics"] .attention .cell[data-shard="1"] button').click();
    await until(
      'shard 1 selected',
      () => panelTitle('metrics'),
      (t) => t === 'metrics shard 1: Stoppedselected',
    );
    await page.locator('section[data-dataset="metrics"] canvas.heatmap').focus();
    await page.keyboard.press('ArrowRight');
    await until(
      'shard 2 selected, Active',
      () => panelTitle('metrics'),
      (t) => t === 'metrics shard 2: Activeselected',
    );
    await stopShard('metrics', 2);
    await until(
      'the panel says Stopped',
      () => panelTitle('metrics'),
      (t) => t === 'metrics shard 2: Stoppedselected',
      5_000,
    );
    await page.keyboard.press('Escape');
  });

  it('says the singleton is unavailable, not "live", while no singleton answers, and live again after', async () => {
    const connection = page.locator('#connection');
    expect(await connection.textContent()).toBe('live');
    const singleton = cluster.node('n1');
    singleton.pause();
    try {
      const said = await until(
        'the header tells the outage',
        () => connection.textContent(),
        (t) => (t ?? '').startsWith('singleton unavailable since '),
        10_000,
      );
      expect(said).toMatch(/^singleton unavailable since \d\d:\d\d:\d\d$/);
      // It stays so while the outage lasts, through the node's own map polls and ingestion samples.
      await new Promise((r) => setTimeout(r, 2_500));
      expect(await connection.textContent()).toBe(said);
      expect(await page.locator('#banner').isVisible()).toBe(true);
    } finally {
      singleton.resume();
    }
    await until(
      'live again once the singleton answers',
      () => connection.textContent(),
      (t) => t === 'live',
      15_000,
    );
    expect(await page.locator('#banner').isVisible()).toBe(false);
  }, 40_000);

  it('fits a 420 px wide screen: no horizontal scroll, every dataset panel inside the viewport', async () => {
    await page.setViewportSize({ width: 420, height: 900 });
    // Let the page redraw its maps for the new width (it waits for the resizing to end).
    await new Promise((r) => setTimeout(r, 500));
    const fit = () => horizontalFit(page);
    const narrow = await fit();
    expect(narrow.panels.length).toBe(2);
    expect(narrow.outside).toEqual([]);
    expect(narrow.scrollWidth).toBeLessThanOrEqual(narrow.clientWidth);
    for (const p of narrow.panels) {
      expect(p.left).toBeGreaterThanOrEqual(0);
      expect(p.right).toBeLessThanOrEqual(narrow.clientWidth);
    }
    // The map is still drawn, whole, and a shard can still be opened.
    const map = await page.locator('section[data-dataset="logs-with-a-rather-long-dataset-name"] canvas.heatmap').boundingBox();
    expect(map!.x + map!.width).toBeLessThanOrEqual(narrow.clientWidth);
    expect((await paintedStatuses(page, 'logs-with-a-rather-long-dataset-name')).length).toBe(64);

    await page.setViewportSize({ width: 1200, height: 900 });
    await new Promise((r) => setTimeout(r, 500));
    const wide = await fit();
    expect(wide.outside).toEqual([]);
    expect(wide.scrollWidth).toBeLessThanOrEqual(wide.clientWidth);
    // At desktop width the map and its panel stand side by side, as before.
    const [mapBox, panelBox] = await Promise.all([
      page.locator('section[data-dataset="metrics"] canvas.heatmap').boundingBox(),
      page.locator('section[data-dataset="metrics"] .inspector').boundingBox(),
    ]);
    expect(panelBox!.x).toBeGreaterThan(mapBox!.x + mapBox!.width);
  });

  describe('the header on a page of its own', () => {
    let own: Page;
    let ownApi: NodeApi;

    /** Every text the header took since the page was opened, in order (a change shown for a moment counts). */
    const headerTexts = () => own.evaluate<string[]>('window.said');

    beforeAll(async () => {
      ownApi = await startNodeApi(cluster.node('n3'), { port: 0, token: TOKEN, feed: { refreshMs: 500 } });
      own = await browser.newPage();
      // The page's clock is ours to move: ten silent seconds pass in an instant.
      await own.clock.install();
      await own.addInitScript({
        content: `
          window.said = [];
          document.addEventListener('DOMContentLoaded', () => {
            const header = document.getElementById('connection');
            new MutationObserver(() => {
              if (window.said[window.said.length - 1] !== header.textContent) window.said.push(header.textContent);
            }).observe(header, { childList: true, characterData: true, subtree: true });
          });`,
      });
      await own.goto(`${ownApi.url}/`);
      await until(
        'live',
        () => own.locator('#connection').textContent(),
        (t) => t === 'live',
      );
    }, 30_000);

    afterAll(async () => {
      await own?.close();
      await ownApi?.close();
    });

    it('says "no update for N s" once ten seconds pass without a message, and live again when one comes', async () => {
      // Jumps the page's clock ahead (a pause first raced the clock it read: "fast-forward to the past").
      await own.clock.fastForward(12_000);
      const texts = await until('silence told', headerTexts, (t) => t.some((x) => /^no update for 1[0-9] s$/.test(x)), 5_000);
      const silent = texts.findIndex((x) => x.startsWith('no update for'));
      await until('live again after the next message', headerTexts, (t) => t.slice(silent + 1).includes('live'), 10_000);
    });

    it('says "reconnecting since" while its node does not answer, and live again once it does', async () => {
      const port = Number(new URL(ownApi.url).port);
      const before = (await headerTexts()).length;
      await ownApi.close();
      const texts = await until('reconnecting told', headerTexts, (t) => t.slice(before).some((x) => /^reconnecting since \d\d:\d\d:\d\d…$/.test(x)), 10_000);
      expect(await own.locator('#connection').getAttribute('data-state')).toBe('reconnecting');
      const lost = texts.length;
      ownApi = await startNodeApi(cluster.node('n3'), { port, token: TOKEN, feed: { refreshMs: 500 } });
      await until('live again', headerTexts, (t) => t.slice(lost).includes('live'), 15_000);
      expect(await own.locator('#connection').getAttribute('data-state')).toBe('live');
    }, 30_000);
  });
});
