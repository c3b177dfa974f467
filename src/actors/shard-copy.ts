// One copy of a shard's ingestion on its node: from the copy's own checkpoint (or where `copyStart`
// says a copy without one, or a copy of a sink that declares one shared store, starts), catching up
// to the end offset seen at start while reporting `RecoveryInProgress`, then `IngestionStarted`;
// every batch goes to the user's sink and is checkpointed, under this node's id, only after the sink
// accepted it, in the background (`CheckpointWriter`): reading goes on while a checkpoint is
// written, up to `maxUncheckpointedRecords`. Every batch carries the fencing token of the copy's assignment
// (docs/ARCHITECTURE.md §12); a batch refused as fenced is kept and tried again, with backoff,
// never counted as ingested and never an error.
//
// A copy is one plain object driven by its node, not an actor: a node holds tens of thousands of
// them, mostly idle, and an actor per copy (its mailbox, path and reference, a logger, a checkpoint
// writer and a score of closures) cost about 7 KB of heap each (issue 34). What a node's copies have
// in common (its ports, its reporter, how it reads a copy's token) is one `CopyHost`; what only a
// busy or troubled copy needs (its logger, its checkpoint writer, its run of refused writes) is
// made when first needed. Steps run one at a time, as an actor's messages did.
import type { Logger } from 'pino';
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
import type { CopyTimer, CopyTimers, Due } from './copy-timers.js';
import { WriteRefusals } from './write-refusals.js';
import type { ReportSink } from './reporter.js';
import type { IngestionProbe } from './telemetry.js';

/** What every copy of a node shares: one per node, so a copy holds no closures of its own. */
export interface CopyHost {
  readonly env: NodeEnv;
  readonly reporter: ReportSink;
  /** The copies' timers, on one timer of the node's clock. */
  readonly timers: CopyTimers;
  /** The copy's status changed (what the node answers a recovering singleton's "what do you run?" with). */
  statusChanged(copy: ShardCopy, status: ShardStatus): void;
  /** The token of this node's copy in the map the node acts on now; undefined once the map no longer gives it the copy. */
  tokenOf(copy: ShardCopy): FencingToken | undefined;
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

type Step = 'start' | 'poll';

export class ShardCopy implements IngestionProbe, Due {
  private reader: ShardReader | undefined;
  private offset = 0;
  private start = 0;
  /** The offset to reach before reporting `IngestionStarted` (see `copyStart`). */
  private catchUpTo = 0;
  private recovering = false;
  private lastPct = 0;
  /**
   * The next step, armed: it waits for `timer`, then for its turn of the event loop (`turn`
   * cancels that wait). Undefined: nothing is armed (a step runs, or the copy waits for a lease).
   */
  private armed: Step | undefined;
  private timer: CopyTimer | undefined;
  private turn: Cancel | undefined;
  /** The copy failed (it waits to be moved) or stopped: no step runs any more. */
  private failed = false;
  private stopped = false;
  /** A step is running; `queued` runs once it ends (a copy's steps never overlap, as an actor's messages). */
  private stepping = false;
  private queued: Step | undefined;
  /** Whether the shard is holding back reads until checkpoints catch up (`maxUncheckpointedRecords`). */
  private heldBack = false;
  /** Empty reads in a row: an idle shard polls less and less often (see `idlePollDelay`). */
  private emptyReads = 0;
  /** A batch the sink refused as fenced: tried again as it is (not read again) until accepted or the shard stops. */
  private pending: readonly SourceRecord[] | undefined;
  /** Bytes of the records read and not yet taken by the sink, for the load meter. */
  private bytesUncounted = 0;
  /** Refusals of `pending` in a row, for the backoff. */
  private refusedInARow = 0;
  /** The token of the last batch the sink accepted: checkpoints are written with it. */
  private acceptedToken: FencingToken | undefined;
  /** Starts put off because the copy's stored checkpoint has a newer token than the node's map. */
  private startsRefused = 0;
  /** Made at the first checkpoint offered: an idle copy never needs one. */
  private writer: CheckpointWriter | undefined;
  private refusalsOfCopy: WriteRefusals | undefined;
  private logOfCopy: Logger | undefined;

