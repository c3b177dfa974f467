// The status page in a real headless Chromium: it paints an embedded cluster's shards in the
// heat-map and lists its members; when a node is killed the page shows its shards move to the
// survivors, live (server-sent events); a stopped shard shows as Stopped, saying why.
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EmbeddedCluster } from '../../src/embedded/embedded-cluster.js';
import { liveCluster } from '../support/live-cluster.js';
import { startNodeApi, type NodeApi } from '../../src/http/node-api.js';
import { cellCentre, marks, openPage, paintedStatuses, tally, until } from './page-probe.js';

let cluster: EmbeddedCluster;
let api: NodeApi;
let browser: Browser;
let page: Page;
const TOKEN = 'page-test-token-0123456789';

const memberRows = () =>
  page.$$eval('#members tbody tr', (rows) =>
    rows.map((r) => ({ node: r.getAttribute('data-node') ?? '', text: r.textContent ?? '', copies: Number(r.children[3]?.textContent) })),
  );

beforeAll(async () => {
  cluster = liveCluster(
    'page',
    [
      { name: 'n1', rack: 'rack-a' },
      { name: 'n2', rack: 'rack-b' },
      { name: 'n3', rack: 'rack-a' },
      { name: 'n4', rack: 'rack-b' },
    ],
    // Shard 0 ingests 20× the others: its node is the hot one in the members' heat scale.
    { source: { shardRates: (_dataset, shard) => (shard === 0 ? 20 : 1) } },
  );
  await cluster.start();
  await cluster.setupDataset({ ref: 'metrics', numShards: 16, minNumNodes: 2, source: { type: 'synthetic', recordsPerSecond: 200 } });
  api = await startNodeApi(cluster.node('n2'), { port: 0, token: TOKEN, feed: { refreshMs: 1_000 } });
  ({ browser, page } = await openPage());
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await api?.close();
  await cluster?.stop();
});

