/**
 * An ordered, durable message log with offsets and consumer groups: Kafka topics in production, an
 * in-memory log in embedded mode. Values are plain JSON data.
 */
export interface BusRecord {
  readonly topic: string;
  readonly offset: number;
  readonly value: unknown;
}

export interface SubscribeOptions {
  /** Where a group with no committed position starts. Default `latest`. */
  readonly start?: 'earliest' | 'latest';
  /**
   * Where a group with no committed position starts, as an offset (it wins over `start`): a new
   * group that takes over from another where that one left off.
   */
  readonly startAt?: number;
  /**
   * Hears what a handler threw, a record that could not be read, and a message given up before
   * all its chunks arrived (`IncompleteMessageError`); delivery goes on with the next record.
   */
  readonly onError?: (error: unknown, record: BusRecord) => void;
  /**
   * Offered each record's labels before its value is read: true when the subscriber has done from
   * the labels alone all that reading the record would do (or it needs nothing from it), and the
   * record is then passed over unread. Only an optimisation: a bus may deliver every record all
   * the same (the in-memory bus does, its values cost nothing to read), and then never offers the
   * labels. A chunked message is offered at its first chunk, and passed over or read whole.
   */
  readonly skip?: (labels: RecordLabels) => boolean;
}

/**
 * Short named strings about a record, written beside its value and readable before it
 * (`SubscribeOptions.skip`): what it is about, so that a reader can pass over a record it needs
 * nothing from without reading (parsing) a value of megabytes. Kafka: one record header.
 */
export type RecordLabels = Readonly<Record<string, string>>;

export interface ProduceOptions {
  /** The record's labels (at most `MAX_LABEL_BYTES` as JSON, or `produce` refuses). */
  readonly labels?: RecordLabels;
}

/** The most bytes a record's labels take as JSON: they describe a value, they do not carry one. */
export const MAX_LABEL_BYTES = 1024;

/** Labels as a bus writes them (JSON text); labels past `MAX_LABEL_BYTES` are refused, a programming error. */
export function encodeLabels(labels: RecordLabels): string {
  const json = JSON.stringify(labels);
  const bytes = Buffer.byteLength(json);
  if (bytes > MAX_LABEL_BYTES) throw new RangeError(`record labels of ${bytes} bytes (as JSON): at most ${MAX_LABEL_BYTES}`);
  return json;
}

/** Labels read back from their JSON text; undefined when they are not an object of strings (then nothing is skipped). */
export function decodeLabels(json: string): RecordLabels | undefined {
  try {
    const value: unknown = JSON.parse(json);
    if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
    return Object.values(value).every((v) => typeof v === 'string') ? (value as RecordLabels) : undefined;
  } catch {
    return undefined;
  }
}

/** Handles one record; the next is delivered once its promise settles. */
export type RecordHandler = (record: BusRecord) => Promise<void> | void;

export interface BusSubscription {
  /**
   * Records that this group has processed everything before `offset` (exclusive, as in Kafka):
   * a later subscription of the same group starts there.
   *
   * Gotcha: the position committed is at most the offset of the first chunk of the oldest message
   * this subscription is still assembling, even when `offset` is later. The group's next
   * subscription then reads that message whole again, and so also receives again the records
   * between that chunk and `offset` (delivery is at least once across subscriptions anyway).
   */
  commit(offset: number): Promise<void>;
  /** Stops delivery; the committed position stays. */
  close(): Promise<void>;
}

/**
 * The bus. Records and messages:
 *
 * - A value whose JSON (UTF-8) fits in the bus's `maxRecordBytes` is one record. A larger one, up
 *   to `maxMessageBytes`, is written as consecutive chunk records, each at most `maxRecordBytes`,
 *   and a subscription delivers it once, whole, when all its chunks have reached it, as one
 *   record whose offset is that of the chunk that completed it. Chunks of messages from several
 *   producers may interleave; duplicated chunks are ignored.
 * - A message whose chunks do not all arrive within the bus's `chunkTimeoutMs` of the last one
 *   that did (a lost chunk, a producer that died mid-message, a subscription that started inside
 *   a message), or that would make the messages a subscription is assembling hold more than twice
 *   `maxMessageBytes`, is given up: `onError` hears an `IncompleteMessageError`, and nothing of it
 *   is ever delivered. Time spent in the subscription's own handler does not count.
 * - A value larger than `maxMessageBytes` is refused by `produce` with a `MessageTooLargeError`
 *   (not retriable), and nothing is written.
 */
export interface Bus {
  /**
   * Appends a value; resolves with its offset once it is durable (a chunked value's: the offset of
   * its last chunk). Rejects with `MessageTooLargeError` when the value's JSON is larger than the
   * bus's `maxMessageBytes`.
   */
  produce(topic: string, value: unknown, options?: ProduceOptions): Promise<number>;
  /**
   * Delivers the topic's records to `handler` one at a time, in offset order, from the group's
   * committed position (or `start`). The next record is delivered only after the handler's
   * promise settles. A handler that throws does not stop delivery: the error is reported to
   * `onError` and the record is skipped (commit positions are the caller's decision). A chunked
   * message is delivered in the place of the chunk that completed it (see `BusSubscription.commit`
   * for what committing means while one is incomplete).
   */
  subscribe(topic: string, group: string, handler: RecordHandler, options?: SubscribeOptions): Promise<BusSubscription>;
  /** The group's committed position on the topic, if it committed one. */
  committedOffset(topic: string, group: string): Promise<number | undefined>;
}

/**
 * A value `produce` refuses for good: its JSON is larger than the bus's `maxMessageBytes`. Nothing
 * of it was written. Trying again cannot help; raising the limit or sending less can.
 */
export class MessageTooLargeError extends Error {
  override readonly name = 'MessageTooLargeError';
  readonly code = 'MESSAGE_TOO_LARGE';
  readonly retriable = false;

  constructor(
    readonly topic: string,
    /** The UTF-8 bytes of the value's JSON. */
    readonly bytes: number,
    /** The bus's `maxMessageBytes`. */
    readonly limit: number,
  ) {
    super(
      `a value of ${bytes} bytes (its JSON) for topic ${topic} is larger than the bus's maxMessageBytes (${limit}): ` +
        'raise the bus option maxMessageBytes (kafka.maxMessageBytes in a node config; every node that reads the topic needs it too) or send less',
    );
  }
}

/** Why a chunked message was given up. */
export type IncompleteReason = 'timeout' | 'memory';

/**
 * A chunked message a subscription gave up before all its chunks reached it, reported to
 * `onError` (with a record at the offset of its first chunk seen, value `null`). It is never
 * delivered, and chunks of it that arrive later are ignored.
 */
export class IncompleteMessageError extends Error {
  override readonly name = 'IncompleteMessageError';
  readonly code = 'INCOMPLETE_MESSAGE';
  readonly retriable = false;

  constructor(
    readonly topic: string,
    /** The message's id, as its producer wrote it beside each chunk. */
    readonly messageId: string,
    /** Distinct chunks that arrived. */
    readonly chunksSeen: number,
    readonly chunkCount: number,
    readonly reason: IncompleteReason,
  ) {
    super(
      `message ${messageId} on ${topic} given up with ${chunksSeen} of ${chunkCount} chunks: ` +
        (reason === 'timeout'
          ? 'the others did not arrive within chunkTimeoutMs (a lost chunk, a producer that died mid-message, or a subscription that started inside it)'
          : 'the messages this subscription was assembling held more than twice maxMessageBytes, and this one was the oldest'),
    );
  }
}
