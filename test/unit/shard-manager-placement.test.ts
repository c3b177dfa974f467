// Replicas, the balanced strategy, planned handoffs and the node operations (drain, replace, add)
// through ShardManager.decide on hand-built states: what an operator and the nodes would see.
import { describe, expect, it } from 'vitest';
import { validateDatasetConfig, type DatasetConfig } from '../../src/core/dataset-config.js';
import { epoch, incarnation, nodeId, replyTo, type DatasetRef, type ShardNum } from '../../src/core/ids.js';
import type { Member, Reply } from '../../src/core/shard-manager/protocol.js';
import type { ShardMapper } from '../../src/core/shard-mapper.js';
import { isServingCopy } from '../../src/core/shard-record.js';
import { ShardEvents } from '../../src/core/status.js';
import { BalancedPlacementStrategy } from '../../src/core/placement/balanced-strategy.js';
import { listWaitingMoves } from '../../src/core/shard-manager/planned-moves.js';
import type { PlacementStrategy } from '../../src/core/placement/placement-types.js';
import { adminReplyTo, ds1, emptyRecovery, Harness, noticesNamed, replyOf } from '../support/manager-harness.js';

const s = (x: number) => x as ShardNum;

function balanced(ref: DatasetRef, numShards: number, replicationFactor: number, extra: Record<string, unknown> = {}): DatasetConfig {
  const r = validateDatasetConfig({ ref, numShards, minNumNodes: 1, replicationFactor, strategy: 'balanced', source: { type: 'synthetic' }, ...extra });
  if (!r.ok) throw new Error(r.error.message);
  return r.value;
}

function filodb(ref: DatasetRef, numShards: number, minNumNodes: number, extra: Record<string, unknown> = {}): DatasetConfig {
  const r = validateDatasetConfig({ ref, numShards, minNumNodes, source: { type: 'synthetic' }, ...extra });
  if (!r.ok) throw new Error(r.error.message);
  return r.value;
}

let joined = 0;
const member = (name: string, rack?: string): Member => ({
  node: nodeId(name),
  incarnation: incarnation(`${name}#1`),
  joinedAt: ++joined,
  ...(rack === undefined ? {} : { rack }),
});

/** Rounds at every membership change (no settle window): these tests are about what one round does. */
function cluster(nodes: readonly [string, string?][]): Harness {
  const h = new Harness({ settleWindowMs: 0 });
  for (const [name, rack] of nodes) h.run({ type: 'MemberUp', member: member(name, rack) });
  return h;
}

const setup = (h: Harness, config: DatasetConfig): Reply | undefined => replyOf(h.run({ type: 'SetupDataset', config, replyTo: adminReplyTo() }));
const op = (
  h: Harness,
  input: { type: 'RemoveNode'; node: string } | { type: 'ReplaceNode'; old: string; new: string } | { type: 'AddNode'; node: string },
): Reply | undefined => replyOf(h.run({ ...input, replyTo: adminReplyTo() } as Parameters<Harness['run']>[0]));

/** The Initializing copies report IngestionStarted (they caught up): once, or until none is left. */
function catchUp(h: Harness, ref: DatasetRef, once = false): void {
  for (;;) {
    const m = h.mapper(ref);
    const pending = m.assignedShards().flatMap((shard) =>
      m
        .recordForShard(shard)
        .assignments.filter((a) => a.placement === 'Initializing')
        .map((a) => ({ shard, node: a.node })),
    );
    if (pending.length === 0) return;
    for (const p of pending) h.report(p.node, ShardEvents.ingestionStarted(ref, p.shard, p.node));
    if (once) return;
  }
}

const loads = (m: ShardMapper, nodes: readonly string[]) => nodes.map((x) => m.numShardsForNode(nodeId(x)));
const spread = (xs: number[]) => Math.max(...xs) - Math.min(...xs);
const rackOf = (h: Harness, node: string) => h.state.members.find((m) => m.node === node)?.rack;

/** Shards without a serving copy. */
const unserved = (m: ShardMapper) =>
  m.assignedShards().filter((shard) => !m.recordForShard(shard).assignments.some(isServingCopy)).length + m.numUnassignedShards;

