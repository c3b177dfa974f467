// The one kafkajs consumer of a dataset, in a group of its own whose assigner hands it exactly the
// partitions of the shards open here. kafkajs cannot change an assignment while it runs, so a
// change of the open shards recreates the consumer, once per burst of changes.
import type { Consumer, EachBatchPayload, Kafka } from 'kafkajs';
import { hasKafkaErrorType } from '../../cluster/kafka-retry.js';
import { ownedPartitionsAssigner } from './assigner.js';
import { fetchedMessages, type FeedConsumer, type FeedConsumerParams, type FeedConsumerStats, type FetchedBatch } from './feed-client.js';

interface LiveConsumer {
  readonly consumer: Consumer;
  readonly groupId: string;
  /** The partitions its assigner hands out. */
  readonly partitions: readonly number[];
  /** When the first change that led to it happened. */
  readonly requestedAt: number;
  joined: boolean;
  assigned: readonly number[];
}

export interface KafkajsFeedConsumerParams extends FeedConsumerParams {
  readonly kafka: Kafka;
  /** Stops a consumer in the background and deletes its group. */
  readonly retire: (consumer: Consumer, groupId: string) => void;
  /** Whether the topic exists: a consumer that meets an unknown topic stops for good when it does not. */
  readonly topicExists: () => Promise<boolean>;
}

/** Runs, recreates and retires the dataset's consumer; seeks, pauses and resumes its partitions. */
export class KafkajsFeedConsumer implements FeedConsumer {
  private current: LiveConsumer | undefined;
  private generation = 0;
  private timer: NodeJS.Timeout | undefined;
  private changedAt: number | undefined;
  private work: Promise<void> = Promise.resolve();
  private retryDelayMs = 0;
  private lastRecreateMs: number | undefined;
  private closed = false;

  constructor(private readonly p: KafkajsFeedConsumerParams) {}

  /**
   * Recreates the consumer `delayMs` after the first change not yet applied; changes in the
   * meantime ride along (opening 8 shards at once recreates once). Recreates never overlap.
   */
  schedule(delayMs: number): void {
    if (this.closed || this.timer !== undefined) return;
    this.changedAt ??= Date.now();
    this.timer = setTimeout(() => {
      this.timer = undefined;
      // reconcile handles Kafka's errors itself; anything else it throws stops the dataset's reads loudly.
      this.work = this.work.then(() => this.reconcile()).catch((e: unknown) => this.p.onFail(e));
    }, delayMs);
  }

  /** Continues `partition` from `offset`. Before the consumer runs (or joins) the join applies the position instead. */
  seek(partition: number, offset: number): void {
    const live = this.current;
    if (live !== undefined) tryConsumer(() => live.consumer.seek({ topic: this.p.topic, partition, offset: String(offset) }));
  }

  resume(partition: number): void {
    const live = this.current;
    if (live !== undefined) tryConsumer(() => live.consumer.resume([{ topic: this.p.topic, partitions: [partition] }]));
  }

  pause(partition: number): void {
    const live = this.current;
    if (live !== undefined) tryConsumer(() => live.consumer.pause([{ topic: this.p.topic, partitions: [partition] }]));
  }

  /**
   * Commits consumed offsets in the current consumer's group (it is the group's only member), for
   * Kafka's own lag tools; partitions it is not assigned are left out. Never throws.
   */
  async commit(offsets: readonly { readonly partition: number; readonly offset: number }[]): Promise<void> {
    const live = this.current;
    if (live === undefined || !live.joined) return;
    const mine = offsets.filter((o) => live.assigned.includes(o.partition));
    if (mine.length === 0) return;
    try {
      await live.consumer.commitOffsets(mine.map((o) => ({ topic: this.p.topic, partition: o.partition, offset: String(o.offset) })));
    } catch (e) {
      this.p.log.debug({ err: e, groupId: live.groupId }, 'consumed offsets not committed to Kafka; the next interval commits later ones');
    }
  }

  stats(): FeedConsumerStats {
    return {
      groupId: this.current?.groupId,
      assigned: this.current?.assigned ?? [],
      generations: this.generation,
      lastRecreateMs: this.lastRecreateMs,
    };
  }

  async shutdown(): Promise<void> {
    this.closed = true;
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    await this.work;
    const live = this.current;
    this.current = undefined;
    if (live !== undefined) this.p.retire(live.consumer, live.groupId);
  }

