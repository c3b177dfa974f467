// A producer of numbered records for the chaos tests: writes batches round-robin over a topic's
// partitions until stopped and remembers which numbers the broker acknowledged, so a test can check
// that each of them reached a sink. A send that fails (the broker is down, frozen or electing a
// leader) is retried, same batch, until it is acknowledged: nothing is counted that was not written.
// So is a send that kafkajs resolves without an answer for every partition of the batch: when a
// partition's leader moves while a send is retried, kafkajs sends again only to the brokers that
// have not answered yet, and a partition that moved to a broker that already answered is never
// written; such a send is retried like a failed one (the ShardedProducer refuses it too).
import type { Message, Producer, RecordMetadata } from 'kafkajs';

/**
 * Sends `messages` (each with its partition) again and again until the broker acknowledged every
 * partition among them (see above why an answer may lack one), pausing 500 ms after each failure
 * (`onRetry`); undefined if `running()` turned false first.
 */
export async function sendUntilAcknowledged(
  producer: Producer,
  topic: string,
  messages: readonly (Message & { readonly partition: number })[],
  running: () => boolean,
  onRetry: () => void,
): Promise<RecordMetadata[] | undefined> {
  while (running()) {
    try {
      const written = await producer.send({ topic, acks: -1, messages: [...messages] });
      const answered = new Set(written.map((r) => r.partition));
      const unwritten = messages.filter((m) => !answered.has(m.partition));
      if (unwritten.length > 0) throw new Error(`no answer for partitions ${unwritten.map((m) => m.partition).join(', ')}`);
      return written;
    } catch {
      onRetry();
      await new Promise((r) => setTimeout(r, 500));
    }
  }
  return undefined;
}

export class NumberedProducer {
  readonly acked = new Set<number>();
  /** Where the broker put each acknowledged record: its partition and offset (one record a partition per send, so the partition's base offset). */
  readonly ackedAt: { readonly partition: number; readonly offset: number }[] = [];
  /** Acknowledged records whose answer named no offset (not in `ackedAt`). */
  ackedWithoutOffset = 0;
  /** Sends that failed and were retried (the broker was away). */
  failedSends = 0;
  private next = 0;
  private running = true;
  private loop: Promise<void> | undefined;

  constructor(
    private readonly producer: Producer,
    private readonly topic: string,
    private readonly partitions: number,
    /** The pause between two acknowledged batches (one record a partition each): sets the rate. */
    private readonly pauseMs = 25,
  ) {}

  start(): void {
    this.loop = (async () => {
      while (this.running) {
        const batch = Array.from({ length: this.partitions }, () => this.next++);
        const messages = batch.map((n) => ({ partition: n % this.partitions, key: `r${n}`, value: JSON.stringify({ n }) }));
        const written = await sendUntilAcknowledged(
          this.producer,
          this.topic,
          messages,
          () => this.running,
          () => (this.failedSends += 1),
        );
        if (written === undefined) break;
        for (const n of batch) this.acked.add(n);
        for (const r of written) {
          if (r.baseOffset === undefined) this.ackedWithoutOffset += 1;
          else this.ackedAt.push({ partition: r.partition, offset: Number(r.baseOffset) });
        }
        await new Promise((r) => setTimeout(r, this.pauseMs));
      }
    })();
  }

  async stop(): Promise<void> {
    this.running = false;
    await this.loop;
  }
}

/**
 * Waits until every acknowledged number shows up in `ingested()` (the sinks' records, read again
 * each round) or `timeoutMs` passed; returns the numbers still missing.
 */
export async function missingRecords(
  acked: ReadonlySet<number>,
  ingested: () => Promise<readonly { readonly value: unknown }[]>,
  timeoutMs: number,
): Promise<number[]> {
  let missing = [...acked];
  const deadline = Date.now() + timeoutMs;
  while (missing.length > 0) {
    const seen = new Set<number>();
    for (const line of await ingested()) seen.add((line.value as { n: number }).n);
    missing = missing.filter((n) => !seen.has(n));
    if (missing.length === 0 || Date.now() > deadline) break;
    await new Promise((r) => setTimeout(r, 500));
  }
  return missing;
}
