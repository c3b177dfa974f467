// The check a sink makes before it applies a write (the fencing-token contract of `RecordSink`):
// per shard, the newest token seen, and a refusal of anything older. Exported for users' sinks
// that keep their state in the process; a sink over a database makes the same comparison in the
// database, atomically with the write (see examples/cassandra-sink.ts).
import { compareTokens, StaleTokenError, type FencingToken } from '../core/fencing-token.js';

export class TokenFence {
  private readonly newest = new Map<string, FencingToken>();

  /**
   * Admits a write of `dataset`'s `shard` carrying `token`, or throws `StaleTokenError` when a newer
   * token was admitted before. Call it in the same step as applying the write (no await between):
   * a check that an older write passes before a newer one lands, and whose own write lands after
   * it, fences nothing. A write without a token (a caller of the three-argument API) is admitted.
   */
  admit(dataset: string, shard: number, token: FencingToken | undefined): void {
    if (token === undefined) return;
    const key = `${dataset}/${shard}`;
    const seen = this.newest.get(key);
    if (seen !== undefined && compareTokens(token, seen) < 0) throw new StaleTokenError(dataset, shard, token, seen);
    if (seen === undefined || compareTokens(token, seen) > 0) this.newest.set(key, { epoch: token.epoch, version: token.version });
  }

  /** The newest token admitted for a shard, if any. */
  newestOf(dataset: string, shard: number): FencingToken | undefined {
    return this.newest.get(`${dataset}/${shard}`);
  }
}