  constructor(
    private readonly host: CopyHost,
    readonly config: DatasetConfig,
    readonly shard: ShardNum,
  ) {
    // Starts wait for their turn like polls: a map that gives a node 65 536 copies starts them over
    // many turns of the event loop, not in one that holds every other message for seconds.
    this.armed = 'start';
    this.due();
  }

  get dataset(): DatasetConfig['ref'] {
    return this.config.ref;
  }

  /** The offset of the next record to ingest (for the node's metrics and status page). */
  position(): number {
    return this.offset;
  }

  /** The source's end offset, for the lag metrics. */
  endOffset(): Promise<number> {
    return this.reader ? this.reader.endOffset() : Promise.resolve(this.offset);
  }

  knownEndOffset(): number | undefined {
    return this.reader?.knownEndOffset?.();
  }

  private get env(): NodeEnv {
    return this.host.env;
  }

  private get log(): Logger {
    return (this.logOfCopy ??= this.env.log.child({ dataset: this.config.ref, shard: this.shard }));
  }

  private get refusals(): WriteRefusals {
    return (this.refusalsOfCopy ??= new WriteRefusals(this.log, this.env.telemetry, this.env.problems, `${this.config.ref}/${this.shard}`, this.config.ref));
  }

  /** The highest offset offered for a checkpoint, or vouched for by the start (-1: none). */
  private get offered(): number {
    return this.writer?.offered ?? this.start - 1;
  }

  /** The highest offset whose checkpoint is written or refused (what is before the start counts as written). */
  private get settled(): number {
    return this.writer?.settled ?? this.start - 1;
  }

  /**
   * Stops the copy: no step starts any more (one under way ends, but arms nothing); its lease wait
   * and runs of refused writes end; its last checkpoint is offered, so the next owner replays
   * little (best effort: a crashed node's MetaStore calls never complete, and nothing waits for
   * them); its reader closes. Only the first two at once: a node that stops the 16 384 copies a
   * move takes away stopped them in one task of up to 170 ms; the rest waits for its turn of the
   * event loop, as polls do (the copy writes nothing meanwhile: it is stopped). `releaseNow`: all
   * of it at once (the node itself stops: its store may close right after).
   */
  stop(releaseNow = false): void {
    if (this.stopped) return;
    this.stopped = true;
    this.disarm();
    this.endLeaseWait();
    if (releaseNow) this.release();
    else this.env.pollTurns.enqueue(() => this.release());
  }

  /** What a stopped copy lets go of. */
  private release(): void {
    this.env.telemetry.untrackIngestion(this); // nothing if it was not tracked yet
    this.env.loadMeter?.close(this.config.ref, this.shard, this);
    this.refusalsOfCopy?.endAll('the shard stopped');
    if (this.reader) this.offerCheckpoint();
    this.writer?.close();
    this.closeReader(this.reader);
  }

  private closeReader(reader: ShardReader | undefined): void {
    void reader?.close().catch((e: unknown) => this.log.warn({ err: e }, 'closing the shard reader failed'));
  }

  /** The armed step's timer fell due: it waits for its turn of the event loop. */
  due(): void {
    this.timer = undefined;
    const step = this.armed;
    if (step === undefined) return;
    this.turn = this.env.pollTurns.enqueue(() => {
      this.turn = undefined;
      this.armed = undefined;
      this.wake(step);
    });
  }

  private disarm(): void {
    if (this.timer) this.host.timers.cancel(this.timer);
    this.turn?.();
    this.timer = undefined;
    this.turn = undefined;
    this.armed = undefined;
  }

