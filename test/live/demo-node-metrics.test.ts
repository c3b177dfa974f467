// `npm start`: besides the page's endpoint, every node serves its own /metrics, listed at start, and
// each covers the shards that node ingests (the page's endpoint follows one node at a time).
import { spawn, type ChildProcess } from 'node:child_process';
import { resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { stopChild } from '../support/stop-child.js';
import { valueWithin } from '../support/value-within.js';

const MAIN = resolve(import.meta.dirname, '../../src/cli/main.ts');

describe("the demo serves every node's metrics", () => {
  let child: ChildProcess | undefined;
  // Ctrl-C stops the demo cleanly; a demo that hangs is killed rather than left behind.
  afterAll(() => stopChild(child), 15_000);

  it('lists one endpoint per node, each labelled with its node, together covering every ingesting shard', async () => {
    child = spawn(process.execPath, ['--import', 'tsx', MAIN, '--no-story', '--port', '0', '--nodes', '3', '--datasets', '1', '--shards', '8'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    child.stdout!.on('data', (d: Buffer) => (stdout += String(d)));
    const line = await valueWithin(() => /each node's own metrics: (.*)/.exec(stdout)?.[1], 30_000);
    const endpoints = [...line.matchAll(/(node-\d+) (http:\/\/\S+\/metrics)/g)].map((m) => ({ node: m[1]!, url: m[2]! }));
    expect(endpoints.map((e) => e.node)).toEqual(['node-1', 'node-2', 'node-3']);
    // Every shard ingests somewhere once the cluster is up: the union of the nodes' series has all 8.
    const shards = await valueWithin(async () => {
      const seen = new Set<string>();
      for (const { node, url } of endpoints) {
        const text = await (await fetch(url)).text();
        if (!text.includes(`shardherd_build_info{version=`) || !new RegExp(`shardherd_build_info\\{[^}]*node="${node}"`).exec(text)) return undefined;
        for (const m of text.matchAll(/shardherd_ingested_records_total\{dataset="metrics",shard="(\d+)"[^}]*\} (\d+)/g)) if (Number(m[2]) > 0) seen.add(m[1]!);
      }
      return seen.size === 8 ? seen : undefined;
    }, 30_000);
    expect(shards.size).toBe(8);
  }, 70_000);
});
