// The status page's colours, read from its stylesheet, against WCAG 2.1's contrast ratios: each
// status colour against the panel the heat-map sits on (3:1 for graphics, 1.4.11), the pattern
// ink against each status colour it is drawn on, and the text colours against both backgrounds
// (4.5:1, 1.4.3). The heat-map is a canvas, which axe-core does not look into.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

const html = readFileSync(new URL('../../src/http/status-page.html', import.meta.url), 'utf8');
const root = /:root\s*\{([^}]*)\}/.exec(html)?.[1] ?? '';
const colour = (name: string): string => {
  const m = new RegExp(`--${name}:\\s*(#[0-9a-fA-F]{6})`).exec(root);
  if (!m) throw new Error(`the page's :root has no --${name}`);
  return m[1]!;
};

function luminance(hex: string): number {
  const [r, g, b] = [1, 3, 5].map((i) => {
    const c = parseInt(hex.slice(i, i + 2), 16) / 255;
    return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
  });
  return 0.2126 * r! + 0.7152 * g! + 0.0722 * b!;
}

function contrast(a: string, b: string): number {
  const [hi, lo] = [luminance(a), luminance(b)].sort((x, y) => y - x);
  return (hi! + 0.05) / (lo! + 0.05);
}

const STATUSES = ['Active', 'Recovery', 'Assigned', 'Error', 'Stopped', 'Down', 'Unassigned'];

describe("the status page's colours", () => {
  it('computes contrast as WCAG does', () => {
    expect(contrast('#000000', '#ffffff')).toBeCloseTo(21, 5);
    expect(contrast('#777777', '#ffffff')).toBeCloseTo(4.48, 2);
  });

  it.each(STATUSES)('%s stands out from the panel (3:1) and carries its pattern in ink (4.5:1)', (status) => {
    expect(contrast(colour(status), colour('panel'))).toBeGreaterThanOrEqual(3);
    expect(contrast(colour(status), colour('bg'))).toBeGreaterThanOrEqual(3);
    expect(contrast(colour('ink'), colour(status))).toBeGreaterThanOrEqual(4.5);
  });

  it('has a colour of its own for each status', () => {
    expect(new Set(STATUSES.map((s) => colour(s).toLowerCase())).size).toBe(STATUSES.length);
  });

  it.each(['text', 'muted'])('writes %s text readable on the page and on the panels (4.5:1)', (name) => {
    expect(contrast(colour(name), colour('bg'))).toBeGreaterThanOrEqual(4.5);
    expect(contrast(colour(name), colour('panel'))).toBeGreaterThanOrEqual(4.5);
  });
});
