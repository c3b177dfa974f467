import type { Logger } from 'pino';
import type { Incarnation, NodeId } from '../core/ids.js';
import type { Bus, BusRecord } from '../cluster/bus.js';
import type { Clock } from '../cluster/clock.js';
import type { IngestionSource, RecordSink } from '../ingest/ingestion-source.js';
import type { SingletonLease } from '../cluster/singleton-lease.js';
import type { MetaStore } from '../store/meta-store.js';
import type { ActorRuntime } from './runtime.js';
import type { RuntimeSettings } from './settings.js';
import type { CheckpointLoader } from './checkpoint-loader.js';
import type { Problems } from './problems.js';
import type { Telemetry } from './telemetry.js';
import type { LoadMeter } from './load-meter.js';
import type { Topics } from '../protocol/wire.js';
import type { NodeDetector } from '../cluster/failure-detector/node-detector.js';
import { limitedLog } from './log-limiter.js';
import type { SingletonContact } from './singleton-contact.js';
import type { LeaseWaits } from './lease-waits.js';
import type { RunGaps } from './run-gaps.js';
import type { SingletonRole } from './singleton-role.js';
import type { PollTurns } from './poll-turns.js';

/** Everything a node's actors use: its identity, its ports, its settings. */
export interface NodeEnv {
  readonly node: NodeId;
  readonly incarnation: Incarnation;
  readonly runtime: ActorRuntime;
  readonly clock: Clock;
  readonly bus: Bus;
  readonly topics: Topics;
  readonly metaStore: MetaStore;
  /** The singleton lease (held in the MetaStore; see `SingletonLease`). */
  readonly lease: SingletonLease;
  readonly source: IngestionSource;
  readonly sink: RecordSink;
  readonly settings: RuntimeSettings;
  readonly log: Logger;
  /** Counters for the node's metrics (`NO_TELEMETRY` where nobody reads them). */
  readonly telemetry: Telemetry;
  /** Each copy's ingested records and bytes and sink time per report window, for datasets placed by load. Absent: none reported. */
  readonly loadMeter?: LoadMeter;
  /** Failures no retry fixes, for the node's /status (each logged once). */
  readonly problems: Problems;
  /** Reads the shards' checkpoints from `metaStore`, many per request. */
  readonly checkpoints: CheckpointLoader;
  /** The shards waiting for a lease to write (heartbeat mode; for /status and metrics). */
  readonly leaseWaits?: LeaseWaits;
  /** When this process did not run (pauses, stalls): a sink wait that spans one starts over. */
  readonly runGaps?: RunGaps;
  /** When this node last heard from the singleton (for /healthz). */
  readonly singletonContact?: SingletonContact;
  /** Turns of the event loop for due polls, shared by every node of the process (`processPollTurns`). */
  readonly pollTurns: PollTurns;
  /**
   * Awaited between slices of long work on the node's maps (`slicePauseFor`): a turn of the event
   * loop once a slice is spent. Absent in a simulated world: the work runs whole.
   */
  readonly slicePause?: () => Promise<void>;
  /** The node's failure detector, in `heartbeat` mode only (docs/ARCHITECTURE.md §11). */
  readonly detector?: NodeDetector;
  /**
   * Whether the singleton this incarnation hosts still acts, readable without waiting for its actor
   * (see `SingletonRole`). Absent: the singleton keeps a flag of its own.
   */
  readonly singletonRole?: SingletonRole;
}

/** A bus record that did not parse: skipped, changing nothing, but logged and counted. */
export function skipMalformed(env: Pick<NodeEnv, 'log' | 'telemetry'>, record: BusRecord, reason: string): void {
  env.log.warn({ event: 'bus.malformed', topic: record.topic, offset: record.offset, reason }, 'malformed record skipped');
  env.telemetry.malformedRecord(record.topic);
}

/** Waits `ms` on the node's clock. */
export function sleep(clock: Clock, ms: number): Promise<void> {
  return new Promise((resolve) => clock.schedule(ms, resolve));
}

/**
 * Retries a retriable failure with exponential backoff on the clock (never a retriable error
 * escapes; anything else is rethrown at once). Failures are logged once per cause and 10 s on a
 * node, with one more line at the window's end counting the others (`limitedLog`).
 */
export async function withRetry<T>(
  env: Pick<NodeEnv, 'clock' | 'settings' | 'log'> & Partial<Pick<NodeEnv, 'telemetry'>>,
  what: string,
  op: () => Promise<T>,
): Promise<T> {
  let delay = env.settings.retryInitialMs;
  for (let attempt = 1; ; attempt++) {
    try {
      return await op();
    } catch (e) {
      if (!(e instanceof Error) || !(e as { retriable?: boolean }).retriable) throw e;
      // Every copy of a node may retry the same call at once (a store down): one line per cause and window.
      limitedLog(env.log, env.clock, `retry ${what}: ${e.message}`, (more) =>
        more === 0
          ? env.log.warn({ event: 'retry', what, err: e, attempt, retryInMs: delay }, `${what} failed; retrying`)
          : env.log.warn(
              { event: 'retry', what, err: e, failures: more },
              `${what} failed ${more} more time(s) on this node in the last 10 s, for the same cause; each is retried`,
            ),
      );
      env.telemetry?.retry(what);
      await sleep(env.clock, delay);
      delay = Math.min(delay * 2, env.settings.retryMaxMs);
    }
  }
}