describe('balanced datasets', () => {
  it('place every replica in a distinct rack, evenly', () => {
    const h = cluster([
      ['a1', 'A'],
      ['a2', 'A'],
      ['b1', 'B'],
      ['b2', 'B'],
      ['c1', 'C'],
      ['c2', 'C'],
    ]);
    expect(setup(h, balanced(ds1, 16, 3))?.type).toBe('DatasetVerified');
    const m = h.mapper(ds1);
    for (let shard = 0; shard < 16; shard++) {
      const nodes = m.nodesForShard(shard);
      expect(nodes).toHaveLength(3);
      expect(new Set(nodes.map((x) => rackOf(h, x))).size).toBe(3);
    }
    expect(loads(m, ['a1', 'a2', 'b1', 'b2', 'c1', 'c2'])).toEqual([8, 8, 8, 8, 8, 8]);
  });

  it('refuse a replication factor above the racks the members span, creating nothing', () => {
    const h = cluster([
      ['a1', 'A'],
      ['b1', 'B'],
    ]);
    const reply = setup(h, balanced(ds1, 8, 3));
    expect(reply).toMatchObject({ type: 'IsolationImpossible', replicationFactor: 3, groups: ['A', 'B'] });
    expect(h.state.datasets.size).toBe(0);
  });

  it('a node that joins gets its share through handoffs: the old copy serves until the new one caught up', () => {
    const h = cluster([['n1'], ['n2'], ['n3'], ['n4']]);
    setup(h, balanced(ds1, 8, 1));
    catchUp(h, ds1);
    h.run({ type: 'MemberUp', member: member('n5') });
    const m = h.mapper(ds1);
    const leaving = m.assignedShards().filter((shard) => m.recordForShard(shard).assignments.some((a) => a.placement === 'Leaving'));
    // ⌊8/5⌋ = 1 move is the lower bound: 8 = 2+2+2+1+1, so n5 takes one shard and the rest stay put.
    expect(leaving).toHaveLength(1);
    expect(unserved(m)).toBe(0);
    const shard = leaving[0]!;
    expect(m.copyOnNode(shard, nodeId('n5'))?.placement).toBe('Initializing');
    // The new copy catches up: only then is the Leaving one removed.
    h.report('n5', ShardEvents.ingestionStarted(ds1, s(shard), nodeId('n5')));
    expect(h.mapper(ds1).nodesForShard(shard)).toEqual(['n5']);
    expect(noticesNamed(h.effects, 'shard.handoff-completed')).toHaveLength(1);
    expect(spread(loads(h.mapper(ds1), ['n1', 'n2', 'n3', 'n4', 'n5']))).toBe(1);
  });

  it('start at most maxConcurrentMoves planned moves at a time, the next ones as handoffs finish', () => {
    const h = cluster([['n1'], ['n2']]);
    setup(h, balanced(ds1, 16, 1, { maxConcurrentMoves: 2 }));
    catchUp(h, ds1);
    h.run({ type: 'MemberUp', member: member('n3') });
    h.run({ type: 'MemberUp', member: member('n4') });
    const inFlight = () =>
      h
        .mapper(ds1)
        .assignedShards()
        .filter((shard) =>
          h
            .mapper(ds1)
            .recordForShard(shard)
            .assignments.some((a) => a.placement === 'Leaving'),
        ).length;
    let rounds = 0;
    while (inFlight() > 0) {
      expect(inFlight()).toBeLessThanOrEqual(2);
      expect(unserved(h.mapper(ds1))).toBe(0);
      catchUp(h, ds1, true);
      rounds++;
    }
    expect(loads(h.mapper(ds1), ['n1', 'n2', 'n3', 'n4'])).toEqual([4, 4, 4, 4]);
    expect(rounds).toBe(4); // 8 moves, two at a time
  });

  it('give every new node and rack its turn while moves are throttled: none waits empty while others fill', () => {
    const h = cluster([
      ['a1', 'A'],
      ['b1', 'B'],
      ['c1', 'C'],
    ]);
    setup(h, balanced(ds1, 1024, 3, { maxConcurrentMoves: 16 }));
    catchUp(h, ds1);
    const joiners = ['a2', 'b2', 'c2'];
    for (const [name, rack] of [
      ['a2', 'A'],
      ['b2', 'B'],
      ['c2', 'C'],
    ] as const)
      h.run({ type: 'MemberUp', member: member(name, rack) });
    const held = () => joiners.map((n) => h.mapper(ds1).copiesForNode(nodeId(n)).length);
    let rounds = 0;
    for (; rounds < 500; rounds++) {
      const before = held();
      catchUp(h, ds1, true);
      const after = held();
      if (
        after.every((x, i) => x === before[i]) &&
        !h
          .mapper(ds1)
          .assignedShards()
          .some((shard) =>
            h
              .mapper(ds1)
              .recordForShard(shard)
              .assignments.some((a) => a.placement !== 'Available'),
          )
      )
        break;
      // After the first rounds, every joiner holds copies, and none is more than a budget ahead of another.
      if (rounds >= 2) expect(Math.min(...after), `round ${rounds}: ${after.join(', ')}`).toBeGreaterThan(0);
      expect(spread(after), `round ${rounds}: ${after.join(', ')}`).toBeLessThanOrEqual(16 + 1);
    }
    expect(loads(h.mapper(ds1), ['a1', 'a2', 'b1', 'b2', 'c1', 'c2'])).toEqual([512, 512, 512, 512, 512, 512]);
    expect(unserved(h.mapper(ds1))).toBe(0);
  });
});

