// A dataset's consumer on @platformatic/kafka: no consumer group. It fetches the open partitions
// itself, each from the offset the feed gives it, from the broker that leads it (one fetch in
// flight per leader; the library keeps the broker's fetch session, follows leader moves and drops
// aborted transactions). Opening or closing a shard takes effect at the next fetch: nothing to
// recreate, no group to join. Consumed offsets are committed in a group of their own,
// `<groupPrefix>.<dataset>.<instanceId>`, only so that Kafka's lag tools see each shard.
import type { Consumer, RecordsBatch } from '@platformatic/kafka';
import { CONTROL_BATCH, OFFSET_OUT_OF_RANGE } from '../../cluster/platformatic-kafka.js';
import { SharedAttempt } from '../../cluster/shared-attempt.js';
import type { FeedConsumer, FeedConsumerParams, FeedConsumerStats, FetchedBatch, FetchedRecords } from './feed-client.js';

/** The library's fetch request and answer (its index does not export their types). */
type FetchOptions = Parameters<Consumer['fetch']>[0];
type FetchRequestTopic = FetchOptions['topics'][number];
type FetchResponse = Awaited<ReturnType<Consumer['fetch']>>;

/** Where the fetcher stands with one open partition. */
interface PartitionState {
  /** The next offset to fetch; undefined until the feed says where to start. */
  position: number | undefined;
  paused: boolean;
  /** Grows at every seek: a fetch sent before it answers for a position no longer wanted. */
  epoch: number;
}

/** A partition as one fetch asked for it. */
interface Asked {
  readonly partition: number;
  readonly offset: number;
  readonly epoch: number;
}

export interface PlatformaticFetcherParams extends FeedConsumerParams {
  /**
   * A new consumer client for this dataset's fetches; it never joins a group. One per dataset: the
   * library keeps one fetch session per broker and client, which two datasets' fetches of other
   * partitions would take from each other.
   */
  readonly connect: () => Promise<Consumer>;
  /** Commits offsets in a consumer group through the admin API (the group has no members). */
  readonly commitOffsets: (groupId: string, offsets: readonly { readonly partition: number; readonly offset: number }[]) => Promise<void>;
  /** Deletes the group of the committed offsets at shutdown, as kafkajs's retired groups are. */
  readonly deleteGroup: (groupId: string) => Promise<void>;
  /** The partition's earliest offset: where a fetch below the log's start goes on. */
  readonly earliestOffset: (partition: number) => Promise<number>;
  /** Whether the topic exists (after a failed metadata read: a deleted topic stops the dataset's reads). */
  readonly topicExists: () => Promise<boolean>;
}

/** Kafka's error codes the fetcher acts on besides OFFSET_OUT_OF_RANGE (the library retries the retriable ones itself). */
const UNKNOWN_TOPIC_OR_PARTITION = 3;
const UNKNOWN_TOPIC_ID = 100;
/** Failed fetch rounds in a row before a missing topic stops the dataset's reads (about 10 s with the backoff). */
const MISSING_TOPIC_ROUNDS = 8;
const MAX_BACKOFF_MS = 2_000;

export class PlatformaticFeedConsumer implements FeedConsumer {
  private readonly partitions = new Map<number, PartitionState>();
  private readonly groupId: string;
  private timer: NodeJS.Timeout | undefined;
  private changedAt: number | undefined;
  private lastRecreateMs: number | undefined;
  private started = false;
  private closed = false;
  private loop: Promise<void> | undefined;
  /** Ends the loop's wait for work. */
  private kick: (() => void) | undefined;
  /** Failed rounds in a row. */
  private failedRounds = 0;
  /** The client of this dataset's fetches, made at the first. */
  private readonly client: SharedAttempt<Consumer>;

  constructor(private readonly p: PlatformaticFetcherParams) {
    this.groupId = `${p.settings.groupPrefix}.${p.dataset}.${p.settings.instanceId}`;
    this.client = new SharedAttempt(() => p.connect());
  }

