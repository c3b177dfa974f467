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

  /**
   * The shard wrote again, or stopped: its wait, if any, ends and is counted. When it was the last
   * shard waiting, the lapse is over for the whole node: `lapse` says how many shards waited in it
   * and the longest wait, for one log line per lapse instead of one per shard.
   */
  end(key: string, now: number): { readonly waitedMs: number; readonly lapse?: { readonly shards: number; readonly longestMs: number } } | undefined {
    const began = this.since.get(key);
    if (began === undefined) return undefined;
    this.since.delete(key);
    const waitedMs = Math.max(0, now - began);
    this.telemetry.leaseWaitEnded(waitedMs);
    this.lapseShards += 1;
    this.lapseLongestMs = Math.max(this.lapseLongestMs, waitedMs);
    if (this.since.size > 0) return { waitedMs };
    const lapse = { shards: this.lapseShards, longestMs: this.lapseLongestMs };
    this.lapseShards = 0;
    this.lapseLongestMs = 0;
    return { waitedMs, lapse };
  }

  /** Shards whose wait ended since no shard last waited, and the longest of those waits. */
  private lapseShards = 0;
  private lapseLongestMs = 0;

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
