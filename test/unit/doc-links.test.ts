// Every relative link of the README and the docs leads to a file of the repository, and every
// anchor into a markdown file names one of its headings (GitHub's slugs). External links are not
// followed.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

const REPO = join(import.meta.dirname, '../..');
const DOCS = [
  'README.md',
  'config/README.md',
  ...readdirSync(join(REPO, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];

/** GitHub's anchor of a heading: lower case, spaces to '-', punctuation other than '-' and '_' dropped. */
function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/`/g, '')
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

function anchors(file: string): Set<string> {
  const text = readFileSync(file, 'utf8').replace(/```[\s\S]*?```/g, '');
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const m of text.matchAll(/^#{1,6}\s+(.+)$/gm)) {
    const base = slug(m[1]!);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

function links(file: string): { target: string; anchor: string | undefined }[] {
  const text = readFileSync(join(REPO, file), 'utf8')
    .replace(/```[\s\S]*?```/g, '')
    .replace(/`[^`\n]*`/g, '');
  return [...text.matchAll(/\]\(([^)\s]+)\)/g)]
    .map((m) => m[1]!)
    .filter((href) => !/^[a-z]+:/i.test(href))
    .map((href) => {
      const [target, anchor] = href.split('#');
      return { target: target!, anchor };
    });
}

describe('documentation links', () => {
  it('slugs headings the way GitHub does', () => {
    expect(slug('7. Real deployment')).toBe('7-real-deployment');
    expect(slug('Placement — 2026-11-24')).toBe('placement--2026-11-24');
    expect(slug('A real cluster: `shardherd node`')).toBe('a-real-cluster-shardherd-node');
  });

  for (const doc of DOCS) {
    it(`every relative link of ${doc} resolves in the repository`, () => {
      const broken: string[] = [];
      for (const { target, anchor } of links(doc)) {
        const file = target === '' ? join(REPO, doc) : join(REPO, dirname(doc), target);
        if (!existsSync(file)) {
          broken.push(`${target}: no such file`);
          continue;
        }
        if (anchor !== undefined && file.endsWith('.md') && !anchors(file).has(anchor))
          broken.push(`${target}#${anchor}: no such heading in ${relative(REPO, file)}`);
      }
      expect(broken).toEqual([]);
    });
  }
});
