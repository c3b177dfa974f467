// The browser tests need a real headless Chromium: Debian's `chromium` package. When it is
// missing, this setup installs it (as the integration setup fetches the Kafka and Cassandra jars),
// and fails with the reason if it cannot.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';

export const CHROMIUM = process.env.SHARDHERD_CHROMIUM ?? '/usr/bin/chromium';

export default function setup(): void {
  if (existsSync(CHROMIUM)) return;
  process.stderr.write(`browser tests: ${CHROMIUM} is missing; installing Debian's chromium package\n`);
  try {
    const asRoot = process.getuid?.() === 0 ? [] : ['sudo', '-n'];
    const run = (args: string[]) => execFileSync(asRoot[0] ?? args[0]!, [...asRoot.slice(1), ...(asRoot.length ? args : args.slice(1))], { stdio: 'inherit', env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } });
    run(['apt-get', 'update', '-qq']);
    run(['apt-get', 'install', '-y', '-qq', '--no-install-recommends', 'chromium']);
  } catch (e) {
    throw new Error(`the browser tests need Chromium at ${CHROMIUM} and installing Debian's chromium package failed: ${e instanceof Error ? e.message : String(e)}. Install it (apt-get install chromium) or set SHARDHERD_CHROMIUM to a Chromium binary.`, { cause: e });
  }
  if (!existsSync(CHROMIUM)) throw new Error(`apt-get installed chromium but ${CHROMIUM} does not exist; set SHARDHERD_CHROMIUM to the binary`);
}
