// A query router as its own process, for the chaos test and the read-availability benchmark: a
// `ShardherdClient` from the public `shardherd/kafka` entry (`connectKafkaClient`), sending routed
// requests at a steady rate over random keys, one JSON line per outcome on stdout.
//
// Settings: the JSON of SHARDHERD_ROUTER (`RouterSettings`). Lines: `{"type":"ready"}` once
// connected and the dataset's map is known, then one `{"type":"r",...}` per request (`RouterLine`),
// `{"type":"done"}` when stdin closes (the parent's way of stopping it), and
// `{"type":"fatal","code":...,"message":...}` if it cannot start (exit code 1).
import { connectKafkaClient } from '../../src/entries/kafka.js';
import { ShardherdClientError, type DatasetRef } from '../../src/index.js';

export interface RouterSettings {
  readonly brokers: readonly string[];
  readonly topicPrefix: string;
  readonly dataset: string;
  /** Requests per second. */
  readonly rate: number;
  readonly deadlineMs: number;
  readonly attemptTimeoutMs?: number;
  readonly connectTimeoutMs?: number;
  /** Distinct series keys the requests pick from at random. Default 10 000. */
  readonly keys?: number;
  /** Hedge requests (a second copy after the recent p95). Default off. */
  readonly hedge?: boolean;
}

/** The router's resident memory (bytes) and requests in flight, once a second. */
export interface MemoryLine {
  readonly type: 'mem';
  readonly rss: number;
  readonly inFlight: number;
}

/** One request's outcome: when it was sent (ms since the epoch), its shard, who answered or why not, and how long it took. */
export type RouterLine =
  | { readonly type: 'r'; readonly t: number; readonly ms: number; readonly shard: number; readonly ok: true; readonly node: string }
  | {
      readonly type: 'r';
      readonly t: number;
      readonly ms: number;
      readonly shard: number | null;
      readonly ok: false;
      readonly code: string;
      readonly message: string;
    };

const settings = JSON.parse(process.env.SHARDHERD_ROUTER ?? '{}') as RouterSettings;
const out = (line: unknown) => process.stdout.write(`${JSON.stringify(line)}\n`);

async function main(): Promise<void> {
  const dataset = settings.dataset as DatasetRef;
  const client = await connectKafkaClient({
    brokers: settings.brokers,
    topicPrefix: settings.topicPrefix,
    name: `router-${process.pid}`,
    deadlineMs: settings.deadlineMs,
    ...(settings.attemptTimeoutMs ? { attemptTimeoutMs: settings.attemptTimeoutMs } : {}),
    connectTimeoutMs: settings.connectTimeoutMs ?? 20_000,
    ...(settings.hedge ? { hedge: true } : {}),
  });
  // The map first, and a reachable serving copy of every shard: a request before would only measure the start.
  await client.whenServed(dataset, { deadlineMs: 30_000 });
  out({ type: 'ready' });

  const keys = settings.keys ?? 10_000;
  let stopping = false;
  let inFlight = 0;
  let sent = 0;
  const start = performance.now();
  const send = () => {
    const k = Math.floor(Math.random() * keys);
    const t = Date.now();
    const t0 = performance.now();
    inFlight++;
    client
      .request<{ node: string; shard: number }>(dataset, { shardKey: { _ws_: 'bench', _ns_: `ns-${k % 64}` }, partitionKey: { series: `s-${k}` } }, { k })
      .then(
        (a) => out({ type: 'r', t, ms: performance.now() - t0, shard: a.shard, ok: true, node: a.node }),
        (e: unknown) => {
          const error = e instanceof ShardherdClientError ? e : undefined;
          out({
            type: 'r',
            t,
            ms: performance.now() - t0,
            shard: error?.shard ?? null,
            ok: false,
            code: error?.code ?? 'UNTYPED',
            message: e instanceof Error ? e.message : String(e),
          });
        },
      )
      .finally(() => inFlight--);
  };
  // What the router holds, every second: its memory must stay bounded by the client's in-flight limit.
  const memory = setInterval(() => out({ type: 'mem', rss: process.memoryUsage().rss, inFlight }), 1_000);
  // Catch-up pacing: every tick sends what the rate owes since the start, so a late tick does not lower the rate.
  const timer = setInterval(() => {
    if (stopping) return;
    const owed = Math.floor(((performance.now() - start) / 1000) * settings.rate) - sent;
    for (let i = 0; i < owed; i++, sent++) send();
  }, 5);
  await new Promise<void>((resolve) => {
    process.stdin.on('end', resolve);
    process.stdin.on('close', resolve);
    process.stdin.resume();
  });
  stopping = true;
  clearInterval(timer);
  clearInterval(memory);
  while (inFlight > 0) await new Promise((r) => setTimeout(r, 10));
  await client.close();
  out({ type: 'done', sent });
}

main().then(
  () => process.exit(0),
  (e: unknown) => {
    out({ type: 'fatal', code: e instanceof ShardherdClientError ? e.code : 'UNTYPED', message: e instanceof Error ? e.message : String(e) });
    process.exit(1);
  },
);
