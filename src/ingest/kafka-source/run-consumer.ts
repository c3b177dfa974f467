// A dataset's consumer as its feed sees it: each fetched batch arrives packed into a run
// (./fetched-run.ts), as many of its records as the shard's buffer had room for, and a partition
// fetches only while the feed has granted it room. The packing runs beside the client library's
// consumer: on the main thread, or on the fetch thread (./fetch-thread.ts) with the library, so
// the same rules hold on either.
import type { Logger } from 'pino';
import { BatchEstimate, type Bounds, type Room } from './batch-estimate.js';
import type { FeedConsumer, FeedConsumerParams, FeedConsumerStats, FetchedBatch, JoinPlan } from './feed-client.js';
import { FetchedRun } from './fetched-run.js';
import type { KafkaSourceSettings } from './settings.js';

/** A fetched batch as the feed gets it. */
export interface PackedBatch {
  readonly partition: number;
  /** The start it belongs to (`RunConsumer.start`); `NO_START` for a batch no start asked for (a seek made it stale, or its partition waits). */
  readonly epoch: number;
  /** The offset the fetch asked for: the records may start above it (aborted, control or compacted-away records). */
  readonly fetchedOffset: number;
  /** Records the client fetched, taken or not. */
  readonly fetched: number;
  /** The records the room took; undefined for none. */
  readonly run: FetchedRun | undefined;
  /** Where the partition goes on: past the run, or past control records when the batch had no others. */
  readonly nextOffset: number;
  /** The partition stopped fetching (the room left would not take a batch like this one) until `grant`. */
  readonly paused: boolean;
}

/** The epoch of a batch that belongs to no start: the feed's epochs start at 1. */
export const NO_START = 0;

/** What a run consumer tells its feed. */
export interface RunConsumerEvents {
  /** The consumer took up `assigned` (a join, a rejoin, a change of the open partitions); each waits, paused, until the feed starts it. */
  onJoin(assigned: readonly number[]): void;
  onBatch(batch: PackedBatch): void;
  /** The consumer stopped for good (or its start failed in a way trying again cannot fix). */
  onFail(error: unknown): void;
}

/** A dataset's consumer: fetches each started partition into the room the feed gave it; commits, stats and shutdown as the client's consumer's. */
export interface RunConsumer extends Pick<FeedConsumer, 'commit' | 'stats' | 'shutdown'> {
  /** The open partitions are now `wanted`: taken up `delayMs` after the first change (later changes ride along). */
  schedule(delayMs: number, wanted: readonly number[]): void;
  /** Fetches `partition` from `offset` into `room`; its batches carry `epoch` (greater than any before), and batches of earlier starts are stale. */
  start(partition: number, offset: number, epoch: number, room: Room): void;
  /** Room for a partition that paused: it fetches again. A grant for an earlier start is ignored. */
  grant(partition: number, epoch: number, room: Room): void;
  /** Stops fetching the partition (its shard was closed). */
  stop(partition: number): void;
}

/** What a run consumer needs to make its client's consumer. */
export interface RunConsumerParams {
  readonly settings: KafkaSourceSettings;
  readonly dataset: string;
  readonly topic: string;
  readonly log: Logger;
}

/** A started partition: its start, and the room left (undefined while it waits for a grant). */
interface Started {
  epoch: number;
  room: Room | undefined;
}

/** Packs the batches of a client library's consumer (`FeedConsumer`) into runs, within the room each partition was given. */
export class PackingConsumer implements RunConsumer {
  private readonly consumer: FeedConsumer;
  private readonly started = new Map<number, Started>();
  /** The size of each partition's last batch: whether the room left takes the next one. */
  private readonly estimates = new Map<number, BatchEstimate>();
  private readonly bounds: Bounds;
  private wanted: readonly number[] = [];
  /** While the consumer's join asks where its partitions start, the starts the feed gives go into the answer. */
  private joinPlan: { partition: number; offset: number }[] | undefined;

