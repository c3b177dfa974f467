// Random placement histories for property tests: a cluster (racks of uneven sizes, unracked members,
// weights, RF 1–3) and a sequence of membership changes, each step placed from the previous step's
// output. Seeded, so a failing step is replayed from its seed and index.
import type { NodeId } from '../../src/core/ids.js';
import type { Placement, PlacementInput } from '../../src/core/placement/placement-types.js';
import { SeededRandom } from '../../src/sim/random.js';
import type { ContractNode } from './exact-placement/contract.js';

export type Operation = 'initial' | 'add' | 'remove' | 'drain' | 'replace' | 'rack-lost' | 'rack-added' | 'weights' | 'absent' | 'back' | 'same';

export interface ClusterShape {
  readonly numShards: number;
  readonly replicationFactor: number;
  readonly nodes: readonly ContractNode[];
}

/** One decision to check: what changed (`label`) and the input the strategy gets. */
export interface PlacementStep {
  readonly op: Operation;
  readonly label: string;
  /** Built from the previous step's output (`previous`); call `next` with this step's output. */
  input(previous: Placement): PlacementInput;
}

const MAX_NODES = 64;
const MIN_NODES = 3;
const MAX_RACKS = 6;

/** A history generator; `size` picks the scale, biased small so thousands of steps stay fast. */
export class RandomPlacementHistory {
  private readonly rng: SeededRandom;
  private nodes: ContractNode[] = [];
  private nextId = 0;
  private nextRack = 0;
  readonly numShards: number;
  readonly replicationFactor: number;
  private readonly weighting: 'equal' | 'integer' | 'fractional';

  constructor(readonly seed: number) {
    this.rng = new SeededRandom(scrambled(seed));
    const r = this.rng;
    const size = r.int(0, 99);
    // Most histories small, a quarter medium, a few large (up to 1024 shards × 64 nodes).
    const [shards, nodes] =
      size < 70 ? [r.int(8, 64), r.int(MIN_NODES, 16)] : size < 95 ? [r.int(65, 256), r.int(8, 40)] : [r.int(257, 1024), r.int(16, MAX_NODES)];
    this.numShards = shards;
    this.replicationFactor = r.int(1, 3);
    this.weighting = r.pick(['equal', 'equal', 'integer', 'fractional'] as const);
    const racks = Array.from({ length: r.int(1, MAX_RACKS) }, () => this.newRack());
    // Uneven racks: each rack gets a random pull, so some racks are large and some tiny.
    const pull = racks.map(() => r.int(1, 8));
    for (let i = 0; i < nodes; i++) this.nodes.push(this.newNode(r.chance(0.1) ? undefined : pickWeighted(r, racks, pull)));
  }

  get shape(): ClusterShape {
    return { numShards: this.numShards, replicationFactor: this.replicationFactor, nodes: this.nodes };
  }

  /** The first step: an initial placement of the cluster. */
  initial(): PlacementStep {
    return this.step('initial', `initial placement on ${this.nodes.length} nodes`);
  }

  /** A random next change; its input applies the change to the output of the step before. */
  next(): PlacementStep {
    const r = this.rng;
    const present = this.nodes.filter((n) => !n.absent);
    const choices: Operation[] = ['add', 'remove', 'drain', 'replace', 'rack-lost', 'rack-added', 'weights', 'absent', 'back', 'same'];
    for (;;) {
      const op = r.pick(choices);
      switch (op) {
        case 'add': {
          if (this.nodes.length >= MAX_NODES) continue;
          const racks = this.racks();
          const fresh = racks.length < MAX_RACKS && r.chance(0.1) ? this.newRack() : undefined;
          const node = this.newNode(fresh ?? (racks.length > 0 && r.chance(0.9) ? r.pick(racks) : undefined));
          this.nodes.push(node);
          return this.step(op, `add ${describeNode(node)}`);
        }
        case 'remove':
        case 'drain': {
          if (this.nodes.length <= MIN_NODES) continue;
          const gone = this.removeSome(op === 'drain' ? r.int(1, 2) : 1);
          return this.step(op, `${op} ${gone.join(',')}`);
        }
        case 'replace': {
          const old = r.pick(this.nodes);
          const fresh = { ...this.newNode(old.group), ...(r.chance(0.7) ? { weight: old.weight } : {}) };
          this.nodes = this.nodes.map((n) => (n.id === old.id ? fresh : n));
          return this.step(op, `replace ${old.id}→${describeNode(fresh)}`);
        }
        case 'rack-lost': {
          const racks = this.racks().filter((g) => this.nodes.filter((n) => n.group !== g).length >= MIN_NODES);
          if (racks.length === 0) continue;
          const rack = r.pick(racks);
          const gone = this.nodes.filter((n) => n.group === rack).map((n) => n.id);
          this.nodes = this.nodes.filter((n) => n.group !== rack);
          return this.step(op, `rack ${rack} lost (${gone.join(',')})`);
        }
        case 'rack-added': {
          const room = MAX_NODES - this.nodes.length;
          if (room < 1 || this.racks().length >= MAX_RACKS) continue;
          const rack = this.newRack();
          const added = Array.from({ length: r.int(1, Math.min(6, room)) }, () => this.newNode(rack));
          this.nodes.push(...added);
          return this.step(op, `rack ${rack} added (${added.map(describeNode).join(' ')})`);
        }
        case 'weights': {
          const changed = Array.from({ length: r.int(1, 2) }, () => r.pick(this.nodes).id);
          this.nodes = this.nodes.map((n) => (changed.includes(n.id) ? { ...n, weight: this.weightFor(true) } : n));
          return this.step(
            op,
            `weights ${this.nodes
              .filter((n) => changed.includes(n.id))
              .map((n) => `${n.id}=${n.weight}`)
              .join(' ')}`,
          );
        }
        case 'absent': {
          if (present.length <= Math.max(2, (2 * this.nodes.length) / 3)) continue;
          const away = r.pick(present);
          this.nodes = this.nodes.map((n) => (n.id === away.id ? { ...n, absent: true } : n));
          return this.step(op, `${away.id} absent`);
        }
        case 'back': {
          const away = this.nodes.filter((n) => n.absent);
          if (away.length === 0) continue;
          const back = r.pick(away);
          this.nodes = this.nodes.map((n) => (n.id === back.id ? { id: n.id, group: n.group, weight: n.weight } : n));
          return this.step(op, `${back.id} back`);
        }
        case 'same':
          return this.step(op, 'nothing changed (held shards may differ)');
        default:
          continue;
      }
    }
  }

