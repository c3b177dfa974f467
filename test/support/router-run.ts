// The parent's side of ./router-process.ts: spawns the router, waits until it is ready, collects
// its outcome lines, stops it; and the figures the chaos test and the benchmark report from them.
import { spawn } from 'node:child_process';
import { resolve } from 'node:path';
import { createInterface } from 'node:readline';
import type { MemoryLine, RouterLine, RouterSettings } from './router-process.js';

const ROUTER = resolve(import.meta.dirname, 'router-process.ts');

export type Outcome = RouterLine;

export interface RouterRun {
  /** Every outcome so far (the array grows while the router runs). */
  readonly outcomes: Outcome[];
  /** The router's largest resident memory (bytes) and number of requests in flight seen so far. */
  readonly peak: { rss: number; inFlight: number };
  /** Closes the router's stdin, waits for its last requests and its exit; resolves with every outcome. */
  stop(): Promise<Outcome[]>;
  /** SIGKILL (a teardown after a failure). */
  kill(): void;
}

/** Spawns a router process and resolves once it has connected and had a first answer. */
export async function startRouter(settings: RouterSettings, readyTimeoutMs = 60_000): Promise<RouterRun> {
  const child = spawn(process.execPath, ['--import', 'tsx', ROUTER], {
    stdio: ['pipe', 'pipe', 'pipe'],
    env: { ...process.env, SHARDHERD_ROUTER: JSON.stringify(settings), FORCE_COLOR: '0' },
  });
  const outcomes: Outcome[] = [];
  const peak = { rss: 0, inFlight: 0 };
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4_000)));
  const exited = new Promise<number | null>((done) => child.once('exit', (code) => done(code)));
  let ready: () => void = () => {};
  let failed: (e: Error) => void = () => {};
  const isReady = new Promise<void>((ok, fail) => ((ready = ok), (failed = fail)));
  createInterface({ input: child.stdout }).on('line', (text) => {
    const line = JSON.parse(text) as Outcome | MemoryLine | { type: 'ready' } | { type: 'done' } | { type: 'fatal'; code: string; message: string };
    if (line.type === 'r') outcomes.push(line);
    else if (line.type === 'mem') {
      peak.rss = Math.max(peak.rss, line.rss);
      peak.inFlight = Math.max(peak.inFlight, line.inFlight);
    } else if (line.type === 'ready') ready();
    else if (line.type === 'fatal') failed(new Error(`the router could not start: ${line.code}: ${line.message}`));
  });
  void exited.then((code) => failed(new Error(`the router exited (${String(code)}) before it was ready: ${stderr}`)));
  const timer = setTimeout(() => failed(new Error(`the router was not ready within ${readyTimeoutMs} ms`)), readyTimeoutMs);
  try {
    await isReady;
  } catch (e) {
    child.kill('SIGKILL');
    throw e;
  } finally {
    clearTimeout(timer);
  }
  return {
    outcomes,
    peak,
    async stop() {
      child.stdin.end();
      const code = await exited;
      if (code !== 0) throw new Error(`the router exited ${String(code)}: ${stderr}`);
      return outcomes;
    },
    kill: () => void child.kill('SIGKILL'),
  };
}

/** Figures of a set of outcomes. */
export interface OutcomeFigures {
  readonly requests: number;
  readonly failed: number;
  readonly pastDeadline: number;
  /** Of the successful requests (ms); undefined without any. */
  readonly p50?: number;
  readonly p99?: number;
  readonly max?: number;
  /** Failures by error code. */
  readonly codes: Readonly<Record<string, number>>;
}

export function figures(outcomes: readonly Outcome[], deadlineMs: number): OutcomeFigures {
  const ms = outcomes.map((o) => o.ms).sort((a, b) => a - b);
  const codes: Record<string, number> = {};
  for (const o of outcomes) if (!o.ok) codes[o.code] = (codes[o.code] ?? 0) + 1;
  const at = (q: number) => (ms.length === 0 ? undefined : ms[Math.min(ms.length - 1, Math.floor(q * ms.length))]);
  return {
    requests: outcomes.length,
    failed: outcomes.filter((o) => !o.ok).length,
    pastDeadline: outcomes.filter((o) => o.ms > deadlineMs).length,
    ...(ms.length === 0 ? {} : { p50: at(0.5)!, p99: at(0.99)!, max: ms.at(-1)! }),
    codes,
  };
}

/** The outcomes of requests sent in `[from, to)` (ms since the epoch). */
export function sentBetween(outcomes: readonly Outcome[], from: number, to: number): Outcome[] {
  return outcomes.filter((o) => o.t >= from && o.t < to);
}
