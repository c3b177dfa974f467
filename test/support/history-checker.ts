// An independent checker of the one-writer promise on real processes: it reads the sink calls every
// node recorded (`{"type":"recorded"}` sinks, one JSON line a call) and the records the producer
// had acknowledged, and reports what broke. On purpose it uses none of the project's code (no token
// comparison, no invariants, no mapper): a bug shared by the product and its checker would hide.
//
// Rules, per (dataset, shard):
// (a) two calls by different nodes that the sink accepted must not overlap in time, for an RF 1
//     dataset (any overlap of [start, end] counts; each is classed by whether the older token's
//     call began before or after a newer token was in use, to say where to look);
// (b) an accepted call must not carry an older token than a call accepted before it, "before"
//     meaning that the earlier call had ended when the later one started;
// (c) every acknowledged record must be in some accepted call.
import { readFile } from 'node:fs/promises';

/** One sink call as a history file has it (see src/ingest/history-sink.ts for the writer's side). */
export interface Call {
  readonly node: string;
  readonly dataset: string;
  readonly shard: number;
  readonly token: readonly [number, number] | null;
  readonly start: number;
  readonly end: number;
  readonly firstOffset: number | null;
  readonly lastOffset: number | null;
  readonly count: number;
  readonly offsets: readonly (readonly [number, number])[];
  readonly outcome: 'ok' | 'refused' | 'failed';
  readonly delayedMs?: number;
}

/** A record the producer had acknowledged: in partition `shard` of the dataset's topic at `offset`. */
export interface AckedRecord {
  readonly dataset: string;
  readonly shard: number;
  readonly offset: number;
}

export interface Overlap {
  readonly dataset: string;
  readonly shard: number;
  readonly first: Call;
  readonly second: Call;
  readonly overlapMs: number;
  /**
   * `in-flight`: the call of the older token had started before any accepted call of a newer token
   * on the shard (a write under way when the shard moved; docs/ARCHITECTURE.md §11.7 leaves such a
   * write to a sink that fences across processes); `stale-start`: it started after a newer token
   * was in use (a write begun without the right to); `same-token`: both calls carry one token.
   * Every kind is a violation; the kind says where to look.
   */
  readonly kind: 'in-flight' | 'stale-start' | 'same-token';
}

export interface OutOfOrder {
  readonly dataset: string;
  readonly shard: number;
  /** The accepted call with the newest token among those that had ended when `later` started. */
  readonly earlier: Call;
  readonly later: Call;
}

export interface HistoryReport {
  readonly calls: number;
  readonly accepted: number;
  readonly refused: number;
  readonly failed: number;
  readonly nodes: readonly string[];
  /** Rule (a): accepted calls of different nodes that overlapped. */
  readonly overlaps: readonly Overlap[];
  /** In-flight overlaps whose older call was cut by a stop of its own process (`CheckInput.paused`): not violations, shown for context. */
  readonly pausedOverlaps: readonly Overlap[];
  /** Overlaps of different nodes' calls where one side was refused or failed (nothing applied): not violations, shown for context. */
  readonly attemptedOverlaps: number;
  /** Rule (b). */
  readonly outOfOrder: readonly OutOfOrder[];
  readonly acked: number;
  /** Rule (c): acknowledged records in no accepted call. */
  readonly lost: readonly AckedRecord[];
  /** History lines that were not JSON (a torn last line). */
  readonly malformedLines: number;
}

/** A window in which a node's process was stopped (SIGSTOP to SIGCONT), on the histories' clock. */
export interface PauseWindow {
  readonly node: string;
  readonly from: number;
  readonly to: number;
}

