// The simulator's faults of the user's sink: a call that fails (throws) once or a few times in a
// row for one node's shard, or one slower than the node's sink timeout. What the node does about
// them (an IngestionError, the shard failed, moved or restarted) is the product's own code path.
import type { Clock } from '../cluster/clock.js';
import type { RecordSink } from '../ingest/ingestion-source.js';
import type { SeededRandom } from './random.js';

/** Share of calls that start a fault (an episode of failures, or one slow call). */
const FAULT_SHARE = 0.003;
/** A slow call lasts the sink timeout and this much more. */
const SLOW_EXTRA_MS: readonly [number, number] = [100, 1_500];

export interface SinkFaultStats {
  slow: number;
  failed: number;
}

export class SinkFaults {
  readonly stats: SinkFaultStats = { slow: 0, failed: 0 };
  /** `node/dataset/shard` → calls still to fail in a row. */
  private readonly failing = new Map<string, number>();
  /** `dataset/shard` of every shard a fault hit. */
  private readonly hit = new Set<string>();

  constructor(
    private readonly clock: Clock,
    private readonly rng: SeededRandom,
    /** The node's sink timeout: a slow call outlasts it. */
    private readonly sinkTimeoutMs: number,
    /** A node's lifecycle now: a slow call of a crashed process never lands. */
    private readonly stateOf: (node: string) => string,
    /** Faults happen while true (the fault steps). */
    private readonly enabled: () => boolean,
    private readonly note: (what: string) => void,
  ) {}

  /** `sink` as node `node` calls it, with this seed's faults. */
  wrap(node: string, sink: RecordSink): RecordSink {
    return {
      accept: (ds, shard, records, token) => {
        const key = `${node}/${ds.ref}/${shard}`;
        const left = this.failing.get(key) ?? 0;
        if (left > 0) return this.fail(key, left);
        if (!this.enabled() || !this.rng.chance(FAULT_SHARE)) return sink.accept(ds, shard, records, token);
        this.hit.add(`${ds.ref}/${shard}`);
        if (this.rng.chance(0.5)) {
          const times = this.rng.int(1, 3);
          this.note(`the sink fails the next ${times} calls of ${node} for ${ds.ref}/${shard}`);
          return this.fail(key, times);
        }
        const ms = this.sinkTimeoutMs + this.rng.int(SLOW_EXTRA_MS[0], SLOW_EXTRA_MS[1]);
        this.note(`a sink call of ${node} for ${ds.ref}/${shard} takes ${ms} ms (past the sink timeout)`);
        this.stats.slow += 1;
        return new Promise<void>((resolve, reject) => {
          this.clock.schedule(ms, () => {
            if (this.stateOf(node) === 'crashed') return;
            sink.accept(ds, shard, records, token).then(resolve, reject);
          });
        });
      },
    };
  }

  /** Whether a fault of this sink hit the shard: its node rightly failed it, and it may have moved off a live owner. */
  faulted(dataset: string, shard: number): boolean {
    return this.hit.has(`${dataset}/${shard}`);
  }

  private fail(key: string, left: number): Promise<void> {
    this.failing.set(key, left - 1);
    this.stats.failed += 1;
    return Promise.reject(new Error(`simulated sink failure (${key})`));
  }
}
