// FiloDB's ShardAssignmentStrategySpec (reference §7.3), the worked examples of §4.1, and the
// K8s / v2 ordinal blocks of §4.3, §4.4 and FiloDbClusterDiscoverySpec (§7.5).
//
// A strategy only answers "which shards should this node start now?"; the caller applies the answer
// to the map before it asks about the next node. `ask` below does exactly that, the way the
// ShardManager does: one ShardAssignmentStarted event per shard.
import { describe, expect, it } from 'vitest';
import { type AssignmentSpec, DefaultShardAssignmentStrategy, type ShardAssignmentStrategy } from '../../src/core/assignment-strategy.js';
import { InvalidIdError } from '../../src/core/errors.js';
import { datasetRef, nodeId } from '../../src/core/ids.js';
import { OrdinalBlockShardAssignmentStrategy, ordinalOf, shardsForOrdinal } from '../../src/core/ordinal-strategy.js';
import { ShardMapper } from '../../src/core/shard-mapper.js';
import { ShardEvents } from '../../src/core/status.js';

const ds = datasetRef('ds1');
const defaultStrategy = new DefaultShardAssignmentStrategy();
const k8sStrategy = new OrdinalBlockShardAssignmentStrategy();

function setup(numShards: number, minNumNodes: number, held?: number[]): { spec: AssignmentSpec; mapper: ShardMapper } {
  const spec: AssignmentSpec = held === undefined ? { numShards, minNumNodes } : { numShards, minNumNodes, held: new Set(held) };
  return { spec, mapper: new ShardMapper(numShards, ds) };
}

/** Asks the strategy about `node`, applies the answer to the mapper, and returns it. */
function ask(strategy: ShardAssignmentStrategy, node: string, spec: AssignmentSpec, mapper: ShardMapper): number[] {
  const shards = strategy.shardAssignments(nodeId(node), spec, mapper);
  for (const s of shards) {
    const r = mapper.updateFromEvent(ShardEvents.assignmentStarted(ds, s, nodeId(node)));
    if (!r.ok) throw r.error;
  }
  return [...shards];
}

/** Asks each node in turn (applying each answer before the next question). */
function askAll(strategy: ShardAssignmentStrategy, nodes: string[], spec: AssignmentSpec, mapper: ShardMapper): number[][] {
  return nodes.map((n) => ask(strategy, n, spec, mapper));
}

const capacity = (strategy: ShardAssignmentStrategy, node: string, spec: AssignmentSpec, mapper: ShardMapper): number =>
  strategy.remainingCapacity(nodeId(node), spec, mapper);

const range = (from: number, to: number): number[] => Array.from({ length: to - from }, (_, i) => from + i);

