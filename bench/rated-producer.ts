// A producer of numbered records at a set rate per partition (a skewed topic: a few hot
// partitions, a long tail), remembering which numbers the broker acknowledged so that a benchmark
// can check each of them reached a sink. Every `TICK_MS` it sends one batch holding each
// partition's share of the tick (fractions carried over); a send that fails is retried, same batch,
// until acknowledged: nothing is counted that was not written.
import type { Producer } from 'kafkajs';
import { sleep } from './runtime-support.js';

const TICK_MS = 100;

export class RatedProducer {
  readonly acked = new Set<number>();
  /** Records acknowledged per partition. */
  readonly ackedPerPartition: number[];
  failedSends = 0;
  private next = 0;
  private running = true;
  private loop: Promise<void> | undefined;
  private readonly owed: number[];

  constructor(
    private readonly producer: Producer,
    private readonly topic: string,
    /** Records per second of each partition. */
    private readonly rates: readonly number[],
  ) {
    this.owed = rates.map(() => 0);
    this.ackedPerPartition = rates.map(() => 0);
  }

  start(): void {
    this.loop = (async () => {
      let last = performance.now();
      while (this.running) {
        const now = performance.now();
        const messages = this.dueSince(now - last);
        last = now;
        if (messages.length > 0) await this.sendUntilAcknowledged(messages);
        await sleep(Math.max(0, TICK_MS - (performance.now() - now)));
      }
    })();
  }

  /** Each partition's records for `elapsedMs`, numbered. */
  private dueSince(elapsedMs: number): { partition: number; key: string; value: string; n: number }[] {
    const messages: { partition: number; key: string; value: string; n: number }[] = [];
    this.rates.forEach((rate, partition) => {
      this.owed[partition]! += (rate * elapsedMs) / 1000;
      for (; this.owed[partition]! >= 1; this.owed[partition]! -= 1) {
        const n = this.next++;
        messages.push({ partition, key: `r${n}`, value: JSON.stringify({ n }), n });
      }
    });
    return messages;
  }

  private async sendUntilAcknowledged(messages: readonly { partition: number; key: string; value: string; n: number }[]): Promise<void> {
    while (this.running) {
      try {
        const written = await this.producer.send({
          topic: this.topic,
          acks: -1,
          messages: messages.map(({ partition, key, value }) => ({ partition, key, value })),
        });
        // kafkajs may resolve without an answer for a partition whose leader moved: not written, sent again.
        const answered = new Set(written.map((r) => r.partition));
        if (messages.some((m) => !answered.has(m.partition))) throw new Error('a partition of the batch was not answered');
        for (const m of messages) {
          this.acked.add(m.n);
          this.ackedPerPartition[m.partition]! += 1;
        }
        return;
      } catch {
        this.failedSends += 1;
        await sleep(500);
      }
    }
  }

  async stop(): Promise<void> {
    this.running = false;
    await this.loop;
  }
}
