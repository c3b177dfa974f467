// One bus subscription on @platformatic/kafka: a group member (the library joins, heartbeats on its
// own timer and rejoins when the group rebalances) and a fetch loop of our own that reads partition
// 0 from where the member's position says, whenever the group gave it the topic.
import type { ConnectionPool, Consumer, GroupAssignment, RecordsBatch } from '@platformatic/kafka';
import type { BusSubscription } from '../bus.js';
import type { KafkaConnection } from '../kafka-client.js';
import { retryRetriable } from '../kafka-retry.js';
import { CONTROL_BATCH, loadPlatformaticKafka, OFFSET_OUT_OF_RANGE, platformaticOptions } from '../platformatic-kafka.js';
import { newestOwnsAssigner, newestOwnsProtocol } from './assigner.js';
import { KafkaBusError, kafkaCall, kafkaError } from './errors.js';
import { MemberPosition } from './member-position.js';
import { BusRecordReader, type FetchedBusRecord } from './record-reader.js';
import type { SubscriptionParams } from './subscription-params.js';

/** What one fetch asks for at most, as kafkajs's consumer does by default. */
const MAX_BYTES_PER_PARTITION = 1024 * 1024;
const MAX_BYTES = 10 * 1024 * 1024;
const MAX_BACKOFF_MS = 2_000;

export class PlatformaticSubscription implements BusSubscription {
  private consumer: Consumer | undefined;
  private readonly position: MemberPosition;
  private readonly reader: BusRecordReader;
  private closing: Promise<void> | undefined;
  /** The join whose position is fixed: the loop fetches only for it. */
  private positionedJoin = -1;
  private loop: Promise<void> | undefined;
  /** Ends the loop's wait for work. */
  private kick: (() => void) | undefined;
  private failedFetches = 0;
  /**
   * The fetch loop's own broker connections. On the member's connections a long-poll fetch (up to
   * the bus's wait) would hold the member's heartbeats and rejoins behind it, and every rebalance of
   * the group would wait for it.
   */
  private fetchConnections: ConnectionPool | undefined;

  constructor(
    private readonly connection: KafkaConnection,
    private readonly p: SubscriptionParams,
    /** The topic's earliest offset: where the member goes on after a fetch below the log's start. */
    private readonly earliestOffset: () => Promise<number>,
  ) {
    this.position = new MemberPosition(p);
    this.reader = new BusRecordReader(p);
  }

  async open(): Promise<void> {
    const { topic, group } = this.p;
    try {
      // A group coordinator still loading after a broker start, or one that moved: tried again.
      await kafkaCall('joining the bus group', { topic, group }, () => retryRetriable(() => this.join()));
      this.loop = this.run();
      await this.position.whenOpen;
    } catch (e) {
      await this.close();
      throw e;
    }
  }

  async commit(offset: number): Promise<void> {
    const { topic, group } = this.p;
    this.position.checkCommit(offset, this.closing !== undefined);
    const capped = this.reader.commitLimit(offset);
    const consumer = this.consumer;
    if (consumer === undefined)
      throw new KafkaBusError('NOT_OWNER', `cannot commit on ${topic} for group ${group}: the subscription is rejoining its group`, { topic, group });
    await kafkaCall(`committing offset ${capped}`, { topic, group }, () =>
      consumer.commit({ offsets: [{ topic, partition: 0, offset: BigInt(capped), leaderEpoch: -1 }] }),
    );
  }

  close(): Promise<void> {
    this.closing ??= (async () => {
      this.reader.close();
      this.position.failOpen(
        new KafkaBusError('CLOSED', `subscription to ${this.p.topic} closed before it was open`, { topic: this.p.topic, group: this.p.group }),
      );
      this.wake();
      try {
        await this.leave(this.consumer);
      } finally {
        await this.fetchConnections?.close().catch(() => undefined);
        this.p.onClosed();
      }
    })();
    return this.closing;
  }