describe('drain (RemoveNode)', () => {
  it('hands every copy off, never leaves a shard unserved, then releases the node', () => {
    const h = cluster([['n1'], ['n2'], ['n3']]);
    setup(h, filodb(ds1, 8, 2));
    catchUp(h, ds1);
    const victim = h.mapper(ds1).shardsForNode(nodeId('n3'));
    expect(victim.length).toBeGreaterThan(0);
    const reply = op(h, { type: 'RemoveNode', node: 'n3' });
    expect(reply).toMatchObject({ type: 'NodeOperationAccepted', operation: 'remove', moves: victim.length, pending: false });
    const m = h.mapper(ds1);
    for (const shard of victim) expect(m.copyOnNode(shard, nodeId('n3'))?.placement).toBe('Leaving');
    expect(unserved(m)).toBe(0);
    expect(h.effects.some((e) => e.type === 'PersistNodeOperations')).toBe(true);
    catchUp(h, ds1);
    expect(h.mapper(ds1).shardsForNode(nodeId('n3'))).toEqual([]);
    expect(h.mapper(ds1).numAssignedShards).toBe(8);
    expect(h.effects.filter((e) => e.type === 'ReleaseNode').map((e) => e.type === 'ReleaseNode' && e.node)).toEqual(['n3']);
    // A drained member gets nothing new, even when shards free up.
    h.run({ type: 'MemberUp', member: member('n4') });
    expect(h.mapper(ds1).shardsForNode(nodeId('n3'))).toEqual([]);
  });

  it("is refused, changing nothing, when the others have no room under FiloDB's cap", () => {
    const h = cluster([['n1'], ['n2']]);
    setup(h, filodb(ds1, 8, 2)); // cap 4 each: both full
    const before = h.mapper(ds1);
    expect(op(h, { type: 'RemoveNode', node: 'n1' })).toMatchObject({ type: 'NodeOperationRefused', reason: 'capacity' });
    expect(h.mapper(ds1)).toBe(before);
    expect(h.state.operations.draining).toEqual([]);
  });

  it('refuses a malformed or unknown node with a typed reason', () => {
    const h = cluster([['n1']]);
    expect(op(h, { type: 'RemoveNode', node: 'bad node!' })).toMatchObject({ type: 'NodeOperationRefused', reason: 'bad-node' });
    expect(op(h, { type: 'RemoveNode', node: 'ghost' })).toMatchObject({ type: 'NodeOperationRefused', reason: 'unknown-node' });
  });

  it('AddNode undoes a drain: the planned moves roll back where the strategy keeps the copies', () => {
    const h = cluster([['n1'], ['n2'], ['n3'], ['n4']]);
    setup(h, balanced(ds1, 8, 1));
    catchUp(h, ds1);
    const held = h.mapper(ds1).shardsForNode(nodeId('n2'));
    op(h, { type: 'RemoveNode', node: 'n2' });
    expect(
      h
        .mapper(ds1)
        .copiesForNode(nodeId('n2'))
        .every((c) => c.copy.placement === 'Leaving'),
    ).toBe(true);
    expect(op(h, { type: 'AddNode', node: 'n2' })).toMatchObject({ type: 'NodeOperationAccepted', operation: 'add' });
    const m = h.mapper(ds1);
    expect(m.shardsForNode(nodeId('n2'))).toEqual(held);
    expect(m.copiesForNode(nodeId('n2')).every((c) => c.copy.placement === 'Available')).toBe(true);
    // The copies that had started elsewhere were dropped: one copy per shard again.
    for (const shard of held) expect(m.nodesForShard(shard)).toEqual(['n2']);
    expect(h.state.operations.draining).toEqual([]);
  });
});