describe('ShardAssignmentStrategySpec (FiloDB reference §7.3)', () => {
  it('1. Default, 8 shards / 3 nodes: [0,1,2], [3,4,5], [6,7]', () => {
    const { spec, mapper } = setup(8, 3);
    expect(askAll(defaultStrategy, ['c1', 'c2', 'c3'], spec, mapper)).toEqual([
      [0, 1, 2],
      [3, 4, 5],
      [6, 7],
    ]);
    expect(mapper.numUnassignedShards).toBe(0);
  });

  it('2. K8s, 8/5 with ordinals 0..4: node-0 takes [0,1] (capacity 2 before, 0 after, nothing on a second ask), then [2,3], [4,5], [6], [7]', () => {
    const { spec, mapper } = setup(8, 5);
    expect(capacity(k8sStrategy, 'node-0', spec, mapper)).toBe(2);
    expect(ask(k8sStrategy, 'node-0', spec, mapper)).toEqual([0, 1]);
    expect(capacity(k8sStrategy, 'node-0', spec, mapper)).toBe(0);
    expect(ask(k8sStrategy, 'node-0', spec, mapper)).toEqual([]);
    expect(askAll(k8sStrategy, ['node-1', 'node-2', 'node-3', 'node-4'], spec, mapper)).toEqual([[2, 3], [4, 5], [6], [7]]);
    expect(mapper.shardsForNode(nodeId('node-0'))).toEqual([0, 1]);
  });

  it('3. K8s, 8/5 on an empty mapper: remainingCapacity per ordinal is [2,2,2,1,1]', () => {
    const { spec, mapper } = setup(8, 5);
    expect(range(0, 5).map((o) => capacity(k8sStrategy, `node-${o}`, spec, mapper))).toEqual([2, 2, 2, 1, 1]);
  });

  it('4. K8s, 16/4: [0..3], [4..7], [8..11], [12..15]', () => {
    const { spec, mapper } = setup(16, 4);
    expect(askAll(k8sStrategy, ['node-0', 'node-1', 'node-2', 'node-3'], spec, mapper)).toEqual([range(0, 4), range(4, 8), range(8, 12), range(12, 16)]);
  });

  it('5. Default, 16/5: [0,1,2,3], [4,5,6], [7,8,9], [10,11,12], [13,14,15]', () => {
    const { spec, mapper } = setup(16, 5);
    expect(askAll(defaultStrategy, ['c1', 'c2', 'c3', 'c4', 'c5'], spec, mapper)).toEqual([
      [0, 1, 2, 3],
      [4, 5, 6],
      [7, 8, 9],
      [10, 11, 12],
      [13, 14, 15],
    ]);
  });

  it('6. Default, 2/2: [0], [1]', () => {
    const { spec, mapper } = setup(2, 2);
    expect(askAll(defaultStrategy, ['c1', 'c2'], spec, mapper)).toEqual([[0], [1]]);
  });

  it('7. Default, 2/3: [0], [1], then nothing for the third node', () => {
    const { spec, mapper } = setup(2, 3);
    expect(askAll(defaultStrategy, ['c1', 'c2', 'c3'], spec, mapper)).toEqual([[0], [1], []]);
    expect(capacity(defaultStrategy, 'c3', spec, mapper)).toBe(0);
  });

  it('8. Default, 8/3: c1 takes [0,1,2]; asking c1 again gives nothing', () => {
    const { spec, mapper } = setup(8, 3);
    expect(capacity(defaultStrategy, 'c1', spec, mapper)).toBe(3);
    expect(ask(defaultStrategy, 'c1', spec, mapper)).toEqual([0, 1, 2]);
    expect(capacity(defaultStrategy, 'c1', spec, mapper)).toBe(0);
    expect(ask(defaultStrategy, 'c1', spec, mapper)).toEqual([]);
    expect(mapper.shardsForNode(nodeId('c1'))).toEqual([0, 1, 2]);
  });

  it('9. Default, 4/3: [0,1], [2], [3]; after removeNode(c1), c2 gets [0] and c3 gets nothing (shard 1 stays unassigned)', () => {
    const { spec, mapper } = setup(4, 3);
    expect(askAll(defaultStrategy, ['c1', 'c2', 'c3'], spec, mapper)).toEqual([[0, 1], [2], [3]]);
    expect(mapper.removeNode(nodeId('c1'))).toEqual([0, 1]);
    expect(ask(defaultStrategy, 'c2', spec, mapper)).toEqual([0]);
    expect(ask(defaultStrategy, 'c3', spec, mapper)).toEqual([]);
    expect(mapper.unassignedShards()).toEqual([1]);
    expect(mapper.nodeForShard(1)).toBeUndefined();
  });

  it('10. Default, 4/2: [0,1], [2,3], the spare gets nothing; after removeNode(c1) returns [0,1] the spare takes [0,1]', () => {
    const { spec, mapper } = setup(4, 2);
    expect(askAll(defaultStrategy, ['c1', 'c2', 'spare'], spec, mapper)).toEqual([[0, 1], [2, 3], []]);
    expect(mapper.removeNode(nodeId('c1'))).toEqual([0, 1]);
    expect(ask(defaultStrategy, 'spare', spec, mapper)).toEqual([0, 1]);
    expect(mapper.shardsForNode(nodeId('spare'))).toEqual([0, 1]);
    expect(mapper.unassignedShards()).toEqual([]);
  });
});