  /** A new consumer joins the group; its joins position the member (`onJoin`). */
  private async join(): Promise<void> {
    if (this.closing !== undefined) return;
    const p = this.p;
    const { Consumer, ConnectionPool } = await loadPlatformaticKafka();
    const options = platformaticOptions(this.connection);
    this.fetchConnections ??= new ConnectionPool(options.clientId, options);
    const consumer: Consumer = new Consumer({
      ...options,
      groupId: p.group,
      sessionTimeout: p.settings.sessionTimeoutMs,
      heartbeatInterval: p.settings.heartbeatIntervalMs,
      rebalanceTimeout: p.settings.rebalanceTimeoutMs,
      protocols: [newestOwnsProtocol(p.openedAt)],
      partitionAssigner: newestOwnsAssigner,
      autocommit: false,
      autocreateTopics: false,
    });
    this.consumer = consumer;
    // The member's subscription names the topic: the group's assigner reads it from there.
    consumer.topics.track(p.topic);
    consumer.on('consumer:group:join', (event: { assignments: readonly GroupAssignment[] }) => {
      if (consumer === this.consumer) this.onJoin(event.assignments);
    });
    let heartbeatsFailing = false;
    consumer.on('consumer:heartbeat:end', () => (heartbeatsFailing = false));
    // Said once per run of failures: the library logs nothing of its own through the bus's log.
    consumer.on('consumer:heartbeat:error', (event: { error?: unknown }) => {
      if (consumer !== this.consumer || heartbeatsFailing) return;
      heartbeatsFailing = true;
      p.log.warn(
        { event: 'bus.consumer.heartbeat-failed', err: event.error },
        'a bus group heartbeat failed (a broker or the group coordinator away?): the client retries',
      );
    });
    consumer.on('consumer:heartbeat:stalled', (event: { stalledFor: number; lastError?: unknown }) => {
      if (consumer === this.consumer)
        p.log.warn(
          { event: 'bus.consumer.heartbeat-stalled', stalledFor: event.stalledFor, err: event.lastError },
          'bus group heartbeats have not been answered for a rebalance timeout (a broker or the group coordinator away?): the client keeps retrying',
        );
    });
    // The library stops heartbeating after a rejoin that failed for good: the member is out of its group.
    consumer.on('error', (error: unknown) => {
      if (consumer === this.consumer) this.onConsumerFailed(consumer, error);
    });
    try {
      await consumer.joinGroup({});
    } catch (e) {
      if (consumer === this.consumer) this.consumer = undefined;
      await consumer.close(true).catch(() => undefined);
      throw e;
    }
  }

  private onJoin(assignments: readonly GroupAssignment[]): void {
    const owns = assignments.some((a) => a.topic === this.p.topic && a.partitions.includes(0));
    const positioned = this.position.joined(owns);
    const join = this.position.currentJoin;
    void positioned.then((offset) => {
      if (offset === undefined || this.closing !== undefined) return;
      this.positionedJoin = join;
      this.position.markReady();
      this.wake();
    });
  }

  private onConsumerFailed(consumer: Consumer, error: unknown): void {
    const { topic, group } = this.p;
    if (!this.position.isReady) {
      this.position.failOpen(kafkaError(`subscribing to ${topic} as group ${group}`, { topic, group }, error));
      return;
    }
    if (this.closing !== undefined) return;
    this.p.log.error({ event: 'bus.consumer.crashed', err: error, restart: true }, 'bus consumer left its group: a new one replaces it');
    // A subscription that silently stopped would leave its node a member that hears nothing. A new
    // consumer joins the group again and goes on from this subscription's position (see onJoin).
    this.consumer = undefined;
    this.position.owns = false;
    void this.leave(consumer);
    const replace = (): void => {
      this.join().catch((e: unknown) => {
        if (this.closing !== undefined) return;
        this.p.log.error({ event: 'bus.consumer.crashed', err: e, topic, group }, 'a replacement bus consumer could not join: trying again');
        setTimeout(replace, this.p.settings.sessionTimeoutMs);
      });
    };
    setTimeout(replace, this.p.settings.heartbeatIntervalMs);
  }

  private async leave(consumer: Consumer | undefined): Promise<void> {
    if (consumer === undefined) return;
    try {
      await consumer.close();
    } catch (e) {
      // Leaving the group failed (a broker away): the broker drops the member after its session.
      this.p.log.warn({ err: e }, 'bus consumer could not leave its group');
      await consumer.close(true).catch(() => undefined);
    }
  }

  private wake(): void {
    const kick = this.kick;
    this.kick = undefined;
    kick?.();
  }

