// One bus subscription: one kafkajs consumer and group member, which positions itself whenever it
// is given the topic and hands the records to the handler one at a time.
import type { Consumer, Kafka } from 'kafkajs';
import type { Logger } from 'pino';
import { decodeLabels, type BusRecord, type BusSubscription, type RecordHandler, type SubscribeOptions } from '../bus.js';
import { ChunkedReader } from '../chunked-reader.js';
import { processEventLoopSlice } from '../event-loop-slice.js';
import type { Clock } from '../clock.js';
import { newestSubscriptionOwns } from './assigner.js';
import { readChunkHeaders, readLabelsHeader } from './chunks.js';
import { KafkaBusError, kafkaCall, kafkaError } from './errors.js';
import type { KafkaBusSettings } from './settings.js';

/** What the bus hands a subscription: its topic, group and handler, and where it starts. */
export interface SubscriptionParams {
  readonly committedOffset: () => Promise<number | undefined>;
  readonly onClosed: () => void;
  readonly kafka: Kafka;
  readonly settings: KafkaBusSettings;
  readonly log: Logger;
  readonly topic: string;
  readonly group: string;
  readonly handler: RecordHandler;
  readonly onError: SubscribeOptions['onError'];
  readonly skip: SubscribeOptions['skip'];
  readonly startIfUncommitted: number;
  readonly openedAt: number;
  readonly fromBeginning: boolean;
  /** The bus's clock: the chunk timeout's time. */
  readonly clock: Clock;
}

/**
 * Restarts of a consumer whose first join failed with an error Kafka calls retriable (a group
 * coordinator still loading its offsets after a broker start, a coordinator that moved, a broker
 * away), each after kafkajs's own retries: then `subscribe` fails with the last error.
 */
const FIRST_JOIN_RESTARTS = 3;

/** Chunked messages being passed over at most (their ids); far more than ever interleave. */
const MAX_SKIPPED_MESSAGES = 256;

type EachMessage = (payload: { message: { offset: string; value: Buffer | null; headers?: Record<string, unknown> } }) => Promise<void>;

/** One subscription: one kafkajs consumer, one group member. */
export class KafkaSubscription implements BusSubscription {
  private consumer: Consumer;
  /** Whether this member was given partition 0 at its last join. */
  private owns = false;
  /** The next offset to deliver; unknown until the member first owns the topic. */
  private position: number | undefined;
  /** Counts joins, so that a positioning overtaken by a newer join does nothing. */
  private joins = 0;
  private ready = false;
  /** Consumers restarted before the first join (FIRST_JOIN_RESTARTS). */
  private restartsBeforeJoin = 0;
  private readonly opened: Deferred<void>;
  /** Stops waiting for the handler in flight, if any. */
  private abandonInFlight: (() => void) | undefined;
  private closing: Promise<void> | undefined;
  /** The chunked messages this subscription is assembling: slices of their JSON bytes. */
  private readonly chunks: ChunkedReader<Buffer>;
  private readonly eachMessage: EachMessage = async ({ message }) => this.onMessage(message.offset, message.value, message.headers);
  /** Chunked messages passed over at their first chunk (`SubscribeOptions.skip`): their other chunks are too. */
  private readonly skippedMessages = new Set<string>();
  /** A fetched batch is read in slices of the event loop's time, not in one task (`EventLoopSlice`). */
  private readonly slice = processEventLoopSlice();

  constructor(private readonly p: SubscriptionParams) {
    this.opened = deferred();
    this.consumer = this.makeConsumer();
    this.chunks = new ChunkedReader<Buffer>({
      topic: p.topic,
      clock: p.clock,
      limits: p.settings,
      report: (error, record) => {
        p.log.warn(
          { event: 'bus.message.incomplete', offset: record.offset, reason: error instanceof Error ? error.message : String(error) },
          'chunked bus message given up',
        );
        this.report(error, record);
      },
    });
  }

