/**
 * The small harness every benchmark module uses: a registry, a repetition loop that reports
 * medians (these machines are noisy), and a markdown table printer. Not a benchmark itself.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

/** One printed result: a markdown table with a title and optional notes under it. */
export interface Table {
  readonly title: string;
  readonly columns: readonly string[];
  readonly rows: readonly (readonly (string | number)[])[];
  readonly notes?: readonly string[];
}

export interface Benchmark {
  /** Short and filterable: `npm run bench -- <part of a name>`. */
  readonly name: string;
  /** Long (the soak): runs only when a filter names it, never in a plain `npm run bench`. */
  readonly onDemand?: boolean;
  run(): Table | Promise<Table>;
}

const registry: Benchmark[] = [];

/** Called by each benchmark module when it is imported. */
export function register(...benchmarks: Benchmark[]): void {
  registry.push(...benchmarks);
}

export function registered(): readonly Benchmark[] {
  return registry;
}

// A full collection before each sample, outside the timed region, so one sample does not pay for
// the previous one's garbage. `--expose-gc` set at run time; `vm` hands back the function.
setFlagsFromString('--expose-gc');
const collect = runInNewContext('gc') as () => void;

/** A full garbage collection now (for heap figures that mean live memory). */
export const collectGarbage = (): void => collect();

export interface SampleOptions {
  /** Untimed runs first (JIT warm-up): at most this many, and none once `warmupMs` is spent. */
  readonly warmup: number;
  readonly warmupMs?: number;
  readonly minSamples: number;
  readonly maxSamples: number;
  /** Keep sampling until this much timed work is done (ms), between min and max samples. */
  readonly budgetMs: number;
  /** Hard stop for the whole case (ms), even below `minSamples`. */
  readonly capMs?: number;
}

export interface Samples<T> {
  /** Wall time of each timed run, ms. */
  readonly times: readonly number[];
  /** The last run's result, for figures other than time. */
  readonly last: T;
}

/** Runs `fn` repeatedly and times each run with the monotonic high-resolution clock. */
export function sample<T>(fn: () => T, o: SampleOptions): Samples<T> {
  const started = performance.now();
  const cap = o.capMs ?? 30_000;
  let last = fn();
  for (let i = 1; i < o.warmup && performance.now() - started < (o.warmupMs ?? 500); i++) last = fn();
  const times: number[] = [];
  let spent = 0;
  while (times.length < o.maxSamples && (times.length < o.minSamples || spent < o.budgetMs) && performance.now() - started < cap) {
    collect();
    const t0 = process.hrtime.bigint();
    last = fn();
    const ms = Number(process.hrtime.bigint() - t0) / 1e6;
    times.push(ms);
    spent += ms;
  }
  return { times, last };
}

/** Nearest-rank quantile (q in 0..1) of unsorted values; the median averages the middle two. */
export function quantile(values: readonly number[], q: number): number {
  const s = [...values].sort((a, b) => a - b);
  if (s.length === 0) return NaN;
  if (q === 0.5 && s.length % 2 === 0) return (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
  return s[Math.max(0, Math.ceil(q * s.length) - 1)]!;
}

/** Milliseconds with three significant figures (at least two decimals below 1 ms). */
export function ms(v: number): string {
  return v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v >= 1 ? v.toFixed(2) : v.toFixed(3);
}

export function markdownTable(t: Table): string {
  const line = (cells: readonly (string | number)[]): string => `| ${cells.join(' | ')} |`;
  const align = t.columns.map((_, i) => (i === 0 ? '---' : '---:'));
  const out = [`### ${t.title}`, '', line(t.columns), line(align), ...t.rows.map(line)];
  if (t.notes && t.notes.length > 0) out.push('', ...t.notes.map((n) => `- ${n}`));
  return out.join('\n');
}
