import type { Bus, BusRecord, BusSubscription, RecordHandler, SubscribeOptions } from './bus.js';
import { frozenJsonCopy } from '../core/json-data.js';
import type { Clock } from './clock.js';

/** What happens to one produced record: the simulator's fault injection. */
export type BusFault =
  | { readonly kind: 'deliver' }
  /** Never appended; `produce` still resolves, with -1. */
  | { readonly kind: 'drop' }
  /** Appended twice in a row; `produce` resolves with the first offset. */
  | { readonly kind: 'duplicate' }
  /** Appended `ms` later by the clock (later records may overtake it); `produce` resolves then. */
  | { readonly kind: 'delay'; readonly ms: number };

export interface MemoryBusOptions {
  /** Decides the fate of each produced record (called once per `produce`, with the copied value). */
  readonly faults?: (topic: string, value: unknown) => BusFault;
  /**
   * Records kept per topic, the newest (default 2 000): like Kafka's retention, older ones are
   * dropped and a subscription behind them goes on from the oldest kept. Without a bound a
   * long-running embedded cluster would keep every record it ever sent.
   */
  readonly retainRecords?: number;
}

/** A topic's retained records: `records[i]` has offset `base + i`. */
interface TopicLog {
  base: number;
  records: BusRecord[];
}

const DEFAULT_RETAIN_RECORDS = 2_000;

interface Subscription {
  readonly topic: string;
  readonly group: string;
  readonly handler: RecordHandler;
  readonly onError: SubscribeOptions['onError'];
  /** The next offset to deliver. */
  position: number;
  running: boolean;
  inFlight: boolean;
  closed: boolean;
}

/**
 * The bus of embedded mode and of the simulator: one partition per topic, kept in memory.
 * Deterministic: records are delivered from microtasks only, and delayed records by the injected
 * clock.
 *
 * - `produce` copies the value as the Kafka bus's JSON would (`frozenJsonCopy`), so a value that
 *   is not JSON data (a function, a Map, NaN) is refused at once, as the Kafka bus refuses it, and
 *   later changes to the caller's object do not reach consumers. The copy is frozen, deeply, and
 *   every delivery shares it: a consumer that would change a record fails at once (as it could
 *   not change a Kafka record's bytes), and nothing is copied per delivery (the simulator's
 *   hottest path).
 * - Delivery starts in a microtask after `subscribe` or `produce`, never inside those calls.
 * - Each topic keeps its newest `retainRecords` records (see the option); offsets never change.
 * - Committed positions are kept per (topic, group) for the life of the bus. Unlike Kafka, two
 *   open subscriptions of one group do not split the topic: each receives every record.
 * - `close()` stops delivery after the record in flight; it does not wait for that record.
 * - A handler error with no `onError` is dropped (the record is skipped either way).
 */
export class MemoryBus implements Bus {
  private readonly logs = new Map<string, TopicLog>();
  private readonly committed = new Map<string, number>();
  private readonly subscriptions: Subscription[] = [];
  private delayed = 0;
  private readonly faults: ((topic: string, value: unknown) => BusFault) | undefined;
  private readonly retain: number;

  constructor(
    private readonly clock: Clock,
    options: MemoryBusOptions = {},
  ) {
    this.faults = options.faults;
    this.retain = options.retainRecords ?? DEFAULT_RETAIN_RECORDS;
    if (!Number.isSafeInteger(this.retain) || this.retain < 1) throw new RangeError(`retainRecords must be a positive integer, got ${this.retain}`);
  }

  async produce(topic: string, value: unknown): Promise<number> {
    if (topic.length === 0) throw new Error('topic name must not be empty');
    const copy = frozenJsonCopy(value);
    const fault = this.faults?.(topic, copy) ?? { kind: 'deliver' };
    switch (fault.kind) {
      case 'deliver':
        return this.append(topic, copy);
      case 'drop':
        return -1;
      case 'duplicate': {
        const offset = this.append(topic, copy);
        this.append(topic, copy);
        return offset;
      }
      case 'delay': {
        this.delayed += 1;
        return new Promise<number>((resolve) => {
          this.clock.schedule(fault.ms, () => {
            this.delayed -= 1;
            resolve(this.append(topic, copy));
          });
        });
      }
    }
  }