describe('AddNode after a drain finished (issue 33: "moves":0, then handoffs seconds later)', () => {
  it('gives the node its share in the same decision, and the answer counts those moves', () => {
    const h = cluster([['n1'], ['n2'], ['n3'], ['n4']]);
    setup(h, balanced(ds1, 8, 1));
    catchUp(h, ds1);
    op(h, { type: 'RemoveNode', node: 'n4' });
    catchUp(h, ds1);
    expect(h.mapper(ds1).shardsForNode(nodeId('n4'))).toEqual([]);
    const reply = op(h, { type: 'AddNode', node: 'n4' });
    const started = h
      .mapper(ds1)
      .copiesForNode(nodeId('n4'))
      .filter((c) => c.copy.placement === 'Initializing').length;
    expect(started).toBe(2);
    expect(reply).toMatchObject({ type: 'NodeOperationAccepted', operation: 'add', moves: started });
  });
});

describe('AddNode while other copies catch up (sim seed 15579)', () => {
  // A shard whose drained copy is Leaving may have another copy catching up, re-created for a lost
  // node. Taking the drain back must drop the move's own new copy, not that one: dropping the wrong
  // one left the move's copy beside the one taken back, two copies in one rack.
  function drainBesideARecreatedCopy(replace: boolean) {
    const h = cluster([
      ['a1', 'A'],
      ['a2', 'A'],
      ['b1', 'B'],
      ['b2', 'B'],
      ['c1', 'C'],
      ['c2', 'C'],
    ]);
    setup(h, balanced(ds1, 16, 2, { replacementDelayMs: 0 }));
    catchUp(h, ds1);
    const before = h.mapper(ds1);
    // The other copy of a2's first shard is lost first: re-created elsewhere, it still catches up.
    const lost = before.nodesForShard(before.shardsForNode(nodeId('a2'))[0]!).find((x) => x !== 'a2')!;
    const shards = before.shardsForNode(nodeId('a2')).filter((shard) => before.nodesForShard(shard).includes(lost));
    h.run({ type: 'MemberDown', node: lost, incarnation: incarnation(`${lost}#1`) });
    const recreated = new Map(
      shards.map((shard) => [
        shard,
        h
          .mapper(ds1)
          .recordForShard(shard)
          .assignments.filter((a) => a.placement === 'Initializing')
          .map((a) => a.node),
      ]),
    );
    expect([...recreated.values()].every((nodes) => nodes.length === 1)).toBe(true);
    if (replace) {
      op(h, { type: 'ReplaceNode', old: 'a2', new: 'a3' });
      h.run({ type: 'MemberUp', member: member('a3', 'A') });
    } else {
      op(h, { type: 'RemoveNode', node: 'a2' });
    }
    expect(
      shards.some(
        (shard) =>
          h
            .mapper(ds1)
            .recordForShard(shard)
            .assignments.filter((a) => a.placement === 'Initializing').length === 2,
      ),
    ).toBe(true);
    expect(op(h, { type: 'AddNode', node: 'a2' })).toMatchObject({ type: 'NodeOperationAccepted', operation: 'add' });
    const after = h.mapper(ds1);
    for (const shard of shards) {
      const nodes = after.nodesForShard(shard);
      expect(nodes).toContain(nodeId('a2'));
      // A replacement's new copy is known: the re-created copy stays. A plain drain's is not (any
      // copy catching up may be it): one of them goes, and the racks stay distinct.
      if (replace) for (const x of recreated.get(shard)!) expect(nodes).toContain(x);
      expect(nodes).toHaveLength(2);
      expect(new Set(nodes.map((x) => rackOf(h, x))).size).toBe(nodes.length);
    }
  }

  it("a replacement taken back drops the new node's copy", () => drainBesideARecreatedCopy(true));
  it('a drain taken back drops one copy catching up, and the racks stay distinct', () => drainBesideARecreatedCopy(false));
});

