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
    // As root directly, else through a sudo that asks no password (CI has no one to type it).
    const aptGet = (...args: string[]) => {
      const [cmd, ...rest] = process.getuid?.() === 0 ? ['apt-get', ...args] : ['sudo', '-n', 'apt-get', ...args];
      execFileSync(cmd!, rest, { stdio: 'inherit', env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } });
    };
    aptGet('update', '-qq');
    aptGet('install', '-y', '-qq', '--no-install-recommends', 'chromium');
  } catch (e) {
    throw new Error(
      `the browser tests need Chromium at ${CHROMIUM} and installing Debian's chromium package failed: ${e instanceof Error ? e.message : String(e)}. Install it (apt-get install chromium) or set SHARDHERD_CHROMIUM to a Chromium binary.`,
      { cause: e },
    );
  }
  if (!existsSync(CHROMIUM)) throw new Error(`apt-get installed chromium but ${CHROMIUM} does not exist; set SHARDHERD_CHROMIUM to the binary`);
}
