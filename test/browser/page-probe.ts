// What the status page shows, read as a user sees it: the status each heat-map cell is painted in
// (its pixels, by the page's own status colours), where a shard's cell is, and the timings the page
// marks (`performance.mark('shardherd:…')`).
import { chromium, type Browser, type Page } from 'playwright-core';
import { CHROMIUM } from './global-setup.js';

/** The few browser globals the probes use, typed here: the project compiles without the DOM library. */
interface Canvas {
  readonly width: number;
  readonly height: number;
  readonly style: { readonly width: string };
  readonly dataset: Readonly<Record<string, string | undefined>>;
  getContext(kind: '2d'): { getImageData(x: number, y: number, w: number, h: number): { readonly data: Uint8ClampedArray } } | null;
}
export interface BrowserGlobals {
  readonly document: { querySelector(selector: string): Canvas | null; readonly documentElement: object };
  getComputedStyle(e: object): { getPropertyValue(name: string): string };
  readonly performance: { getEntriesByName(name: string): readonly { readonly startTime: number; readonly detail?: unknown }[] };
}

export interface Marked {
  readonly startTime: number;
  readonly detail: Record<string, number | string>;
}

/**
 * The status painted in each cell of a dataset's heat-map, shard by shard: the pixel at half the
 * cell's width and 80 % of its height, matched to the nearest status colour ('Unassigned' for
 * the panel's colour inside its ring; 'unknown' for anything else).
 */
export function paintedStatuses(page: Page, dataset: string): Promise<string[]> {
  return page.evaluate((name) => {
    const { document, getComputedStyle } = globalThis as unknown as BrowserGlobals;
    const canvas = document.querySelector(`section[data-dataset="${name}"] canvas.heatmap`);
    if (!canvas || !canvas.dataset.painted) return [];
    const cols = Number(canvas.dataset.cols);
    const cell = Number(canvas.dataset.cell);
    const n = Number(canvas.dataset.painted);
    const dpr = canvas.width / parseFloat(canvas.style.width);
    const data = canvas.getContext('2d')!.getImageData(0, 0, canvas.width, canvas.height).data;
    const css = getComputedStyle(document.documentElement);
    const rgb = (v: string) => {
      const h = css.getPropertyValue(v).trim().slice(1);
      return [0, 2, 4].map((i) => parseInt(h.slice(i, i + 2), 16));
    };
    const colours = ['Active', 'Recovery', 'Assigned', 'Error', 'Stopped', 'Down', 'Unassigned'].map((s) => [s, rgb(`--${s}`)] as const);
    colours.push(['Unassigned', rgb('--panel')]);
    const out: string[] = [];
    for (let i = 0; i < n; i++) {
      const x = Math.round(((i % cols) * cell + Math.floor((cell - 1) * 0.5)) * dpr);
      const y = Math.round((Math.floor(i / cols) * cell + Math.floor((cell - 1) * 0.8)) * dpr);
      const at = (y * canvas.width + x) * 4;
      const px = [data[at]!, data[at + 1]!, data[at + 2]!];
      let best = 'unknown';
      let bestDistance = 30; // nearer than this to a status colour, or unknown
      for (const [status, c] of colours) {
        const d = Math.abs(c[0]! - px[0]!) + Math.abs(c[1]! - px[1]!) + Math.abs(c[2]! - px[2]!);
        if (d < bestDistance) {
          bestDistance = d;
          best = status;
        }
      }
      out.push(best);
    }
    return out;
  }, dataset);
}

/** Where a shard's cell is on the screen (its centre), for the mouse; the map is scrolled into view first. */
export async function cellCentre(page: Page, dataset: string, shard: number): Promise<{ x: number; y: number }> {
  const canvas = page.locator(`section[data-dataset="${dataset}"] canvas.heatmap`);
  await canvas.scrollIntoViewIfNeeded();
  const box = await canvas.boundingBox();
  const cols = Number(await canvas.getAttribute('data-cols'));
  const cell = Number(await canvas.getAttribute('data-cell'));
  if (!box || !cols || !cell) throw new Error(`the heat-map of ${dataset} is not drawn`);
  return { x: box.x + (shard % cols) * cell + cell / 2, y: box.y + Math.floor(shard / cols) * cell + cell / 2 };
}