describe('replace (ReplaceNode)', () => {
  it("waits for the new node, then moves exactly the old node's copies into it", () => {
    const h = cluster([
      ['a1', 'A'],
      ['a2', 'A'],
      ['b1', 'B'],
      ['b2', 'B'],
    ]);
    setup(h, balanced(ds1, 16, 2));
    catchUp(h, ds1);
    const before = h.mapper(ds1);
    const old = before.shardsForNode(nodeId('a2'));
    expect(op(h, { type: 'ReplaceNode', old: 'a2', new: 'a3' })).toMatchObject({ type: 'NodeOperationAccepted', pending: true, moves: 0 });
    expect(h.state.operations.replacements).toEqual([{ old: 'a2', new: 'a3' }]);
    h.run({ type: 'MemberUp', member: member('a3', 'A') });
    const during = h.mapper(ds1);
    // The lower bound a_x: the new node takes exactly the old node's copies, nobody else moves.
    expect(during.shardsForNode(nodeId('a3'))).toEqual(old);
    let moved = 0;
    for (let shard = 0; shard < 16; shard++) moved += during.nodesForShard(shard).filter((x) => !before.nodesForShard(shard).includes(x)).length;
    expect(moved).toBe(old.length);
    expect(unserved(during)).toBe(0);
    catchUp(h, ds1);
    expect(h.mapper(ds1).shardsForNode(nodeId('a2'))).toEqual([]);
    expect(h.effects.some((e) => e.type === 'ReleaseNode' && e.node === 'a2')).toBe(true);
  });

  it('is refused when the new node already serves, or sits in another rack than the old one', () => {
    // One shard × RF 2 over racks A and B: a1 and one B node hold it, the other B node is idle.
    const h = cluster([
      ['a1', 'A'],
      ['b1', 'B'],
      ['b2', 'B'],
    ]);
    setup(h, balanced(ds1, 1, 2));
    const holders = h.mapper(ds1).nodesForShard(0);
    const idle = ['b1', 'b2'].find((x) => !holders.includes(nodeId(x)))!;
    const busy = ['b1', 'b2'].find((x) => holders.includes(nodeId(x)))!;
    expect(op(h, { type: 'ReplaceNode', old: 'a1', new: busy })).toMatchObject({ type: 'NodeOperationRefused', reason: 'serving' });
    expect(op(h, { type: 'ReplaceNode', old: 'a1', new: idle })).toMatchObject({ type: 'NodeOperationRefused', reason: 'isolation' });
    expect(op(h, { type: 'ReplaceNode', old: 'a1', new: 'a1' })).toMatchObject({ type: 'NodeOperationRefused', reason: 'bad-node' });
    expect(h.state.operations).toMatchObject({ draining: [], replacements: [] });
  });
});

describe('failover in the middle of a handoff', () => {
  it("the new singleton finishes it: the map and the drain survive, the new copy's report completes it", () => {
    const h = cluster([['n1'], ['n2'], ['n3']]);
    setup(h, filodb(ds1, 8, 2));
    catchUp(h, ds1);
    op(h, { type: 'RemoveNode', node: 'n3' });
    const mid = h.mapper(ds1).toSnapshot(h.state.epoch);
    const ops = h.state.operations;
    const members = h.state.members;
    // A new singleton at epoch 2 recovers from what was persisted.
    const h2 = new Harness({}, { ...emptyRecovery(2, members), datasets: [filodb(ds1, 8, 2)], maps: [mid], operations: ops });
    const m = h2.mapper(ds1);
    expect(m.copiesForNode(nodeId('n3')).every((c) => c.copy.placement === 'Leaving')).toBe(true);
    expect(unserved(m)).toBe(0);
    catchUp(h2, ds1);
    expect(h2.mapper(ds1).shardsForNode(nodeId('n3'))).toEqual([]);
    expect(h2.effects.some((e) => e.type === 'ReleaseNode' && e.node === 'n3')).toBe(true);
    expect(h2.state.epoch).toBe(epoch(2));
  });

  it("when the new copy's node dies, the Leaving copy keeps serving and the move starts again elsewhere", () => {
    // FiloDB's strategy: n3 = [0..3], n2 = [4..7], n1 idle; n4 joins idle (FiloDB never rebalances).
    const h = cluster([['n1'], ['n2'], ['n3']]);
    setup(h, filodb(ds1, 8, 2));
    catchUp(h, ds1);
    h.run({ type: 'MemberUp', member: member('n4') });
    expect(op(h, { type: 'ReplaceNode', old: 'n3', new: 'n4' })).toMatchObject({ type: 'NodeOperationAccepted', moves: 4, pending: false });
    expect(h.mapper(ds1).shardsForNode(nodeId('n4'))).toEqual([0, 1, 2, 3]);
    h.removeMember('n4');
    expect(unserved(h.mapper(ds1))).toBe(0);
    // n3 stays drained, now into whichever member has room (n1; n2 is at FiloDB's cap of 4).
    expect(h.state.operations).toMatchObject({ draining: ['n3'], replacements: [] });
    expect(h.mapper(ds1).shardsForNode(nodeId('n1'))).toEqual([0, 1, 2, 3]);
    catchUp(h, ds1);
    expect(h.mapper(ds1).shardsForNode(nodeId('n3'))).toEqual([]);
    expect(h.effects.some((e) => e.type === 'ReleaseNode' && e.node === 'n3')).toBe(true);
  });
});

