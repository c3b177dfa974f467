// One call of the user's sink for a batch, and what its outcome means for the shard: accepted;
// refused as the design expects (a newer token was seen, or this node is no longer a member: the
// batch is tried again later, never counted as ingested); or a failure of the sink (it threw, it
// did not answer in time, or it refused without naming a newer token), which fails the shard.
import type { Clock } from '../cluster/clock.js';
import type { DatasetConfig } from '../core/dataset-config.js';
import { ShardherdError } from '../core/errors.js';
import { compareTokens, StaleTokenError, tokenText, type FencingToken } from '../core/fencing-token.js';
import type { ShardNum } from '../core/ids.js';
import type { RecordSink, SourceRecord } from '../ingest/ingestion-source.js';
import type { RunGaps } from './run-gaps.js';

/** The node refused the batch itself: this incarnation is no longer a member (it restarts). */
export class NotMemberError extends ShardherdError {
  constructor(node: string) {
    super('NOT_A_MEMBER', `${node} is no longer a member: records refused`, { node });
  }
}

/**
 * The node may not write now: in `heartbeat` mode its lease has lapsed, or was granted under another
 * epoch than the map the shard is ingested under (docs/ARCHITECTURE.md §11.4). Thrown before the
 * sink is called, so it is never sink time: the shard waits for the next grant, nothing fails.
 */
export class LeaseLapsedError extends ShardherdError {
  constructor(
    node: string,
    readonly epoch: number,
  ) {
    super('LEASE_LAPSED', `${node} holds no lease under epoch ${epoch}: the write waits for a grant`, { node });
  }
}

/**
 * The sink did not settle a call within `sinkTimeoutMs`: the shard fails. `settled` resolves once
 * the call does end (or never): the shard reports its failure only then (or after a second
 * `sinkTimeoutMs`), so the singleton never moves the shard while this node's call is still under way
 * (docs/ARCHITECTURE.md §12.2).
 */
export class SinkTimeoutError extends ShardherdError {
  constructor(
    dataset: string,
    shard: number,
    readonly timeoutMs: number,
    readonly settled: Promise<void>,
  ) {
    super('SINK_TIMEOUT', `the sink did not answer a batch of ${dataset} shard ${shard} within ${timeoutMs} ms`, { dataset, shard });
  }
}

/** The sink broke the fencing contract (a refusal that names no newer token than the write's). */
export class SinkContractError extends ShardherdError {
  constructor(dataset: string, shard: number, message: string) {
    super('SINK_CONTRACT', `the sink broke its contract for ${dataset} shard ${shard}: ${message}`, { dataset, shard });
  }
}

export type SinkOutcome =
  | { readonly kind: 'accepted' }
  | { readonly kind: 'refused'; readonly cause: 'stale-token' | 'not-a-member'; readonly detail: Readonly<Record<string, unknown>>; readonly message: string }
  /** No write was made: the node holds no lease for the token's epoch (a wait, not a refusal). */
  | { readonly kind: 'lease-lapsed'; readonly detail: Readonly<Record<string, unknown>>; readonly message: string };

/**
 * Hands `records` to `sink` with `token`, waiting at most `timeoutMs` (0: for ever). Throws
 * `SinkTimeoutError`, `SinkContractError`, or what the sink threw, when the sink failed.
 */
export async function callSink(
  sink: RecordSink,
  clock: Clock,
  timeoutMs: number,
  dataset: DatasetConfig,
  shard: ShardNum,
  records: readonly SourceRecord[],
  token: FencingToken,
  runGaps?: Pick<RunGaps, 'stalledSince'>,
): Promise<SinkOutcome> {
  try {
    const call = sink.accept(dataset, shard, records, token);
    const settled = call.then(
      () => undefined,
      () => undefined,
    );
    await withTimeout(call, clock, timeoutMs, () => new SinkTimeoutError(dataset.ref, shard, timeoutMs, settled), runGaps);
    return { kind: 'accepted' };
  } catch (e) {
    if (e instanceof LeaseLapsedError)
      return {
        kind: 'lease-lapsed',
        detail: { token: tokenText(token) },
        message: "this node holds no lease for the map's epoch: the batch waits for a grant",
      };
    if (e instanceof NotMemberError)
      return {
        kind: 'refused',
        cause: 'not-a-member',
        detail: { token: tokenText(token) },
        message: 'records fetched before this node was fenced were refused',
      };
    if (e instanceof StaleTokenError) {
      // A refusal must name a token newer than the one given: anything else is a sink bug, and
      // retrying it would loop for ever.
      if (compareTokens(e.newest, token) <= 0)
        throw new SinkContractError(dataset.ref, shard, `it refused token ${tokenText(token)} naming token ${tokenText(e.newest)}, which is not newer`);
      return {
        kind: 'refused',
        cause: 'stale-token',
        detail: { token: tokenText(token), newest: tokenText(e.newest) },
        message: 'the sink refused records of an older token than one it has seen',
      };
    }
    throw e;
  }
}

/**
 * A timer that fires later than it was due by more than this (50 ms, or 5 % of a long wait), or a
 * wait during which the process is known not to have run that long (`RunGaps`: a pause that began
 * just after the call did fires the timer nearly on time), says that this process did not run for
 * a while (a pause, a stall of its event loop, CPU starvation): the sink's answer may be waiting
 * behind the timer, and the call may not have run at all. The wait starts over instead of failing,
 * at most `MAX_STALLED_REARMS` times, so a sink that hangs on a node that always stalls still fails.
 */
const stalledAfterMs = (ms: number) => Math.max(50, ms * 0.05);
const MAX_STALLED_REARMS = 3;

function withTimeout<T>(p: Promise<T>, clock: Clock, ms: number, error: () => Error, runGaps?: Pick<RunGaps, 'stalledSince'>): Promise<T> {
  if (ms <= 0) return p;
  return new Promise<T>((resolve, reject) => {
    let done = false;
    let cancel: () => void = () => {};
    let rearms = 0;
    const arm = () => {
      const armedAt = clock.now();
      const due = armedAt + ms;
      cancel = clock.schedule(ms, () => {
        if (done) return;
        const stalled = Math.max(clock.now() - due, runGaps?.stalledSince(armedAt) ?? 0);
        if (stalled > stalledAfterMs(ms) && rearms++ < MAX_STALLED_REARMS) return arm();
        done = true;
        reject(error());
      });
    };
    arm();
    p.then(
      (v) => {
        if (done) return;
        done = true;
        cancel();
        resolve(v);
      },
      (e: unknown) => {
        if (done) return;
        done = true;
        cancel();
        reject(e);
      },
    );
  });
}