  /** Runs a step now, or once the one under way has ended. */
  private wake(step: Step): void {
    if (this.failed || this.stopped) return;
    if (this.stepping) {
      if (this.queued !== 'start') this.queued = step;
      return;
    }
    this.stepping = true;
    // Counted as work in flight, like an actor's message: a simulation waits for it to end.
    const done = this.env.runtime.beginWork();
    void (step === 'start' ? this.startStep() : this.pollStep())
      .catch((e: unknown) => {
        // A poison record, a sink that refuses, a source that cannot be opened: the shard reports
        // IngestionError and waits for the singleton to move it.
        if (!this.failed && !this.stopped) this.fail(e);
      })
      .finally(() => {
        this.stepping = false;
        done();
        const next = this.queued;
        this.queued = undefined;
        // A step armed since is the next one already.
        if (next && this.armed === undefined) this.wake(next);
      });
  }

  /** Arms `step` in `delay` ms (replacing what was armed); then it waits for its turn of the event loop (`PollTurns`). */
  private schedule(step: Step, delay: number): void {
    if (this.stopped || this.failed) return;
    this.disarm();
    this.armed = step;
    this.timer = this.host.timers.add(delay, this);
  }

  private pollNow(): void {
    if (this.timer === undefined) return; // no poll waits for its time: one is on its way, or runs
    this.schedule('poll', 0);
  }

  private report(event: ShardEvent, status: ShardStatus): void {
    this.host.reporter.report(event);
    this.host.statusChanged(this, status);
  }

  private checkpointWriter(): CheckpointWriter {
    const { env, config, shard } = this;
    // Checkpoints go out in the background, one at a time, the latest offer winning (§12.4).
    return (this.writer ??= (() => {
      /** Checkpoint writes failing since this many attempts (0: they are written): one warning per outage, not per attempt. */
      let checkpointFailures = 0;
      const writer = new CheckpointWriter({
        clock: env.clock,
        retryInitialMs: env.settings.retryInitialMs,
        retryMaxMs: env.settings.retryMaxMs,
        write: (offset, token) => env.metaStore.writeCheckpoint(config.ref, shard, env.node, env.settings.checkpointGroup, offset, token),
        written: (offset) => {
          this.reader?.consumed?.(offset + 1);
          this.refusalsOfCopy?.end('checkpoint');
          if (checkpointFailures > 0)
            this.log.info({ event: 'checkpoint.written-again', offset, failedAttempts: checkpointFailures }, 'checkpoints are written again');
          checkpointFailures = 0;
        },
        // Not tried again for this offset: the next offer is (it may be admitted once this node's map has the newer token).
        refused: (e, offset, token) => {
          const newer = e.stored.token !== undefined && compareTokens(e.stored.token, token) > 0;
          this.refusals.refused(
            'checkpoint',
            newer ? 'stale-token' : 'lower-offset',
            { offset, token: tokenText(token), stored: e.stored.offset, storedToken: e.stored.token && tokenText(e.stored.token) },
            newer
              ? 'a checkpoint of a newer owner is stored: this one was refused'
              : 'a higher checkpoint of the same assignment is stored: this one was refused',
          );
        },
        // Ingestion goes on; a restart replays a little more (at least once, never lost). Said once
        // per outage: every shard's every attempt would repeat it.
        failed: (e, offset, retryInMs) => {
          if (checkpointFailures++ === 0)
            this.log.warn(
              { event: 'checkpoint.failed', err: e, offset, retryInMs },
              'checkpoint not written; ingestion goes on and the checkpoint is tried again',
            );
          else this.log.debug({ err: e, offset }, 'checkpoint not written');
        },
      });
      // What is before the start counts as checkpointed for the bound on un-checkpointed records.
      writer.startFrom(this.start - 1);
      return writer;
    })());
  }

  /**
   * Offers the checkpoint of what the sink accepted, with the token it was accepted under (what the
   * checkpoint vouches for, also for the last checkpoint of a copy the map has just moved away).
   */
  private offerCheckpoint(): void {
    if (this.acceptedToken === undefined || this.offset - 1 <= this.offered) return;
    this.checkpointWriter().offer(this.offset - 1, this.acceptedToken);
  }

  /**
   * The assignment a failure is reported for, read when the copy fails (the one its node now waits
   * to see replaced): the singleton ignores a report of an older one (§12.2). Not read when the
   * report leaves: a call that timed out is reported once it ends, and by then this node may have
   * started the copy again under a newer map (a new singleton's epoch), whose run the report does
   * not speak of.
   */
  private tokenOfFailure(): FencingToken | undefined {
    return this.host.tokenOf(this) ?? this.acceptedToken;
  }