  async subscribe(
    topic: string,
    group: string,
    handler: RecordHandler,
    options: SubscribeOptions = {},
  ): Promise<BusSubscription> {
    const committed = this.committed.get(key(topic, group));
    const log = this.log(topic);
    const start = committed ?? (options.start === 'earliest' ? log.base : end(log));
    const sub: Subscription = {
      topic,
      group,
      handler,
      onError: options.onError,
      position: start,
      running: false,
      inFlight: false,
      closed: false,
    };
    this.subscriptions.push(sub);
    this.kick(sub);
    return {
      commit: async (offset: number) => {
        if (!Number.isSafeInteger(offset) || offset < 0) throw new RangeError(`commit offset must be a non-negative integer, got ${offset}`);
        this.committed.set(key(topic, group), offset);
      },
      close: async () => {
        sub.closed = true;
        const i = this.subscriptions.indexOf(sub);
        if (i >= 0) this.subscriptions.splice(i, 1);
      },
    };
  }

  /**
   * Work not yet done: records appended but not yet handled by each open subscription (the one in
   * its handler included), plus delayed records not yet appended. Zero means the bus is quiet.
   */
  pending(): number {
    let n = this.delayed;
    for (const sub of this.subscriptions) {
      const log = this.log(sub.topic);
      n += Math.max(0, end(log) - Math.max(sub.position, log.base)) + (sub.inFlight ? 1 : 0);
    }
    return n;
  }

  /** Every record of `topic` still retained (for tests and the simulator); records are frozen. */
  topic(name: string): readonly BusRecord[] {
    return [...this.log(name).records];
  }

  /** The committed position of `group` on `topic`, if it committed one. */
  committedPosition(topic: string, group: string): number | undefined {
    return this.committed.get(key(topic, group));
  }

  private log(topic: string): TopicLog {
    let log = this.logs.get(topic);
    if (!log) {
      log = { base: 0, records: [] };
      this.logs.set(topic, log);
    }
    return log;
  }

  private append(topic: string, value: unknown): number {
    const log = this.log(topic);
    const offset = end(log);
    log.records.push(Object.freeze({ topic, offset, value }));
    // Dropped in chunks (twice the bound, then back to it), so appending stays O(1) amortised.
    if (log.records.length >= 2 * this.retain) {
      const drop = log.records.length - this.retain;
      log.records.splice(0, drop);
      log.base += drop;
    }
    for (const sub of this.subscriptions) if (sub.topic === topic) this.kick(sub);
    return offset;
  }

  /** Starts the subscription's delivery loop in a microtask, unless it is already running. */
  private kick(sub: Subscription): void {
    if (sub.running || sub.closed) return;
    sub.running = true;
    void Promise.resolve().then(() => this.deliver(sub));
  }

  private async deliver(sub: Subscription): Promise<void> {
    try {
      for (;;) {
        if (sub.closed) return;
        const log = this.log(sub.topic);
        if (sub.position < log.base) sub.position = log.base; // behind retention: the oldest kept
        const record = log.records[sub.position - log.base];
        if (!record) return;
        sub.position += 1;
        sub.inFlight = true;
        try {
          await sub.handler(record);
        } catch (error) {
          try {
            sub.onError?.(error, record);
          } catch {
            // An error handler that throws must not stop delivery either.
          }
        } finally {
          sub.inFlight = false;
        }
      }
    } finally {
      sub.running = false;
    }
  }
}

function end(log: TopicLog): number {
  return log.base + log.records.length;
}

function key(topic: string, group: string): string {
  return `${topic}\u0000${group}`;
}
