// `shardherd node` as a process: a bad config exits 2 naming the key, a status port in use exits 2
// naming `status.port` before anything connects, an unreachable Cassandra exits 1 after its
// connect timeout saying where it tried — no crash loop, no stack trace.
import { spawn, spawnSync } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { countingServer } from '../support/counting-server.js';
import { tempDir } from '../support/temp-dir.js';

const MAIN = resolve(import.meta.dirname, '../../src/cli/main.ts');

async function configFile(config: unknown): Promise<string> {
  const dir = tempDir('shardherd-cmd-');
  const path = join(dir, 'node.json');
  await writeFile(path, JSON.stringify(config));
  return path;
}

async function runNode(config: unknown): Promise<{ status: number | null; stdout: string; stderr: string }> {
  const path = await configFile(config);
  const r = spawnSync(process.execPath, ['--import', 'tsx', MAIN, 'node', '--config', path], { encoding: 'utf8', timeout: 30_000 });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** Runs the command without blocking this process, so that servers of the test can answer it. */
async function runNodeAsync(config: unknown): Promise<{ status: number | null; stdout: string; stderr: string }> {
  const path = await configFile(config);
  const child = spawn(process.execPath, ['--import', 'tsx', MAIN, 'node', '--config', path], { stdio: ['ignore', 'pipe', 'pipe'], timeout: 30_000 });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const status = await new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
  return { status, stdout, stderr };
}

describe('shardherd node', () => {
  it('exits 2 on a bad config, naming the key', async () => {
    const r = await runNode({ node: 'n1', kafka: { brokers: [] }, cassandra: { contactPoints: ['127.0.0.1:9042'] } });
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/node\.json: kafka\.brokers needs at least one host:port/);
    expect(r.stderr).not.toMatch(/\n\s+at /);
  }, 30_000);

  it('exits 2 when a served handler module is missing, before connecting to anything', async () => {
    const r = await runNode({
      node: 'n1',
      kafka: { brokers: ['127.0.0.1:1'] },
      cassandra: { contactPoints: ['127.0.0.1:1'], connectTimeoutMs: 20_000 },
      serve: [{ dataset: 'metrics', handler: './handlers/none.js' }],
    });
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/node\.json: serve\.0\.handler names no file: .*handlers\/none\.js/);
  }, 30_000);

  it('exits 2 when its status port is in use, naming status.port, before it connects to Kafka or Cassandra', async () => {
    const taken = await countingServer();
    const kafka = await countingServer();
    const cassandra = await countingServer();
    try {
      const r = await runNodeAsync({
        node: 'n1',
        kafka: { brokers: [`127.0.0.1:${kafka.port}`] },
        cassandra: { contactPoints: [`127.0.0.1:${cassandra.port}`], connectTimeoutMs: 1_000 },
        status: { port: taken.port },
      });
      expect(r.status).toBe(2);
      expect(r.stderr).toMatch(
        new RegExp(`node\\.json: status\\.port ${taken.port}: cannot listen on 127\\.0\\.0\\.1:${taken.port}, which is in use by another process`),
      );
      expect(r.stderr).toMatch(/did not join the cluster/);
      expect(r.stderr).not.toMatch(/\n\s+at /);
      expect(kafka.connections()).toBe(0);
      expect(cassandra.connections()).toBe(0);
    } finally {
      for (const s of [taken, kafka, cassandra]) s.server.close();
    }
  }, 30_000);

  it('exits 1 when Cassandra cannot be reached within connectTimeoutMs, saying where it tried', async () => {
    const r = await runNode({
      node: 'n1',
      kafka: { brokers: ['127.0.0.1:1'] },
      cassandra: { contactPoints: ['127.0.0.1:1'], connectTimeoutMs: 1_000 },
    });
    expect(r.status).toBe(1);
    const lines = r.stdout
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { level: number; msg: string; err?: { message: string } });
    const fatal = lines.find((l) => l.msg === 'node could not start');
    expect(fatal?.err?.message).toMatch(/127\.0\.0\.1:1/);
  }, 30_000);
});
