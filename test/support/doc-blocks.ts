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

const TS = /^```(ts|typescript)\s*$/;
const JSON_BLOCK = /^```json\s*$/;

/** Every ```ts (or ```typescript) block of one Markdown text. */
export function tsBlocksOf(file: string, markdown: string): DocBlock[] {
  return blocksOf(file, markdown, TS, 'ts');
}

/** Every ```json block of one Markdown text. */
export function jsonBlocksOf(file: string, markdown: string): DocBlock[] {
  return blocksOf(file, markdown, JSON_BLOCK, 'json');
}

function blocksOf(file: string, markdown: string, opening: RegExp, extension: string): DocBlock[] {
  const blocks: DocBlock[] = [];
  const lines = markdown.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const fence = lines[i]!.trim();
    if (!fence.startsWith('```')) continue;
    const start = i;
    const body: string[] = [];
    for (i++; i < lines.length && lines[i]!.trim() !== '```'; i++) body.push(lines[i]!);
    if (i >= lines.length) throw new Error(`${file}:${start + 1}: a code block is never closed`);
    if (!opening.test(fence)) continue;
    const base = file.replace(/\.md$/, '').replace(/[^A-Za-z0-9]+/g, '-');
    blocks.push({ file, line: start + 1, code: body.join('\n') + '\n', moduleName: `${base}-${start + 1}.${extension}` });
  }
  return blocks;
}

/** The Markdown files whose blocks are checked: README.md and every Markdown file of docs/. */
function docFiles(repo: string): string[] {
  return [
    'README.md',
    ...readdirSync(join(repo, 'docs'))
      .filter((f) => f.endsWith('.md'))
      .sort()
      .map((f) => `docs/${f}`),
  ];
}

/** The TypeScript blocks of README.md and every Markdown file of docs/. */
export function docBlocks(repo: string): DocBlock[] {
  return docFiles(repo).flatMap((f) => tsBlocksOf(f, readFileSync(join(repo, f), 'utf8')));
}

/** The JSON blocks of README.md and every Markdown file of docs/. */
export function docJsonBlocks(repo: string): DocBlock[] {
  return docFiles(repo).flatMap((f) => jsonBlocksOf(f, readFileSync(join(repo, f), 'utf8')));
}
