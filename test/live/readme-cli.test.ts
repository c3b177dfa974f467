// The operator examples of README.md and docs/USAGE.md ("Operating a cluster") run as written
// against the demo they describe (`npm start -- --no-story`: five nodes, `metrics` and `logs` of 16
// shards): every `shardherd` command exits 0, every `curl` answers. Only the address (the demo
// takes a free port here, not 8080) and `$TOKEN` (the token the demo printed) are filled in. Also
// the CLI's own texts about stopped shards and the token.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runAdmin, type AdminIo } from '../../src/cli/admin/run-admin.js';
import { parseCommandLine } from '../../src/cli/options.js';
import { TOKEN_DIR_ENV } from '../../src/http/access-token.js';
import { stopChild } from '../support/stop-child.js';
import { valueWithin } from '../support/value-within.js';

const REPO = resolve(import.meta.dirname, '../..');
const MAIN = join(REPO, 'src/cli/main.ts');
const DEMO_URL = 'http://127.0.0.1:8080';
const CLI = 'npx tsx src/cli/main.ts ';

/** The shell lines of the "Operating a cluster" section of a Markdown file, comments cut off. */
function operatorLines(file: string): string[] {
  const text = readFileSync(join(REPO, file), 'utf8');
  const start = text.indexOf('\n## Operating a cluster\n');
  expect(start, `${file} has a section "Operating a cluster"`).toBeGreaterThanOrEqual(0);
  const end = text.indexOf('\n## ', start + 1);
  const section = text.slice(start, end < 0 ? undefined : end);
  const blocks = [...section.matchAll(/^```sh\n([\s\S]*?)^```$/gm)].map((m) => m[1]!);
  return blocks
    .flatMap((b) => b.split('\n'))
    .map((l) => l.replace(/\s+#\s.*$/, '').trim())
    .filter((l) => l !== '');
}

const EXAMPLES = ['README.md', 'docs/USAGE.md'].map((file) => ({ file, lines: operatorLines(file) }));

/** Runs one `shardherd` command line in this process, as the CLI does. */
async function cli(argv: readonly string[], env: NodeJS.ProcessEnv = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  const parsed = parseCommandLine([...argv]);
  if (parsed.kind !== 'admin') throw new Error(`not an admin command: ${argv.join(' ')}`);
  let stdout = '';
  let stderr = '';
  const io: AdminIo = { stdout: (s) => void (stdout += s), stderr: (s) => void (stderr += s), env, stdin: async () => '' };
  const code = await runAdmin(parsed.command, io);
  return { code, stdout, stderr };
}

describe('the operator examples, against the demo', () => {
  let child: ChildProcess | undefined;
  let url = '';
  let token = '';

  beforeAll(async () => {
    child = spawn(process.execPath, ['--import', 'tsx', MAIN, '--no-story', '--port', '0'], { cwd: REPO, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    child.stdout!.on('data', (d: Buffer) => (stdout += String(d)));
    const m = await valueWithin(() => /status page (http:\/\/\S+)\/ .* token (\S+)/.exec(stdout) ?? undefined, 30_000);
    url = m[1]!;
    token = m[2]!;
    // As a user would: once the page shows every shard of both datasets Active.
    await valueWithin(async () => {
      const view = (await (await fetch(`${url}/api/v1/overview`)).json()) as { datasets: { name: string; counts: Record<string, number> }[] };
      return view.datasets.length === 2 && view.datasets.every((d) => d.counts.Active === 16) ? true : undefined;
    }, 30_000);
  }, 70_000);

  afterAll(() => stopChild(child), 15_000);

  it('finds the examples: shardherd commands that stop and start a shard', () => {
    for (const { file, lines } of EXAMPLES) {
      const commands = lines.filter((l) => l.startsWith(CLI));
      expect(
        commands.some((l) => / shards stop /.test(l)),
        file,
      ).toBe(true);
      expect(
        commands.some((l) => / shards start /.test(l)),
        file,
      ).toBe(true);
    }
  });

  for (const { file, lines } of EXAMPLES) {
    it(`${file}: every command runs as written`, async () => {
      for (const line of lines) {
        const filled = line.replaceAll(DEMO_URL, url).replaceAll('$TOKEN', token);
        if (line.startsWith(CLI)) {
          const argv = filled.slice(CLI.length).split(/\s+/);
          if (!argv.includes('--url')) argv.push('--url', url);
          const r = await cli(argv);
          expect({ line, code: r.code, stderr: r.stderr }).toEqual({ line, code: 0, stderr: '' });
          if (argv[0] === 'shards' && argv[1] === 'start') expect(r.stdout).toMatch(/^started shards 3 of metrics on node-1$/m);
        } else if (line.startsWith('curl -s http')) {
          const [address, grep] = filled.slice('curl -s '.length).split(/\s*\|\s*grep\s+/);
          const res = await fetch(address!.trim());
          expect({ line, status: res.status }).toEqual({ line, status: 200 });
          const body = await res.text();
          if (grep !== undefined) expect(body, line).toContain(grep.trim());
        } else {
          // Opening the page in a browser is the one line no test runs.
          expect(line, `${file}: a line this test does not know how to run`).toMatch(/^xdg-open /);
        }
      }
      // The shard the examples stopped and started is back, and the others never left.
      await valueWithin(async () => {
        const view = (await (await fetch(`${url}/api/v1/overview`)).json()) as { datasets: { name: string; counts: Record<string, number> }[] };
        return view.datasets.every((d) => d.counts.Active === 16) ? true : undefined;
      }, 20_000);
    }, 60_000);
  }

  it('says on stderr when a change goes with the token of the local token file', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'shardherd-token-'));
    try {
      const port = new URL(url).port;
      writeFileSync(join(dir, `token-${port}`), `${token}\n`);
      const env = { [TOKEN_DIR_ENV]: dir };
      const stop = await cli(['shards', 'stop', 'logs', '--shards', '5', '--url', url], env);
      expect(stop).toMatchObject({ code: 0, stdout: 'stopped shards 5 of logs\n' });
      expect(stop.stderr).toBe(`shardherd: no --token, $SHARDHERD_TOKEN or --config: using the token in ${join(dir, `token-${port}`)}\n`);
      // With --token, or for a read, it says nothing.
      const start = await cli(['shards', 'start', 'logs', '--node', 'node-1', '--shards', '5', '--url', url, '--token', token], env);
      expect(start).toMatchObject({ code: 0, stderr: '' });
      expect(await cli(['members', '--url', url], env)).toMatchObject({ code: 0, stderr: '' });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("the CLI's help", () => {
  const help = (...path: string[]): string => {
    const r = parseCommandLine([...path, '--help']);
    expect(r).toMatchObject({ kind: 'exit', code: 0 });
    return r.kind === 'exit' ? r.stdout.replace(/\s+/g, ' ') : '';
  };

  it('says a stopped shard stays stopped until started, not until a membership change', () => {
    const text = help('shards', 'stop');
    expect(text).toContain('stay stopped (through membership changes, drains and failovers) until `shards start`');
    expect(text).not.toMatch(/until started or a membership change/);
  });

  it('says where the token comes from without --token, for the commands that change the cluster only', () => {
    for (const path of [
      ['shards', 'stop'],
      ['shards', 'start'],
      ['dataset', 'setup'],
      ['dataset', 'remove'],
      ['nodes', 'drain'],
      ['nodes', 'undrain'],
      ['nodes', 'replace'],
    ]) {
      expect(help(...path), path.join(' ')).toContain(
        'Without --token it takes, in order, $SHARDHERD_TOKEN, the token of the --config file, or the token file',
      );
    }
    for (const path of [['status'], ['datasets'], ['members']]) expect(help(...path), path.join(' ')).not.toContain('Without --token');
  });
});
