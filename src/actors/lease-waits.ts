// The shards of a node that hold a batch and wait for a lease to write it (`heartbeat` mode,
// docs/ARCHITECTURE.md §11.4). A lapse pauses writes; it is not a failure, so it is shown where an
// operator looks for pauses: the node's /status and metrics, not its errors.
import type { Telemetry } from './telemetry.js';

export class LeaseWaits {
  /** `dataset/shard` → when its wait began (the node's clock, ms). */
  private readonly since = new Map<string, number>();

  constructor(private readonly telemetry: Pick<Telemetry, 'leaseWaitEnded'>) {}

  /** A shard found no lease for its batch; a wait already under way keeps its start. */
  begin(key: string, now: number): void {
    if (!this.since.has(key)) this.since.set(key, now);
  }

  /** The shard wrote again, or stopped: its wait, if any, ends and is counted. */
  end(key: string, now: number): number | undefined {
    const began = this.since.get(key);
    if (began === undefined) return undefined;
    this.since.delete(key);
    const waitedMs = Math.max(0, now - began);
    this.telemetry.leaseWaitEnded(waitedMs);
    return waitedMs;
  }

  /** Shards waiting now. */
  get count(): number {
    return this.since.size;
  }

  /** How long the oldest wait has lasted at `now` (0 when none waits). */
  longestMs(now: number): number {
    let oldest = Infinity;
    for (const t of this.since.values()) oldest = Math.min(oldest, t);
    return oldest === Infinity ? 0 : Math.max(0, now - oldest);
  }
}
