// One copy of a shard's ingestion on its node: from the copy's own checkpoint (or where `copyStart`
// says a copy without one, or a copy of a sink that declares one shared store, starts), catching up
// to the end offset seen at start while reporting `RecoveryInProgress`, then `IngestionStarted`;
// every batch goes to the user's sink and is checkpointed, under this node's id, only after the sink
// accepted it, in the background (`CheckpointWriter`): reading goes on while a checkpoint is
// written, up to `maxUncheckpointedRecords`. Every batch carries the fencing token of the copy's assignment
// (docs/ARCHITECTURE.md §12); a batch refused as fenced is kept and tried again, with backoff,
// never counted as ingested and never an error.
import type { Cancel } from '../cluster/clock.js';
import type { DatasetConfig } from '../core/dataset-config.js';
import type { ShardNum } from '../core/ids.js';
import { type ShardEvent, ShardEvents, type ShardStatus, Status } from '../core/status.js';
import { copyStart } from '../ingest/copy-start.js';
import { IngestionFailure, sinkStorage, type ShardReader } from '../ingest/ingestion-source.js';
import { ShardherdError } from '../core/errors.js';
import { compareTokens, tokenText, type FencingToken } from '../core/fencing-token.js';
import type { SourceRecord } from '../ingest/ingestion-source.js';
import { limitedLog } from './log-limiter.js';
import { type NodeEnv, withRetry } from './node-env.js';
import { callSink, SinkTimeoutError } from './sink-call.js';
import { CheckpointWriter } from './checkpoint-writer.js';
import { WriteRefusals } from './write-refusals.js';
import type { ReportSink } from './reporter.js';
import type { ActorRef } from './runtime.js';

export type IngestionMsg = { readonly type: 'Start' } | { readonly type: 'Poll' };

/** What the coordinator hears about a shard it runs (for recovery's "what do you run?"). */
export type ShardStatusUpdate = { readonly type: 'ShardStatus'; readonly dataset: DatasetConfig['ref']; readonly shard: ShardNum; readonly status: ShardStatus };

interface State {
  reader: ShardReader | undefined;
  offset: number;
  start: number;
  endAtStart: number;
  /** The offset to reach before reporting `IngestionStarted` (see `copyStart`). */
  catchUpTo: number;
  recovering: boolean;
  lastPct: number;
  timer: Cancel | undefined;
  failed: boolean;
  /** When the last checkpoint was offered to the writer (clock ms). */
  checkpointOfferedAt: number;
  /** Whether the shard is holding back reads until checkpoints catch up (`maxUncheckpointedRecords`). */
  heldBack: boolean;
  /** Stops the node's metrics from following this shard. */
  untrack: () => void;
  /** Empty reads in a row: an idle shard polls less and less often (see `idlePollDelay`). */
  emptyReads: number;
  /** A batch the sink refused as fenced: tried again as it is (not read again) until accepted or the shard stops. */
  pending: readonly SourceRecord[] | undefined;
  /** Refusals of `pending` in a row, for the backoff. */
  refusedInARow: number;
  /** The token of the last batch the sink accepted: checkpoints are written with it. */
  acceptedToken: FencingToken | undefined;
  /** Starts put off because the copy's stored checkpoint has a newer token than the node's map. */
  startsRefused: number;
}

/** An idle shard's poll interval grows up to this many `pollIntervalMs`. */
export const IDLE_POLL_FACTOR = 10;

/**
 * How long an idle shard waits before it polls again: `pollIntervalMs`, doubled with every empty
 * read in a row up to `IDLE_POLL_FACTOR` times it. A node of thousands of idle shards then polls a
 * tenth as often; a source that says when records arrive (Kafka's) wakes the shard at once anyway,
 * and one that cannot (the synthetic source) is read at most `IDLE_POLL_FACTOR × pollIntervalMs` late.
 */
export function idlePollDelay(pollIntervalMs: number, emptyReads: number): number {
  return pollIntervalMs * Math.min(IDLE_POLL_FACTOR, 2 ** Math.max(0, emptyReads - 1));
}

/**
 * The wait after an empty read: until the next record exists when the source knows when that is
 * (never sooner than `pollIntervalMs`, so a fast source is still read in batches), else
 * `idlePollDelay`.
 */
