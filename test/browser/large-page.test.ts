// The status page of a real-sized cluster in a real headless Chromium: 64 embedded nodes in 8 racks
// and one dataset of 4096 shards × RF 3 (12 288 copies). The page paints every shard in the
// heat-map, shows a shard's copies with rate, lag and history on hover, a row per node with its
// copies, rate and lag, and the events as they happen; an operator stops and starts a shard and
// drains and undrains a node from it, token asked each time; axe-core finds nothing serious.
// Measured and printed (not asserted but for generous sanity bounds, the machine is shared): the
// first render, each update's latency and size. docs/BENCHMARKS.md records a run. A screenshot of
// the page is left in the OS temp folder and its path printed.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EmbeddedCluster } from '../../src/embedded/embedded-cluster.js';
import { startNodeApi, type NodeApi } from '../../src/http/node-api.js';
import { cellCentre, type Marked, marks, openPage, paintedStatuses, tally, until } from './page-probe.js';

const NODES = 64;
const SHARDS = 4096;
const RF = 3;
const TOKEN = 'large-page-token-0123456789';
const DATASET = 'metrics';
/**
 * Per shard. All 12 288 copies ingest in this one process, beside the singleton and the API: at
 * 1 record/s their work kept the singleton's answers seconds late on a slow machine. A quarter of
 * that still gives every copy and node a rate and a lag to show.
 */
const RECORDS_PER_SECOND = 0.25;

let cluster: EmbeddedCluster;
let api: NodeApi;
let browser: Browser;
let page: Page;
const outDir = mkdtempSync(join(tmpdir(), 'shardherd-large-page-'));
/** Everything measured, printed at the end and written beside the screenshot. */
const measured: Record<string, unknown> = {};
/** Errors thrown in the page: none is expected. */
const pageErrors: string[] = [];

const node = (i: number) => `n${String(i).padStart(2, '0')}`;

beforeAll(async () => {
  const t0 = performance.now();
  cluster = new EmbeddedCluster({
    name: `large-page-${Date.now()}`,
    nodes: Array.from({ length: NODES }, (_, i) => ({ name: node(i + 1), rack: `rack-${i % 8}` })),
    log: pino({ level: 'silent' }),
    // Sessions long enough that 64 nodes, 12 288 ingesting copies and a browser on 2 shared cores
    // do not expire one by a stalled event loop.
    sessionTimeoutMs: 5_000,
    heartbeatIntervalMs: 500,
    settings: { publishIntervalMs: 1_000, recoveryReplyTimeoutMs: 1_000, pollIntervalMs: 200, reportResendMs: 1_000 },
  });
  await cluster.start({ timeoutMs: 60_000 });
  expect(
    (
      await cluster.setupDataset({
        ref: DATASET,
        numShards: SHARDS,
        minNumNodes: NODES,
        replicationFactor: RF,
        strategy: 'balanced',
        source: { type: 'synthetic', recordsPerSecond: RECORDS_PER_SECOND },
      })
    ).type,
  ).toBe('DatasetVerified');
  await cluster.whenConverged(DATASET, { timeoutMs: 120_000 });
  measured.clusterReadyMs = Math.round(performance.now() - t0);
  // The singleton shares this process's event loop with 64 nodes' ingestion: an operator's answer
  // may wait longer than a real node's 5 s before the API gives up with a 503.
  api = await startNodeApi(cluster.node('n02'), { port: 0, token: TOKEN, singletonTimeoutMs: 30_000 });
  ({ browser, page } = await openPage({ width: 1400, height: 1000 }));
  page.on('pageerror', (e) => pageErrors.push(e.message));
}, 180_000);

afterAll(async () => {
  await browser?.close();
  await api?.close();
  await cluster?.stop();
  writeFileSync(join(outDir, 'timings.json'), `${JSON.stringify(measured, null, 2)}\n`);
  console.log(`status page at ${SHARDS} shards × RF ${RF} on ${NODES} nodes, measured: ${JSON.stringify(measured)}`);
  console.log(`timings: ${join(outDir, 'timings.json')}`);
}, 60_000);

/** The updates painted since `sinceMs` (page clock) that changed shards. */
async function shardUpdates(sinceMs: number): Promise<Marked[]> {
  return (await marks(page, 'update')).filter((m) => Number(m.detail.received) >= sinceMs && Number(m.detail.shards) > 0);
}

