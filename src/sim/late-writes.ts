// The simulator's model of late writes and its check of the fencing-token invariant (I13,
// docs/ARCHITECTURE.md §9, §12). A sink call's effect may land a while after the call started; a
// node paused while its call is under way (SIGSTOP in the middle of a write) lands it only after it
// resumes, by when its shard may have moved. Whatever lands goes through the fencing sink; the
// checker sees every write that was applied, and a write applied for a shard after one with a
// newer token is a violation.
import type { Clock } from '../cluster/clock.js';
import { compareTokens, tokenText, type FencingToken } from '../core/fencing-token.js';
import type { RecordSink } from '../ingest/ingestion-source.js';
import type { SeededRandom } from './random.js';

/** Share of sink calls whose effect is delayed, and how long (ms of simulated time). */
const DELAYED_SHARE = 0.3;
const DELAY_MS: readonly [number, number] = [20, 400];
/** How often a held effect looks whether its node runs again. */
const HELD_POLL_MS = 25;

export interface LateWriteStats {
  /** Effects that landed after their node was paused in the middle of the call. */
  landedAfterPause: number;
  /** Of those, refused by the sink's fence (a newer token had been applied meanwhile). */
  refusedAfterPause: number;
}

export class LateWrites {
  readonly stats: LateWriteStats = { landedAfterPause: 0, refusedAfterPause: 0 };

  constructor(
    private readonly clock: Clock,
    private readonly rng: SeededRandom,
    /** A node's lifecycle now ('paused', 'crashed', ...). */
    private readonly stateOf: (node: string) => string,
    private readonly enabled: () => boolean,
  ) {}

  /** `sink` as node `node` calls it: some calls land late, and a call under way when the node pauses lands after it resumes. */
  wrap(node: string, sink: RecordSink): RecordSink {
    return {
      accept: (ds, shard, records, token) => {
        if (!this.enabled() || !this.rng.chance(DELAYED_SHARE)) return sink.accept(ds, shard, records, token);
        const landAt = this.clock.now() + this.rng.int(DELAY_MS[0], DELAY_MS[1]);
        let pausedMeanwhile = false;
        return new Promise<void>((resolve, reject) => {
          const land = () => {
            const state = this.stateOf(node);
            // A crashed process's half-sent write never arrives (its promise never settles: the process is gone).
            if (state === 'crashed') return;
            if (state === 'paused') {
              pausedMeanwhile = true;
              this.clock.schedule(HELD_POLL_MS, land);
              return;
            }
            if (pausedMeanwhile) this.stats.landedAfterPause += 1;
            sink.accept(ds, shard, records, token).then(resolve, (e: unknown) => {
              if (pausedMeanwhile) this.stats.refusedAfterPause += 1;
              reject(e);
            });
          };
          this.clock.schedule(Math.max(0, landAt - this.clock.now()), land);
        });
      },
    };
  }
}

/** I13: per shard, the newest token of a write applied so far; an older one applied later is a violation. */
export class TokenOrderCheck {
  private readonly newest = new Map<string, FencingToken>();

  constructor(private readonly violate: (message: string) => void) {}

  /** Wraps the shared sink: every write it applies (resolves) is checked, with the token the node sent. */
  wrap(sink: RecordSink, forward: (token: FencingToken | undefined) => FencingToken | undefined = (t) => t): RecordSink {
    return {
      accept: async (ds, shard, records, token) => {
        await sink.accept(ds, shard, records, forward(token));
        if (token === undefined) return;
        const key = `${ds.ref}/${shard}`;
        const seen = this.newest.get(key);
        if (seen !== undefined && compareTokens(token, seen) < 0) {
          this.violate(
            `${key}: a write of token ${tokenText(token)} (offsets ${records[0]?.offset ?? '-'}..${records.at(-1)?.offset ?? '-'}) was applied after one of token ${tokenText(seen)}`,
          );
        }
        if (seen === undefined || compareTokens(token, seen) > 0) this.newest.set(key, token);
      },
    };
  }
}
