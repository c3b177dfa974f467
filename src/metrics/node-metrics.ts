// One node's Prometheus metrics (prom-client, a registry per node so several embedded nodes in one
// process never mix their series). Counters are fed by the actors through `Telemetry`; gauges of
// the cluster's state are read from the node when Prometheus scrapes, so they cost nothing between
// scrapes and are never stale.
import { createRequire } from 'node:module';
import type * as PromClient from 'prom-client';
import type { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { DROP_CAUSES, type DropCause } from '../cluster/failure-detector/messages.js';
import type { FencedWriteKind, FollowedMapStamp, IngestionProbe, MetricsSubject, NodeTelemetry } from '../actors/telemetry.js';
import { LastAnswer } from '../actors/last-answer.js';
import { RealClock } from '../cluster/clock.js';
import type { DatasetRef } from '../core/ids.js';
import type { NoticeName } from '../core/shard-manager/protocol.js';
import type { ShardStatusType } from '../core/status.js';
import { META_STORE_OPERATIONS } from '../store/meta-store.js';
import { nextTurn } from '../cluster/turns.js';
import { packageVersion } from './package-version.js';

/** The clock of every end offset's wait (one for all: a node tracks tens of thousands of copies). */
const REAL_CLOCK = new RealClock();

/**
 * A copy the metrics follow, with the last end offset its source gave (the lag gauges read it: a
 * slow broker makes the gauge older, never the scrape slower). One object per copy, no closure.
 */
class TrackedCopy extends LastAnswer<number> {
  constructor(readonly probe: IngestionProbe) {
    super(undefined, REAL_CLOCK, END_OFFSET_WAIT_MS);
  }

  get dataset(): DatasetRef {
    return this.probe.dataset;
  }

  get shard(): number {
    return this.probe.shard;
  }

  protected override question(): Promise<number> {
    return this.probe.endOffset();
  }
}

// prom-client takes tens of milliseconds to load: it is loaded with the first node's metrics, not
// when `shardherd` is imported (an application that only routes or reads maps never pays for it).
let promClientModule: typeof PromClient | undefined;
const promClient = (): typeof PromClient => (promClientModule ??= createRequire(import.meta.url)('prom-client') as typeof PromClient);

const STATUSES: readonly ShardStatusType[] = ['Unassigned', 'Assigned', 'Recovery', 'Active', 'Error', 'Stopped', 'Down'];
/**
 * How long a scrape waits for a shard's end offset before it takes the last one it read (or leaves
 * the lag out before the first): a slow broker makes the gauge older, never the scrape slow.
 */
const END_OFFSET_WAIT_MS = 50;
/**
 * Copies on a node past which it exports no per-shard series, only per-dataset ones: a node of
 * 65 536 copies exported 131 072 per-shard series, 8.5 MB a scrape that held its event loop for
 * half a second, and about 4.6 KB of heap per copy (issue 34).
 */
export const PER_SHARD_SERIES_UP_TO = 4096;

export class NodeMetrics implements NodeTelemetry {
  readonly registry: Registry = new (promClient().Registry)();
  private subject: MetricsSubject | undefined;
  /** The copies this node ingests, by their probe (a copy that starts again is a new probe). */
  private readonly probes = new Map<IngestionProbe, TrackedCopy>();
  /** The shards of each dataset with an ingested-records series, to remove them with the dataset. */
  private readonly countedShards = new Map<DatasetRef, Set<string>>();
  /** Datasets removed and not started again here since. */
  private readonly removed = new Set<DatasetRef>();
  private readonly failovers: Counter;
  private readonly recoveryDuration: Histogram;
  private readonly reassignments: Counter<'dataset'>;
  private readonly cooldownRefusals: Counter<'dataset'>;
  private readonly loadRounds: Counter<'dataset'>;
  private readonly loadRefusals: Counter<'dataset'>;
  private readonly busErrors: Counter<'operation'>;
  private readonly malformed: Counter<'topic'>;
  private readonly metaStoreErrors: Counter<'operation'>;
  private readonly retries: Counter<'what'>;
  private readonly fencedWrites: Counter<'dataset' | 'kind' | 'cause'>;
  /** The fenced-write series of each dataset, to remove them with the dataset. */
  private readonly fencedSeries = new Map<string, Map<string, { kind: FencedWriteKind; cause: string }>>();
  private readonly records: Counter<'dataset' | 'shard'>;
  private readonly datasetRecords: Counter<'dataset'>;
  private readonly perShardSeriesUpTo: number;
  private lagsOfScrape: ReturnType<NodeMetrics['lags']> | undefined;
  private readonly detectorDrops: Counter<'cause'>;
  private readonly detectorEvictions: Counter;
  private readonly leaseWaits: Counter;
  private readonly reportsResent: Counter<'cause'>;

  constructor(options: { readonly defaultMetrics?: boolean; readonly perShardSeriesUpTo?: number } = {}) {
    const registers = [this.registry];
    this.perShardSeriesUpTo = options.perShardSeriesUpTo ?? PER_SHARD_SERIES_UP_TO;
    const { Counter, Histogram, collectDefaultMetrics } = promClient();
    if (options.defaultMetrics) collectDefaultMetrics({ register: this.registry, prefix: 'shardherd_process_' });
    this.failovers = new Counter({
      name: 'shardherd_singleton_failovers_total',
      help: 'Times a singleton on this node took over and recovered the cluster state',
      registers,
    });
    this.recoveryDuration = new Histogram({
      name: 'shardherd_singleton_recovery_duration_seconds',
      help: 'From taking the singleton lease to acting on the recovered state',
      buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers,
    });
    // Every label set known in advance starts at 0: a series that appears only at its first
    // increment makes `rate()` and alerts on `increase() > 0` miss that first one, and a dashboard
    // cannot tell "none yet" from "not exported".
    const perDataset = async (c: Counter<'dataset'>) => {
      for (const map of await this.maps()) c.inc({ dataset: map.dataset }, 0);
    };
    this.reassignments = new Counter({
      name: 'shardherd_shard_reassignments_total',
      help: "Shards moved to another node after an ingestion error (by this node's singleton)",
      labelNames: ['dataset'],
      registers,
      collect: () => perDataset(this.reassignments),
    });
    this.loadRounds = new Counter({
      name: 'shardherd_load_rounds_total',
      help: "Load rounds that moved copies of a load-aware dataset (by this node's singleton; docs/PLACEMENT.md)",
      labelNames: ['dataset'],
      registers,
    });
    this.loadRefusals = new Counter({
      name: 'shardherd_load_report_refusals_total',
      help: "Load reports with figures the singleton refused and never acted on (by this node's singleton)",
      labelNames: ['dataset'],
      registers,
    });
    this.cooldownRefusals = new Counter({
      name: 'shardherd_shard_cooldown_refusals_total',
      help: 'Reassignments skipped because the shard was inside its cooldown',
      labelNames: ['dataset'],
      registers,
      collect: () => perDataset(this.cooldownRefusals),
    });
    this.busErrors = new Counter({
      name: 'shardherd_bus_errors_total',
      help: 'Bus produce failures and received records that could not be handled',
      labelNames: ['operation'],
      registers,
    });
    for (const operation of ['produce', 'handle']) this.busErrors.inc({ operation }, 0);
    this.malformed = new Counter({
      name: 'shardherd_bus_malformed_records_total',
      help: 'Bus records that did not parse and were skipped, changing nothing',
      labelNames: ['topic'],
      registers,
      collect: () => {
        for (const topic of this.subject?.busTopics ?? []) this.malformed.inc({ topic }, 0);
      },
    });
    this.metaStoreErrors = new Counter({
      name: 'shardherd_metastore_errors_total',
      help: 'MetaStore calls that failed (retried or not)',
      labelNames: ['operation'],
      registers,
    });
    for (const operation of META_STORE_OPERATIONS) this.metaStoreErrors.inc({ operation }, 0);
    // `what` names whatever was retried (free text): its series appear with the first retry.
    this.retries = new Counter({ name: 'shardherd_retries_total', help: 'Retriable failures retried after a backoff', labelNames: ['what'], registers });
    // Per dataset, kind and cause; series appear with the first refusal (the causes are few but
    // datasets come and go).
    this.fencedWrites = new Counter({
      name: 'shardherd_fenced_writes_total',
      help: 'Writes refused as fenced: sink batches and checkpoints of a token older than one seen, or of a node no longer a member',
      labelNames: ['dataset', 'kind', 'cause'],
      registers,
    });
    this.records = new Counter({
      name: 'shardherd_ingested_records_total',
      help: `Records the sink accepted, per shard this node ingests (only while it runs at most ${this.perShardSeriesUpTo} copies)`,
      labelNames: ['dataset', 'shard'],
      registers,
      collect: () => this.dropMovedShards(),
    });
    this.datasetRecords = new Counter({
      name: 'shardherd_dataset_ingested_records_total',
      help: 'Records the sink accepted on this node, per dataset',
      labelNames: ['dataset'],
      registers,
    });
    this.detectorDrops = new Counter({
      name: 'shardherd_detector_dropped_frames_total',
      help: 'Failure detector frames dropped without being acted on, by cause (heartbeat mode)',
      labelNames: ['cause'],
      registers,
    });
    for (const cause of DROP_CAUSES) this.detectorDrops.inc({ cause }, 0);
    this.detectorEvictions = new Counter({
      name: 'shardherd_detector_evictions_total',
      help: "Members this node's singleton evicted on the failure detector's evidence (heartbeat mode)",
      registers,
    });
    this.leaseWaits = new Counter({
      name: 'shardherd_lease_wait_seconds_total',
      help: 'Time shards spent holding a batch while this node held no lease to write it (heartbeat mode): writes paused, nothing failed',
      registers,
    });
    this.reportsResent = new Counter({
      name: 'shardherd_report_events_resent_total',
      help: 'Events this node sent the singleton again: lost (passed unacknowledged, or its produce failed), or silence (the singleton acknowledged nothing for a while)',
      labelNames: ['cause'],
      registers,
    });
    this.defineStateGauges();
  }

  /** Connects the gauges to the node they describe. */
  observe(subject: MetricsSubject): void {
    this.subject = subject;
  }

  /** The exposition in Prometheus's text format. */
  scrape(): Promise<string> {
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  /** The copies this node ingests now: the status page reads their position and lag from these. */
  ingestionProbes(): readonly IngestionProbe[] {
    return [...this.probes.keys()];
  }

  // ------------------------------------------------------------ Telemetry

  notice(name: NoticeName, dataset: DatasetRef | undefined, count: number): void {
    const labels = { dataset: dataset ?? '' };
    if (name === 'shard.reassigned') this.reassignments.inc(labels, count);
    else if (name === 'shard.reassignment-skipped') this.cooldownRefusals.inc(labels, count);
    else if (name === 'load.moves-planned') this.loadRounds.inc(labels, count);
    else if (name === 'load.reports-refused') this.loadRefusals.inc(labels, count);
  }

  singletonRecovered(ms: number): void {
    this.failovers.inc();
    this.recoveryDuration.observe(ms / 1000);
  }

  detectorDropped(cause: DropCause): void {
    this.detectorDrops.inc({ cause });
  }

  detectorEvicted(): void {
    this.detectorEvictions.inc();
  }

  leaseWaitEnded(waitedMs: number): void {
    this.leaseWaits.inc(waitedMs / 1000);
  }

  reportEventsResent(cause: 'lost' | 'silence', events: number): void {
    this.reportsResent.inc({ cause }, events);
  }

  malformedRecord(topic: string): void {
    this.malformed.inc({ topic });
  }

  busError(operation: 'produce' | 'handle'): void {
    this.busErrors.inc({ operation });
  }

  metaStoreError(operation: string): void {
    this.metaStoreErrors.inc({ operation });
  }

  retry(what: string): void {
    this.retries.inc({ what });
  }

  fencedWrite(dataset: string, kind: FencedWriteKind, cause: string): void {
    this.fencedWrites.inc({ dataset, kind, cause });
    let seen = this.fencedSeries.get(dataset);
    if (!seen) this.fencedSeries.set(dataset, (seen = new Map()));
    seen.set(`${kind} ${cause}`, { kind, cause });
  }

  ingested(dataset: DatasetRef, shard: number, records: number): void {
    // A shard of a removed dataset that was still stopping: its series is gone and stays gone.
    if (this.removed.has(dataset)) return;
    this.datasetRecords.inc({ dataset }, records);
    if (this.perShardSeries()) this.countShard(dataset, shard, records);
  }

  /** Whether this node runs few enough copies for per-shard series (`PER_SHARD_SERIES_UP_TO`). */
  private perShardSeries(): boolean {
    return this.probes.size <= this.perShardSeriesUpTo;
  }

  private countShard(dataset: DatasetRef, shard: number, records: number): void {
    let shards = this.countedShards.get(dataset);
    if (!shards) this.countedShards.set(dataset, (shards = new Set()));
    shards.add(String(shard));
    this.records.inc({ dataset, shard: String(shard) }, records);
  }

  /**
   * The records series of shards this node no longer ingests (moved away, stopped) go at the next
   * scrape: a node keeps series only of the shards it runs, so a sum across nodes counts each
   * running copy once and a dashboard does not list every shard a node ever held.
   */
  private dropMovedShards(): void {
    // Per-shard series exist only for a few thousand copies: their keys are cheap to list here.
    const running = this.perShardSeries() ? new Set([...this.probes.keys()].map((p) => `${p.dataset}/${p.shard}`)) : new Set<string>();
    for (const [dataset, shards] of this.countedShards) {
      for (const shard of shards) {
        if (running.has(`${dataset}/${shard}`)) continue;
        this.records.remove({ dataset, shard });
        shards.delete(shard);
      }
      if (shards.size === 0) this.countedShards.delete(dataset);
    }
  }

  datasetRemoved(dataset: DatasetRef): void {
    this.removed.add(dataset);
    for (const shard of this.countedShards.get(dataset) ?? []) this.records.remove({ dataset, shard });
    this.countedShards.delete(dataset);
    this.datasetRecords.remove({ dataset });
    this.reassignments.remove({ dataset });
    this.cooldownRefusals.remove({ dataset });
    for (const labels of this.fencedSeries.get(dataset)?.values() ?? []) this.fencedWrites.remove({ dataset, ...labels });
    this.fencedSeries.delete(dataset);
  }

  trackIngestion(probe: IngestionProbe): void {
    const { dataset, shard } = probe;
    // A dataset set up again under the same name: counted afresh.
    this.removed.delete(dataset);
    // The lag gauge reads the end offset through it: a slow broker makes the gauge older, never the scrape slower.
    this.probes.set(probe, new TrackedCopy(probe));
    if (this.perShardSeries()) this.countShard(dataset, shard, 0);
    this.datasetRecords.inc({ dataset }, 0);
  }

  untrackIngestion(probe: IngestionProbe): void {
    this.probes.delete(probe);
  }

  // ------------------------------------------------------------ gauges read at scrape time

  private defineStateGauges(): void {
    this.gauge('shardherd_build_info', 'Always 1: the shardherd version this node runs, and its id', ['version', 'node'], async (g) => {
      if (this.subject) g.set({ version: packageVersion(), node: this.subject.node }, 1);
    });
    this.gauge('shardherd_shards', 'Shards per dataset and status, from the map this node follows', ['dataset', 'status'], async (g) => {
      for (const { dataset, mapper } of await this.maps()) {
        const counts = new Map<ShardStatusType, number>(STATUSES.map((s) => [s, 0]));
        for (let shard = 0; shard < mapper.numShards; shard++) {
          const status = mapper.statusForShard(shard).type;
          counts.set(status, counts.get(status)! + 1);
        }
        for (const [status, n] of counts) g.set({ dataset, status }, n);
      }
    });
    this.gauge('shardherd_shard_assignments', 'Shard copies per dataset and node, from the map this node follows', ['dataset', 'node'], async (g) => {
      for (const { dataset, mapper } of await this.maps()) {
        for (const node of mapper.allNodes()) g.set({ dataset, node }, mapper.numShardsForNode(node));
      }
    });
    this.gauge('shardherd_map_epoch', 'Epoch of the map this node follows, per dataset', ['dataset'], async (g) => {
      for (const map of await this.maps()) g.set({ dataset: map.dataset }, map.epoch);
    });
    this.gauge('shardherd_map_version', 'Version of the map this node follows, per dataset', ['dataset'], async (g) => {
      for (const map of await this.maps()) g.set({ dataset: map.dataset }, map.version);
    });
    this.gauge('shardherd_is_singleton', '1 when this node hosts the active singleton', [], async (g) => {
      g.set((await this.subject?.isSingleton()) ? 1 : 0);
    });
    this.gauge('shardherd_singleton_epoch', 'The newest singleton epoch this node heard of', [], async (g) => {
      g.set((await this.subject?.knownEpoch()) ?? 0);
    });
    this.gauge(
      'shardherd_lease_waiting_shards',
      'Shards holding a batch until this node holds a lease to write it (heartbeat mode; a lapse pauses writes, it fails nothing)',
      [],
      async (g) => {
        g.set(this.subject?.leaseWaitingShards?.() ?? 0);
      },
    );
    this.gauge(
      'shardherd_load_node_ratio',
      "Per load-aware dataset and member: its load over its weighted share in this node's singleton's load view (1: its share; only while the view is complete)",
      ['dataset', 'node'],
      async (g) => {
        for (const { dataset, node, ratio } of (await this.subject?.loadRatios?.()) ?? []) g.set({ dataset, node }, ratio);
      },
    );
    this.gauge('shardherd_membership_size', "Members in this node's membership view", [], async (g) => {
      g.set(this.subject?.membershipSize() ?? 0);
    });
    this.gauge(
      'shardherd_ingestion_lag_records',
      `Per shard this node ingests: end offset of its stream minus the next offset to ingest (only while it runs at most ${this.perShardSeriesUpTo} copies)`,
      ['dataset', 'shard'],
      async (g) => {
        if (!this.perShardSeries()) return;
        for (const { dataset, shard, lag } of await this.lags()) if (lag !== undefined) g.set({ dataset, shard: String(shard) }, lag);
      },
    );
    this.gauge(
      'shardherd_dataset_ingestion_lag_records',
      'Per dataset: the sum over the copies this node ingests of their end offset minus the next offset to ingest',
      ['dataset'],
      async (g) => {
        const sums = new Map<DatasetRef, number>();
        for (const { dataset, lag } of await this.lags()) if (lag !== undefined) sums.set(dataset, (sums.get(dataset) ?? 0) + lag);
        for (const [dataset, sum] of sums) g.set({ dataset }, sum);
      },
    );
  }

  /** A gauge whose values `fill` sets afresh at every scrape (series that vanished vanish from it too). */
  private gauge<L extends string>(name: string, help: string, labelNames: readonly L[], fill: (g: Gauge<L>) => Promise<void>): void {
    const gauge: Gauge<L> = new (promClient().Gauge<L>)({
      name,
      help,
      labelNames,
      registers: [this.registry],
      collect: async () => {
        gauge.reset();
        await fill(gauge);
      },
    });
  }

  /**
   * Each tracked copy's lag (undefined before its end offset was first read), once per scrape for
   * both lag gauges. With per-shard series each end offset is asked afresh (waiting up to
   * END_OFFSET_WAIT_MS); past them the last one read is taken and asked again for the next scrape:
   * a timer per copy per scrape cost a node of 65 536 copies a quarter of a second.
   */
  private lags(): Promise<{ dataset: DatasetRef; shard: number; lag: number | undefined }[]> {
    this.lagsOfScrape ??= (async () => {
      const fresh = this.perShardSeries();
      const lagOf = (probe: IngestionProbe, end: number | undefined) => (end === undefined ? undefined : Math.max(0, end - probe.position()));
      try {
        const probes = [...this.probes.values()];
        // Past per-shard series: what each source knows now, with no question per copy where it can say.
        if (!fresh) return probes.map((c) => ({ dataset: c.dataset, shard: c.shard, lag: lagOf(c.probe, c.probe.knownEndOffset?.() ?? c.peek()) }));
        return await Promise.all(probes.map(async (c) => ({ dataset: c.dataset, shard: c.shard, lag: lagOf(c.probe, await c.get()) })));
      } finally {
        nextTurn(() => (this.lagsOfScrape = undefined));
      }
    })();
    return this.lagsOfScrape;
  }

  private async maps(): Promise<readonly FollowedMapStamp[]> {
    return (await this.subject?.maps()) ?? [];
  }
}
