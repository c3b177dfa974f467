/**
 * Routed request overhead: `ShardherdClient.request` against a bare keep-alive HTTP request
 * (`node:http`, same Agent settings) to the same node's server and handler, in the same run, on
 * 127.0.0.1. One embedded node serving 4 shards; the handler answers a small JSON object.
 * Throughput: 16 requests in flight for 2 s each way; latency: one request at a time (p50, p99).
 * Rounds alternate which side goes first; the table gives the medians of the rounds. The client
 * with the global `fetch` (undici) as transport is measured beside it, for the choice of transport.
 * The package is built first and measured as users run it (`dist/`): through tsx every function
 * of the sources carries a naming wrapper, which would weigh on the client's side only.
 */
import { Agent, request as httpRequest } from 'node:http';
import { pino } from 'pino';
import { execFileSync } from 'node:child_process';
import type { RequestTransport } from '../src/client/http-transport.js';
import type { ShardherdClient } from '../src/client/shardherd-client.js';
import type { DatasetRef } from '../src/core/ids.js';
import { MAP_VERSION_HEADER, requestPath } from '../src/protocol/routed-wire.js';
import { quantile, register, type Table } from './harness.js';

const DATASET = 'routed' as DatasetRef;
const ROUNDS = 5;
const THROUGHPUT_MS = 2_000;
const CONCURRENCY = 16;
const LATENCY_SAMPLES = 2_000;
const PAYLOAD = { query: 'sum(rate(x[1m]))', from: 0, to: 60_000 };

type Send = () => Promise<unknown>;

/** Requests per second with CONCURRENCY in flight, and the process's CPU per request (client and server: both run here). */
async function throughput(send: Send): Promise<{ rps: number; cpuUs: number }> {
  let done = 0;
  const cpu0 = process.cpuUsage();
  const end = performance.now() + THROUGHPUT_MS;
  const loop = async () => {
    while (performance.now() < end) {
      await send();
      done++;
    }
  };
  const t0 = performance.now();
  await Promise.all(Array.from({ length: CONCURRENCY }, loop));
  const cpu = process.cpuUsage(cpu0);
  return { rps: done / ((performance.now() - t0) / 1000), cpuUs: (cpu.user + cpu.system) / done };
}

async function latencies(send: Send): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < LATENCY_SAMPLES; i++) {
    const t0 = performance.now();
    await send();
    out.push(performance.now() - t0);
  }
  return out;
}

function bareSender(url: string, shard: number, version: number): { send: Send; close: () => void } {
  const agent = new Agent({ keepAlive: true, maxSockets: 64, scheduling: 'lifo' });
  const u = new URL(url);
  const path = requestPath(DATASET, shard);
  const send: Send = () =>
    new Promise((resolve, reject) => {
      // The payload serialised per request, as any caller does (the client does too).
      const body = JSON.stringify(PAYLOAD);
      const req = httpRequest(
        {
          agent,
          hostname: u.hostname,
          port: Number(u.port),
          method: 'POST',
          path,
          headers: { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)), [MAP_VERSION_HEADER]: String(version) },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () =>
            res.statusCode === 200 ? resolve(JSON.parse(Buffer.concat(chunks).toString('utf8'))) : reject(new Error(`HTTP ${res.statusCode}`)),
          );
        },
      );
      req.on('error', reject);
      req.end(body);
    });
  return { send, close: () => agent.destroy() };
}

const median = (xs: readonly number[]) => quantile(xs, 0.5);

/** The built modules the benchmark measures (see the header). */
async function built() {
  execFileSync('npm', ['run', '-s', 'build'], { stdio: 'inherit' });
  const transports = (await import('../dist/client/http-transport.js' as string)) as typeof import('../src/client/http-transport.js');
  const client = (await import('../dist/client/shardherd-client.js' as string)) as typeof import('../src/client/shardherd-client.js');
  const embedded = (await import('../dist/embedded/embedded-cluster.js' as string)) as typeof import('../src/embedded/embedded-cluster.js');
  return { ...transports, ...client, ...embedded };
}

