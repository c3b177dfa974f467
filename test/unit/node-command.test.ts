// `shardherd node` as a process: a bad config exits 2 naming the key, an unreachable Cassandra
// exits 1 after its connect timeout saying where it tried — no crash loop, no stack trace.
import { spawnSync } from 'node:child_process';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const MAIN = resolve(import.meta.dirname, '../../src/cli/main.ts');

async function runNode(config: unknown): Promise<{ status: number | null; stdout: string; stderr: string }> {
  const dir = await mkdtemp(join(tmpdir(), 'shardherd-cmd-'));
  const path = join(dir, 'node.json');
  await writeFile(path, JSON.stringify(config));
  const r = spawnSync(process.execPath, ['--import', 'tsx', MAIN, 'node', '--config', path], { encoding: 'utf8', timeout: 30_000 });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe('shardherd node', () => {
  it('exits 2 on a bad config, naming the key', async () => {
    const r = await runNode({ node: 'n1', kafka: { brokers: [] }, cassandra: { contactPoints: ['127.0.0.1:9042'] } });
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/node\.json: kafka\.brokers needs at least one broker/);
    expect(r.stderr).not.toMatch(/\n\s+at /);
  }, 30_000);

  it('exits 2 when a served handler module is missing, before connecting to anything', async () => {
    const r = await runNode({ node: 'n1', kafka: { brokers: ['127.0.0.1:1'] }, cassandra: { contactPoints: ['127.0.0.1:1'], connectTimeoutMs: 20_000 }, serve: [{ dataset: 'metrics', handler: './handlers/none.js' }] });
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/node\.json: serve\.0\.handler names no file: .*handlers\/none\.js/);
  }, 30_000);

  it('exits 1 when Cassandra cannot be reached within connectTimeoutMs, saying where it tried', async () => {
    const r = await runNode({
      node: 'n1',
      kafka: { brokers: ['127.0.0.1:1'] },
      cassandra: { contactPoints: ['127.0.0.1:1'], connectTimeoutMs: 1_000 },
    });
    expect(r.status).toBe(1);
    const lines = r.stdout.split('\n').filter(Boolean).map((l) => JSON.parse(l) as { level: number; msg: string; err?: { message: string } });
    const fatal = lines.find((l) => l.msg === 'node could not start');
    expect(fatal?.err?.message).toMatch(/127\.0\.0\.1:1/);
  }, 30_000);
});
