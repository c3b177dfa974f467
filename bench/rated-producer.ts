// A producer of numbered records at a set rate per partition (a skewed topic: a few hot
// partitions, a long tail), remembering which numbers the broker acknowledged so that a benchmark
// can check each of them reached a sink. Every `TICK_MS` it sends one batch holding each
// partition's share of the tick (fractions carried over); a send that fails is retried, same batch,
// until acknowledged: nothing is counted that was not written.
import type { Producer } from 'kafkajs';
import { sendUntilAcknowledged } from '../test/support/numbered-producer.js';
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
        if (messages.length > 0) await this.send(messages);
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

  /** Sends the batch until every partition of it is acknowledged (or the producer stops), then counts it. */
  private async send(messages: readonly { partition: number; key: string; value: string; n: number }[]): Promise<void> {
    const plain = messages.map(({ partition, key, value }) => ({ partition, key, value }));
    const written = await sendUntilAcknowledged(
      this.producer,
      this.topic,
      plain,
      () => this.running,
      () => (this.failedSends += 1),
    );
    if (written === undefined) return;
    for (const m of messages) {
      this.acked.add(m.n);
      this.ackedPerPartition[m.partition]! += 1;
    }
  }

  async stop(): Promise<void> {
    this.running = false;
    await this.loop;
  }
}
