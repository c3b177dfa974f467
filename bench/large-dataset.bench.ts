/**
 * The embedded demo (`shardherd --no-story`: five nodes in one process, the synthetic source) given
 * one large dataset through its HTTP API: `SHARDHERD_LARGE_SHARDS` shards (default 65 536) × RF 1,
 * one record a second per shard. Measured from outside the demo's process, before the dataset
 * (the baseline, same run) and after it:
 * - the singleton's answers: `GET /api/v1/datasets` (a round trip through the singleton, every
 *   dataset's counts) and `GET /api/v1/datasets/metrics` (one small dataset), and `/healthz`,
 *   each asked five times a second: p50, p99, max and failures;
 * - the longest event-loop stall of the demo's process (Node's event-loop delay monitor, exported
 *   as `shardherd_process_nodejs_eventloop_lag_max_seconds`), every node's metrics scraped every 2 s
 *   as Prometheus would (the node of 65 536 copies among them);
 * - the time from the `POST` to every copy Active.
 * `SHARDHERD_LARGE_BUSY=2` runs two busy-loop processes beside it. It runs the built package
 * (`npm run build` first), as `npm start` does.
 */
import { spawn } from 'node:child_process';
import { busyCores } from './disturbances.js';
import { ms, quantile, register, type Table } from './harness.js';
import { sleep } from './runtime-support.js';

const SHARDS = Number(process.env.SHARDHERD_LARGE_SHARDS ?? 65_536);
const BUSY = Number(process.env.SHARDHERD_LARGE_BUSY ?? 0);
const BASELINE_MS = 15_000;
const AFTER_MS = 60_000;
const ASK_EVERY_MS = 200;
const LAG_EVERY_MS = 2_000;

/** One answer: when it was asked (performance.now()) and how long it took; a failure has no time. */
interface Answer {
  readonly at: number;
  readonly ms: number | undefined;
}

interface Phase {
  readonly answers: Map<string, Answer[]>;
  readonly stalls: { readonly at: number; readonly ms: number }[];
}

async function startDemo(): Promise<{ url: string; token: string; metrics: string[]; stop(): Promise<void> }> {
  // The built package, as `npm start` runs it (`npm run build` first).
  const child = spawn(process.execPath, ['dist/cli/main.js', '--no-story', '--port', '0', '--log-level', 'warn'], { stdio: ['ignore', 'pipe', 'ignore'] });
  const exited = new Promise<void>((done) => child.once('exit', () => done()));
  const kill = () => child.kill('SIGKILL');
  process.once('exit', kill);
  let out = '';
  child.stdout!.on('data', (chunk: Buffer) => (out += chunk.toString()));
  const started = performance.now();
  for (;;) {
    const url = /status page (http:\/\/127\.0\.0\.1:\d+)\//.exec(out)?.[1];
    const token = /token ([A-Za-z0-9_-]{16,})/.exec(out)?.[1];
    const nodeMetrics = /each node's own metrics: (.*)/.exec(out)?.[1]?.match(/http:\/\/[^ ]+\/metrics/g);
    if (url && token && nodeMetrics) {
      // Every node's metrics are scraped, as Prometheus would; one of them carries the process's figures.
      const metrics = nodeMetrics;
      return {
        url,
        token,
        metrics,
        stop: async () => {
          process.off('exit', kill);
          child.kill('SIGINT');
          const t = setTimeout(kill, 10_000);
          await exited;
          clearTimeout(t);
        },
      };
    }
    if (child.exitCode !== null || performance.now() - started > 120_000) throw new Error(`the demo did not start: ${out}`);
    await sleep(100);
  }
}

/**
 * Asks each route every ASK_EVERY_MS and reads the event-loop stall every LAG_EVERY_MS (from the
 * node's metrics that carry the process's figures), until `until` resolves.
 */
async function observe(url: string, metrics: readonly string[], until: Promise<void>): Promise<Phase> {
  const phase: Phase = { answers: new Map(), stalls: [] };
  let done = false;
  void until.then(() => (done = true));
  const ask = async (route: string) => {
    const entry: Answer[] = [];
    phase.answers.set(route, entry);
    while (!done) {
      const t0 = performance.now();
      try {
        const res = await fetch(`${url}${route}`, { signal: AbortSignal.timeout(30_000) });
        await res.arrayBuffer();
        entry.push({ at: t0, ms: res.ok ? performance.now() - t0 : undefined });
      } catch {
        entry.push({ at: t0, ms: undefined });
      }
      await sleep(Math.max(0, ASK_EVERY_MS - (performance.now() - t0)));
    }
  };
  const lag = async () => {
    while (!done) {
      await sleep(LAG_EVERY_MS);
      for (const m of metrics) {
        try {
          const text = await (await fetch(m, { signal: AbortSignal.timeout(30_000) })).text();
          const max = /^shardherd_process_nodejs_eventloop_lag_max_seconds (\S+)/m.exec(text)?.[1];
          if (max !== undefined) phase.stalls.push({ at: performance.now(), ms: Number(max) * 1000 });
        } catch {
          // a scrape that failed is seen in the answers' failures
        }
      }
    }
  };
  await Promise.all([ask('/api/v1/datasets'), ask('/api/v1/datasets/metrics'), ask('/healthz'), lag()]);
  return phase;
}