/** Clicks an action button, gives the token in the dialog, and waits for the API's answer on the page. */
async function act(button: ReturnType<Page['locator']>, expectStatus: RegExp): Promise<Marked> {
  const before = (await marks(page, 'action')).length;
  await button.click();
  const dialog = page.locator('#token-dialog');
  await dialog.waitFor({ state: 'visible' });
  expect(await dialog.textContent()).toContain('access token');
  if ((await page.inputValue('#token-input')) === '') await page.fill('#token-input', TOKEN);
  await page.check('#token-remember');
  await page.click('#token-confirm');
  const action = await until(
    "the API's answer",
    () => marks(page, 'action'),
    (m) => m.length > before,
  );
  const answer = await page.textContent('#action-result');
  expect(answer).toMatch(expectStatus);
  return action[action.length - 1]!;
}

const ms = (n: number) => Math.round(n);
/** From the update's making on the page's node (its `at`, wall clock) to the page painting it: the page's part of an update. */
const builtToPainted = async (u: Marked) => ms((await page.evaluate(() => performance.timeOrigin)) + Number(u.detail.painted) - Number(u.detail.at));
const stats = (xs: readonly number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return { n: s.length, median: ms(s[Math.floor(s.length / 2)] ?? NaN), max: ms(s[s.length - 1] ?? NaN) };
};

