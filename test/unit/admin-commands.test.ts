// The admin commands of `shardherd` in this process against an embedded cluster's HTTP API: the hint
// after a usage error names a command that exists, and `status` shows why a shard failed and exits
// 1 while a shard is Down or in Error (and FiloDB's status route shows the same cause). (test/integration/admin-cli.test.ts runs the same commands
// as a user does, against a real node process.)
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runAdmin, type AdminIo } from '../../src/cli/admin/run-admin.js';
import { parseCommandLine } from '../../src/cli/options.js';
import type { EmbeddedCluster } from '../../src/embedded/embedded-cluster.js';
import { startNodeApi, type NodeApi } from '../../src/http/node-api.js';
import type { SimDriver } from '../../src/sim/driver.js';
import { simulatedCluster } from '../support/live-cluster.js';

const TOKEN = 'admin-commands-token-0123456789';

/** The subcommands a command's help lists (commander's "Commands:" section), `help` aside. */
function subcommands(path: readonly string[]): string[] {
  const r = parseCommandLine([...path, '--help']);
  expect(r, path.join(' ')).toMatchObject({ kind: 'exit', code: 0 });
  const stdout = r.kind === 'exit' ? r.stdout : '';
  const section = stdout.split(/^Commands:$/m)[1] ?? '';
  return section
    .split('\n')
    .map((l) => /^ {2}([a-z-]+)\b/.exec(l)?.[1])
    .filter((n): n is string => n !== undefined && n !== 'help');
}

describe('usage errors', () => {
  it('end with a hint that names a real command, whose --help works', () => {
    const paths: string[][] = [];
    const walk = (path: string[]) => {
      paths.push(path);
      for (const sub of subcommands(path)) walk([...path, sub]);
    };
    walk([]);
    // The tree the docs list: the demo, node, and every admin command with its group.
    expect(paths.map((p) => p.join(' '))).toEqual(
      expect.arrayContaining(['', 'node', 'status', 'shards', 'shards stop', 'shards start', 'dataset setup', 'nodes replace', 'nodes drain']),
    );
    for (const path of paths) {
      const r = parseCommandLine([...path, '--no-such-flag']);
      expect(r, path.join(' ')).toMatchObject({ kind: 'exit', code: 2 });
      const hint = /\(run (shardherd(?: [a-z-]+)*) --help for the options\)/.exec(r.kind === 'exit' ? r.stderr : '');
      expect(hint?.[1], `the hint of "${path.join(' ')}"`).toBe(['shardherd', ...path].join(' '));
      const help = parseCommandLine([...hint![1]!.split(' ').slice(1), '--help']);
      expect(help).toMatchObject({ kind: 'exit', code: 0, stdout: expect.stringMatching(new RegExp(`^Usage: ${hint![1]}\\b`)) });
    }
  });
});

describe('status', () => {
  let cluster: EmbeddedCluster;
  let driver: SimDriver;
  let api: NodeApi;

  /** Runs an admin command line; what it printed and its exit code. */
  async function admin(...argv: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
    const parsed = parseCommandLine([...argv, '--url', api.url, '--token', TOKEN]);
    if (parsed.kind !== 'admin') throw new Error(`not an admin command: ${argv.join(' ')}`);
    let stdout = '';
    let stderr = '';
    const io: AdminIo = { stdout: (s) => void (stdout += s), stderr: (s) => void (stderr += s), env: {}, stdin: async () => '' };
    const code = await driver.whenSettled(runAdmin(parsed.command, io));
    return { code, stdout, stderr };
  }

  async function eventually(probe: () => Promise<boolean>, timeoutMs = 15_000): Promise<void> {
    if (!(await driver.until(probe, timeoutMs))) throw new Error(`not within ${timeoutMs} ms of the cluster's time`);
  }

  beforeAll(async () => {
    // Record 20 of every shard of `poisoned` cannot be read: its shards fail, move once, fail again
    // and stay in Error inside their cooldown.
    ({ cluster, driver } = simulatedCluster('admin', ['n1', 'n2'], {
      source: { failAt: (ds, shard, offset) => (ds === 'poisoned' && shard === 1 && offset === 20 ? 'poison record at offset 20' : undefined) },
    }));
    await driver.whenSettled(cluster.start());
    await driver.whenSettled(cluster.setupDataset({ ref: 'metrics', numShards: 4, minNumNodes: 2, source: { type: 'synthetic', recordsPerSecond: 200 } }));
    api = await startNodeApi(cluster.node('n1'), { port: 0, token: TOKEN });
    await driver.whenSettled(cluster.whenConverged('metrics', { timeoutMs: 10_000 }));
  });

  afterAll(async () => {
    await api?.close();
    await cluster?.stop();
  });

  it('exits 0 while every shard is Active', async () => {
    const r = await admin('status');
    expect(r).toMatchObject({ code: 0, stderr: '' });
    expect(r.stdout).toMatch(/^metrics\s+4\s+1\s+filodb-default\s+1\s+\d+\s+Active 4$/m);
  });

  it('exits 1 while a shard is in Error, with the cause in the WHY column and in --json', async () => {
    await driver.whenSettled(cluster.setupDataset({ ref: 'poisoned', numShards: 2, minNumNodes: 2, source: { type: 'synthetic', recordsPerSecond: 400 } }));
    await eventually(async () => (await admin('status')).stdout.includes('failed: poison record'));
    const r = await admin('status');
    expect(r.code).toBe(1);
    expect(r.stderr).toBe('shardherd: poisoned: 1 shard 1 Down or in Error\n');
    expect(r.stdout).toMatch(/^poisoned: shards without all their copies, or failing$/m);
    expect(r.stdout).toMatch(/^SHARD\s+STATUS\s+COPIES\s+WHY$/m);
    expect(r.stdout).toMatch(/^1\s+Error\s+0\/1\s+failed: poison record at offset 20; \S/m);
    const json = await admin('status', '--json');
    expect(json.code).toBe(1);
    const shard = (JSON.parse(json.stdout) as { datasets: { name: string; shards: { shard: number; status: string; error?: string }[] }[] }).datasets.find(
      (d) => d.name === 'poisoned',
    )!.shards[1];
    expect(shard).toMatchObject({ shard: 1, status: 'Error', error: 'poison record at offset 20' });
  });

  it("shows the cause on FiloDB's route as FiloDB prints an errored shard's status", async () => {
    const body = (await (await driver.whenSettled(fetch(`${api.url}/api/v1/cluster/poisoned/status`))).json()) as { data: { shard: number; status: string }[] };
    expect(body.data[1]).toMatchObject({ shard: 1, status: 'ShardStatusError(poison record at offset 20)' });
    expect(body.data[0]!.status).toMatch(/^ShardStatus(Active|Recovery\(\d+\))$/);
  });
});