  private get leaseKey(): string {
    return `${this.config.ref}/${this.shard}`;
  }

  private endLeaseWait(): void {
    const { env } = this;
    if (!env.leaseWaits) return;
    const ended = env.leaseWaits.end(this.leaseKey, env.clock.now());
    if (ended === undefined) return;
    this.log.debug({ event: 'lease.shard-wait-ended', waitedMs: ended.waitedMs }, 'the shard writes again');
    // One line per lapse of the node, not one per shard (a node of 16 384 copies logged 16 384).
    const { lapse } = ended;
    if (lapse)
      env.log.info(
        { event: 'lease.wait-ended', shards: lapse.shards, longestWaitMs: lapse.longestMs },
        `the node holds a lease again: ${lapse.shards} shard(s) that held their batches write again (the longest waited ${lapse.longestMs} ms)`,
      );
  }

  /** Polls again at the first grant under the epoch of the map the copy is ingested under (§11.4). */
  private waitForLease(): void {
    const { env } = this;
    if (env.leaseWaits && env.leaseWaits.count === 0)
      this.log.debug({ event: 'lease.wait-began' }, 'this node holds no lease: its shards hold their batches until a grant');
    env.leaseWaits?.begin(this.leaseKey, env.clock.now());
    const detector = env.detector;
    if (!detector) {
      this.schedule('poll', env.settings.pollIntervalMs); // cannot happen: only a detector refuses for a lease
      return;
    }
    void detector
      .whenHolding(() => this.host.tokenOf(this)?.epoch)
      .then(() => {
        if (this.armed === undefined) this.schedule('poll', 0);
      });
  }

  /**
   * Reports the failure once the sink call that failed has ended: a call that timed out may still
   * be writing, and the singleton moves the shard on this report, so the report is this node's
   * word that it writes no more (docs/ARCHITECTURE.md §12.2). A call that never ends is given up
   * after one more `sinkTimeoutMs` (then only the token fences it).
   */
  private fail(e: unknown): void {
    const { env, config, shard } = this;
    this.failed = true;
    const failedUnder = this.tokenOfFailure();
    this.endLeaseWait();
    if (e instanceof SinkTimeoutError) {
      const message = e.message;
      this.log.warn(
        { code: e.code, offset: this.offset, reason: message },
        'ingestion failed: the sink failed; the failure is reported once the call has ended',
      );
      this.host.statusChanged(this, Status.error(message));
      let reported = false;
      const reportOnce = (abandoned: boolean) => {
        if (reported) return;
        reported = true;
        cancelAbandon();
        if (abandoned)
          this.log.warn(
            { code: e.code, waitedMs: e.timeoutMs },
            'the sink call that timed out has still not ended: the failure is reported anyway, and only the fencing token refuses the call if it lands',
          );
        this.report(ShardEvents.ingestionError(config.ref, shard, env.node, message, failedUnder), Status.error(message));
      };
      const cancelAbandon = env.clock.schedule(e.timeoutMs, () => reportOnce(true));
      void e.settled.then(() => reportOnce(false));
      return;
    }
    const message = e instanceof Error ? e.message : String(e);
    // A poison record is an expected condition (a warning with its offset); so is a sink that times
    // out or breaks its contract (the user's to fix, said with its code); anything else is a bug or an outage.
    if (e instanceof IngestionFailure) this.log.warn({ offset: e.offset, reason: message }, 'ingestion failed on a record it cannot read');
    else if (e instanceof ShardherdError && e.code === 'SINK_CONTRACT')
      this.log.warn({ code: e.code, offset: this.offset, reason: message }, 'ingestion failed: the sink failed');
    else {
      // An outage fails every copy of the node at once: one line per cause and window, with a count.
      limitedLog(env.log, env.clock, `ingestion failed: ${message}`, (more) =>
        more === 0
          ? this.log.error({ err: e, offset: this.offset }, 'ingestion failed')
          : env.log.error({ err: e, shards: more }, `ingestion failed on ${more} more shard(s) of this node in the last 10 s, for the same cause`),
      );
    }
    this.report(ShardEvents.ingestionError(config.ref, shard, env.node, message, failedUnder), Status.error(message));
  }