export interface CheckInput {
  readonly calls: readonly Call[];
  /**
   * When nodes were stopped. An in-flight overlap whose older call was cut by a stop of its own
   * process is the one case a lease cannot cover (docs/ARCHITECTURE.md §11.7: the stopped process
   * finishes its call when it runs again, after the shard moved; only a sink that fences across
   * processes refuses it): it is reported apart (`pausedOverlaps`), not as a violation.
   */
  readonly paused?: readonly PauseWindow[];
  /** The datasets of replication factor 1: rule (a) applies to them only. */
  readonly rf1Datasets: ReadonlySet<string>;
  readonly acked: readonly AckedRecord[];
  readonly malformedLines?: number;
}

/** Lexicographic: epoch first, then version. */
export function compareToken(a: readonly [number, number], b: readonly [number, number]): number {
  return a[0] !== b[0] ? a[0] - b[0] : a[1] - b[1];
}

const shardKey = (dataset: string, shard: number) => `${dataset}\u0000${shard}`;

function byShard(calls: readonly Call[]): Map<string, Call[]> {
  const out = new Map<string, Call[]>();
  for (const c of calls) {
    const key = shardKey(c.dataset, c.shard);
    const list = out.get(key);
    if (list) list.push(c);
    else out.set(key, [c]);
  }
  return out;
}

/** For a shard's calls: the earliest start of a call whose token is newer than a given one. */
function firstNewerStart(calls: readonly Call[]): (t: readonly [number, number]) => number {
  const byToken = calls.filter((c) => c.token !== null).sort((x, y) => compareToken(x.token!, y.token!));
  // suffixMin[i]: the earliest start among byToken[i..].
  const suffixMin = new Array<number>(byToken.length + 1).fill(Infinity);
  for (let i = byToken.length - 1; i >= 0; i--) suffixMin[i] = Math.min(suffixMin[i + 1]!, byToken[i]!.start);
  return (t) => {
    let lo = 0;
    let hi = byToken.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (compareToken(byToken[mid]!.token!, t) > 0) hi = mid;
      else lo = mid + 1;
    }
    return suffixMin[lo]!;
  };
}

function kindOf(a: Call, b: Call, newerStart: (t: readonly [number, number]) => number): Overlap['kind'] {
  if (a.token === null || b.token === null || compareToken(a.token, b.token) === 0) return 'same-token';
  const older = compareToken(a.token, b.token) < 0 ? a : b;
  return older.start < newerStart(older.token!) ? 'in-flight' : 'stale-start';
}

/** Pairs of calls by different nodes whose intervals overlap (touching ends do not), by a sweep over start times. */
function overlapsOf(calls: readonly Call[]): Overlap[] {
  const newerStart = firstNewerStart(calls);
  const sorted = [...calls].sort((x, y) => x.start - y.start);
  const open: Call[] = [];
  const found: Overlap[] = [];
  for (const c of sorted) {
    for (let i = open.length - 1; i >= 0; i--) if (open[i]!.end <= c.start) open.splice(i, 1);
    for (const o of open) {
      if (o.node !== c.node)
        found.push({ dataset: c.dataset, shard: c.shard, first: o, second: c, overlapMs: Math.min(o.end, c.end) - c.start, kind: kindOf(o, c, newerStart) });
    }
    open.push(c);
  }
  return found;
}

/** Accepted calls whose token is older than that of an accepted call that had ended before they started. */
function outOfOrderOf(calls: readonly Call[]): OutOfOrder[] {
  const withToken = calls.filter((c): c is Call & { token: readonly [number, number] } => c.token !== null);
  const byEnd = [...withToken].sort((x, y) => x.end - y.end);
  const byStart = [...withToken].sort((x, y) => x.start - y.start);
  const found: OutOfOrder[] = [];
  let newest: (typeof withToken)[number] | undefined;
  let i = 0;
  for (const c of byStart) {
    while (i < byEnd.length && byEnd[i]!.end < c.start) {
      const e = byEnd[i++]!;
      if (!newest || compareToken(e.token, newest.token) > 0) newest = e;
    }
    if (newest && compareToken(c.token, newest.token) < 0) found.push({ dataset: c.dataset, shard: c.shard, earlier: newest, later: c });
  }
  return found;
}