function nextPollDelay(pollIntervalMs: number, emptyReads: number, reader: ShardReader, now: number): number {
  const at = reader.nextRecordAt?.();
  if (at !== undefined && Number.isFinite(at)) return Math.max(pollIntervalMs, Math.ceil(at - now));
  return idlePollDelay(pollIntervalMs, emptyReads);
}

/** The wait before a refused batch is tried again: `retryInitialMs`, doubling with each refusal in a row up to `retryMaxMs`. */
export function refusalBackoff(settings: { readonly retryInitialMs: number; readonly retryMaxMs: number }, refusedInARow: number): number {
  return Math.min(settings.retryMaxMs, settings.retryInitialMs * 2 ** Math.min(30, Math.max(0, refusedInARow - 1)));
}

export function spawnIngestionActor(
  env: NodeEnv,
  parent: ActorRef<unknown>,
  config: DatasetConfig,
  shard: ShardNum,
  reporter: ReportSink,
  notify: (update: ShardStatusUpdate) => void,
  /** The token of this node's copy in the map the node acts on now; undefined once the map no longer gives it the copy. */
  tokenOf: () => FencingToken | undefined,
): ActorRef<IngestionMsg> {
  const log = env.log.child({ dataset: config.ref, shard });
  const refusals = new WriteRefusals(log, env.telemetry, env.problems, `${config.ref}/${shard}`, config.ref);
  const report = (event: ShardEvent, status: ShardStatus) => {
    reporter.report(event);
    notify({ type: 'ShardStatus', dataset: config.ref, shard, status });
  };
  // A due poll waits for its turn of the event loop (`PollTurns`): `s.timer` cancels whichever wait it is in.
  const schedulePoll = (s: State, self: ActorRef<IngestionMsg>, delay: number) => {
    s.timer = env.clock.schedule(delay, () => {
      s.timer = env.pollTurns.enqueue(() => {
        s.timer = undefined;
        env.runtime.send(self, { type: 'Poll' });
      });
    });
  };
  const pollNow = (s: State, self: ActorRef<IngestionMsg>) => {
    if (s.timer === undefined) return; // a poll is already on its way
    s.timer();
    schedulePoll(s, self, 0);
  };
  /** Checkpoint writes failing since this many attempts (0: they are written): one warning per outage, not per attempt. */
  let checkpointFailures = 0;
  let readerOfShard: ShardReader | undefined;
  // Checkpoints go out in the background, one at a time, the latest offer winning (§12.4).
  const writer = new CheckpointWriter({
    clock: env.clock,
    retryInitialMs: env.settings.retryInitialMs,
    retryMaxMs: env.settings.retryMaxMs,
    write: (offset, token) => env.metaStore.writeCheckpoint(config.ref, shard, env.node, env.settings.checkpointGroup, offset, token),
    written: (offset) => {
      readerOfShard?.consumed?.(offset + 1);
      refusals.end('checkpoint');
      if (checkpointFailures > 0) log.info({ event: 'checkpoint.written-again', offset, failedAttempts: checkpointFailures }, 'checkpoints are written again');
      checkpointFailures = 0;
    },
    // Not tried again for this offset: the next offer is (it may be admitted once this node's map has the newer token).
    refused: (e, offset, token) => {
      const newer = e.stored.token !== undefined && compareTokens(e.stored.token, token) > 0;
      refusals.refused('checkpoint', newer ? 'stale-token' : 'lower-offset', { offset, token: tokenText(token), stored: e.stored.offset, storedToken: e.stored.token && tokenText(e.stored.token) }, newer ? 'a checkpoint of a newer owner is stored: this one was refused' : 'a higher checkpoint of the same assignment is stored: this one was refused');
    },
    // Ingestion goes on; a restart replays a little more (at least once, never lost). Said once
    // per outage: every shard's every attempt would repeat it.
    failed: (e, offset, retryInMs) => {
      if (checkpointFailures++ === 0) log.warn({ event: 'checkpoint.failed', err: e, offset, retryInMs }, 'checkpoint not written; ingestion goes on and the checkpoint is tried again');
      else log.debug({ err: e, offset }, 'checkpoint not written');
    },
  });
  /**
   * Offers the checkpoint of what the sink accepted, with the token it was accepted under (what the
   * checkpoint vouches for, also for the last checkpoint of a copy the map has just moved away).
   */
  const offerCheckpoint = (s: State) => {
    if (s.acceptedToken === undefined || s.offset - 1 <= writer.offered) return;
    writer.offer(s.offset - 1, s.acceptedToken);
    s.checkpointOfferedAt = env.clock.now();
  };
  /**
   * The assignment a failure is reported for, read when the copy fails (the one its node now waits
   * to see replaced): the singleton ignores a report of an older one (§12.2). Not read when the
   * report leaves: a call that timed out is reported once it ends, and by then this node may have
   * started the copy again under a newer map (a new singleton's epoch), whose run the report does
   * not speak of.
   */
  const tokenOfFailure = (s: State): FencingToken | undefined => tokenOf() ?? s.acceptedToken;
  const leaseKey = `${config.ref}/${shard}`;
  const endLeaseWait = () => {
    const ended = env.leaseWaits?.end(leaseKey, env.clock.now());
    if (ended === undefined) return;
    log.debug({ event: 'lease.shard-wait-ended', waitedMs: ended.waitedMs }, 'the shard writes again');
    // One line per lapse of the node, not one per shard (a node of 16 384 copies logged 16 384).
    const { lapse } = ended;
    if (lapse) env.log.info({ event: 'lease.wait-ended', shards: lapse.shards, longestWaitMs: lapse.longestMs }, `the node holds a lease again: ${lapse.shards} shard(s) that held their batches write again (the longest waited ${lapse.longestMs} ms)`);
  };
  /** Polls again at the first grant under the epoch of the map the copy is ingested under (§11.4). */
  const waitForLease = (s: State, self: ActorRef<IngestionMsg>) => {
    if (env.leaseWaits && env.leaseWaits.count === 0) log.debug({ event: 'lease.wait-began' }, 'this node holds no lease: its shards hold their batches until a grant');
    env.leaseWaits?.begin(leaseKey, env.clock.now());
    const detector = env.detector;
    if (!detector) {
      schedulePoll(s, self, env.settings.pollIntervalMs); // cannot happen: only a detector refuses for a lease
      return;
    }
    void detector.whenHolding(() => tokenOf()?.epoch).then(() => {
      if (!s.failed && s.timer === undefined) schedulePoll(s, self, 0);
    });
  };
  /**
   * Reports the failure once the sink call that failed has ended: a call that timed out may still
   * be writing, and the singleton moves the shard on this report, so the report is this node's
   * word that it writes no more (docs/ARCHITECTURE.md §12.2). A call that never ends is given up
   * after one more `sinkTimeoutMs` (then only the token fences it).
   */
  const fail = (s: State, e: unknown) => {
    s.failed = true;
    const failedUnder = tokenOfFailure(s);
    endLeaseWait();
    if (e instanceof SinkTimeoutError) {
      const message = e.message;
      log.warn({ code: e.code, offset: s.offset, reason: message }, 'ingestion failed: the sink failed; the failure is reported once the call has ended');
      notify({ type: 'ShardStatus', dataset: config.ref, shard, status: Status.error(message) });
      let reported = false;
      const reportOnce = (abandoned: boolean) => {
        if (reported) return;
        reported = true;
        cancelAbandon();
        if (abandoned) log.warn({ code: e.code, waitedMs: e.timeoutMs }, 'the sink call that timed out has still not ended: the failure is reported anyway, and only the fencing token refuses the call if it lands');
        report(ShardEvents.ingestionError(config.ref, shard, env.node, message, failedUnder), Status.error(message));
      };
      const cancelAbandon = env.clock.schedule(e.timeoutMs, () => reportOnce(true));
      void e.settled.then(() => reportOnce(false));
      return;
    }
    const message = e instanceof Error ? e.message : String(e);
    // A poison record is an expected condition (a warning with its offset); so is a sink that times
    // out or breaks its contract (the user's to fix, said with its code); anything else is a bug or an outage.
    if (e instanceof IngestionFailure) log.warn({ offset: e.offset, reason: message }, 'ingestion failed on a record it cannot read');
    else if (e instanceof ShardherdError && e.code === 'SINK_CONTRACT') log.warn({ code: e.code, offset: s.offset, reason: message }, 'ingestion failed: the sink failed');
    else {
      // An outage fails every copy of the node at once: one line per cause and window, with a count.
      limitedLog(env.log, env.clock, `ingestion failed: ${message}`, (more) =>
        more === 0
          ? log.error({ err: e, offset: s.offset }, 'ingestion failed')
          : env.log.error({ err: e, shards: more }, `ingestion failed on ${more} more shard(s) of this node in the last 10 s, for the same cause`),
      );
    }
    report(ShardEvents.ingestionError(config.ref, shard, env.node, message, failedUnder), Status.error(message));
  };

  const initialState: State = { reader: undefined, offset: 0, start: 0, endAtStart: 0, catchUpTo: 0, recovering: false, lastPct: 0, timer: undefined, failed: false, checkpointOfferedAt: -Infinity, heldBack: false, untrack: () => {}, emptyReads: 0, pending: undefined, refusedInARow: 0, startsRefused: 0, acceptedToken: undefined };
  const ref = env.runtime.spawn<State, IngestionMsg>(parent, `ingest-${config.ref}-${shard}`, async (s, msg, ctx) => {
    if (s.failed) return s;
    try {
      if (msg.type === 'Start') {
        const checkpoints = await withRetry(env, 'reading the checkpoint', () => env.checkpoints.read(config.ref, shard));
        // Its own checkpoint written under a newer token than this node's map gives the copy: this
        // node acts on an older map (or a newer incarnation took the copy). Starting would resume
        // from a checkpoint it may not write: it waits for its map, with backoff, unless stopped.
        const stored = checkpoints.tokens?.get(env.node)?.get(env.settings.checkpointGroup);
        const token = tokenOf();
        if (stored !== undefined && token !== undefined && compareTokens(stored, token) > 0) {
          s.startsRefused += 1;
          refusals.refused('checkpoint', 'newer-token-stored', { token: tokenText(token), storedToken: tokenText(stored) }, 'the copy\'s checkpoint has a newer token than this node\'s map: the shard waits for the newer map');
          s.timer = env.clock.schedule(refusalBackoff(env.settings, s.startsRefused), () => {
            s.timer = undefined;
            env.runtime.send(ctx.self, { type: 'Start' });
          });
          return s;
        }
        if (s.startsRefused > 0) refusals.end('checkpoint', 'the map caught up');
        s.reader = await env.source.open(config, shard);
        const earliest = await s.reader.earliestOffset();
        s.endAtStart = await s.reader.endOffset();
        const plan = copyStart({
          checkpoints,
          node: env.node,
          group: env.settings.checkpointGroup,
          copyStartFrom: config.copyStartFrom,
          newShardStartFrom: config.source.type === 'kafka' ? config.source.startFrom : 'earliest',
          earliest,
          endAtStart: s.endAtStart,
          // A sink of one store for all copies lets a copy resume from the shard's newest fenced checkpoint.
          storage: sinkStorage(env.sink),
        });
        if (plan.lostToRetention > 0) log.warn({ from: plan.from, reason: plan.reason, earliest, lost: plan.lostToRetention }, 'records before the earliest available offset were never ingested: lost to retention');
        s.start = plan.from;
        s.catchUpTo = plan.catchUpTo;
        s.offset = s.start;
        // What is before the start counts as checkpointed for the bound on un-checkpointed records.
        writer.startFrom(s.start - 1);
        readerOfShard = s.reader;
        const reader = s.reader;
        s.untrack = env.telemetry.trackIngestion(config.ref, shard, { position: () => s.offset, endOffset: () => reader.endOffset() });
        // Not Available before it holds what the serving copies held when it started (M3DB's bootstrap).
        s.recovering = s.offset < s.catchUpTo;
        if (s.recovering) report(ShardEvents.recoveryInProgress(config.ref, shard, env.node, 0), Status.recovery(0));
        else report(ShardEvents.ingestionStarted(config.ref, shard, env.node), Status.active);
        // Debug: its node logs the copies a map started in one line (`shards.started`).
        log.debug({ from: s.start, reason: plan.reason, catchUpTo: s.catchUpTo, peersCheckpoint: plan.peersCheckpoint }, 'shard started');
        schedulePoll(s, ctx.self, 0);
        return s;
      }
      // Too much accepted and not checkpointed (a store slower than ingestion for long): reads wait
      // for the checkpoints, so a crash never replays more than the bound.
      const uncheckpointed = s.offset - 1 - writer.settled;
      if (s.pending === undefined && uncheckpointed > env.settings.maxUncheckpointedRecords) {
        offerCheckpoint(s);
        if (!s.heldBack) log.debug({ event: 'checkpoint.held-back', uncheckpointed, bound: env.settings.maxUncheckpointedRecords }, 'reads wait for checkpoints to catch up');
        s.heldBack = true;
        schedulePoll(s, ctx.self, env.settings.pollIntervalMs);
        return s;
      }
      s.heldBack = false;
      const records = s.pending ?? (await s.reader!.read(s.offset, env.settings.batchSize));
      if (records.length > 0) {
        // The token of the moment of the call: a batch read under an older assignment goes with
        // the newer token once this node holds it (its records are still the copy's next ones).
        const token = tokenOf();
        const outcome = token === undefined
          ? { kind: 'refused' as const, cause: 'not-assigned' as const, detail: {}, message: 'records fetched before the map moved this copy were not written' }
          : await callSink(env.sink, env.clock, env.settings.sinkTimeoutMs, config, shard, records, token, env.runGaps);
        if (outcome.kind === 'lease-lapsed') {
          // No lease for the map's epoch: nothing was written and nothing failed. The batch waits
          // for the next grant; no poll runs meanwhile (the grant's wake-up is the next poll).
          s.pending = records;
          waitForLease(s, ctx.self);
          return s;
        }
        endLeaseWait();
        if (outcome.kind === 'refused') {
          s.pending = records;
          s.refusedInARow += 1;
          refusals.refused('sink', outcome.cause, outcome.detail, outcome.message);
          schedulePoll(s, ctx.self, refusalBackoff(env.settings, s.refusedInARow));
          return s;
        }
        if (s.pending) refusals.end('sink');
        s.acceptedToken = token;
        s.pending = undefined;
        s.refusedInARow = 0;
        env.telemetry.ingested(config.ref, shard, records.length);
        const last = records[records.length - 1]!.offset;
        s.offset = last + 1;
        if (env.clock.now() - s.checkpointOfferedAt >= env.settings.checkpointIntervalMs) offerCheckpoint(s);
      } else if (s.offset - 1 > writer.offered) {
        // Caught up: what is left unwritten goes now, or it would wait for the next record.
        offerCheckpoint(s);
      }
      if (s.recovering) {
        if (s.offset >= s.catchUpTo) {
          s.recovering = false;
          report(ShardEvents.ingestionStarted(config.ref, shard, env.node), Status.active);
        } else {
          const pct = Math.floor(((s.offset - s.start) * 100) / (s.catchUpTo - s.start));
          if (pct >= s.lastPct + env.settings.progressStepPct) {
            s.lastPct = pct;
            report(ShardEvents.recoveryInProgress(config.ref, shard, env.node, pct), Status.recovery(pct));
          }
        }
      }
      // Records came: more may be waiting (a source that buffers, like Kafka's, hands out what it
      // has fetched so far), so poll again at once; an empty read waits for the interval, or less
      // if the source says records arrived.
      s.emptyReads = records.length > 0 ? 0 : s.emptyReads + 1;
      schedulePoll(s, ctx.self, records.length > 0 ? 0 : nextPollDelay(env.settings.pollIntervalMs, s.emptyReads, s.reader!, env.clock.now()));
      if (records.length === 0) s.reader!.whenReadable?.(() => pollNow(s, ctx.self));
      return s;
    } catch (e) {
      // A poison record, a sink that refuses, a source that cannot be opened: the shard reports
      // IngestionError and waits for the singleton to move it.
      fail(s, e);
      return s;
    }
  }, {
    initialState,
    onCrash: 'stop',
    afterStop: async (s) => {
      s.timer?.();
      s.failed = true; // a lease's wake-up after the stop polls nothing
      endLeaseWait();
      s.untrack();
      refusals.endAll('the shard stopped');
      // The last checkpoint, so the next owner replays little (best effort: a crashed node's
      // MetaStore calls never complete, and nothing waits for them).
      if (s.reader) offerCheckpoint(s);
      writer.close();
      await s.reader?.close().catch((e: unknown) => log.warn({ err: e }, 'closing the shard reader failed'));
    },
  });
  // Starts wait for their turn like polls: a map that gives a node 65 536 copies starts them over
  // many turns of the event loop, not in one that holds every other message for seconds.
  initialState.timer = env.pollTurns.enqueue(() => {
    initialState.timer = undefined;
    env.runtime.send(ref, { type: 'Start' });
  });
  return ref;
}