  private async startStep(): Promise<void> {
    const { env, config, shard } = this;
    const checkpoints = await withRetry(env, 'reading the checkpoint', () => env.checkpoints.read(config.ref, shard));
    // Checkpoints are read in batches: one answer lets a thousand copies go on at once, and their
    // starts (opening a reader, the first report) ran in one task of hundreds of milliseconds.
    // Each goes on in its turn of the event loop, as polls do.
    await env.pollTurns.next();
    if (this.stopped) return;
    // Its own checkpoint written under a newer token than this node's map gives the copy: this
    // node acts on an older map (or a newer incarnation took the copy). Starting would resume
    // from a checkpoint it may not write: it waits for its map, with backoff, unless stopped.
    const stored = checkpoints.tokens?.get(env.node)?.get(env.settings.checkpointGroup);
    const token = this.host.tokenOf(this);
    if (stored !== undefined && token !== undefined && compareTokens(stored, token) > 0) {
      this.startsRefused += 1;
      this.refusals.refused(
        'checkpoint',
        'newer-token-stored',
        { token: tokenText(token), storedToken: tokenText(stored) },
        "the copy's checkpoint has a newer token than this node's map: the shard waits for the newer map",
      );
      this.schedule('start', refusalBackoff(env.settings, this.startsRefused));
      return;
    }
    if (this.startsRefused > 0) this.refusalsOfCopy?.end('checkpoint', 'the map caught up');
    const reader = await env.source.open(config, shard);
    // Stopped while it opened: nobody else will close it.
    if (this.stopped) return this.closeReader(reader);
    this.reader = reader;
    const earliest = await reader.earliestOffset();
    const endAtStart = await reader.endOffset();
    const plan = copyStart({
      checkpoints,
      node: env.node,
      group: env.settings.checkpointGroup,
      copyStartFrom: config.copyStartFrom,
      newShardStartFrom: config.source.type === 'kafka' ? config.source.startFrom : 'earliest',
      earliest,
      endAtStart,
      // A sink of one store for all copies lets a copy resume from the shard's newest fenced checkpoint.
      storage: sinkStorage(env.sink),
    });
    if (this.stopped) return;
    if (plan.lostToRetention > 0)
      this.log.warn(
        { from: plan.from, reason: plan.reason, earliest, lost: plan.lostToRetention },
        'records before the earliest available offset were never ingested: lost to retention',
      );
    this.start = plan.from;
    this.catchUpTo = plan.catchUpTo;
    this.offset = this.start;
    env.telemetry.trackIngestion(this);
    env.loadMeter?.open(config.ref, shard, this);
    // Not Available before it holds what the serving copies held when it started (M3DB's bootstrap).
    this.recovering = this.offset < this.catchUpTo;
    if (this.recovering) this.report(ShardEvents.recoveryInProgress(config.ref, shard, env.node, 0), Status.recovery(0));
    else this.report(ShardEvents.ingestionStarted(config.ref, shard, env.node), Status.active);
    // Debug: its node logs the copies a map started in one line (`shards.started`).
    if (env.log.isLevelEnabled('debug'))
      this.log.debug({ from: this.start, reason: plan.reason, catchUpTo: this.catchUpTo, peersCheckpoint: plan.peersCheckpoint }, 'shard started');
    this.schedule('poll', 0);
  }

