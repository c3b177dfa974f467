// The nodes' load reports into a load-aware dataset's view (docs/PLACEMENT.md, "Load reports"):
// each figure from a serving copy kept with when it came; a figure or a whole report that cannot be
// right refused and counted, never acted on. Every batch ends with the load rounds that are due.
import type { LoadBalanceConfig } from '../dataset-config.js';
import { isServingCopy } from '../shard-record.js';
import type { Steps } from '../steps.js';
import type { DatasetRef } from '../ids.js';
import type { LoadRefusal, LoadReport } from './protocol.js';
import type { Step } from './step.js';
import { checkLoads, loadOf } from './load-balancing.js';

/** A report more than this ahead of the singleton's clock is refused: the node's clock is wrong. */
const MAX_AHEAD_MS = 60_000;
/** No copy ingests or spends this much per second: such a figure is a bug, not a load. */
const ABSURD = 1e12;

/** The configured measure of one report's entry. */
function figure(r: LoadReport, i: number, measure: LoadBalanceConfig['measure']): unknown {
  switch (measure) {
    case 'records':
      return r.records[i];
    case 'bytes':
      return r.bytes[i];
    case 'sink-time':
      return r.sinkMs[i];
    case 'weight':
      return r.weights?.[i];
  }
}

/** Why a whole report is refused, if it is. */
function reportRefusal(step: Step, r: LoadReport): LoadRefusal | undefined {
  const ds = step.dataset(r.dataset);
  if (ds?.config.loadBalance === undefined) return 'unknown-dataset';
  if (step.member(r.node)?.incarnation !== r.incarnation) return 'not-a-member';
  if (!(r.at <= step.now + MAX_AHEAD_MS)) return 'from-the-future';
  const n = r.shards.length;
  if (r.records.length !== n || r.bytes.length !== n || r.sinkMs.length !== n || (r.weights !== undefined && r.weights.length !== n)) return 'malformed';
  return undefined;
}

/** Why one figure is refused, if it is; `skip` when it is fine but not counted (a copy still catching up). */
function figureRefusal(step: Step, r: LoadReport, shard: number, value: unknown): LoadRefusal | 'skip' | undefined {
  if (typeof value !== 'number' || Number.isNaN(value)) return 'not-a-number';
  if (value < 0) return 'negative';
  if (!(value <= ABSURD)) return 'absurd';
  const { mapper } = step.dataset(r.dataset)!;
  const copy = Number.isInteger(shard) && shard >= 0 && shard < mapper.numShards ? mapper.copyOnNode(shard, r.node) : undefined;
  if (copy === undefined) return 'not-its-copy';
  // A copy catching up ingests its backlog faster than the shard's records arrive: not the shard's load.
  return isServingCopy(copy) && copy.placement !== 'Leaving' ? undefined : 'skip';
}

/** Takes the nodes' load reports into the view; refused figures are counted, never acted on. */
export function* loadReports(step: Step, reports: readonly LoadReport[]): Steps<void> {
  const changed = new Map<DatasetRef, { values: Float64Array; at: Float64Array; refused: Partial<Record<LoadRefusal, number>> }>();
  const working = (ref: DatasetRef) => {
    if (step.dataset(ref)?.config.loadBalance === undefined) return undefined;
    let w = changed.get(ref);
    if (!w) {
      const load = loadOf(step, ref);
      w = { values: Float64Array.from(load.values), at: Float64Array.from(load.at), refused: { ...load.refused } };
      changed.set(ref, w);
    }
    return w;
  };
  /** Refused now, by dataset (as the report named it) and why. */
  const refusedNow = new Map<DatasetRef, Partial<Record<LoadRefusal, number>>>();
  const refuse = (ref: DatasetRef, why: LoadRefusal, count: number) => {
    const now = refusedNow.get(ref) ?? {};
    now[why] = (now[why] ?? 0) + count;
    refusedNow.set(ref, now);
    const w = working(ref);
    if (w) w.refused[why] = (w.refused[why] ?? 0) + count;
  };
  for (const r of reports) {
    const whole = reportRefusal(step, r);
    if (whole !== undefined) {
      refuse(r.dataset, whole, Math.max(1, r.shards.length));
      continue;
    }
    const measure = step.dataset(r.dataset)!.config.loadBalance!.measure;
    const w = working(r.dataset)!;
    for (let i = 0; i < r.shards.length; i++) {
      const shard = r.shards[i]!;
      const value = figure(r, i, measure);
      const why = figureRefusal(step, r, shard, value);
      if (why === 'skip') continue;
      if (why !== undefined) {
        refuse(r.dataset, why, 1);
        continue;
      }
      w.values[shard] = value as number;
      w.at[shard] = step.now;
    }
  }
  for (const [ref, w] of changed) step.loads.set(ref, { ...loadOf(step, ref), values: w.values, at: w.at, refused: w.refused });
  for (const [ref, byWhy] of refusedNow) {
    const known = step.dataset(ref) !== undefined;
    step.notice({
      name: 'load.reports-refused',
      level: 'warn',
      ...(known ? { dataset: ref } : {}),
      message: `${ref}: load figures refused (never acted on): ${Object.entries(byWhy)
        .map(([why, n]) => `${n} ${why}`)
        .join(', ')}`,
    });
  }
  yield* checkLoads(step);
}
