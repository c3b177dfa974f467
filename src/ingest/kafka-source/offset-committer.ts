// Consumed offsets written to Kafka as well, so Kafka's own tools (`kafka-consumer-groups
// --describe`, lag exporters) show each shard's lag. The MetaStore checkpoints stay the source of
// truth: these offsets are written at most once per interval, after the checkpoint, and a failure
// only delays them. They go to a group no consumer ever joins (`<prefix>.<dataset>`), because the
// admin API may set the offsets only of a group without members.
import type { Admin } from 'kafkajs';
import type { Logger } from 'pino';

interface Pending {
  readonly topic: string;
  /** partition → the next offset to consume. */
  readonly partitions: Map<number, number>;
}

export class OffsetCommitter {
  private readonly pending = new Map<string, Pending>();
  private timer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> = Promise.resolve();

  constructor(
    private readonly admin: () => Promise<Admin>,
    private readonly intervalMs: number,
    private readonly log: Logger,
  ) {}

  /** Notes that `group` has consumed `topic`'s partition up to `nextOffset` (exclusive); written within the interval. */
  record(group: string, topic: string, partition: number, nextOffset: number): void {
    let p = this.pending.get(group);
    if (!p || p.topic !== topic) {
      p = { topic, partitions: new Map() };
      this.pending.set(group, p);
    }
    p.partitions.set(partition, Math.max(nextOffset, p.partitions.get(partition) ?? 0));
    this.timer ??= setTimeout(() => {
      this.timer = undefined;
      void this.flush();
    }, this.intervalMs);
  }

  /** Writes what is pending now (and waits for a write already under way). */
  flush(): Promise<void> {
    const batch = [...this.pending];
    this.pending.clear();
    this.flushing = this.flushing.then(async () => {
      for (const [groupId, { topic, partitions }] of batch) {
        try {
          const admin = await this.admin();
          await admin.setOffsets({ groupId, topic, partitions: [...partitions].map(([partition, offset]) => ({ partition, offset: String(offset) })) });
        } catch (e) {
          this.log.debug({ err: e, groupId, topic }, 'consumed offsets not written to Kafka; the next interval writes later ones');
        }
      }
    });
    return this.flushing;
  }

  /** Writes what is pending, then stops. */
  async close(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    await this.flush();
  }
}
