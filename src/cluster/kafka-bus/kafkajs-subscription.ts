// One bus subscription on kafkajs: one consumer and group member, which positions itself whenever
// it is given the topic and hands the records to the reader one at a time.
import type { Consumer, Kafka } from 'kafkajs';
import type { BusSubscription } from '../bus.js';
import { newestSubscriptionOwns } from './assigner.js';
import { kafkaCall, kafkaError, KafkaBusError } from './errors.js';
import { MemberPosition } from './member-position.js';
import { BusRecordReader } from './record-reader.js';
import type { SubscriptionParams } from './subscription-params.js';

/**
 * Restarts of a consumer whose first join failed with an error Kafka calls retriable (a group
 * coordinator still loading its offsets after a broker start, a coordinator that moved, a broker
 * away), each after kafkajs's own retries: then `subscribe` fails with the last error.
 */
const FIRST_JOIN_RESTARTS = 3;

type EachMessage = (payload: { message: { offset: string; value: Buffer | null; headers?: Record<string, unknown> } }) => Promise<void>;

/** One subscription: one kafkajs consumer, one group member. */
export class KafkajsSubscription implements BusSubscription {
  private consumer: Consumer;
  private readonly position: MemberPosition;
  /** Consumers restarted before the first join (FIRST_JOIN_RESTARTS). */
  private restartsBeforeJoin = 0;
  private closing: Promise<void> | undefined;
  private readonly reader: BusRecordReader;
  private readonly eachMessage: EachMessage = async ({ message }) => {
    if (this.closing !== undefined || !this.position.take(Number(message.offset))) return;
    await this.reader.read({ offset: Number(message.offset), value: message.value, headers: message.headers });
  };

  constructor(
    private readonly kafka: Kafka,
    private readonly p: SubscriptionParams,
  ) {
    this.position = new MemberPosition(p);
    this.reader = new BusRecordReader(p);
    this.consumer = this.makeConsumer();
  }

  private makeConsumer(): Consumer {
    const p = this.p;
    const consumer = this.kafka.consumer({
      groupId: p.group,
      partitionAssigners: [newestSubscriptionOwns(p.openedAt)],
      sessionTimeout: p.settings.sessionTimeoutMs,
      heartbeatInterval: p.settings.heartbeatIntervalMs,
      rebalanceTimeout: p.settings.rebalanceTimeoutMs,
      maxWaitTimeInMs: p.settings.maxWaitTimeMs,
      allowAutoTopicCreation: false,
      retry: {
        // kafkajs asks only for errors it deems retriable. After the first join it rejoins on its
        // own; before it, a few times more, then subscribe() fails.
        restartOnFailure: async (error) => this.restartOnFailure(error),
      },
    });
    consumer.on(consumer.events.GROUP_JOIN, (event) => {
      if (consumer === this.consumer) this.onJoin(event.payload.memberAssignment);
    });
    consumer.on(consumer.events.CRASH, (event) => {
      if (consumer !== this.consumer) return;
      const { error, restart } = event.payload;
      if (!this.position.isReady) {
        if (!restart) this.position.failOpen(kafkaError(`subscribing to ${p.topic} as group ${p.group}`, { topic: p.topic, group: p.group }, error));
      } else if (this.closing === undefined) {
        p.log.error(
          { event: 'bus.consumer.crashed', err: error, restart },
          restart ? 'bus consumer failed: it restarts' : 'bus consumer failed for good: a new one replaces it',
        );
        // kafkajs does not restart a consumer after an error it deems final; a subscription that
        // silently stopped would leave its node a member that hears nothing. A new consumer joins
        // the group again and goes on from this subscription's position (see onJoin).
        if (!restart) setTimeout(() => void this.replaceConsumer(), p.settings.heartbeatIntervalMs);
      }
    });
    return consumer;
  }

  private restartOnFailure(error: Error): boolean {
    if (this.closing !== undefined) return false;
    if (this.position.isReady) return true;
    if (this.restartsBeforeJoin >= FIRST_JOIN_RESTARTS) return false;
    this.restartsBeforeJoin += 1;
    this.p.log.warn(
      { event: 'bus.consumer.join-retried', err: error, attempt: this.restartsBeforeJoin, of: FIRST_JOIN_RESTARTS },
      'joining the bus group failed with an error Kafka calls retriable: the consumer starts again',
    );
    return true;
  }

  private async replaceConsumer(): Promise<void> {
    if (this.closing !== undefined) return;
    const { topic, group } = this.p;
    this.position.owns = false;
    const consumer = this.makeConsumer();
    this.consumer = consumer;
    try {
      await consumer.connect();
      await consumer.subscribe({ topics: [topic], fromBeginning: this.p.fromBeginning });
      await consumer.run({ autoCommit: false, eachMessage: this.eachMessage });
    } catch (e) {
      if (consumer !== this.consumer || this.closing !== undefined) return;
      this.p.log.error({ event: 'bus.consumer.crashed', err: e, topic, group }, 'a replacement bus consumer could not start: trying again');
      setTimeout(() => void this.replaceConsumer(), this.p.settings.sessionTimeoutMs);
    }
  }

  async open(): Promise<void> {
    const { topic, group } = this.p;
    try {
      await kafkaCall('connecting a consumer', { topic, group }, () => this.consumer.connect());
      await kafkaCall('subscribing a consumer', { topic, group }, () => this.consumer.subscribe({ topics: [topic], fromBeginning: this.p.fromBeginning }));
      await kafkaCall('starting a consumer', { topic, group }, () => this.consumer.run({ autoCommit: false, eachMessage: this.eachMessage }));
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
    await kafkaCall(`committing offset ${capped}`, { topic, group }, () => this.consumer.commitOffsets([{ topic, partition: 0, offset: String(capped) }]));
  }

  close(): Promise<void> {
    this.closing ??= (async () => {
      this.reader.close();
      this.position.failOpen(
        new KafkaBusError('CLOSED', `subscription to ${this.p.topic} closed before it was open`, { topic: this.p.topic, group: this.p.group }),
      );
      try {
        await this.consumer.disconnect();
      } catch (e) {
        this.p.log.warn({ err: e }, 'bus consumer disconnect failed');
      } finally {
        this.p.onClosed();
      }
    })();
    return this.closing;
  }

  /**
   * Called synchronously by kafkajs after each join, before it fetches anything: pause the
   * partition until its position is fixed, then seek there and resume.
   */
  private onJoin(assignment: Record<string, number[] | undefined>): void {
    const owns = (assignment[this.p.topic] ?? []).includes(0);
    const partitions = [{ topic: this.p.topic, partitions: [0] }];
    if (owns) this.consumer.pause(partitions);
    void this.position.joined(owns).then((offset) => {
      if (offset === undefined || this.closing !== undefined) return;
      try {
        this.consumer.seek({ topic: this.p.topic, partition: 0, offset: String(offset) });
        this.consumer.resume(partitions);
      } catch (e) {
        // The consumer stopped in between (a crash); its restart joins again and repositions.
        this.p.log.debug({ err: e }, 'bus subscription could not seek');
      }
      this.position.markReady();
    });
  }
}