describe('draining a node whose single copy is still catching up', () => {
  it('keeps the copy in the map as Leaving until its successor caught up: its node may still be writing, and the map names both writers', () => {
    // One shard, FiloDB's strategy (a single copy): a1 holds it, still catching up, when it is drained.
    const h = cluster([['a1'], ['b1']]);
    setup(h, filodb(ds1, 1, 1));
    const owner = h.mapper(ds1).nodeForShard(0)!;
    const other = owner === 'a1' ? 'b1' : 'a1';
    h.report(owner, ShardEvents.recoveryInProgress(ds1, s(0), nodeId(owner), 40));
    expect(op(h, { type: 'RemoveNode', node: owner })?.type).toBe('NodeOperationAccepted');
    const copies = () =>
      h
        .mapper(ds1)
        .recordForShard(0)
        .assignments.map((a) => `${a.node}:${a.placement}`)
        .sort();
    expect(copies()).toEqual([`${other}:Initializing`, `${owner}:Leaving`]);
    // Once the new copy caught up, the drained node's copy goes.
    h.report(other, ShardEvents.ingestionStarted(ds1, s(0), nodeId(other)));
    expect(copies()).toEqual([`${other}:Available`]);
  });

  it('drops a replica still catching up at once (a balanced dataset: each copy has its own data)', () => {
    const h = cluster([
      ['a1', 'A'],
      ['b1', 'B'],
      ['b2', 'B'],
    ]);
    setup(h, balanced(ds1, 1, 2));
    const inB = h
      .mapper(ds1)
      .nodesForShard(0)
      .find((n) => n.startsWith('b'))!;
    expect(op(h, { type: 'RemoveNode', node: inB })?.type).toBe('NodeOperationAccepted');
    expect(
      h
        .mapper(ds1)
        .recordForShard(0)
        .assignments.map((a) => a.node),
    ).not.toContain(inB);
  });
});

describe('planned moves that wait for the move budget', () => {
  it('go on as new copies catch up, even when the moves only replaced copies still catching up', () => {
    // Two racks, then a third: every copy is still catching up when c1 joins, so each move just drops
    // one of them (no Leaving copy, no handoff to finish); one move at a time.
    const h = cluster([
      ['a1', 'A'],
      ['b1', 'B'],
    ]);
    setup(h, balanced(ds1, 8, 2, { maxConcurrentMoves: 1 }));
    h.run({ type: 'MemberUp', member: member('c1', 'C') });
    expect(h.state.datasets.get(ds1)!.waitingMoves?.count).toBeGreaterThan(0);
    // Every new copy that catches up lets the next move start, until the spread is at its bound.
    catchUp(h, ds1);
    const m = h.mapper(ds1);
    expect(loads(m, ['a1', 'b1', 'c1']).sort()).toEqual([5, 5, 6]);
    expect(h.state.datasets.get(ds1)!.waitingMoves?.count).toBe(0);
    for (let shard = 0; shard < 8; shard++) expect(new Set(m.nodesForShard(shard).map((x) => rackOf(h, x))).size).toBe(2);
  });

  it('pair a copy leaving a drained node with a new copy in its own rack, so a half-done swap keeps replicas apart', () => {
    // a2 is drained while its copies still catch up; the moves off it go to a3 (its rack), never
    // leaving two staying copies of a shard in one rack, whatever the budget lets through.
    const h = cluster([
      ['a1', 'A'],
      ['b1', 'B'],
      ['a2', 'A'],
    ]);
    setup(h, balanced(ds1, 8, 2, { maxConcurrentMoves: 1 }));
    expect(op(h, { type: 'RemoveNode', node: 'a2' })?.type).toBe('NodeOperationAccepted');
    h.run({ type: 'MemberUp', member: member('a3', 'A') });
    for (let round = 0; round < 40; round++) {
      const m = h.mapper(ds1);
      for (let shard = 0; shard < 8; shard++) {
        const staying = m
          .recordForShard(shard)
          .assignments.filter((a) => a.placement !== 'Leaving')
          .map((a) => rackOf(h, a.node));
        expect(new Set(staying).size, `shard ${shard}: ${staying.join(', ')}`).toBe(staying.length);
      }
      if (m.shardsForNode(nodeId('a2')).length === 0) break;
      catchUp(h, ds1, true);
    }
    expect(h.mapper(ds1).shardsForNode(nodeId('a2'))).toEqual([]);
  });
});