  private step(op: Operation, label: string): PlacementStep {
    const nodes = [...this.nodes];
    const held = this.randomHeld();
    const { numShards, replicationFactor } = this;
    return {
      op,
      label: held.size > 0 ? `${label}; held ${[...held].join(',')}` : label,
      input: (previous) => ({
        numShards,
        replicationFactor,
        nodes,
        current: op === 'initial' ? previous.map(() => []) : withoutStrandedAbsentCopies(previous, nodes),
        ...(held.size > 0 ? { held } : {}),
      }),
    };
  }

  private randomHeld(): ReadonlySet<number> {
    const r = this.rng;
    if (!r.chance(0.3)) return new Set();
    const count = r.int(1, Math.max(1, Math.min(6, this.numShards >> 2)));
    return new Set(Array.from({ length: count }, () => r.int(0, this.numShards - 1)));
  }

  private removeSome(count: number): NodeId[] {
    const gone: NodeId[] = [];
    for (let k = 0; k < count && this.nodes.length > MIN_NODES; k++) {
      const victim = this.rng.pick(this.nodes);
      gone.push(victim.id);
      this.nodes = this.nodes.filter((n) => n.id !== victim.id);
    }
    return gone;
  }

  private racks(): string[] {
    return [...new Set(this.nodes.map((n) => n.group).filter((g) => !g.startsWith('node:')))];
  }

  private newRack(): string {
    return `r${this.nextRack++}`;
  }

  /** A node in `rack`, or unracked (its own group, as `placementNode` makes it) when undefined. */
  private newNode(rack: string | undefined): ContractNode {
    const id = `n${this.nextId++}` as NodeId;
    return { id, group: rack ?? `node:${id}`, weight: this.weightFor(false) };
  }

  private weightFor(changing: boolean): number {
    const r = this.rng;
    const mode = changing && this.weighting === 'equal' ? 'integer' : this.weighting;
    if (mode === 'equal' || r.chance(0.4)) return 1;
    return mode === 'integer' ? r.int(1, 5) : r.pick([0.5, 1.5, 2.5, 0.25, 0.3, 1.1, 3.7]);
  }
}

/**
 * What the coordinator does before it asks: a shard with no copy on a present node has nothing to
 * wait for, so its copies on absent nodes are dropped (it is placed afresh).
 */
export function withoutStrandedAbsentCopies(current: Placement, nodes: readonly ContractNode[]): Placement {
  const presentIds = new Set<string>(nodes.filter((n) => !n.absent).map((n) => n.id));
  const absentIds = new Set<string>(nodes.filter((n) => n.absent).map((n) => n.id));
  return current.map((ids) => (ids.some((id) => presentIds.has(id)) ? ids : ids.filter((id) => !absentIds.has(id))));
}

export function describeNode(n: ContractNode): string {
  return `${n.id}@${n.group}${n.weight === 1 ? '' : `:w${n.weight}`}${n.absent ? '(absent)' : ''}`;
}

/** Consecutive seeds start xoroshiro in nearby states; a hash of the seed spreads them out. */
function scrambled(seed: number): number {
  let x = Math.imul(seed ^ 0x9e3779b9, 0x85ebca6b);
  x = Math.imul(x ^ (x >>> 13), 0xc2b2ae35);
  return (x ^ (x >>> 16)) >>> 0;
}

function pickWeighted<T>(r: SeededRandom, items: readonly T[], pull: readonly number[]): T {
  let x = r.int(
    1,
    pull.reduce((a, b) => a + b, 0),
  );
  for (let i = 0; i < items.length; i++) if ((x -= pull[i]!) <= 0) return items[i]!;
  return items[items.length - 1]!;
}