  schedule(delayMs: number): void {
    if (this.closed || this.timer !== undefined) return;
    this.changedAt ??= Date.now();
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.takeUp();
    }, delayMs);
  }

  seek(partition: number, offset: number): void {
    const st = this.partitions.get(partition);
    if (st === undefined) return;
    st.position = offset;
    st.epoch += 1;
    this.wake();
  }

  pause(partition: number): void {
    const st = this.partitions.get(partition);
    if (st !== undefined) st.paused = true;
  }

  resume(partition: number): void {
    const st = this.partitions.get(partition);
    if (st === undefined) return;
    st.paused = false;
    this.wake();
  }

  async commit(offsets: readonly { readonly partition: number; readonly offset: number }[]): Promise<void> {
    if (offsets.length === 0) return;
    try {
      await this.p.commitOffsets(this.groupId, offsets);
    } catch (e) {
      this.p.log.debug({ err: e, groupId: this.groupId }, 'consumed offsets not committed to Kafka; the next interval commits later ones');
    }
  }

  stats(): FeedConsumerStats {
    return {
      groupId: this.groupId,
      assigned: [...this.partitions.keys()].sort((a, b) => a - b),
      generations: this.started ? 1 : 0,
      lastRecreateMs: this.lastRecreateMs,
    };
  }

  async shutdown(): Promise<void> {
    this.closed = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    this.wake();
    await this.loop;
    if (this.started)
      await this.p.deleteGroup(this.groupId).catch((e: unknown) => this.p.log.debug({ err: e, groupId: this.groupId }, 'deleting the offsets group failed'));
  }

  /** Takes up the open partitions: drops the closed ones, asks the feed where the new ones start. */
  private takeUp(): void {
    if (this.closed) return;
    const wanted = new Set(this.p.wanted());
    for (const partition of this.partitions.keys()) if (!wanted.has(partition)) this.partitions.delete(partition);
    const added = [...wanted].filter((partition) => !this.partitions.has(partition)).sort((a, b) => a - b);
    for (const partition of added) this.partitions.set(partition, { position: undefined, paused: true, epoch: 0 });
    const plan = this.p.onJoin(added);
    for (const { partition, offset } of plan.start) {
      const st = this.partitions.get(partition);
      if (st === undefined) continue;
      st.position = offset;
      st.paused = false;
      st.epoch += 1;
    }
    if (this.changedAt !== undefined) this.lastRecreateMs = Date.now() - this.changedAt;
    this.changedAt = undefined;
    if (!this.started && wanted.size > 0) {
      this.started = true;
      this.p.log.info(
        { event: 'ingest.consumer-joined', groupId: this.groupId, partitions: [...wanted].sort((a, b) => a - b) },
        'Kafka ingestion fetcher started',
      );
    }
    this.loop ??= this.run().finally(() => (this.loop = undefined));
    this.wake();
  }

  private wake(): void {
    const kick = this.kick;
    this.kick = undefined;
    kick?.();
  }

  /** Fetches until shutdown; waits while no partition can be fetched. */
  private async run(): Promise<void> {
    while (!this.closed) {
      const asked: Asked[] = [];
      for (const [partition, st] of this.partitions) {
        if (!st.paused && st.position !== undefined) asked.push({ partition, offset: st.position, epoch: st.epoch });
      }
      if (asked.length === 0) {
        await new Promise<void>((resolve) => (this.kick = resolve));
        continue;
      }
      try {
        await this.fetchRound(asked);
        this.failedRounds = 0;
      } catch (e) {
        if (this.closed) return;
        if (!(await this.survive(e))) return;
      }
    }
  }

  /** One fetch per leader of the asked partitions, side by side; each answer handed to the feed. */
  private async fetchRound(asked: readonly Asked[]): Promise<void> {
    const client = await this.client.get();
    // After a failed round the metadata is read again: a leader may have moved.
    const metadata = await client.metadata({ topics: [this.p.topic], forceUpdate: this.failedRounds > 0 }).catch(async (e: unknown) => {
      if (await this.p.topicExists().catch(() => true)) throw e;
      throw Object.assign(new Error(`Kafka topic "${this.p.topic}" does not exist`, { cause: e }), { missingTopic: true });
    });
    const topic = metadata.topics.get(this.p.topic);
    if (topic === undefined) throw Object.assign(new Error(`Kafka topic "${this.p.topic}" does not exist`), { missingTopic: true });
    const byLeader = new Map<number, Asked[]>();
    for (const a of asked) {
      const leader = topic.partitions[a.partition]?.leader ?? -1;
      byLeader.set(leader, [...(byLeader.get(leader) ?? []), a]);
    }
    const s = this.p.settings;
    await Promise.all(
      [...byLeader].map(async ([node, parts]) => {
        const topics: FetchRequestTopic[] = [
          {
            topicId: topic.id,
            partitions: parts.map((a) => ({
              partition: a.partition,
              fetchOffset: BigInt(a.offset),
              currentLeaderEpoch: -1,
              lastFetchedEpoch: -1,
              partitionMaxBytes: s.maxBytesPerPartition,
            })),
          },
        ];
        let response: FetchResponse;
        try {
          response = await client.fetch({ node, topics, maxWaitTime: s.maxWaitTimeMs, minBytes: s.minBytes, maxBytes: s.maxBytes });
        } catch (e) {
          // One partition's error fails the request, but the answer holds the others' records.
          const partial = (e as { response?: FetchResponse }).response;
          if (partial === undefined) throw e;
          response = partial;
        }
        await this.deliver(response, parts);
      }),
    );
  }

  private async deliver(response: FetchResponse, parts: readonly Asked[]): Promise<void> {
    const asked = new Map(parts.map((a) => [a.partition, a]));
    let missing: Error | undefined;
    for (const topic of response.responses) {
      for (const answer of topic.partitions) {
        const a = asked.get(answer.partitionIndex);
        if (a === undefined) continue;
        if (answer.errorCode === OFFSET_OUT_OF_RANGE) {
          await this.restartAtEarliest(a);
        } else if (answer.errorCode === UNKNOWN_TOPIC_OR_PARTITION || answer.errorCode === UNKNOWN_TOPIC_ID) {
          missing = Object.assign(new Error(`Kafka topic "${this.p.topic}" or its partition ${a.partition} is gone`), { missingTopic: true });
        } else if (answer.errorCode === 0) {
          this.handOver(a, answer.records ?? []);
        }
      }
    }
    if (missing !== undefined) throw missing;
  }

  /** The partition's records as one batch for the feed (control batches left out), without an object per record. */
  private handOver(a: Asked, batches: readonly RecordsBatch[]): void {
    const kept: RecordsBatch['records'][number][] = [];
    const offsets: number[] = [];
    let nextOffset = a.offset;
    for (const batch of batches) {
      const first = Number(batch.firstOffset);
      nextOffset = Math.max(nextOffset, first + batch.lastOffsetDelta + 1);
      if ((batch.attributes & CONTROL_BATCH) !== 0) continue;
      for (const record of batch.records) {
        const offset = first + record.offsetDelta;
        // A batch starts where it was written: the records before the fetched offset were read before.
        if (offset < a.offset) continue;
        kept.push(record);
        offsets.push(offset);
      }
    }
    const records: FetchedRecords = {
      length: kept.length,
      offset: (i) => offsets[i]!,
      key: (i) => kept[i]!.key,
      value: (i) => kept[i]!.value,
    };
    // A fetch in flight when its partition was closed may still bring records: they are dropped,
    // not handed over nor counted.
    if (!this.partitions.has(a.partition) || (records.length === 0 && nextOffset === a.offset)) return;
    const batch: FetchedBatch = {
      partition: a.partition,
      fetchedOffset: a.offset,
      records,
      nextOffset,
      isStale: () => this.partitions.get(a.partition)?.epoch !== a.epoch,
      took: (offset) => {
        const st = this.partitions.get(a.partition);
        if (st !== undefined && st.epoch === a.epoch) st.position = offset;
      },
      pause: () => this.pause(a.partition),
    };
    this.p.onBatch(batch);
  }

  /** A fetch below the log's start (retention removed it): the partition goes on from its earliest record. */
  private async restartAtEarliest(a: Asked): Promise<void> {
    const earliest = await this.p.earliestOffset(a.partition);
    const st = this.partitions.get(a.partition);
    if (st === undefined || st.epoch !== a.epoch) return;
    this.p.log.warn(
      { event: 'ingest.offset-out-of-range', partition: a.partition, offset: a.offset, earliest },
      'the offset to fetch is not in the partition: going on from its earliest record',
    );
    st.position = earliest;
    st.epoch += 1;
  }

  /** After a failed round: waits and goes on (true), or stops the dataset's reads (a topic gone for good). */
  private async survive(e: unknown): Promise<boolean> {
    this.failedRounds += 1;
    const missingTopic = (e as { missingTopic?: unknown }).missingTopic === true;
    if (missingTopic && this.failedRounds >= MISSING_TOPIC_ROUNDS) {
      this.partitions.clear();
      this.p.onFail(e);
      return false;
    }
    const delayMs = Math.min(100 * 2 ** (this.failedRounds - 1), MAX_BACKOFF_MS);
    if (this.failedRounds === 1 || this.failedRounds % 10 === 0) {
      this.p.log.warn({ err: e, failedRounds: this.failedRounds, retryInMs: delayMs }, 'fetching the dataset\u2019s partitions failed; trying again');
    }
    await new Promise<void>((resolve) => {
      const t = setTimeout(resolve, delayMs);
      this.kick = () => {
        clearTimeout(t);
        resolve();
      };
    });
    return !this.closed;
  }
}
