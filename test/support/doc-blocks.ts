// The TypeScript blocks of the README and docs/, so a test can compile each of them against the
// installed package: what the docs show must be what a user can type.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

export interface DocBlock {
  /** The Markdown file, relative to the repository. */
  readonly file: string;
  /** The line of the opening fence. */
  readonly line: number;
  readonly code: string;
  /** A file name for the block as a module of its own, e.g. `README-191.ts`. */
  readonly moduleName: string;
}

const OPENING = /^```(ts|typescript)\s*$/;

/** Every ```ts (or ```typescript) block of one Markdown text. */
export function tsBlocksOf(file: string, markdown: string): DocBlock[] {
  const blocks: DocBlock[] = [];
  const lines = markdown.split('\n');
  for (let i = 0; i < lines.length; i++) {
    if (!OPENING.test(lines[i]!.trim())) continue;
    const start = i;
    const body: string[] = [];
    for (i++; i < lines.length && lines[i]!.trim() !== '```'; i++) body.push(lines[i]!);
    if (i >= lines.length) throw new Error(`${file}:${start + 1}: a code block is never closed`);
    const base = file.replace(/\.md$/, '').replace(/[^A-Za-z0-9]+/g, '-');
    blocks.push({ file, line: start + 1, code: body.join('\n') + '\n', moduleName: `${base}-${start + 1}.ts` });
  }
  return blocks;
}

/** The blocks of README.md and every Markdown file of docs/. */
export function docBlocks(repo: string): DocBlock[] {
  const files = ['README.md', ...readdirSync(join(repo, 'docs')).filter((f) => f.endsWith('.md')).sort().map((f) => `docs/${f}`)];
  return files.flatMap((f) => tsBlocksOf(f, readFileSync(join(repo, f), 'utf8')));
}
