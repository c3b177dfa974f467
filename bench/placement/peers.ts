/**
 * The placers the placement benchmark compares, each replaying a scenario one decision per step:
 * `balanced` (the pure strategy), `filodb-default` (FiloDB's strategy driven through the singleton's
 * own `ShardManager.decide`, as users run it) and Effect's `HashRing` (effect/HashRing, the peer
 * baseline, run in this process).
 */
import * as HashRing from 'effect/HashRing';
import * as PrimaryKey from 'effect/PrimaryKey';
import { epoch, incarnation, type Member, nodeId, type NodeId, replyTo, validateDatasetConfig } from '../../src/index.js';
import {
  BalancedPlacementStrategy,
  type Placement,
  type PlacementNode,
  ShardManager,
  type ShardManagerInput,
  type ShardManagerState,
} from '../../src/entries/core.js';

/** One decision: from the map before and the live nodes after, the map after. */
export interface Placer {
  readonly name: string;
  /** Whether a moved copy keeps serving until its successor has caught up (a planned handoff). */
  readonly handoff: boolean;
  /** Replication factors it can place. */
  supports(rf: number): boolean;
  /** A fresh run of one scenario: `decide` is called once per step, in order. */
  start(numShards: number, rf: number, nodes: readonly PlacementNode[]): PlacerRun;
}

export interface PlacerRun {
  /** The step's decision; `time` runs it again from the same state (for timing, no side effect). */
  decide(nodes: readonly PlacementNode[]): { placement: Placement; time: () => unknown };
}

export const balanced: Placer = {
  name: 'balanced',
  handoff: true,
  supports: () => true,
  start(numShards, rf) {
    const strategy = new BalancedPlacementStrategy();
    let current: Placement = Array.from({ length: numShards }, () => []);
    return {
      decide(nodes) {
        const input = { numShards, replicationFactor: rf, nodes, current };
        const r = strategy.place(input);
        if (!r.ok) throw new Error(r.error.message);
        current = r.value;
        return { placement: r.value, time: () => strategy.place(input) };
      },
    };
  },
};

/**
 * Effect ≥ 0.51's runners: each builds a weighted HashRing of the live runners and takes
 * `getShards(ring, S)` (entry i owns shard i + 1). Keys are address-like (`host:port`), as runners'
 * are; loopback addresses only label the ring points.
 */
export const effectHashRing: Placer = {
  name: 'effect-hashring',
  handoff: false,
  supports: (rf) => rf === 1,
  start(numShards) {
    const address = new Map<string, string>();
    const keyOf = (id: string): string => {
      if (!address.has(id)) address.set(id, `127.0.${(address.size >> 8) & 255}.${address.size & 255}:34431`);
      return address.get(id)!;
    };
    class Runner implements PrimaryKey.PrimaryKey {
      constructor(readonly id: string) {}
      [PrimaryKey.symbol](): string {
        return keyOf(this.id);
      }
    }
    const ring = (nodes: readonly PlacementNode[]) => {
      const r = HashRing.make<Runner>();
      for (const n of nodes) HashRing.add(r, new Runner(n.id), { weight: n.weight });
      return HashRing.getShards(r, numShards);
    };
    return {
      decide(nodes) {
        const owners = ring(nodes);
        if (!owners) throw new Error('HashRing.getShards returned nothing (empty ring)');
        return { placement: owners.map((o) => [o.id as NodeId]), time: () => ring(nodes) };
      },
    };
  },
};

const NOW = 1_700_000_000_000;
/** Past any reassignment cooldown, so a rolling replacement is not held back by the previous step. */
const STEP_MS = 3_600_000;

/**
 * FiloDB's default strategy as the singleton runs it: SetupDataset with minNumNodes = the initial
 * node count, then MemberUp / MemberDown for each operation (a replacement is the old node's
 * MemberDown, then the new one's MemberUp). It never rebalances, so its moves stay at the forced
 * bound and its spread is whatever that leaves.
 */
export const filodbDefault: Placer = {
  name: 'filodb-default',
  handoff: false,
  supports: (rf) => rf === 1,
  start(numShards, _rf, initial) {
    const manager = new ShardManager();
    const member = (id: string, k: number): Member => ({ node: nodeId(id), incarnation: incarnation('inc-1'), joinedAt: k + 1 });
    let joined = 0;
    const members = new Map<string, Member>();
    let state: ShardManagerState | undefined;
    let now = NOW;
    const config = validateDatasetConfig({ ref: 'bench', numShards, minNumNodes: initial.length, source: { type: 'synthetic' } });
    if (!config.ok) throw new Error(config.error.message);
    const placementOf = (s: ShardManagerState): Placement => {
      const mapper = s.datasets.get(config.value.ref)!.mapper;
      return Array.from({ length: numShards }, (_, shard) => {
        const owner = mapper.nodeForShard(shard);
        return owner === undefined ? [] : [owner];
      });
    };
    const run = (from: ShardManagerState, inputs: readonly ShardManagerInput[]): ShardManagerState =>
      inputs.reduce((s, input) => manager.decide(s, input, now).state, from);
    return {
      decide(nodes) {
        now += STEP_MS;
        const inputs: ShardManagerInput[] = [];
        let from: ShardManagerState;
        if (state === undefined) {
          for (const n of nodes) members.set(n.id, member(n.id, joined++));
          const recovery = {
            epoch: epoch(1),
            datasets: [],
            maps: [],
            subscriptions: [],
            watchers: [],
            cooldowns: [],
            members: [...members.values()],
            running: [],
          };
          from = manager.decide(manager.initialState(), { type: 'Recover', recovery }, now).state;
          inputs.push({ type: 'SetupDataset', config: config.value, replyTo: replyTo('bench') });
        } else {
          from = state;
          const live = new Set(nodes.map((n) => n.id as string));
          for (const [id, m] of members) {
            if (live.has(id)) continue;
            inputs.push({ type: 'MemberDown', node: m.node, incarnation: m.incarnation });
            members.delete(id);
          }
          for (const n of nodes) {
            if (members.has(n.id)) continue;
            const m = member(n.id, joined++);
            members.set(n.id, m);
            inputs.push({ type: 'MemberUp', member: m });
          }
        }
        state = run(from, inputs);
        const start = from;
        return { placement: placementOf(state), time: () => run(start, inputs) };
      },
    };
  },
};

export const PLACERS: readonly Placer[] = [balanced, filodbDefault, effectHashRing];
