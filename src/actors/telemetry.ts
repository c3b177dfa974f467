// What a node's actors tell its metrics. An interface, so the actor layer does not depend on a
// metrics library and the simulator pays nothing (`NO_TELEMETRY`).
import type { DatasetRef } from '../core/ids.js';
import type { NoticeName } from '../core/shard-manager/protocol.js';
import type { DropCause } from '../cluster/failure-detector/messages.js';
import type { ShardMapper } from '../core/shard-mapper.js';
import type { NodeLoadRatio } from '../core/shard-manager/load-view.js';

/** A shard this node ingests, looked at when metrics are read (lag = end offset − position). */
export interface IngestionProbe {
  readonly dataset: DatasetRef;
  readonly shard: number;
  /** The offset of the next record to ingest. */
  position(): number;
  endOffset(): Promise<number>;
  /** The end offset the source knows now, without asking (see `ShardReader.knownEndOffset`). */
  knownEndOffset?(): number | undefined;
}

/** What a fenced write was: a batch to the sink, or a checkpoint to the MetaStore. */
export type FencedWriteKind = 'sink' | 'checkpoint';

export interface Telemetry {
  /** `count` singleton notices of one kind (reassignments, cooldown refusals, recoveries are counted from these). */
  notice(name: NoticeName, dataset: DatasetRef | undefined, count: number): void;
  /** This node's singleton finished recovering `ms` after it took the lease. */
  singletonRecovered(ms: number): void;
  /** A bus record that did not parse was skipped (it changed nothing). */
  malformedRecord(topic: string): void;
  /** A bus produce failed, or a received record could not be handled. */
  busError(operation: 'produce' | 'handle'): void;
  /** A MetaStore call failed (retried or not). */
  metaStoreError(operation: string): void;
  /** A retriable failure is retried after a backoff. */
  retry(what: string): void;
  /** A write was refused as fenced (a newer token was seen, or the node is no longer a member). */
  fencedWrite(dataset: DatasetRef | string, kind: FencedWriteKind, cause: string): void;
  /** The sink accepted `records` records of a shard. */
  ingested(dataset: DatasetRef, shard: number, records: number): void;
  /** Follows a shard's ingestion until the returned function is called. */
  trackIngestion(probe: IngestionProbe): void;
  /** The copy stopped: its metrics no longer follow it (a copy started since in its place is not touched). */
  untrackIngestion(probe: IngestionProbe): void;
  /** The dataset was removed: its series go, so a removed dataset does not stay on dashboards for ever. */
  datasetRemoved(dataset: DatasetRef): void;
  /** A failure detector frame was dropped, never acted on (docs/ARCHITECTURE.md §11.10). */
  detectorDropped(cause: DropCause): void;
  /** This node's singleton evicted a member on the failure detector's evidence. */
  detectorEvicted(): void;
  /** A shard's wait for a lease to write (heartbeat mode) ended after `waitedMs`. */
  leaseWaitEnded(waitedMs: number): void;
  /**
   * The reporter sent `events` events again: `lost`, their report was passed by the singleton (or
   * its produce failed) unacknowledged; `silence`, the singleton acknowledged nothing for a while.
   */
  reportEventsResent(cause: 'lost' | 'silence', events: number): void;
}

/** A map as the node follows it: its dataset, stamp and the mapper itself (not to be changed). */
export interface FollowedMapStamp {
  readonly dataset: DatasetRef;
  readonly epoch: number;
  readonly version: number;
  readonly mapper: ShardMapper;
}

/** What the gauges read off the node at scrape time. */
export interface MetricsSubject {
  /** The node's id: the `node` label of `shardherd_build_info`. */
  readonly node: string;
  /** The bus topics this node reads: `shardherd_bus_malformed_records_total` starts at 0 for each. */
  readonly busTopics: readonly string[];
  /**
   * The maps this node follows (every dataset's, via its guardian), as the guardian holds them:
   * read in place at each scrape, never copied (a snapshot of a 65 536 × 3 map per gauge made each
   * scrape of a large node cost hundreds of milliseconds).
   */
  maps(): Promise<readonly FollowedMapStamp[]>;
  isSingleton(): Promise<boolean>;
  /** The newest singleton epoch this node heard of. */
  knownEpoch(): Promise<number | undefined>;
  membershipSize(): number;
  /** Shards waiting for a lease to write (heartbeat mode). */
  leaseWaitingShards?(): number;
  /** Each member's load over its weighted share per load-aware dataset, as this node's singleton sees it (none elsewhere). */
  loadRatios?(): Promise<readonly NodeLoadRatio[]>;
}

/**
 * A node's metrics as the node holds them: what its actors tell (`Telemetry`), what they read off
 * the node at a scrape, and the exposition its API serves. `NodeMetrics` (src/metrics) implements
 * it with prom-client; the node knows only this.
 */
export interface NodeTelemetry extends Telemetry {
  observe(subject: MetricsSubject): void;
  /** The exposition in Prometheus's text format. */
  scrape(): Promise<string>;
  readonly contentType: string;
  /** The copies whose ingestion is followed now. */
  ingestionProbes(): readonly IngestionProbe[];
}

export const NO_TELEMETRY: Telemetry = {
  notice: () => {},
  singletonRecovered: () => {},
  malformedRecord: () => {},
  busError: () => {},
  metaStoreError: () => {},
  retry: () => {},
  fencedWrite: () => {},
  ingested: () => {},
  trackIngestion: () => {},
  untrackIngestion: () => {},
  datasetRemoved: () => {},
  detectorDropped: () => {},
  detectorEvicted: () => {},
  leaseWaitEnded: () => {},
  reportEventsResent: () => {},
};
