// `shardherd topics create` without a broker: the command line it takes, and the refusals that
// come before or instead of any topic — a dataset the config does not set up or that has no Kafka
// topic (exit 2, naming the key), brokers where nothing listens (exit 1, naming them).
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { EXIT_USAGE, parseCommandLine } from '../../src/cli/options.js';
import { runTopicsCreate } from '../../src/cli/topics-command.js';
import { freePort } from '../support/free-port.js';
import { tempDir } from '../support/temp-dir.js';

async function configFile(brokers: string[]): Promise<string> {
  const dir = tempDir('shardherd-topics-');
  const path = join(dir, 'node.json');
  await writeFile(
    path,
    JSON.stringify({
      node: 'n1',
      kafka: { brokers },
      cassandra: { contactPoints: ['127.0.0.1:9042'] },
      datasets: [
        { ref: 'metrics', numShards: 4, minNumNodes: 1, source: { type: 'kafka', topic: 'metrics' } },
        { ref: 'demo', numShards: 2, minNumNodes: 1, source: { type: 'synthetic' } },
      ],
    }),
  );
  return path;
}

async function run(path: string, datasets?: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const code = await runTopicsCreate(path, datasets, 'silent', { stdout: (s) => (stdout += s), stderr: (s) => (stderr += s) });
  return { code, stdout, stderr };
}

describe('shardherd topics create', () => {
  it('takes a config and any number of --dataset', () => {
    expect(parseCommandLine(['topics', 'create', '--config', 'c.json'])).toEqual({
      kind: 'topics-create',
      configPath: 'c.json',
      datasets: undefined,
      logLevel: 'error',
    });
    expect(parseCommandLine(['topics', 'create', '--config', 'c.json', '--dataset', 'a', '--dataset', 'b'])).toMatchObject({ datasets: ['a', 'b'] });
    expect(parseCommandLine(['topics', 'create'])).toMatchObject({
      kind: 'exit',
      code: EXIT_USAGE,
      stderr: expect.stringMatching(/required option '--config <file>'/),
    });
  });

  it('exits 2 naming the key for a dataset the config does not set up, or one without a Kafka topic', async () => {
    const path = await configFile([`127.0.0.1:${await freePort()}`]);
    expect(await run(path, ['logs'])).toEqual({
      code: 2,
      stdout: '',
      stderr: `shardherd topics create: ${path}: datasets has no dataset logs (it sets up metrics, demo)\n`,
    });
    expect(await run(path, ['demo'])).toEqual({
      code: 2,
      stdout: '',
      stderr: `shardherd topics create: ${path}: datasets.1.source.type is synthetic: dataset demo has no Kafka topic to create\n`,
    });
  });

  it('exits 1 naming the brokers and kafka.brokers when nothing listens there', async () => {
    const broker = `127.0.0.1:${await freePort()}`;
    const path = await configFile([broker]);
    const r = await run(path);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(
      new RegExp(
        `^shardherd topics create: no Kafka broker could be reached at ${broker.replace(/\./g, '\\.')} \\(kafka\\.brokers of ${path.replace(/[.\\/]/g, '\\$&')}\\)`,
      ),
    );
  }, 30_000);
});
