// Every sink call of a simulation, recorded from the outside (who called, as which incarnation, for
// which shard, with which token, from when to when on the simulated real time, with what outcome),
// and the check of I15 on those calls alone, whatever the leases and maps say
// (docs/ARCHITECTURE.md §9):
//
// - I15 one writer per RF-1 shard at a time: for a dataset of one copy per shard, the intervals
//   [start, end] of two calls of one shard by different nodes never overlap.
//
// Two calls overlap when both are under way at some moment: the later begins before the earlier
// ends (calls that begin and end at one instant overlap a call under way around that instant; two
// such at one instant follow each other, as one simulated instant runs its work in order).
//
// Left out, each because the design leaves it to the fencing token (§11.7, §12.2) and names it: a
// call under way while its process was stopped (paused or stalled: it lands when the process runs
// again); a call that outlasted the node's sink timeout (the node gave it up and failed the shard);
// a call of an older token that began before the other node's first call under its newer token (a
// write already under way when the shard moved: its token is older, so the fence orders it). And,
// because the simulation drains and replaces nodes of RF-1 datasets, a planned handoff: calls of
// one handoff's two copies while the maps name both, and until the leaving copy's node hears of the
// map that removed it (`inHandoff`, from the persisted maps: `handoffs.ts`). Calls with one token
// by two nodes are a handoff's too: a token names one set of copies.
import { compareTokens, StaleTokenError, tokenText, type FencingToken } from '../core/fencing-token.js';
import type { RecordSink } from '../ingest/ingestion-source.js';

export type SinkCallOutcome = 'applied' | 'refused' | 'failed';

export interface SinkCall {
  readonly node: string;
  readonly incarnation: string;
  readonly dataset: string;
  readonly shard: number;
  readonly token: FencingToken | undefined;
  readonly records: number;
  /** Simulated real time (not the node's drifting clock). */
  readonly start: number;
  /** When the call settled; undefined while it has not (a crashed process's call never does). */
  end: number | undefined;
  outcome: SinkCallOutcome | undefined;
}

export interface OneWriterRules {
  /** Whether `dataset` keeps one copy per shard. */
  readonly singleCopy: (dataset: string) => boolean;
  /** Whether `node`'s process was stopped (paused, stalled, dead) at some moment of `from .. to`. */
  readonly stoppedDuring: (node: string, from: number, to: number) => boolean;
  /** The node's sink timeout: a call that lasted longer had been given up by its node. */
  readonly sinkTimeoutMs: number;
  /** Whether nodes `a` and `b` were one handoff's two copies of the shard throughout `from .. to`. */
  readonly inHandoff: (dataset: string, shard: number, a: string, b: string, from: number, to: number) => boolean;
}

/** Records every call made through `wrap`, with the simulated real time of `now`. */
export class SinkCallLog {
  readonly calls: SinkCall[] = [];

  constructor(private readonly now: () => number) {}

  /** `sink` as incarnation `incarnation()` of `node` calls it: each call is recorded, then forwarded. */
  wrap(node: string, incarnation: () => string, sink: RecordSink): RecordSink {
    return {
      accept: (ds, shard, records, token) => {
        const call: SinkCall = {
          node,
          incarnation: incarnation(),
          dataset: ds.ref,
          shard,
          token,
          records: records.length,
          start: this.now(),
          end: undefined,
          outcome: undefined,
        };
        this.calls.push(call);
        const settle = (outcome: SinkCallOutcome) => {
          call.end = this.now();
          call.outcome = outcome;
        };
        return sink.accept(ds, shard, records, token).then(
          () => settle('applied'),
          (e: unknown) => {
            settle(e instanceof StaleTokenError ? 'refused' : 'failed');
            throw e;
          },
        );
      },
    };
  }
}

const callText = (c: SinkCall) =>
  `${c.node}@${c.incarnation} (token ${c.token ? tokenText(c.token) : 'none'}, ${c.start}..${c.end} ms, ${c.records} records, ${c.outcome})`;

const sameToken = (a: FencingToken | undefined, b: FencingToken | undefined) => a !== undefined && b !== undefined && compareTokens(a, b) === 0;

/** I15 over `calls`: one message per shard whose calls by two nodes overlapped (the first such pair). */
export function oneWriterViolations(calls: readonly SinkCall[], rules: OneWriterRules): string[] {
  const byShard = new Map<string, SinkCall[]>();
  for (const c of calls) {
    if (c.end === undefined || !rules.singleCopy(c.dataset)) continue;
    const key = `${c.dataset}/${c.shard}`;
    const list = byShard.get(key) ?? [];
    list.push(c);
    byShard.set(key, list);
  }
  const out: string[] = [];
  for (const [key, list] of byShard) {
    list.sort((a, b) => a.start - b.start);
    const judged = list.filter((c) => c.end! - c.start <= rules.sinkTimeoutMs && !rules.stoppedDuring(c.node, c.start, c.end!));
    const pair = firstOverlap(judged, list, rules);
    if (pair) out.push(`${key}: ${callText(pair[0])} overlapped ${callText(pair[1])}`);
  }
  return out;
}

/** The first overlapping pair of `sorted` (by start) not left to the fence; `all`: every settled call of the shard, by start. */
function firstOverlap(sorted: readonly SinkCall[], all: readonly SinkCall[], rules: OneWriterRules): [SinkCall, SinkCall] | undefined {
  for (let i = 0; i < sorted.length; i++) {
    const a = sorted[i]!;
    for (let j = i + 1; j < sorted.length; j++) {
      const b = sorted[j]!;
      if (b.start > a.end!) break; // sorted by start: no later call begins inside `a`
      if (b.node === a.node || !overlap(a, b)) continue;
      if (sameToken(a.token, b.token) || underWay(all, a, b)) continue;
      if (rules.inHandoff(a.dataset, a.shard, a.node, b.node, Math.min(a.start, b.start), Math.max(a.end!, b.end!))) continue;
      return [a, b];
    }
  }
  return undefined;
}

/** Whether `a` (begun first) and `b` are both under way at some moment: `b` begins before `a` ended. */
const overlap = (a: SinkCall, b: SinkCall) => b.start < a.end!;

/** The first call of `node` under `token`. */
const firstUnder = (calls: readonly SinkCall[], node: string, token: FencingToken) => calls.find((c) => c.node === node && sameToken(c.token, token))!;

/**
 * Whether `a` (begun first) is of an older token and was under way before `b`'s node first wrote
 * under `b`'s token. `calls` are in the order they began (sorted by start, stably): two begun at
 * one instant follow each other in that order, as the instant ran its work (sim seed 3448: the old
 * owner's call and the new owner's first began at the same millisecond, the old one first, before
 * its node heard of the move; the fence refused it).
 */
function underWay(calls: readonly SinkCall[], a: SinkCall, b: SinkCall): boolean {
  if (a.token === undefined || b.token === undefined || compareTokens(a.token, b.token) >= 0) return false;
  const first = firstUnder(calls, b.node, b.token);
  return a.start < first.start || (a.start === first.start && calls.indexOf(a) < calls.indexOf(first));
}