async function run(): Promise<Table> {
  const { EmbeddedCluster, FetchTransport, HttpTransport, ShardherdClient } = await built();
  const cluster = new EmbeddedCluster({ name: 'routed-bench', nodes: ['n1'], log: pino({ level: 'silent' }), settings: { publishIntervalMs: 1_000 } });
  const node = cluster.node('n1');
  const url = await node.serve(DATASET, ({ shard, payload }) => ({ shard, rows: 1, echo: (payload as typeof PAYLOAD).query }));
  await cluster.start();
  const setup = await cluster.setupDataset({ ref: DATASET, numShards: 4, minNumNodes: 1, source: { type: 'synthetic', recordsPerSecond: 1 } }, 10_000);
  if (setup.type !== 'DatasetVerified') throw new Error(`setup: ${setup.type}`);
  const clients: Record<string, { client: ShardherdClient; transport: RequestTransport }> = {};
  for (const [name, transport] of [
    ['http', new HttpTransport()],
    ['fetch', new FetchTransport()],
  ] as const) {
    const client = await ShardherdClient.connectEmbedded(cluster, { name, transport });
    clients[name] = { client, transport };
  }
  const shard = 1;
  for (const { client } of Object.values(clients)) {
    const end = Date.now() + 10_000;
    for (;;) {
      try {
        await client.request(DATASET, { shard }, PAYLOAD, { deadlineMs: 1_000 });
        break;
      } catch (e) {
        if (Date.now() > end) throw e;
        await new Promise((r) => setTimeout(r, 50));
      }
    }
  }
  const version = clients.http!.client.map(DATASET)!.version;
  const bare = bareSender(
    (await node.serve(DATASET, ({ shard: s, payload }) => ({ shard: s, rows: 1, echo: (payload as typeof PAYLOAD).query }))) ?? url!,
    shard,
    version,
  );
  // serve() again reopened the port: let the clients hear the new address.
  await new Promise((r) => setTimeout(r, 300));
  const sides: Record<string, Send> = {
    bare: bare.send,
    client: () => clients.http!.client.request(DATASET, { shard }, PAYLOAD),
    'client (fetch)': () => clients.fetch!.client.request(DATASET, { shard }, PAYLOAD),
  };
  const results: Record<string, { rps: number[]; cpuUs: number[]; p50: number[]; p99: number[] }> = {};
  for (const name of Object.keys(sides)) results[name] = { rps: [], cpuUs: [], p50: [], p99: [] };
  // Warm-up.
  for (const send of Object.values(sides)) for (let i = 0; i < 500; i++) await send();
  for (let round = 0; round < ROUNDS; round++) {
    const order = Object.keys(sides);
    if (round % 2 === 1) order.reverse();
    for (const name of order) {
      const t = await throughput(sides[name]!);
      results[name]!.rps.push(t.rps);
      results[name]!.cpuUs.push(t.cpuUs);
      const lat = await latencies(sides[name]!);
      results[name]!.p50.push(quantile(lat, 0.5));
      results[name]!.p99.push(quantile(lat, 0.99));
    }
  }
  bare.close();
  for (const { client } of Object.values(clients)) await client.close();
  await cluster.stop();
  const b = results.bare!;
  const row = (name: string) => {
    const r = results[name]!;
    return [
      name,
      Math.round(median(r.rps)),
      (median(r.rps) / median(b.rps)).toFixed(2),
      median(r.cpuUs).toFixed(1),
      (median(b.cpuUs) / median(r.cpuUs)).toFixed(2),
      median(r.p50).toFixed(3),
      (median(r.p50) - median(b.p50)).toFixed(3),
      median(r.p99).toFixed(3),
    ];
  };
  return {
    title: `Routed requests: ShardherdClient.request against a bare keep-alive request to the same handler (medians of ${ROUNDS} rounds)`,
    columns: [
      'side',
      `requests/s (${CONCURRENCY} in flight)`,
      '× bare',
      'CPU µs per request',
      'bare CPU ÷ this CPU',
      'p50 ms (1 in flight)',
      'added p50 ms',
      'p99 ms',
    ],
    rows: ['bare', 'client', 'client (fetch)'].map(row),
    notes: [
      'Goals: client ≥ 0.9 × bare throughput, ≤ 0.3 ms added p50.',
      'Client and server share this process (the embedded node serves), so CPU per request is both sides: on a loaded machine it is the steadier figure of the two.',
    ],
  };
}

register({ name: 'routed-requests', run });