  private async pollStep(): Promise<void> {
    const { env, config, shard } = this;
    // Too much accepted and not checkpointed (a store slower than ingestion for long): reads wait
    // for the checkpoints, so a crash never replays more than the bound.
    const uncheckpointed = this.offset - 1 - this.settled;
    if (this.pending === undefined && uncheckpointed > env.settings.maxUncheckpointedRecords) {
      this.offerCheckpoint();
      if (!this.heldBack)
        this.log.debug(
          { event: 'checkpoint.held-back', uncheckpointed, bound: env.settings.maxUncheckpointedRecords },
          'reads wait for checkpoints to catch up',
        );
      this.heldBack = true;
      this.schedule('poll', env.settings.pollIntervalMs);
      return;
    }
    this.heldBack = false;
    const reader = this.reader!;
    // Bytes as fetched, of the records read now (a batch the sink refused is counted once, when read).
    const fresh = this.pending === undefined;
    const bytesBefore = fresh ? (reader.bytesRead?.() ?? 0) : 0;
    const records = this.pending ?? (await reader.read(this.offset, env.settings.batchSize));
    if (fresh) this.bytesUncounted += (reader.bytesRead?.() ?? 0) - bytesBefore;
    if (records.length > 0) {
      const sinkStart = env.clock.now();
      // The token of the moment of the call: a batch read under an older assignment goes with
      // the newer token once this node holds it (its records are still the copy's next ones).
      const token = this.host.tokenOf(this);
      const outcome =
        token === undefined
          ? { kind: 'refused' as const, cause: 'not-assigned' as const, detail: {}, message: 'records fetched before the map moved this copy were not written' }
          : await callSink(env.sink, env.clock, env.settings.sinkTimeoutMs, config, shard, records, token, env.runGaps);
      if (outcome.kind === 'lease-lapsed') {
        // No lease for the map's epoch: nothing was written and nothing failed. The batch waits
        // for the next grant; no poll runs meanwhile (the grant's wake-up is the next poll).
        this.pending = records;
        if (!this.stopped) this.waitForLease();
        return;
      }
      this.endLeaseWait();
      if (outcome.kind === 'refused') {
        this.pending = records;
        this.refusedInARow += 1;
        this.refusals.refused('sink', outcome.cause, outcome.detail, outcome.message);
        this.schedule('poll', refusalBackoff(env.settings, this.refusedInARow));
        return;
      }
      if (this.pending) this.refusalsOfCopy?.end('sink');
      this.acceptedToken = token;
      this.pending = undefined;
      this.refusedInARow = 0;
      env.telemetry.ingested(config.ref, shard, records.length);
      env.loadMeter?.ingested(config.ref, shard, records.length, this.bytesUncounted, env.clock.now() - sinkStart);
      this.bytesUncounted = 0;
      // Stopped during the call: its last checkpoint went with the stop (what this batch adds is replayed by the next owner).
      if (this.stopped) return;
      const last = records[records.length - 1]!.offset;
      this.offset = last + 1;
      const offeredAt = this.writer?.offeredAt;
      if (offeredAt === undefined || env.clock.now() - offeredAt >= env.settings.checkpointIntervalMs) this.offerCheckpoint();
    } else if (this.offset - 1 > this.offered) {
      // Caught up: what is left unwritten goes now, or it would wait for the next record.
      this.offerCheckpoint();
    }
    if (this.recovering) {
      if (this.offset >= this.catchUpTo) {
        this.recovering = false;
        this.report(ShardEvents.ingestionStarted(config.ref, shard, env.node), Status.active);
      } else {
        const pct = Math.floor(((this.offset - this.start) * 100) / (this.catchUpTo - this.start));
        if (pct >= this.lastPct + env.settings.progressStepPct) {
          this.lastPct = pct;
          this.report(ShardEvents.recoveryInProgress(config.ref, shard, env.node, pct), Status.recovery(pct));
        }
      }
    }
    // Records came: more may be waiting (a source that buffers, like Kafka's, hands out what it
    // has fetched so far), so poll again at once; an empty read waits for the interval, or less
    // if the source says records arrived.
    this.emptyReads = records.length > 0 ? 0 : this.emptyReads + 1;
    this.schedule('poll', records.length > 0 ? 0 : nextPollDelay(env.settings.pollIntervalMs, this.emptyReads, reader, env.clock.now()));
    if (records.length === 0 && !this.stopped) reader.whenReadable?.(() => this.pollNow());
  }
}