describe('a join wave under the move budget', () => {
  /** The balanced strategy, counting how often the singleton asks it for a whole map. */
  function countingPlacement() {
    const inner = new BalancedPlacementStrategy();
    const counter = { asked: 0, name: inner.name, place: (input: Parameters<PlacementStrategy['place']>[0]) => (counter.asked++, inner.place(input)) };
    return counter;
  }

  it('starts exactly the copies the placement needs, asking the strategy once per decision, not once per copy catching up', () => {
    // 1024 × 3 on three racks of one node, then one more node per rack: each new node takes half of
    // its rack's copies, 1536 moves in all, 16 at a time. Asking the strategy again for each copy that
    // caught up made a join wave quadratic in the map's size (issue 34).
    const placement = countingPlacement();
    const h = new Harness({ settleWindowMs: 0, placement });
    for (const [name, rack] of [
      ['a1', 'A'],
      ['b1', 'B'],
      ['c1', 'C'],
    ] as const)
      h.run({ type: 'MemberUp', member: member(name, rack) });
    setup(h, balanced(ds1, 1024, 3, { maxConcurrentMoves: 16 }));
    catchUp(h, ds1);
    const copiesOn = (node: string) => h.mapper(ds1).copiesForNode(nodeId(node)).length;
    for (const [name, rack] of [
      ['a2', 'A'],
      ['b2', 'B'],
      ['c2', 'C'],
    ] as const)
      h.run({ type: 'MemberUp', member: member(name, rack) });
    const askedForTheJoins = placement.asked;
    let started = 0;
    for (let batch = 0; batch < 1000; batch++) {
      const before = ['a2', 'b2', 'c2'].reduce((sum, n) => sum + copiesOn(n), 0);
      catchUp(h, ds1, true);
      started = ['a2', 'b2', 'c2'].reduce((sum, n) => sum + copiesOn(n), 0);
      if (started === before && h.mapper(ds1).shardsWithLeavingCopy().length === 0) break;
    }
    expect(loads(h.mapper(ds1), ['a1', 'a2', 'b1', 'b2', 'c1', 'c2'])).toEqual([512, 512, 512, 512, 512, 512]);
    expect(started).toBe(3 * 512); // every copy a new node holds was started once: none moved twice
    expect(unserved(h.mapper(ds1))).toBe(0);
    // 1536 copies caught up in 96 batches; the strategy was asked for none of them.
    expect(placement.asked).toBe(askedForTheJoins);
  });

  it('plans again when an operator stops shards while moves wait, so the rest still balance', () => {
    const placement = countingPlacement();
    const h = new Harness({ settleWindowMs: 0, placement });
    for (const [name, rack] of [
      ['a1', 'A'],
      ['b1', 'B'],
    ] as const)
      h.run({ type: 'MemberUp', member: member(name, rack) });
    setup(h, balanced(ds1, 64, 2, { maxConcurrentMoves: 2 }));
    catchUp(h, ds1);
    h.run({ type: 'MemberUp', member: member('a2', 'A') });
    const waiting = listWaitingMoves(h.state.datasets.get(ds1)!.waitingMoves!);
    expect(waiting.length).toBeGreaterThan(4);
    // Stop four shards a1 keeps in the plan: its share of rack A shrinks, so the waiting moves off
    // it are now too many (followed as planned, they would leave a1 28 copies and a2 32).
    const moving = new Set(waiting.map((m) => m.shard));
    const stopped = h
      .mapper(ds1)
      .shardsForNode(nodeId('a1'))
      .filter((shard) => !moving.has(shard) && h.mapper(ds1).copyOnNode(shard, nodeId('a1'))?.placement === 'Available')
      .slice(0, 4);
    expect(stopped).toHaveLength(4);
    expect(replyOf(h.run({ type: 'StopShards', dataset: ds1, shards: stopped, replyTo: adminReplyTo() }))?.type).toBe('Success');
    const asked = placement.asked;
    catchUp(h, ds1);
    expect(placement.asked).toBeGreaterThan(asked);
    const m = h.mapper(ds1);
    for (const shard of stopped) expect(m.recordForShard(shard)).toMatchObject({ assignments: [], status: { type: 'Stopped' } });
    // 60 shards × 2 copies: A's 60 copies split 30/30 between a1 and a2, and B keeps its 60.
    expect(loads(m, ['a1', 'a2', 'b1'])).toEqual([30, 30, 60]);
    expect(h.state.datasets.get(ds1)!.waitingMoves?.count).toBe(0);
  });
});