  /** Reads the topic while the member owns it and knows where; waits otherwise. */
  private async run(): Promise<void> {
    while (this.closing === undefined) {
      const join = this.position.currentJoin;
      const from = this.position.position;
      const consumer = this.consumer;
      const connections = this.fetchConnections;
      if (!this.position.owns || this.positionedJoin !== join || from === undefined || consumer === undefined || connections === undefined) {
        await new Promise<void>((resolve) => (this.kick = resolve));
        continue;
      }
      try {
        const records = await this.fetch(consumer, connections, from);
        this.failedFetches = 0;
        for (const record of records) {
          // A join in between repositions the member: what it fetched before may be stale.
          if (this.closing !== undefined || !this.position.isCurrent(join)) break;
          if (this.position.take(record.offset)) await this.reader.read(record);
        }
      } catch (e) {
        if (this.closing !== undefined) return;
        this.failedFetches += 1;
        const backoffMs = Math.min(MAX_BACKOFF_MS, 50 * 2 ** Math.min(this.failedFetches, 6));
        this.p.log.debug({ event: 'bus.fetch.failed', err: e, attempt: this.failedFetches, backoffMs }, 'bus fetch failed: trying again');
        await new Promise((resolve) => setTimeout(resolve, backoffMs));
      }
    }
  }

  /** One fetch of partition 0 from its leader, from `from`, on `connections`: the records at or after it, in order. */
  private async fetch(consumer: Consumer, connections: ConnectionPool, from: number): Promise<FetchedBusRecord[]> {
    const { topic, settings } = this.p;
    // After a failed fetch the metadata is read again: a leader may have moved.
    const metadata = await consumer.metadata({ topics: [topic], forceUpdate: this.failedFetches > 0 });
    const t = metadata.topics.get(topic);
    const leader = t?.partitions[0]?.leader ?? -1;
    if (t === undefined || leader < 0) throw new Error(`topic ${topic} has no leader for partition 0`);
    const response = await consumer.fetch({
      node: leader,
      connectionPool: connections,
      topics: [
        {
          topicId: t.id,
          partitions: [{ partition: 0, fetchOffset: BigInt(from), currentLeaderEpoch: -1, lastFetchedEpoch: -1, partitionMaxBytes: MAX_BYTES_PER_PARTITION }],
        },
      ],
      maxWaitTime: settings.maxWaitTimeMs,
      minBytes: 1,
      maxBytes: MAX_BYTES,
    });
    const answer = response.responses.flatMap((r) => r.partitions).find((a) => a.partitionIndex === 0);
    if (answer === undefined) return [];
    if (answer.errorCode === OFFSET_OUT_OF_RANGE) {
      await this.restartAtEarliest(from);
      return [];
    }
    if (answer.errorCode !== 0) throw new Error(`fetching ${topic} failed with Kafka error code ${answer.errorCode}`);
    return recordsFrom(answer.records ?? [], from);
  }

  /** A fetch below the log's start (retention removed the records): the member goes on from the earliest record there is. */
  private async restartAtEarliest(from: number): Promise<void> {
    const earliest = await this.earliestOffset();
    this.p.log.warn({ event: 'bus.records.gone', from, earliest }, 'bus records before the earliest one kept were removed: going on from the earliest');
    this.position.skipTo(earliest);
  }
}

/** The records of fetched batches at or after `from` (a batch starts where it was written), control batches left out. */
function recordsFrom(batches: readonly RecordsBatch[], from: number): FetchedBusRecord[] {
  const records: FetchedBusRecord[] = [];
  for (const batch of batches) {
    if ((batch.attributes & CONTROL_BATCH) !== 0) continue;
    const first = Number(batch.firstOffset);
    for (const record of batch.records) {
      const offset = first + record.offsetDelta;
      if (offset < from) continue;
      records.push({ offset, value: record.value ?? null, headers: headersOf(record.headers) });
    }
  }
  return records;
}

/** A record's headers by name: a Buffer each, an array of them when a name repeats (as kafkajs gives them). */
function headersOf(headers: readonly (readonly [Buffer | null, Buffer | null])[]): Record<string, unknown> | undefined {
  if (headers.length === 0) return undefined;
  const byName: Record<string, Buffer | Buffer[]> = {};
  for (const [key, value] of headers) {
    if (key === null || value === null) continue;
    const name = key.toString('utf8');
    const seen = byName[name];
    byName[name] = seen === undefined ? value : Array.isArray(seen) ? [...seen, value] : [seen, value];
  }
  return byName;
}