/** Merged, sorted inclusive offset runs of the accepted calls of one shard. */
function coverage(calls: readonly Call[]): [number, number][] {
  const runs = calls.flatMap((c) => c.offsets.map(([a, b]): [number, number] => [a, b])).sort((x, y) => x[0] - y[0]);
  const merged: [number, number][] = [];
  for (const r of runs) {
    const last = merged.at(-1);
    if (last && r[0] <= last[1] + 1) last[1] = Math.max(last[1], r[1]);
    else merged.push(r);
  }
  return merged;
}

function covered(runs: readonly [number, number][], offset: number): boolean {
  let lo = 0;
  let hi = runs.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    const [a, b] = runs[mid]!;
    if (offset < a) hi = mid - 1;
    else if (offset > b) lo = mid + 1;
    else return true;
  }
  return false;
}

export function checkHistory(input: CheckInput): HistoryReport {
  const accepted = input.calls.filter((c) => c.outcome === 'ok');
  const overlaps: Overlap[] = [];
  const pausedOverlaps: Overlap[] = [];
  const outOfOrder: OutOfOrder[] = [];
  const cutByPause = (o: Overlap) => {
    if (o.kind !== 'in-flight') return false;
    const older = compareToken(o.first.token!, o.second.token!) < 0 ? o.first : o.second;
    // The stop fell within the call. A call recorded as starting after the stop signal was sent,
    // while the process was stopped, began before the signal landed (a stopped process starts
    // nothing): it was cut by that stop too.
    return (input.paused ?? []).some((p) => p.node === older.node && p.from <= older.end && older.start <= p.to);
  };
  let attemptedOverlaps = 0;
  for (const [, calls] of byShard(input.calls)) {
    const ok = calls.filter((c) => c.outcome === 'ok');
    if (input.rf1Datasets.has(calls[0]!.dataset)) {
      for (const o of overlapsOf(ok)) (cutByPause(o) ? pausedOverlaps : overlaps).push(o);
      attemptedOverlaps += overlapsOf(calls).filter((o) => o.first.outcome !== 'ok' || o.second.outcome !== 'ok').length;
    }
    outOfOrder.push(...outOfOrderOf(ok));
  }
  const runs = new Map([...byShard(accepted)].map(([key, calls]) => [key, coverage(calls)]));
  const lost = input.acked.filter((r) => !covered(runs.get(shardKey(r.dataset, r.shard)) ?? [], r.offset));
  return {
    calls: input.calls.length,
    accepted: accepted.length,
    refused: input.calls.filter((c) => c.outcome === 'refused').length,
    failed: input.calls.filter((c) => c.outcome === 'failed').length,
    nodes: [...new Set(input.calls.map((c) => c.node))].sort(),
    overlaps,
    pausedOverlaps,
    attemptedOverlaps,
    outOfOrder,
    acked: input.acked.length,
    lost,
    malformedLines: input.malformedLines ?? 0,
  };
}

/** Parses history files' text; lines that are not JSON objects are counted, not fatal (a process killed mid-line). */
export function parseHistory(texts: readonly string[]): { calls: Call[]; malformedLines: number } {
  const calls: Call[] = [];
  let malformedLines = 0;
  for (const text of texts) {
    for (const line of text.split('\n')) {
      if (line.trim() === '') continue;
      try {
        const c = JSON.parse(line) as Call;
        if (typeof c.node !== 'string' || typeof c.start !== 'number' || typeof c.end !== 'number' || !Array.isArray(c.offsets)) throw new Error('not a call');
        calls.push(c);
      } catch {
        malformedLines += 1;
      }
    }
  }
  return { calls, malformedLines };
}