describe('requests replayed from the inbox after a failover', () => {
  const changed = (effects: readonly { type: string }[]) => effects.filter((e) => e.type !== 'Reply' && e.type !== 'Notice');

  it('are answered as the first time and change nothing, even when the cluster has changed since', () => {
    // The drain is refused (no other member has room under FiloDB's cap); a new singleton then
    // replays the request from the inbox after a member joined, which would make it acceptable.
    const h = cluster([['n1'], ['n2']]);
    setup(h, filodb(ds1, 8, 2));
    catchUp(h, ds1);
    const request = { type: 'RemoveNode', node: 'n2', replyTo: replyTo('n9@x/req-7') } as const;
    const first = replyOf(h.run(request));
    expect(first).toMatchObject({ type: 'NodeOperationRefused' });
    const stored = h.effects.find((e) => e.type === 'PersistAppliedRequests');
    expect(stored?.type === 'PersistAppliedRequests' && stored.applied.at(-1)).toEqual({
      request: 'n9@x/req-7',
      reply: first,
      fingerprint: expect.stringMatching(/^[0-9a-f]{16}$/),
    });

    const next = new Harness(
      {},
      {
        ...emptyRecovery(2, h.state.members),
        datasets: [...h.state.datasets.values()].map((d) => d.config),
        maps: [h.mapper(ds1).toSnapshot(epoch(1), ds1)],
        applied: stored?.type === 'PersistAppliedRequests' ? stored.applied : [],
      },
    );
    next.run({ type: 'MemberUp', member: member('n3') });
    const again = next.run(request);
    expect(replyOf(again)).toEqual(first);
    expect(changed(again)).toEqual([]);
    expect(noticesNamed(again, 'request.replayed')).toHaveLength(1);
    expect(next.state.operations).toMatchObject({ draining: [], replacements: [] });
    // The same drain asked anew (a new reply address) is a new request: now it is accepted.
    expect(replyOf(next.run({ ...request, replyTo: replyTo('n9@x/req-8') }))).toMatchObject({ type: 'NodeOperationAccepted' });
  });

  it('a dataset set up once is not set up again: the replay gets DatasetVerified and nothing is written', () => {
    const h = cluster([['n1']]);
    const request = { type: 'SetupDataset', config: filodb(ds1, 4, 1), replyTo: replyTo('n1@x/req-1') } as const;
    expect(replyOf(h.run(request))).toEqual({ type: 'DatasetVerified', dataset: ds1 });
    const again = h.run(request);
    expect(replyOf(again)).toEqual({ type: 'DatasetVerified', dataset: ds1 });
    expect(changed(again)).toEqual([]);
  });

  it('a request sent again under its idempotency key, from another address, is answered there as the first time; another request under that key is refused', () => {
    const h = cluster([['n1'], ['n2']]);
    const first = { type: 'SetupDataset', config: filodb(ds1, 4, 1), replyTo: replyTo('n1@x/req-1'), idempotencyKey: 'k-1' } as const;
    expect(replyOf(h.run(first))).toEqual({ type: 'DatasetVerified', dataset: ds1 });
    // The client timed out and sent it again through another node: the same key, a new address.
    const again = h.run({ ...first, replyTo: replyTo('n2@y/req-9') });
    expect(again).toContainEqual({ type: 'Reply', to: 'n2@y/req-9', reply: { type: 'DatasetVerified', dataset: ds1 } });
    expect(changed(again)).toEqual([]);
    // The same key for another request: refused, nothing changes.
    const other = h.run({ type: 'RemoveDataset', dataset: ds1, replyTo: replyTo('n2@y/req-10'), idempotencyKey: 'k-1' });
    expect(replyOf(other)).toMatchObject({ type: 'RequestIdReused' });
    expect(changed(other)).toEqual([]);
    expect(h.state.datasets.has(ds1)).toBe(true);
  });

  it('remembers the last 100 requests only', () => {
    const h = cluster([['n1']]);
    for (let i = 0; i < 120; i++) h.run({ type: 'StopShards', dataset: ds1, shards: [0], replyTo: replyTo(`n1@x/req-${i}`) });
    expect(h.state.applied).toHaveLength(100);
    expect(h.state.applied[0]!.request).toBe('n1@x/req-20');
  });
});