  private makeConsumer(): Consumer {
    const p = this.p;
    const consumer = p.kafka.consumer({
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
      if (!this.ready) {
        if (!restart) this.opened.reject(kafkaError(`subscribing to ${p.topic} as group ${p.group}`, { topic: p.topic, group: p.group }, error));
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
    if (this.ready) return true;
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
    this.owns = false;
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
      await this.opened.promise;
    } catch (e) {
      await this.close();
      throw e;
    }
  }

  async commit(offset: number): Promise<void> {
    const { topic, group } = this.p;
    if (!Number.isSafeInteger(offset) || offset < 0) throw new RangeError(`commit offset must be a non-negative integer, got ${offset}`);
    if (this.closing !== undefined)
      throw new KafkaBusError('CLOSED', `cannot commit on ${topic} for group ${group}: the subscription is closed`, { topic, group });
    if (!this.owns) {
      throw new KafkaBusError('NOT_OWNER', `cannot commit on ${topic} for group ${group}: a newer subscription of the group owns the topic`, { topic, group });
    }
    // Never past a message still being assembled: the group's next owner must read it whole.
    const capped = this.chunks.commitLimit(offset);
    if (capped < offset) this.p.log.debug({ event: 'bus.commit.capped', offset, committed: capped }, 'commit held at the first chunk of an incomplete message');
    await kafkaCall(`committing offset ${capped}`, { topic, group }, () => this.consumer.commitOffsets([{ topic, partition: 0, offset: String(capped) }]));
  }

  close(): Promise<void> {
    this.closing ??= (async () => {
      this.chunks.close();
      this.abandonInFlight?.();
      if (!this.ready)
        this.opened.reject(
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
    const join = ++this.joins;
    this.owns = (assignment[this.p.topic] ?? []).includes(0);
    this.p.log.debug(
      { event: 'bus.subscription.joined', owns: this.owns },
      this.owns ? 'bus subscription owns its topic' : 'bus subscription joined without the topic',
    );
    if (!this.owns) {
      this.markReady();
      return;
    }
    const partitions = [{ topic: this.p.topic, partitions: [0] }];
    this.consumer.pause(partitions);
    void this.fixPosition(join).then((offset) => {
      if (join !== this.joins || this.closing !== undefined) return;
      try {
        this.consumer.seek({ topic: this.p.topic, partition: 0, offset: String(offset) });
        this.consumer.resume(partitions);
      } catch (e) {
        // The consumer stopped in between (a crash); its restart joins again and repositions.
        this.p.log.debug({ err: e }, 'bus subscription could not seek');
      }
      this.markReady();
    });
  }

  /** The group's committed offset or the next unseen record, whichever is later. */
  private async fixPosition(join: number): Promise<number> {
    let committed: number | undefined;
    try {
      committed = await this.p.committedOffset();
    } catch (e) {
      this.p.log.error({ err: e, event: 'bus.position.unknown' }, 'cannot read the committed offset: going on from the position this subscription knows');
    }
    const next = this.position === undefined ? (committed ?? this.p.startIfUncommitted) : Math.max(this.position, committed ?? 0);
    if (join === this.joins) {
      this.position = next;
      this.p.log.debug({ event: 'bus.subscription.positioned', offset: next, committed }, 'bus subscription positioned');
    }
    return next;
  }

  private markReady(): void {
    if (this.ready) return;
    this.ready = true;
    this.opened.resolve();
  }

  private async onMessage(rawOffset: string, raw: Buffer | null, headers: Readonly<Record<string, unknown>> | undefined): Promise<void> {
    await this.slice.yieldIfSpent();
    if (this.closing !== undefined) return;
    const offset = Number(rawOffset);
    // Already delivered to this subscription (kafkajs may fetch from before the seek once).
    if (this.position !== undefined && offset < this.position) return;
    this.position = offset + 1;
    const { topic } = this.p;
    let bytes = raw;
    let what = `record ${offset}`;
    const read = readChunkHeaders(headers);
    if (read.kind === 'malformed') return this.malformed(offset, `record ${offset} of ${topic} is not a chunk: ${read.reason}`, raw);
    if (this.passesOver(read, headers)) return;
    if (read.kind === 'chunk') {
      if (raw === null) return this.malformed(offset, `record ${offset} of ${topic} is a chunk without a value`, raw);
      const outcome = this.chunks.read({ position: read.position, offset, piece: raw, bytes: raw.length });
      if (outcome.kind === 'invalid') return this.malformed(offset, `record ${offset} of ${topic} is not a chunk: ${outcome.reason}`, raw);
      if (outcome.kind === 'duplicate' || outcome.kind === 'finished') {
        // A chunk seen already, or of a message delivered or given up (and reported) before.
        this.p.log.debug({ event: 'bus.chunk.ignored', offset, id: read.position.id, index: read.position.index, why: outcome.kind }, 'bus chunk ignored');
        return;
      }
      if (outcome.kind === 'waiting') return;
      bytes = Buffer.concat(outcome.pieces, outcome.bytes);
      what = `message ${outcome.id} (${outcome.pieces.length} chunks, the last at offset ${offset})`;
    }
    const text = bytes === null ? null : bytes.toString('utf8');
    let value: unknown;
    try {
      if (text === null) throw new Error('the record has no value');
      value = JSON.parse(text);
    } catch (e) {
      return this.malformed(offset, `${what} of ${topic} is not JSON: ${e instanceof Error ? e.message : String(e)}`, bytes, e);
    }
    const record: BusRecord = { topic, offset, value };
    // close() ends this wait: it must not wait for a handler that never returns (a paused or dead
    // node's handler waits on its gate), and kafkajs leaves the group only after this returns.
    await new Promise<void>((resolve) => {
      this.abandonInFlight = resolve; // before the handler runs: it may call close() itself
      void this.deliver(record).then(resolve);
    });
    this.abandonInFlight = undefined;
  }

  /**
   * Whether the record is passed over unread: its labels say the handler needs nothing from it. A
   * chunked message is judged at its first chunk, so that it is passed over or read whole.
   */
  private passesOver(read: ReturnType<typeof readChunkHeaders>, headers: Readonly<Record<string, unknown>> | undefined): boolean {
    const { skip } = this.p;
    if (!skip) return false;
    if (read.kind === 'chunk') {
      const { id, index, count } = read.position;
      if (this.skippedMessages.has(id)) {
        if (index === count - 1) this.skippedMessages.delete(id);
        return true;
      }
      if (index !== 0) return false;
    }
    const json = readLabelsHeader(headers);
    const labels = json === undefined ? undefined : decodeLabels(json);
    if (!labels || !skip(labels)) return false;
    if (read.kind === 'chunk' && read.position.count > 1) {
      // Bounded: a message whose last chunk never comes must not hold its id for ever.
      if (this.skippedMessages.size >= MAX_SKIPPED_MESSAGES) this.skippedMessages.delete(this.skippedMessages.values().next().value!);
      this.skippedMessages.add(read.position.id);
    }
    return true;
  }

  private async deliver(record: BusRecord): Promise<void> {
    this.chunks.handlerStarted();
    try {
      await this.p.handler(record);
    } catch (error) {
      this.report(error, record);
    } finally {
      this.chunks.handlerEnded();
    }
  }

  /** A record (or a chunked message) that cannot be read: reported as `MALFORMED_RECORD` with its raw text, and skipped. */
  private malformed(offset: number, reason: string, raw: Buffer | null, cause?: unknown): void {
    const { topic, group } = this.p;
    const error = new KafkaBusError('MALFORMED_RECORD', reason, { topic, group, cause });
    this.p.log.warn({ event: 'bus.malformed', offset, reason }, 'malformed bus record skipped');
    this.report(error, { topic, offset, value: raw === null ? null : raw.toString('utf8') });
  }

  private report(error: unknown, record: BusRecord): void {
    if (!this.p.onError) {
      this.p.log.warn({ event: 'bus.handler.failed', offset: record.offset, err: error }, 'bus record not handled (no onError)');
      return;
    }
    try {
      this.p.onError(error, record);
    } catch (e) {
      this.p.log.warn({ err: e, offset: record.offset }, 'onError threw');
    }
  }
}

interface Deferred<T> {
  readonly promise: Promise<T>;
  readonly resolve: (value: T) => void;
  readonly reject: (error: unknown) => void;
}

function deferred<T>(): Deferred<T> {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  // The subscription may fail before anyone awaits it; its awaiting caller still sees the error.
  promise.catch(() => undefined);
  return { promise, resolve, reject };
}
