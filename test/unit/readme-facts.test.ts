// Facts the README states about the package that package.json decides: the Node versions it runs
// on and the libraries it depends on. Either changes without the README saying so otherwise. And
// the README's shape: it fits on a screen, the quick start first, the reference in docs/.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
  engines: { node: string };
  dependencies: Record<string, string>;
};

/** The text of a `## ` section, up to the next one. */
function section(title: string): string {
  const start = readme.indexOf(`\n## ${title}\n`);
  expect(start, `README has a section "${title}"`).toBeGreaterThanOrEqual(0);
  const end = readme.indexOf('\n## ', start + 1);
  return readme.slice(start, end < 0 ? undefined : end);
}

describe('README', () => {
  it('states the Node versions of `engines`, as they are written there', () => {
    expect(section('Installing')).toContain(`**Node.js \`${pkg.engines.node}\`**`);
  });

  it('fits on a screen: at most 200 lines, the quick start its first section, the reference moved to docs/', () => {
    expect(readme.split('\n').length).toBeLessThanOrEqual(200);
    expect(readme.match(/^## .+$/m)?.[0]).toBe('## Quick start');
    expect(section('Quick start')).toContain('npm ci && npm start');
    expect(section('Quick start')).toContain('npm ci && npm test');
    for (const doc of ['docs/STATUS.md', 'docs/USAGE.md', 'docs/API.md', 'docs/DEVELOPMENT.md']) expect(readme).toContain(`](${doc}`);
  });

  it('names every runtime dependency in its Dependencies section', () => {
    const text = section('Dependencies');
    const missing = Object.keys(pkg.dependencies).filter((name) => !text.includes(`\`${name}\``));
    expect(missing).toEqual([]);
  });
});
