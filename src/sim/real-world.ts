// The faults real processes met that the simulator's detector world lacked (a sink that fails or
// hangs, refusals and resets from live processes, event loops stalled for seconds, nodes slow to
// come up after joining), and a sink timeout short enough that a lease wait or a slow sink runs
// into it. Each seed chooses which of them it has from a random source of their own (derived from
// the seed), so a seed's other random choices are drawn as before; a run without them
// (`worldFaults: false`) is the detector world as it was.
import { SeededRandom } from './random.js';

/** What one fault step adds, drawn before the step's other faults are applied. */
export type WorldFault =
  | { readonly kind: 'stall'; readonly node: string; readonly ms: number }
  | { readonly kind: 'reset'; readonly from: readonly string[]; readonly to: string; readonly ms: number; readonly bothWays: boolean };

export interface WorldChoices {
  readonly sinkFaults: boolean;
  readonly resets: boolean;
  readonly stalls: boolean;
  readonly slowJoins: boolean;
  /** The nodes' `sinkTimeoutMs`. */
  readonly sinkTimeoutMs: number;
}

/** The nodes' sink timeout when a seed has none of these faults: the product's default. */
const DEFAULT_SINK_TIMEOUT_MS = 30_000;
const STALL_MS: readonly [number, number] = [500, 5_000];
const SLOW_JOIN_MS: readonly [number, number] = [1_000, 4_000];

export class RealWorld {
  /** The seed's choices, for its own random sources (`sinkRng`) and the simulation's settings. */
  readonly choices: WorldChoices;
  /** The sink faults' own random source. */
  readonly sinkRng: SeededRandom;
  private readonly rng: SeededRandom;
  readonly stats = { stalls: 0, resets: 0, slowJoins: 0 };

  constructor(seed: number, on: boolean) {
    this.rng = new SeededRandom(seed ^ 0x3ea1);
    this.sinkRng = new SeededRandom(seed ^ 0x5147);
    const all = on && this.rng.chance(0.85);
    this.choices = {
      sinkFaults: all && this.rng.chance(0.6),
      resets: all && this.rng.chance(0.6),
      stalls: all && this.rng.chance(0.6),
      slowJoins: all && this.rng.chance(0.5),
      sinkTimeoutMs: all ? this.rng.pick([1_000, 2_500]) : DEFAULT_SINK_TIMEOUT_MS,
    };
  }

  /** Whether the seed has any of these faults. */
  get any(): boolean {
    const c = this.choices;
    return c.sinkFaults || c.resets || c.stalls || c.slowJoins;
  }

  /** This fault step's additions: `nodes` are the live members by name (`singleton` among them, if one runs). */
  step(nodes: readonly string[], singleton: string | undefined): WorldFault[] {
    const out: WorldFault[] = [];
    if (nodes.length < 2) return out;
    if (this.choices.stalls && this.rng.chance(0.12)) {
      out.push({ kind: 'stall', node: this.rng.pick(nodes), ms: this.rng.int(STALL_MS[0], STALL_MS[1]) });
    }
    if (this.choices.resets && this.rng.chance(0.25)) {
      // Often the singleton's endpoint (its port takes every heartbeat), else any node's.
      const to = singleton !== undefined && this.rng.chance(0.5) ? singleton : this.rng.pick(nodes);
      const others = nodes.filter((n) => n !== to);
      const from = this.rng.chance(0.5) ? others : [this.rng.pick(others)];
      const ms = this.rng.chance(0.5) ? this.rng.int(5, 100) : this.rng.int(100, 1_000);
      out.push({ kind: 'reset', from, to, ms, bothWays: this.rng.chance(0.5) });
    }
    for (const f of out) this.stats[f.kind === 'stall' ? 'stalls' : 'resets'] += 1;
    return out;
  }

  /** How long a node that just joined stays silent before it runs (0: it runs at once). */
  slowJoinMs(): number {
    if (!this.choices.slowJoins || !this.rng.chance(0.5)) return 0;
    this.stats.slowJoins += 1;
    return this.rng.int(SLOW_JOIN_MS[0], SLOW_JOIN_MS[1]);
  }
}