/** Reads history files (a missing one is empty: a node that never wrote). */
export async function readHistories(paths: readonly string[]): Promise<{ calls: Call[]; malformedLines: number }> {
  return parseHistory(await Promise.all(paths.map((p) => readFile(p, 'utf8').catch(() => ''))));
}

export function violations(r: HistoryReport): number {
  return r.overlaps.length + r.outOfOrder.length + r.lost.length;
}

const iso = (ms: number) => new Date(ms).toISOString().slice(11, 23);
const tok = (t: Call['token']) => (t ? `(${t[0]},${t[1]})` : '(none)');
const describe = (c: Call) =>
  `${c.node} token ${tok(c.token)} ${iso(c.start)}–${iso(c.end)} (${(c.end - c.start).toFixed(1)} ms${c.delayedMs ? `, held ${c.delayedMs} ms by the test hook` : ''}) offsets ${c.firstOffset ?? '-'}..${c.lastOffset ?? '-'} (${c.count} records)`;

/** How many overlaps of each kind, as text. */
function kinds(overlaps: readonly Overlap[]): string {
  const kind = (k: Overlap['kind']) => overlaps.filter((o) => o.kind === k).length;
  return `${kind('stale-start')} stale-start (the older token's call began after a newer token was in use), ${kind('in-flight')} in-flight (it began before: a write under way when the shard moved), ${kind('same-token')} same-token`;
}

/** One example per call: a call that overlapped hundreds of others (a hung one) shows once, with the first of them. */
function firstPerCall<T>(items: readonly T[], call: (t: T) => Call): T[] {
  const seen = new Set<Call>();
  return items.filter((t) => !seen.has(call(t)) && seen.add(call(t)) !== undefined);
}

/** The checker's findings as text: the figures, then up to `examples` of each kind of violation. */
export function formatReport(r: HistoryReport, examples = 10): string {
  const overlapCalls = new Set(r.overlaps.flatMap((o) => [o.first, o.second]));
  const lines = [
    `history: ${r.calls} sink calls by ${r.nodes.join(', ') || 'no node'} (${r.accepted} accepted, ${r.refused} refused as fenced, ${r.failed} failed)${r.malformedLines ? `, ${r.malformedLines} malformed lines` : ''}`,
    `(a) overlapping accepted writes of one RF 1 shard by two nodes: ${r.overlaps.length}` +
      (r.overlaps.length
        ? ` pairs of calls (${overlapCalls.size} calls) on ${new Set(r.overlaps.map((o) => `${o.dataset}/${o.shard}`)).size} shards, longest overlap ${Math.max(...r.overlaps.map((o) => o.overlapMs)).toFixed(1)} ms; ${kinds(r.overlaps)}`
        : '') +
      ` (not counted: overlaps where one side was refused or failed, ${r.attemptedOverlaps}; in-flight calls cut by a stop of their own process, ${r.pausedOverlaps.length})`,
    ...firstPerCall(r.overlaps, (o) => o.first)
      .slice(0, examples)
      .map((o) => `    ${o.dataset}/${o.shard}: ${o.overlapMs.toFixed(1)} ms overlap, ${o.kind}\n      ${describe(o.first)}\n      ${describe(o.second)}`),
    `(b) accepted writes with a token older than one accepted before: ${r.outOfOrder.length}`,
    ...firstPerCall(r.outOfOrder, (v) => v.earlier)
      .slice(0, examples)
      .map((v) => `    ${v.dataset}/${v.shard}:\n      before: ${describe(v.earlier)}\n      after:  ${describe(v.later)}`),
    `(c) acknowledged records in no accepted write: ${r.lost.length} of ${r.acked}`,
    ...(r.lost.length
      ? [
          `    ${r.lost
            .slice(0, examples * 2)
            .map((l) => `${l.dataset}/${l.shard}@${l.offset}`)
            .join(', ')}${r.lost.length > examples * 2 ? ', …' : ''}`,
        ]
      : []),
  ];
  return lines.join('\n');
}
