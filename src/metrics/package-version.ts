// The version of the installed shardherd package, from its package.json: two levels up from this
// module both in src/metrics (a checkout) and in dist/metrics (the package as installed), and
// package.json is always in the package. Read at the first scrape, not when the root is imported.
import { createRequire } from 'node:module';

let version: string | undefined;

export function packageVersion(): string {
  return (version ??= (createRequire(import.meta.url)('../../package.json') as { version: string }).version);
}