describe('the status page', () => {
  it("paints every shard Active, tells a hovered shard's owner, and lists the members with racks and the singleton", async () => {
    await page.goto(`${api.url}/`);
    await until(
      'all 16 shards painted Active',
      () => paintedStatuses(page, 'metrics'),
      (p) => p.length === 16 && p.every((s) => s === 'Active'),
    );
    const members = await memberRows();
    expect(members.map((m) => m.node)).toEqual(['n1', 'n2', 'n3', 'n4']);
    expect(members.find((m) => m.text.includes('singleton'))?.node).toBe('n1');
    expect(members.map((m) => m.text).join(' ')).toContain('rack-b');
    expect(members.reduce((n, m) => n + m.copies, 0)).toBe(16);
    expect(await page.textContent('#singleton')).toMatch(/^n1 \(epoch 1\)$/);
    expect(await page.textContent('#connection')).toBe('live');
    const { x, y } = await cellCentre(page, 'metrics', 0);
    await page.mouse.move(x, y);
    const copy = await until(
      "the hovered shard's copy in the panel",
      () => page.locator('section[data-dataset="metrics"] .inspector tbody td').first().textContent(),
      (t) => /^n\d$/.test(t ?? ''),
    );
    expect(members.find((m) => m.node === copy)?.copies).toBeGreaterThan(0);
  });

  it('colours each member by its load: the node of the hot shard red, the others blue, as the rates say', async () => {
    const map = await cluster.request((replyTo) => ({ type: 'GetShardMap', dataset: 'metrics' as never, replyTo }));
    const hotNode = map.type === 'CurrentShardSnapshot' ? map.snapshot.shards[0]!.assignments[0]!.node : undefined;
    expect(hotNode).toBeDefined();
    const heat = await until(
      'every member coloured by its ingestion rate',
      () =>
        page.$$eval('#members tbody tr', (rows) => {
          const { getComputedStyle } = globalThis as unknown as { getComputedStyle(e: object): { backgroundColor: string } };
          return rows.map((r) => {
            const cell = r.children[5] as unknown as { dataset: Record<string, string | undefined> };
            return { node: r.getAttribute('data-node'), heat: cell.dataset.heat, colour: getComputedStyle(cell).backgroundColor };
          });
        }),
      (rows) => rows.length === 4 && rows.every((r) => r.heat !== undefined) && rows.some((r) => r.heat === 'hot'),
    );
    // FiloDB's placement gives nodes different numbers of shards: the hot shard's node is the one far above the mean.
    expect(heat.filter((r) => r.heat === 'hot').map((r) => r.node)).toEqual([hotNode]);
    // Painted, not only labelled: the hot cell's colour is a red; a node under the mean (one with fewer shards) a blue.
    const rgb = (c: string) => (c.match(/\d+(\.\d+)?/g) ?? []).map(Number);
    const [hr, , hb] = rgb(heat.find((r) => r.heat === 'hot')!.colour);
    expect(hr!).toBeGreaterThan(hb!);
    for (const cold of heat.filter((r) => r.heat === 'cold')) {
      const [cr, , cb] = rgb(cold.colour);
      expect(cb!).toBeGreaterThan(cr!);
    }
    expect(heat.some((r) => r.heat === 'cold')).toBe(true);
  });

  it('works from the keyboard: the map moves shard by shard, and a focused button keeps its focus through updates', async () => {
    const canvas = page.locator('section[data-dataset="metrics"] canvas.heatmap');
    await canvas.focus();
    await page.keyboard.press('ArrowRight');
    await page.keyboard.press('ArrowDown');
    const panel = page.locator('section[data-dataset="metrics"] .inspector');
    await until(
      'shard 5 in the panel (one right, one row down of 4)',
      () => panel.textContent(),
      (t) => (t ?? '').includes('metrics shard 5: Active'),
    );
    await page.keyboard.press('Enter');
    await until(
      'shard 5 kept',
      () => panel.textContent(),
      (t) => (t ?? '').includes('selected'),
    );
    const drain = page.locator('#members tbody tr[data-node="n4"] button');
    await drain.focus();
    const seen = (await marks(page, 'ingestion')).length;
    await until(
      'an ingestion update and a view since',
      () => marks(page, 'ingestion'),
      (m) => m.length >= seen + 2,
      10_000,
      100,
    );
    expect(await drain.evaluate((b) => b === b.ownerDocument.activeElement)).toBe(true);
    await page.keyboard.press('Escape');
  });

  it('shows the shards of a killed node move to the survivors, without a reload', async () => {
    const victim = 'n3';
    expect((await memberRows()).find((m) => m.node === victim)?.copies).toBeGreaterThan(0);
    const loadedAt = await page.evaluate(() => performance.timeOrigin);
    cluster.node(victim).crash();
    const after = await until(
      `${victim} gone and its shards on the others`,
      memberRows,
      (rows) => !rows.some((r) => r.node === victim) && rows.reduce((n, r) => n + r.copies, 0) === 16,
    );
    expect(after.map((r) => r.node)).toEqual(['n1', 'n2', 'n4']);
    await until(
      'every shard painted Active again',
      () => paintedStatuses(page, 'metrics'),
      (p) => p.length === 16 && p.every((s) => s === 'Active'),
    );
    expect(await page.textContent('#cluster-events')).toMatch(new RegExp(`${victim} left`));
    expect(await page.evaluate(() => performance.timeOrigin)).toBe(loadedAt); // the same page: it updated itself
  }, 40_000);

  it('shows a stopped shard as Stopped, and says why it has no copy', async () => {
    const res = await fetch(`${api.url}/api/v1/cluster/metrics/stopshards`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ shardList: [3] }),
    });
    expect(res.status).toBe(200);
    await until(
      'shard 3 painted Stopped',
      () => paintedStatuses(page, 'metrics'),
      (p) => p[3] === 'Stopped',
    );
    expect(tally(await paintedStatuses(page, 'metrics'))).toEqual({ Active: 15, Stopped: 1 });
    expect(await page.locator('section[data-dataset="metrics"] .attention .cell[data-shard="3"][data-status="Stopped"]').textContent()).toBe(
      '#3 Stoppedno copy',
    );
    const { x, y } = await cellCentre(page, 'metrics', 3);
    await page.mouse.click(x, y);
    const panel = await until(
      'the panel',
      () => page.locator('section[data-dataset="metrics"] .inspector').textContent(),
      (t) => (t ?? '').includes('shard 3: Stopped'),
    );
    expect(panel).toContain('why it has no copy: stopped by an operator (stopshards)');
  }, 30_000);
});