describe('DefaultShardAssignmentStrategy: the §4.1 algorithm and worked examples', () => {
  it('16/5 gives counts 4, 3, 3, 3, 3', () => {
    const { spec, mapper } = setup(16, 5);
    expect(askAll(defaultStrategy, ['a', 'b', 'c', 'd', 'e'], spec, mapper).map((s) => s.length)).toEqual([4, 3, 3, 3, 3]);
  });

  it('applying the answer with registerNode instead of events gives the same split', () => {
    const { spec, mapper } = setup(8, 3);
    const answers = ['c1', 'c2', 'c3'].map((c) => {
      const shards = defaultStrategy.shardAssignments(nodeId(c), spec, mapper);
      const r = mapper.registerNode(shards, nodeId(c));
      if (!r.ok) throw r.error;
      return [...shards];
    });
    expect(answers).toEqual([
      [0, 1, 2],
      [3, 4, 5],
      [6, 7],
    ]);
  });

  it('4/2 with a spare: the spare takes both shards of a removed node, even when it is the one that went first', () => {
    const { spec, mapper } = setup(4, 2);
    askAll(defaultStrategy, ['c1', 'c2', 'spare'], spec, mapper);
    expect(mapper.removeNode(nodeId('c2'))).toEqual([2, 3]);
    expect(capacity(defaultStrategy, 'spare', spec, mapper)).toBe(2);
    expect(ask(defaultStrategy, 'spare', spec, mapper)).toEqual([2, 3]);
    // the survivor is at the cap and takes nothing more
    expect(capacity(defaultStrategy, 'c1', spec, mapper)).toBe(0);
  });

  it('a partially filled node tops up: 8/3 split 3,3,2, the node with 2 absorbs one shard of a removed node', () => {
    const { spec, mapper } = setup(8, 3);
    askAll(defaultStrategy, ['c1', 'c2', 'c3'], spec, mapper);
    expect(mapper.removeNode(nodeId('c2'))).toEqual([3, 4, 5]);
    // c3 has 2: nodes = 3 − 2 + 1 = 2, want = ceil((3 + 2) / 2) = 3, so one more
    expect(capacity(defaultStrategy, 'c3', spec, mapper)).toBe(1);
    expect(ask(defaultStrategy, 'c3', spec, mapper)).toEqual([3]);
    // c1 already holds the cap of 3
    expect(ask(defaultStrategy, 'c1', spec, mapper)).toEqual([]);
    expect(mapper.unassignedShards()).toEqual([4, 5]);
  });

  it('spare rule: with owners == minNumNodes a spare sizes for nobody else and takes up to the cap, lowest shards first', () => {
    const { spec, mapper } = setup(16, 4);
    askAll(defaultStrategy, ['c1', 'c2', 'c3', 'c4'], spec, mapper);
    // free five shards without losing an owner: c1 keeps 3, c2 keeps 6 and 7
    for (const s of [0, 1, 2, 4, 5]) {
      const r = mapper.unassignShard(s);
      if (!r.ok) throw r.error;
    }
    expect(mapper.numAssignedNodes).toBe(4);
    expect(capacity(defaultStrategy, 'spare', spec, mapper)).toBe(4);
    expect(ask(defaultStrategy, 'spare', spec, mapper)).toEqual([0, 1, 2, 4]);
    expect(mapper.unassignedShards()).toEqual([5]);
  });

  it('more owners than minNumNodes: a spare gets nothing; an owner gets "up to the cap" or nothing depending on the excess', () => {
    // 4/2 with three owners: nodes for a spare = 2 − 3 = −1 → nothing; for an owner = 0 → up to the cap of 2
    const three = setup(4, 2);
    for (const [s, c] of [
      [0, 'c1'],
      [1, 'c2'],
      [2, 'c3'],
    ] as const) {
      const r = three.mapper.registerNode([s], nodeId(c));
      if (!r.ok) throw r.error;
    }
    expect(capacity(defaultStrategy, 'spare', three.spec, three.mapper)).toBe(0);
    expect(ask(defaultStrategy, 'spare', three.spec, three.mapper)).toEqual([]);
    expect(ask(defaultStrategy, 'c1', three.spec, three.mapper)).toEqual([3]);

    // 8/2 with four owners: nodes for an owner = 2 − 4 + 1 = −1 → nothing, though four shards are free
    const four = setup(8, 2);
    for (const [s, c] of [
      [0, 'c1'],
      [1, 'c2'],
      [2, 'c3'],
      [3, 'c4'],
    ] as const) {
      const r = four.mapper.registerNode([s], nodeId(c));
      if (!r.ok) throw r.error;
    }
    expect(four.mapper.unassignedShards()).toEqual([4, 5, 6, 7]);
    for (const n of ['c1', 'c2', 'c3', 'c4', 'spare']) {
      expect(capacity(defaultStrategy, n, four.spec, four.mapper)).toBe(0);
      expect(ask(defaultStrategy, n, four.spec, four.mapper)).toEqual([]);
    }
  });

  it('never gives a node more than ceil(numShards / minNumNodes), even when sizing would allow more', () => {
    // 8/4, cap 2. Three owners hold one shard each; a fourth node sizes for itself alone (want = 5) but is capped at 2.
    const { spec, mapper } = setup(8, 4);
    for (const [s, c] of [
      [0, 'c1'],
      [1, 'c2'],
      [2, 'c3'],
    ] as const) {
      const r = mapper.registerNode([s], nodeId(c));
      if (!r.ok) throw r.error;
    }
    expect(capacity(defaultStrategy, 'c4', spec, mapper)).toBe(2);
    expect(ask(defaultStrategy, 'c4', spec, mapper)).toEqual([3, 4]);
  });

  it('with minNumNodes 1 a single node takes every shard; with fewer live nodes than minNumNodes shards stay unassigned', () => {
    const one = setup(4, 1);
    expect(ask(defaultStrategy, 'c1', one.spec, one.mapper)).toEqual([0, 1, 2, 3]);

    const under = setup(8, 4);
    expect(askAll(defaultStrategy, ['c1', 'c2'], under.spec, under.mapper)).toEqual([
      [0, 1],
      [2, 3],
    ]);
    expect(under.mapper.unassignedShards()).toEqual([4, 5, 6, 7]);
  });

  it('never hands out an assigned shard: it only picks among unassigned ones', () => {
    const { spec, mapper } = setup(8, 2);
    const r = mapper.registerNode([0, 2, 4], nodeId('other'));
    if (!r.ok) throw r.error;
    expect(ask(defaultStrategy, 'c1', spec, mapper)).toEqual([1, 3, 5, 6]);
    expect(mapper.shardsForNode(nodeId('other'))).toEqual([0, 2, 4]);
  });

  it('held shards are never returned and do not count as free', () => {
    // 8/3 with 0 and 1 held: six free, so c1 sizes for ceil(6/3) = 2 (3 without the hold) and skips 0 and 1
    const { spec, mapper } = setup(8, 3, [0, 1]);
    expect(capacity(defaultStrategy, 'c1', spec, mapper)).toBe(2);
    expect(ask(defaultStrategy, 'c1', spec, mapper)).toEqual([2, 3]);
    expect(askAll(defaultStrategy, ['c2', 'c3'], spec, mapper)).toEqual([
      [4, 5],
      [6, 7],
    ]);
    expect(mapper.unassignedShards()).toEqual([0, 1]);
    // only held shards left: nothing to give, no capacity
    expect(capacity(defaultStrategy, 'c4', spec, mapper)).toBe(0);
    expect(ask(defaultStrategy, 'c4', spec, mapper)).toEqual([]);
  });

  it('held shards are skipped even by a spare that may take up to the cap', () => {
    const { spec, mapper } = setup(4, 2);
    askAll(defaultStrategy, ['c1', 'c2'], spec, mapper);
    mapper.removeNode(nodeId('c1'));
    const heldSpec: AssignmentSpec = { ...spec, held: new Set([0]) };
    expect(ask(defaultStrategy, 'spare', heldSpec, mapper)).toEqual([1]);
    expect(mapper.unassignedShards()).toEqual([0]);
  });
});

