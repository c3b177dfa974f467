// Random small inputs of the load-aware strategy, small enough for an integer program to solve
// exactly in milliseconds: 2–5 nodes in 1–4 groups (weights 1, 1.5, 2; some absent), 2–12 shards at
// RF 1–3, current maps with missing copies, copies on nodes that left, held shards, and loads of
// several shapes (even, Zipf-like, with zeros, some not measured). Seeded: a failure names its seed.
import { nodeId, type NodeId } from '../../src/core/ids.js';
import type { LoadAwareInput } from '../../src/core/placement/load-aware-strategy.js';
import { SeededRandom } from '../../src/sim/random.js';

export interface RandomLoadInput {
  readonly input: LoadAwareInput;
  /** The loads as the strategy counts them (an unmeasured shard as the mean of the measured ones). */
  readonly counted: readonly number[];
}

export function randomLoadInput(seed: number): RandomLoadInput {
  const r = new SeededRandom(seed * 7919 + 17);
  const groups = r.int(1, 4);
  const nodes = Array.from({ length: r.int(2, 5) }, (_, i) => ({
    id: nodeId(`n${i}`),
    group: `g${r.int(0, groups - 1)}`,
    weight: r.pick([1, 1, 1.5, 2]),
    absent: r.chance(0.1),
  }));
  const numShards = r.int(2, 12);
  const replicationFactor = r.int(1, 3);
  const ids: NodeId[] = [...nodes.map((n) => n.id), nodeId('gone')];
  const current = Array.from({ length: numShards }, () => {
    const copies = new Set<NodeId>();
    for (let k = r.int(0, replicationFactor); k > 0; k--) copies.add(r.pick(ids));
    return [...copies].sort();
  });
  const held = new Set<number>();
  for (let s = 0; s < numShards; s++) if (r.chance(0.08)) held.add(s);
  const shape = r.pick(['even', 'zipf', 'zeros', 'unmeasured'] as const);
  const loads: (number | undefined)[] = Array.from({ length: numShards }, (_, s) => {
    switch (shape) {
      case 'even':
        return r.int(1, 10);
      case 'zipf':
        return 10 / (s + 1);
      case 'zeros':
        return r.chance(0.3) ? 0 : r.int(0, 100) / 10;
      case 'unmeasured':
        return r.chance(0.3) ? undefined : r.int(1, 10);
    }
  });
  const measured = loads.filter((l): l is number => l !== undefined);
  const fallback = measured.length === 0 ? 1 : measured.reduce((a, b) => a + b, 0) / measured.length;
  return {
    input: { numShards, replicationFactor, nodes, current, held, loads },
    // Nothing measured carries load (none measured, or all idle): every shard counts as one copy.
    counted: loads.every((l) => !l) ? loads.map(() => 1) : loads.map((l) => l ?? fallback),
  };
}
