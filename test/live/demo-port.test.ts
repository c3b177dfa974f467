// `npm start -- --port <n>` with the port taken by another process: the demo does not start and
// exits 2 saying so, instead of serving its page on some other port the operator does not know.
import { spawn } from 'node:child_process';
import { createServer, type AddressInfo, type Server } from 'node:net';
import { resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const MAIN = resolve(import.meta.dirname, '../../src/cli/main.ts');

describe('the demo with a --port that is taken', () => {
  let taken: Server;
  let port: number;

  beforeAll(async () => {
    taken = createServer();
    await new Promise<void>((done) => taken.listen(0, '127.0.0.1', done));
    port = (taken.address() as AddressInfo).port;
  });

  afterAll(() => new Promise<void>((done) => taken.close(() => done())));

  it('exits 2 with a message naming the port, before any node starts', async () => {
    const child = spawn(process.execPath, ['--import', 'tsx', MAIN, '--no-story', '--port', String(port)], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += String(d)));
    child.stderr.on('data', (d: Buffer) => (stderr += String(d)));
    // --no-story runs until Ctrl-C: an exit at all says the demo did not start.
    const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
    const code = await new Promise<number | null>((done) => child.on('exit', (c) => done(c)));
    clearTimeout(timer);
    expect(code).toBe(2);
    expect(stderr).toBe(`shardherd: --port ${port} is in use by another process: name a free port, or --port 0 for any free one\n`);
    expect(stdout).not.toMatch(/status page http/);
  }, 30_000);
});