  constructor(
    makeConsumer: (params: FeedConsumerParams) => FeedConsumer,
    params: RunConsumerParams,
    private readonly events: RunConsumerEvents,
  ) {
    this.bounds = params.settings;
    this.consumer = makeConsumer({
      ...params,
      wanted: () => [...this.wanted],
      onJoin: (assigned) => this.onJoin(assigned),
      onBatch: (batch) => this.onBatch(batch),
      onFail: (e) => events.onFail(e),
    });
  }

  schedule(delayMs: number, wanted: readonly number[]): void {
    this.wanted = [...wanted];
    this.consumer.schedule(delayMs);
  }

  start(partition: number, offset: number, epoch: number, room: Room): void {
    this.started.set(partition, { epoch, room });
    if (this.joinPlan !== undefined) {
      this.joinPlan.push({ partition, offset });
      return;
    }
    this.consumer.seek(partition, offset);
    this.consumer.resume(partition);
  }

  grant(partition: number, epoch: number, room: Room): void {
    const st = this.started.get(partition);
    if (st === undefined || st.epoch !== epoch) return;
    st.room = room;
    this.consumer.resume(partition);
  }

  stop(partition: number): void {
    this.started.delete(partition);
    this.estimates.delete(partition);
    this.consumer.pause(partition);
  }

  commit(offsets: readonly { readonly partition: number; readonly offset: number }[]): Promise<void> {
    return this.consumer.commit(offsets);
  }

  stats(): FeedConsumerStats {
    return this.consumer.stats();
  }

  shutdown(): Promise<void> {
    return this.consumer.shutdown();
  }

  /** Every assigned partition waits for the feed's start; starts the feed gives at once are the join's plan. */
  private onJoin(assigned: readonly number[]): JoinPlan {
    for (const p of assigned) this.started.delete(p);
    const plan: { partition: number; offset: number }[] = [];
    this.joinPlan = plan;
    try {
      this.events.onJoin(assigned);
    } finally {
      this.joinPlan = undefined;
    }
    const starting = new Set(plan.map((s) => s.partition));
    return { start: plan, pause: assigned.filter((p) => !starting.has(p)) };
  }

  /** Takes what the room allows, moves the partition past it, and pauses it when the room left would not take a batch like this one. */
  private onBatch(batch: FetchedBatch): void {
    const { partition, records, fetchedOffset } = batch;
    const st = this.started.get(partition);
    if (batch.isStale() || st?.room === undefined) {
      // Not started, or waiting for room: it fetches nothing until the feed says so. Stale: a seek came after the fetch.
      if (!batch.isStale()) batch.pause();
      this.events.onBatch({ partition, epoch: NO_START, fetchedOffset, fetched: records.length, run: undefined, nextOffset: fetchedOffset, paused: false });
      return;
    }
    const room = st.room;
    const run = room.records > 0 && room.bytes > 0 ? FetchedRun.pack(records, room.records, room.bytes) : undefined;
    const taken = run?.count ?? 0;
    let nextOffset = fetchedOffset;
    // A batch of only records no reader sees (control records, aborted transactions) moves the partition past them.
    if (run !== undefined) nextOffset = taken === records.length ? batch.nextOffset : run.lastOffset() + 1;
    else if (records.length === 0) nextOffset = Math.max(batch.nextOffset, fetchedOffset);
    if (nextOffset > fetchedOffset) batch.took(nextOffset);
    st.room = run === undefined ? room : { records: room.records - run.count, bytes: room.bytes - run.bytes };
    const estimate = this.estimateOf(partition);
    estimate.note(records.length, taken, run?.bytes ?? 0);
    // Backpressure: what was not taken is fetched again once reads made room (the feed's grant).
    const paused = taken < records.length || !estimate.fits(st.room, this.bounds);
    if (paused) {
      st.room = undefined;
      batch.pause();
    }
    this.events.onBatch({ partition, epoch: st.epoch, fetchedOffset, fetched: records.length, run, nextOffset, paused });
  }

  private estimateOf(partition: number): BatchEstimate {
    let e = this.estimates.get(partition);
    if (e === undefined) this.estimates.set(partition, (e = new BatchEstimate()));
    return e;
  }
}