/** The page's marks of one name, in order. */
export function marks(page: Page, name: string): Promise<Marked[]> {
  return page.evaluate(
    (n) =>
      (globalThis as unknown as BrowserGlobals).performance
        .getEntriesByName(n)
        .map((e) => ({ startTime: e.startTime, detail: e.detail as Record<string, number | string> })),
    `shardherd:${name}`,
  );
}

/** Counts of each value. */
export function tally(values: readonly string[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const v of values) out[v] = (out[v] ?? 0) + 1;
  return out;
}

export async function until<T>(what: string, probe: () => Promise<T>, ok: (v: T) => boolean, timeoutMs = 20_000, everyMs = 25): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: T;
  do {
    last = await probe();
    if (ok(last)) return last;
    await new Promise((r) => setTimeout(r, everyMs));
  } while (Date.now() < deadline);
  throw new Error(`${what}: not within ${timeoutMs} ms; last seen ${JSON.stringify(last).slice(0, 2000)}`);
}

/** Headless Chromium with one page; a Chromium that will not start is named in the error. */
export async function openPage(viewport = { width: 1200, height: 900 }): Promise<{ browser: Browser; page: Page }> {
  let browser: Browser;
  try {
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] });
  } catch (e) {
    throw new Error(`could not start headless Chromium at ${CHROMIUM}: ${e instanceof Error ? e.message : String(e)}`, { cause: e });
  }
  return { browser, page: await browser.newPage({ viewport }) };
}

/** The few layout globals `horizontalFit` reads, typed here for the same reason. */
interface LayoutBox {
  readonly tagName: string;
  readonly id: string;
  readonly className: unknown;
  readonly parentElement: LayoutBox | null;
  readonly scrollWidth: number;
  readonly clientWidth: number;
  getBoundingClientRect(): { readonly left: number; readonly right: number; readonly width: number };
}
interface LayoutGlobals {
  readonly document: {
    readonly documentElement: LayoutBox;
    readonly body: LayoutBox & { querySelectorAll(s: string): Iterable<LayoutBox> };
    querySelectorAll(s: string): Iterable<LayoutBox>;
  };
  getComputedStyle(e: LayoutBox): { readonly overflowX: string };
}

export interface HorizontalFit {
  readonly scrollWidth: number;
  readonly clientWidth: number;
  /** Each dataset panel's left and right edge. */
  readonly panels: readonly { readonly left: number; readonly right: number }[];
  /** Every element drawn past the window's edges (but inside a box that scrolls on its own), named with its right edge. */
  readonly outside: readonly string[];
}

/** Whether the page fits the window's width, as a user sees it: the document's scroll width and every element's box. */
export function horizontalFit(page: Page): Promise<HorizontalFit> {
  return page.evaluate(() => {
    const { document, getComputedStyle } = globalThis as unknown as LayoutGlobals;
    const root = document.documentElement;
    const inScroller = (e: LayoutBox) => {
      for (let p = e.parentElement; p; p = p.parentElement) if (p.scrollWidth > p.clientWidth && getComputedStyle(p).overflowX === 'auto') return true;
      return false;
    };
    const past = (e: LayoutBox) => {
      const r = e.getBoundingClientRect();
      return r.width > 0 && (r.left < -0.5 || r.right > root.clientWidth + 0.5);
    };
    const panels = [...document.querySelectorAll('section[data-dataset]')].map((s) => {
      const r = s.getBoundingClientRect();
      return { left: r.left, right: r.right };
    });
    const outside = [...document.body.querySelectorAll('*')]
      .filter((e) => past(e) && !inScroller(e))
      .map((e) => `${e.tagName.toLowerCase()}${e.id ? `#${e.id}` : ''}.${String(e.className)} ${Math.round(e.getBoundingClientRect().right)}`);
    return { scrollWidth: root.scrollWidth, clientWidth: root.clientWidth, panels, outside };
  });
}