  private async reconcile(): Promise<void> {
    if (this.closed) return;
    const wanted = this.p.wanted().sort((a, b) => a - b);
    const requestedAt = this.changedAt ?? Date.now();
    this.changedAt = undefined;
    const old = this.current;
    if (old !== undefined && sameNumbers(old.partitions, wanted)) return;
    if (old !== undefined) {
      this.current = undefined;
      this.p.retire(old.consumer, old.groupId);
    }
    if (wanted.length === 0) return;

    this.generation += 1;
    const { settings: s, topic } = this.p;
    const groupId = `${s.groupPrefix}.${this.p.dataset}.${s.instanceId}.${this.generation}`;
    const consumer = this.p.kafka.consumer({
      groupId,
      partitionAssigners: [ownedPartitionsAssigner(topic, wanted, groupId)],
      allowAutoTopicCreation: false,
      maxBytesPerPartition: s.maxBytesPerPartition,
      maxBytes: s.maxBytes,
      minBytes: s.minBytes,
      maxWaitTimeInMs: s.maxWaitTimeMs,
      retry: {
        // kafkajs restarts a consumer after every error it calls retriable, an unknown topic
        // included: a deleted topic would be fetched for ever while reads return nothing.
        restartOnFailure: async (e) => !hasKafkaErrorType(e, 'UNKNOWN_TOPIC_OR_PARTITION') || (await this.p.topicExists().catch(() => true)),
      },
    });
    const live: LiveConsumer = { consumer, groupId, partitions: wanted, requestedAt, joined: false, assigned: [] };
    this.current = live;
    consumer.on(consumer.events.GROUP_JOIN, (e) => this.onJoin(live, e.payload.memberAssignment[topic] ?? []));
    consumer.on(consumer.events.CRASH, (e) => this.onCrash(live, e.payload.error, e.payload.restart));
    try {
      await consumer.connect();
      await consumer.subscribe({ topics: [topic], fromBeginning: true });
      // Resolves once the group is joined (a failed join is a CRASH event instead).
      await consumer.run({ autoCommit: false, eachBatchAutoResolve: false, eachBatch: (payload) => this.onBatch(live, payload) });
      this.retryDelayMs = 0;
    } catch (e) {
      if (this.current !== live) return;
      this.current = undefined;
      this.p.retire(consumer, groupId);
      if (isRetriable(e)) {
        this.retryDelayMs = Math.min(Math.max(this.retryDelayMs * 2, 200), 5_000);
        this.p.log.warn({ err: e, retryInMs: this.retryDelayMs }, 'starting the Kafka ingestion consumer failed; trying again');
        this.schedule(this.retryDelayMs);
      } else {
        this.p.onFail(e);
      }
    }
  }

  /** Every join (the first, and any rejoin or restart inside kafkajs) starts each partition where its buffer ends. */
  private onJoin(live: LiveConsumer, assigned: readonly number[]): void {
    if (this.current !== live) return;
    const { topic, log } = this.p;
    live.assigned = [...assigned].sort((a, b) => a - b);
    if (!sameNumbers(live.assigned, live.partitions)) {
      log.warn(
        { expected: live.partitions, assigned: live.assigned, groupId: live.groupId },
        'the Kafka ingestion consumer was assigned other partitions than the open shards',
      );
    }
    const plan = this.p.onJoin(live.assigned);
    for (const { partition, offset } of plan.start) tryConsumer(() => live.consumer.seek({ topic, partition, offset: String(offset) }));
    if (plan.pause.length > 0) tryConsumer(() => live.consumer.pause([{ topic, partitions: [...plan.pause] }]));
    if (plan.start.length > 0) tryConsumer(() => live.consumer.resume([{ topic, partitions: plan.start.map((s) => s.partition) }]));
    if (!live.joined) {
      live.joined = true;
      this.lastRecreateMs = Date.now() - live.requestedAt;
      log.info(
        { event: 'ingest.consumer-joined', groupId: live.groupId, partitions: live.assigned, durationMs: this.lastRecreateMs },
        'Kafka ingestion consumer joined',
      );
    }
  }

  private onCrash(live: LiveConsumer, error: Error, restart: boolean): void {
    if (this.current !== live) return;
    if (restart) {
      this.p.log.warn({ err: error, groupId: live.groupId }, 'Kafka ingestion consumer crashed; kafkajs restarts it');
      return;
    }
    this.current = undefined;
    this.p.retire(live.consumer, live.groupId);
    this.p.onFail(error);
  }

  private async onBatch(live: LiveConsumer, payload: EachBatchPayload): Promise<void> {
    // The last fetch of a consumer being replaced: the next one fetches the same records again.
    if (this.current !== live || this.closed) return;
    this.p.onBatch(fetchedBatch(payload));
  }
}

/** kafkajs's batch as the feed takes it. */
function fetchedBatch(payload: EachBatchPayload): FetchedBatch {
  const { batch } = payload;
  return {
    partition: batch.partition,
    // kafkajs's batch knows the offset it was fetched at, though its types do not say so.
    fetchedOffset: Number((batch as { fetchedOffset?: string }).fetchedOffset ?? batch.firstOffset()),
    records: fetchedMessages(batch.messages),
    nextOffset: Number(batch.lastOffset()) + 1,
    isStale: () => payload.isStale(),
    // Resolving up to the batch's last offset moves kafkajs past any trailing control records too.
    took: (offset) => payload.resolveOffset(String(offset - 1)),
    pause: () => payload.pause(),
  };
}

function sameNumbers(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

function isRetriable(e: unknown): boolean {
  return (
    typeof e === 'object' && e !== null && (e as { retriable?: unknown }).retriable === true && (e as { type?: unknown }).type !== 'UNKNOWN_TOPIC_OR_PARTITION'
  );
}

/** kafkajs refuses seek/pause/resume while its consumer is between runs; the next join applies them. */
function tryConsumer(op: () => void): void {
  try {
    op();
  } catch {
    // Nothing to do: see above.
  }
}