async function allActive(url: string, dataset: string, shards: number): Promise<boolean> {
  try {
    const body = (await (await fetch(`${url}/api/v1/datasets`, { signal: AbortSignal.timeout(30_000) })).json()) as {
      datasets: { name: string; counts: Record<string, number> }[];
    };
    return body.datasets.find((d) => d.name === dataset)?.counts.Active === shards;
  } catch {
    return false;
  }
}

register({
  name: 'large-dataset',
  run: async (): Promise<Table> => {
    const busy = BUSY > 0 ? busyCores(BUSY) : undefined;
    const demo = await startDemo();
    try {
      await sleep(5_000); // the demo's own datasets set up
      const baseline = await observe(demo.url, demo.metrics, sleep(BASELINE_MS));
      const t0 = performance.now();
      const res = await fetch(`${demo.url}/api/v1/datasets`, {
        method: 'POST',
        headers: { authorization: `Bearer ${demo.token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ ref: 'huge', numShards: SHARDS, minNumNodes: 1, source: { type: 'synthetic', recordsPerSecond: 1 } }),
      });
      const postMs = performance.now() - t0;
      const postStatus = res.status;
      await res.arrayBuffer();
      let activeMs: number | undefined;
      const watchActive = (async () => {
        while (performance.now() - t0 < AFTER_MS) {
          if (await allActive(demo.url, 'huge', SHARDS)) {
            activeMs = performance.now() - t0;
            return;
          }
          await sleep(500);
        }
      })();
      const after = await observe(demo.url, demo.metrics, sleep(AFTER_MS));
      await watchActive;
      // The answers after the POST, split at the moment every copy was Active: while setting up, and at rest after.
      const activeAt = activeMs === undefined ? Infinity : t0 + activeMs;
      const windows: [string, Phase, (at: number) => boolean][] = [
        ["before (the demo's 2 datasets × 16 shards)", baseline, () => true],
        [`setting up ${SHARDS} shards (POST → every copy Active)`, after, (at) => at < activeAt],
        ['after, every copy Active and ingesting', after, (at) => at >= activeAt],
      ];
      const rows: (string | number)[][] = [];
      const p99Of: Record<string, number> = {};
      for (const [name, phase, inWindow] of windows) {
        for (const [route, answers] of phase.answers) {
          const asked = answers.filter((a) => inWindow(a.at));
          const times = asked.flatMap((a) => (a.ms === undefined ? [] : [a.ms]));
          if (route === '/api/v1/datasets/metrics') p99Of[name] = quantile(times, 0.99);
          rows.push([
            name,
            route,
            asked.length,
            asked.length - times.length,
            ...(times.length === 0 ? ['', '', ''] : [ms(quantile(times, 0.5)), ms(quantile(times, 0.99)), ms(Math.max(...times))]),
          ]);
        }
        const stalls = phase.stalls.filter((s) => inWindow(s.at)).map((s) => s.ms);
        rows.push([name, 'longest event-loop stall of the demo', stalls.length, '', '', '', stalls.length === 0 ? '' : ms(Math.max(...stalls))]);
      }
      const [before, settingUp, atRest] = windows.map(([name]) => p99Of[name]!);
      return {
        title: `The embedded demo given a ${SHARDS}-shard dataset${BUSY > 0 ? `, ${BUSY} busy loops beside it` : ''}`,
        columns: ['phase', 'route', 'answers', 'failed', 'p50 ms', 'p99 ms', 'max ms'],
        rows,
        notes: [
          `POST /api/v1/datasets: ${postStatus} in ${ms(postMs)} ms; every copy Active ${activeMs === undefined ? `not within ${AFTER_MS / 1000} s` : `after ${(activeMs / 1000).toFixed(1)} s`}`,
          `p99 of /api/v1/datasets/metrics against before: ${(settingUp! / before!).toFixed(2)}× while setting up, ${(atRest! / before!).toFixed(2)}× at rest`,
          'each route asked every 200 ms by one caller; stalls read every 2 s (the maximum since the previous read)',
        ],
      };
    } finally {
      await demo.stop();
      await busy?.stop();
    }
  },
});