describe(`the status page of ${NODES} nodes and ${SHARDS} shards × RF ${RF}`, () => {
  it('paints every shard on first load, well within the sanity bound, and again on a reload', async () => {
    await page.goto(`${api.url}/`);
    const [first] = await until(
      'the first render',
      () => marks(page, 'first-render'),
      (m) => m.length > 0,
      30_000,
    );
    const [snapshot] = await marks(page, 'snapshot');
    const painted = await paintedStatuses(page, DATASET);
    expect(painted).toHaveLength(SHARDS);
    expect(tally(painted)).toEqual({ Active: SHARDS });
    measured.firstRenderColdMs = ms(first!.startTime);
    // Where it went: the page's HTML loaded, then the snapshot (the feed's first view of the cluster) came in.
    measured.htmlLoadedMs = ms(
      await page.evaluate(
        () =>
          (globalThis as unknown as { performance: { getEntriesByType(t: string): { responseEnd: number }[] } }).performance.getEntriesByType('navigation')[0]!
            .responseEnd,
      ),
    );
    measured.snapshotReceivedMs = ms(Number(snapshot!.detail.received));
    measured.snapshotBytes = snapshot!.detail.bytes;
    // For comparison: the overview (what each `view` of /api/v1/events carries, every change and every refresh).
    measured.overviewBytes = (await (await fetch(`${api.url}/api/v1/overview`)).text()).length;
    measured.snapshotReceiveToPaintMs = ms(Number(snapshot!.detail.painted) - Number(snapshot!.detail.received));
    // A reload finds the feed running (it lingers a minute after the last page left).
    await page.reload();
    const [again] = await until(
      'the first render after a reload',
      () => marks(page, 'first-render'),
      (m) => m.length > 0,
      30_000,
    );
    measured.firstRenderWarmMs = ms(again!.startTime);
    expect(tally(await paintedStatuses(page, DATASET))).toEqual({ Active: SHARDS });
    expect(first!.startTime).toBeLessThan(15_000); // a sanity bound; the goal (1 s) is measured, not asserted
    // Every node has its row with its 192 copies, and within a sample or two its rate and lag.
    const rows = await page.locator('#members tbody tr').count();
    expect(rows).toBe(NODES);
    await until(
      "every node's ingest rate",
      () => page.$$eval('#members tbody tr td:nth-child(6)', (tds) => tds.map((t) => t.textContent ?? '')),
      (r) => r.every((t) => /^\d[\d.,]*\/s$/.test(t)),
      20_000,
      250,
    );
    measured.ingestionBytes = (await marks(page, 'ingestion')).at(-1)?.detail.bytes;
    const copies = await page.$$eval('#members tbody tr td:nth-child(4)', (tds) => tds.map((t) => Number(t.textContent)));
    expect(copies.reduce((a, b) => a + b, 0)).toBe(SHARDS * RF);
    expect(await page.textContent('#updated-at')).toMatch(/^\d\d:\d\d:\d\d$/);
  }, 120_000);

  it("shows a hovered shard's copies with their rate and lag", async () => {
    const shard = 1234;
    const { x, y } = await cellCentre(page, DATASET, shard);
    await page.mouse.move(x, y);
    const inspector = page.locator(`section[data-dataset="${DATASET}"] .inspector`);
    await until(
      'the hovered shard in the panel',
      () => inspector.textContent(),
      (t) => (t ?? '').includes(`${DATASET} shard ${shard}: Active`),
    );
    const rows = await until(
      'its copies with rate and lag',
      () => inspector.locator('tbody tr').evaluateAll((trs) => trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent ?? ''))),
      (r) => r.length === RF && r.every((c) => /\/s$/.test(c[3] ?? '') && /^\d/.test(c[4] ?? '')),
      20_000,
      250,
    );
    expect(new Set(rows.map((r) => r[0])).size).toBe(RF);
    expect(rows.every((r) => r[1] === 'Available' && r[2] === 'Active')).toBe(true);
  }, 60_000);

  const STOPPED = 777;
  const inspector = () => page.locator(`section[data-dataset="${DATASET}"] .inspector`);

  it('stops a shard from the page, asking for the token, and shows it Stopped, in colour, pattern and text, in time', async () => {
    const { x, y } = await cellCentre(page, DATASET, STOPPED);
    await page.mouse.click(x, y);
    await until(
      'the shard selected',
      () => inspector().textContent(),
      (t) => (t ?? '').includes(`${DATASET} shard ${STOPPED}: Active`) && (t ?? '').includes('selected'),
    );
    const stop = await act(inspector().getByRole('button', { name: 'Stop shard' }), /: 200 OK .*"status":"success"/);
    await until(
      'the shard painted Stopped',
      () => paintedStatuses(page, DATASET),
      (p) => p[STOPPED] === 'Stopped',
      20_000,
      10,
    );
    const [stopped] = await shardUpdates(Number(stop.detail.sent));
    measured.stopShard = {
      requestToPaintedMs: ms(Number(stopped!.detail.painted) - Number(stop.detail.sent)),
      answerToPaintedMs: ms(Number(stopped!.detail.painted) - Number(stop.detail.answered)),
      receiveToPaintedMs: ms(Number(stopped!.detail.painted) - Number(stopped!.detail.received)),
      builtToPaintedMs: await builtToPainted(stopped!),
      bytes: stopped!.detail.bytes,
    };
    expect(Number(stopped!.detail.painted) - Number(stop.detail.sent)).toBeLessThan(5_000); // a sanity bound; the goal (200 ms) is measured
    // In text too: the panel, the list of shards not Active, the counts, the timeline, the shard's history.
    await until(
      'the panel says Stopped',
      () => inspector().textContent(),
      (t) => (t ?? '').includes(`shard ${STOPPED}: Stopped`),
    );
    expect(await page.locator(`section[data-dataset="${DATASET}"] .attention .cell[data-shard="${STOPPED}"][data-status="Stopped"]`).count()).toBe(1);
    expect(await page.textContent('#timeline')).toContain(`${DATASET} #${STOPPED}Active → Stopped`);
    expect(await page.textContent(`section[data-dataset="${DATASET}"] .summary`)).toBe('Active 4095 · Stopped 1');
    await until(
      'its history in the panel',
      () => inspector().textContent(),
      (t) => /History.*Active → Stopped/.test(t ?? ''),
      10_000,
      100,
    );
  }, 60_000);

  it('has no serious or critical accessibility finding (axe-core, WCAG 2.1 A and AA), with the token dialog closed and open', async () => {
    const axe = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
    await page.addScriptTag({ content: axe });
    type Finding = { id: string; impact: string | null; help: string; nodes: { target: string[] }[] };
    const audit = () =>
      page.evaluate(async () => {
        const w = globalThis as unknown as { document: object; axe: { run(ctx: object, o: object): Promise<{ violations: Finding[]; passes: unknown[] }> } };
        const r = await w.axe.run(w.document, { runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'best-practice'] } });
        return {
          violations: r.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.slice(0, 3).map((n) => ({ target: n.target })) })),
          passes: r.passes.length,
        };
      });
    const closed = await audit();
    await page.locator('#members tbody tr[data-node="n01"]').getByRole('button', { name: 'Drain' }).click();
    await page.locator('#token-dialog').waitFor({ state: 'visible' });
    const open = await audit();
    await page.click('#token-dialog button[value="cancel"]');
    measured.axe = {
      passedRules: closed.passes,
      findings: closed.violations.map((v) => `${v.id} (${v.impact})`),
      withDialog: open.violations.map((v) => `${v.id} (${v.impact})`),
    };
    const serious = [...closed.violations, ...open.violations].filter((v) => v.impact === 'serious' || v.impact === 'critical');
    expect(serious).toEqual([]);
  }, 60_000);

  it('drains a node from its row, every step of the moves shown as it happens', async () => {
    const victim = 'n64';
    const row = page.locator(`#members tbody tr[data-node="${victim}"]`);
    const drain = await act(row.getByRole('button', { name: 'Drain' }), /: 202 Accepted/);
    await until(
      'the node shown draining',
      () => row.textContent(),
      (t) => (t ?? '').includes('draining'),
    );
    // The page as an operator sees it mid-drain: copies handed off (corner marks), the stopped shard.
    await until(
      'the first moves painted',
      () => shardUpdates(Number(drain.detail.sent)),
      (u) => u.length > 0,
      20_000,
      10,
    );
    const shot = join(outDir, 'status-page-4096.png');
    await page.screenshot({ path: shot, fullPage: true });
    console.log(`screenshot of the ${SHARDS}-shard page mid-drain: ${shot}`);
    // `UPDATE_SCREENSHOT=1` refreshes the one kept in docs/ (the window's height only: the heat-map, the first node rows).
    if (process.env.UPDATE_SCREENSHOT === '1') {
      await page.evaluate(() => (globalThis as unknown as { scrollTo(x: number, y: number): void }).scrollTo(0, 0));
      await page.screenshot({ path: join(import.meta.dirname, '../../docs/status-page.png') });
    }
    await until(
      `${victim}'s copies gone`,
      () => row.locator('td:nth-child(4)').textContent(),
      (t) => t === '0',
      120_000,
      100,
    );
    await until(
      'every shard but the stopped one Active',
      () => paintedStatuses(page, DATASET),
      (p) => p.every((s, i) => s === (i === STOPPED ? 'Stopped' : 'Active')),
      60_000,
      100,
    );
    const updates = await shardUpdates(Number(drain.detail.sent));
    measured.drain = {
      firstUpdateRequestToPaintedMs: ms(Number(updates[0]!.detail.painted) - Number(drain.detail.sent)),
      firstUpdateAnswerToPaintedMs: ms(Number(updates[0]!.detail.painted) - Number(drain.detail.answered)),
      updates: updates.length,
      shardsPerUpdate: stats(updates.map((u) => Number(u.detail.shards))),
      bytesPerUpdate: stats(updates.map((u) => Number(u.detail.bytes))),
      receiveToPaintedMs: stats(updates.map((u) => Number(u.detail.painted) - Number(u.detail.received))),
      builtToPaintedMs: stats(await Promise.all(updates.map(builtToPainted))),
      drainedInMs: ms(Number(updates[updates.length - 1]!.detail.painted) - Number(drain.detail.sent)),
    };
    expect(await page.textContent('#cluster-events')).toContain(`${victim} draining`);
    expect(await page.textContent('#timeline')).toMatch(/more shard changes \(each in its shard's history\)/);
  }, 180_000);

  it('starts the stopped shard and undrains the node from the page', async () => {
    const { x, y } = await cellCentre(page, DATASET, STOPPED);
    // Still selected since it was stopped: a click on a selected shard lets it go, a second selects it again.
    await page.mouse.click(x, y);
    if (!((await inspector().textContent()) ?? '').includes('selected')) await page.mouse.click(x, y);
    await until(
      'the stopped shard selected',
      () => inspector().textContent(),
      (t) => (t ?? '').includes(`shard ${STOPPED}: Stopped`) && (t ?? '').includes('selected'),
    );
    // The token is remembered (the box was ticked): the dialog still asks before anything is sent.
    const start = await act(inspector().getByRole('button', { name: 'Start shard on' }), /: 200 OK .*"status":"success"/);
    await until(
      'the shard painted as started',
      () => paintedStatuses(page, DATASET),
      (p) => p[STOPPED] !== 'Stopped',
      20_000,
      10,
    );
    const [started] = await shardUpdates(Number(start.detail.sent));
    measured.startShard = {
      requestToPaintedMs: ms(Number(started!.detail.painted) - Number(start.detail.sent)),
      answerToPaintedMs: ms(Number(started!.detail.painted) - Number(start.detail.answered)),
      receiveToPaintedMs: ms(Number(started!.detail.painted) - Number(started!.detail.received)),
      builtToPaintedMs: await builtToPainted(started!),
      bytes: started!.detail.bytes,
    };
    await until(
      'the shard Active again',
      () => paintedStatuses(page, DATASET),
      (p) => p[STOPPED] === 'Active',
      60_000,
      50,
    );
    await page.keyboard.press('Escape');
    const row = page.locator('#members tbody tr[data-node="n64"]');
    const undrain = await act(row.getByRole('button', { name: 'Undrain' }), /: 202 Accepted/);
    await until(
      'the node no longer draining',
      () => row.textContent(),
      (t) => !(t ?? '').includes('draining'),
      20_000,
      50,
    );
    measured.undrainAnswerMs = ms(Number(undrain.detail.answered) - Number(undrain.detail.sent));
    expect(await page.textContent('#cluster-events')).toContain('n64 no longer draining');
  }, 120_000);

  it('threw no error in the page', () => {
    expect(pageErrors).toEqual([]);
  });
});