describe('OrdinalBlockShardAssignmentStrategy (reference §4.3)', () => {
  it('gives each ordinal its block whatever order the nodes are asked in', () => {
    const { spec, mapper } = setup(8, 5);
    expect(askAll(k8sStrategy, ['node-4', 'node-2', 'node-0', 'node-3', 'node-1'], spec, mapper)).toEqual([[7], [4, 5], [0, 1], [6], [2, 3]]);
  });

  it('a node without an ordinal gets nothing and has no capacity', () => {
    const { spec, mapper } = setup(8, 5);
    for (const n of ['spare', 'node', 'node-x', 'node-1a']) {
      expect(capacity(k8sStrategy, n, spec, mapper)).toBe(0);
      expect(ask(k8sStrategy, n, spec, mapper)).toEqual([]);
    }
    expect(mapper.numUnassignedShards).toBe(8);
  });

  it('a node with ordinal >= minNumNodes gets nothing and has no capacity (no throw)', () => {
    const { spec, mapper } = setup(8, 5);
    for (const n of ['node-5', 'node-6', 'node-100']) {
      expect(capacity(k8sStrategy, n, spec, mapper)).toBe(0);
      expect(ask(k8sStrategy, n, spec, mapper)).toEqual([]);
    }
    expect(mapper.numUnassignedShards).toBe(8);
  });

  it('a restarted pod gets exactly its block back; no other ordinal takes it meanwhile', () => {
    const { spec, mapper } = setup(16, 4);
    askAll(k8sStrategy, ['node-0', 'node-1', 'node-2', 'node-3'], spec, mapper);
    expect(mapper.removeNode(nodeId('node-1'))).toEqual([4, 5, 6, 7]);
    for (const n of ['node-0', 'node-2', 'node-3']) expect(ask(k8sStrategy, n, spec, mapper)).toEqual([]);
    expect(ask(k8sStrategy, 'node-1', spec, mapper)).toEqual([4, 5, 6, 7]);
  });

  it('skips block shards owned by someone else and held shards', () => {
    const { spec, mapper } = setup(16, 4, [2]);
    const r = mapper.registerNode([1], nodeId('intruder'));
    if (!r.ok) throw r.error;
    expect(ask(k8sStrategy, 'node-0', spec, mapper)).toEqual([0, 3]);
  });
});

