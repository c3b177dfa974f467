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
  /** Hears what a handler threw (or a record that could not be read); delivery goes on with the next record. */
  readonly onError?: (error: unknown, record: BusRecord) => void;
}

/** Handles one record; the next is delivered once its promise settles. */
export type RecordHandler = (record: BusRecord) => Promise<void> | void;

export interface BusSubscription {
  /**
   * Records that this group has processed everything before `offset` (exclusive, as in Kafka):
   * a later subscription of the same group starts there.
   */
  commit(offset: number): Promise<void>;
  /** Stops delivery; the committed position stays. */
  close(): Promise<void>;
}

export interface Bus {
  /** Appends a value; resolves with its offset once it is durable. */
  produce(topic: string, value: unknown): Promise<number>;
  /**
   * Delivers the topic's records to `handler` one at a time, in offset order, from the group's
   * committed position (or `start`). The next record is delivered only after the handler's
   * promise settles. A handler that throws does not stop delivery: the error is reported to
   * `onError` and the record is skipped (commit positions are the caller's decision).
   */
  subscribe(
    topic: string,
    group: string,
    handler: RecordHandler,
    options?: SubscribeOptions,
  ): Promise<BusSubscription>;
}