describe('shardsForOrdinal (reference §4.4, FiloDbClusterDiscoverySpec)', () => {
  it('16 shards over minNumNodes 4: ordinals 0..3 get blocks of 4', () => {
    expect(range(0, 4).map((o) => shardsForOrdinal(o, 16, 4))).toEqual([range(0, 4), range(4, 8), range(8, 12), range(12, 16)]);
  });

  it('8 shards over minNumNodes 4: ordinal 4 throws InvalidIdError', () => {
    expect(shardsForOrdinal(3, 8, 4)).toEqual([6, 7]);
    expect(() => shardsForOrdinal(4, 8, 4)).toThrow(InvalidIdError);
  });

  it('8 shards over minNumNodes 5: [0,1], [2,3], [4,5], [6], [7]; ordinal 5 throws InvalidIdError', () => {
    expect(range(0, 5).map((o) => shardsForOrdinal(o, 8, 5))).toEqual([[0, 1], [2, 3], [4, 5], [6], [7]]);
    expect(() => shardsForOrdinal(5, 8, 5)).toThrow(InvalidIdError);
  });

  it('negative or fractional ordinals throw InvalidIdError', () => {
    expect(() => shardsForOrdinal(-1, 8, 5)).toThrow(InvalidIdError);
    expect(() => shardsForOrdinal(1.5, 8, 5)).toThrow(InvalidIdError);
  });

  it('the blocks of all ordinals cover every shard once, in order, with sizes differing by at most one', () => {
    for (const [numShards, minNumNodes] of [
      [8, 3],
      [16, 5],
      [64, 7],
      [4, 4],
      [2, 3],
      [256, 10],
    ] as const) {
      const blocks = range(0, minNumNodes).map((o) => shardsForOrdinal(o, numShards, minNumNodes));
      expect(blocks.flat()).toEqual(range(0, numShards));
      const sizes = blocks.map((b) => b.length);
      expect(Math.max(...sizes) - Math.min(...sizes)).toBeLessThanOrEqual(1);
    }
  });
});

describe('ordinalOf', () => {
  it('reads the trailing -N of a StatefulSet-style node id', () => {
    expect(ordinalOf(nodeId('node-0'))).toBe(0);
    expect(ordinalOf(nodeId('filodb-3'))).toBe(3);
    expect(ordinalOf(nodeId('node-12'))).toBe(12);
    expect(ordinalOf(nodeId('my-set-2-7'))).toBe(7);
  });

  it('is undefined without a trailing -N', () => {
    for (const id of ['node', 'node-', 'node-1a', 'node_3', '12', 'node.4']) {
      expect(ordinalOf(nodeId(id))).toBeUndefined();
    }
  });
});
