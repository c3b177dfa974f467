// Operations, not events: a lost node's copies kept for its replacement delay, and the settle window
// that decides the membership events of one operation together, through ShardManager.decide with
// a hand-driven clock (docs/PLACEMENT.md, "Lost nodes and the replacement delay", "Settle window").
import { describe, expect, it } from 'vitest';
import { runtimeSettings } from '../../src/actors/settings.js';
import { validateDatasetConfig, type DatasetConfig } from '../../src/core/dataset-config.js';
import { epoch, incarnation, nodeId, type DatasetRef, type NodeId, type ShardNum } from '../../src/core/ids.js';
import { BalancedPlacementStrategy } from '../../src/core/placement/balanced-strategy.js';
import { placementNode } from '../../src/core/shard-manager/planned-moves.js';
import type { Member, ShardManagerInput } from '../../src/core/shard-manager/protocol.js';
import { SETTLE_WINDOW_BOUND } from '../../src/core/shard-manager/settle-window.js';
import { ShardManager, type ShardManagerOptions } from '../../src/core/shard-manager/shard-manager.js';
import type { ShardMapper } from '../../src/core/shard-mapper.js';
import { isServingCopy } from '../../src/core/shard-record.js';
import { ShardEvents } from '../../src/core/status.js';
import { adminReplyTo, ds1, Harness, noticesNamed, replyOf } from '../support/manager-harness.js';

const SETTLE = 1_000;
const DELAY = 60_000;

function balanced(numShards: number, replicationFactor: number, extra: Record<string, unknown> = {}): DatasetConfig {
  const r = validateDatasetConfig({ ref: ds1, numShards, minNumNodes: 1, replicationFactor, strategy: 'balanced', source: { type: 'synthetic' }, ...extra });
  if (!r.ok) throw new Error(r.error.message);
  return r.value;
}

/** A harness that counts, decision by decision, the copies each one created (a node given a copy it did not hold). */
class Cluster {
  readonly h: Harness;
  created = 0;
  /** When the map changed (ms), in order. */
  readonly changedAt: number[] = [];
  private joined = 0;
  private readonly incarnations = new Map<string, number>();
  private readonly racks = new Map<string, string>();

  constructor(options: ShardManagerOptions = {}) {
    this.h = new Harness({ settleWindowMs: SETTLE, ...options });
  }

  run(input: ShardManagerInput): void {
    const before = this.h.state.datasets.get(ds1)?.mapper;
    this.h.run(input);
    for (const e of this.h.effects) if (e.type === 'ScheduleCheck' && !this.pending.includes(e.at)) this.pending.push(e.at);
    const after = this.h.state.datasets.get(ds1)?.mapper;
    if (before && after) this.created += copiesCreated(before, after);
    if (before && after && before.version !== after.version) this.changedAt.push(this.h.now);
  }

  member(name: string, rack: string): Member {
    this.racks.set(name, rack);
    return { node: nodeId(name), incarnation: incarnation(`${name}#${this.incarnations.get(name) ?? 1}`), joinedAt: ++this.joined, rack };
  }

  up(name: string, rack: string): void {
    this.run({ type: 'MemberUp', member: this.member(name, rack) });
  }

  down(name: string): void {
    const m = this.h.state.members.find((x) => x.node === name)!;
    this.run({ type: 'MemberDown', node: m.node, incarnation: m.incarnation });
  }

  /** The same node back under a new incarnation, as a restarted process joins. */
  restart(name: string): void {
    this.incarnations.set(name, (this.incarnations.get(name) ?? 1) + 1);
    this.up(name, this.racks.get(name)!);
  }

  setup(config: DatasetConfig): void {
    const reply = replyOf(this.h.run({ type: 'SetupDataset', config, replyTo: adminReplyTo() }));
    expect(reply?.type).toBe('DatasetVerified');
  }

  /** Time passes; the timers due (`ScheduleCheck`) fire as the singleton's actor fires them. */
  advance(ms: number): void {
    const end = this.h.now + ms;
    for (;;) {
      const due = this.pending.filter((at) => at <= end);
      if (due.length === 0) break;
      this.h.now = Math.max(this.h.now, Math.min(...due));
      this.pending = this.pending.filter((at) => at > this.h.now);
      this.run({ type: 'CheckCooldowns' });
    }
    this.h.now = end;
  }

  /** Times of the `ScheduleCheck`s not fired yet. */
  private pending: number[] = [];

  /** Every copy that is not serving yet on a member catches up (reports IngestionStarted), until none is left. */
  catchUp(): void {
    for (let i = 0; i < 100; i++) {
      const m = this.mapper;
      const members = new Set(this.h.state.members.map((x) => x.node as string));
      const pending = m.assignedShards().flatMap((shard) =>
        m
          .recordForShard(shard)
          .assignments.filter((a) => members.has(a.node) && a.status.type !== 'Active')
          .map((a) => ({ shard, node: a.node })),
      );
      if (pending.length === 0) return;
      for (const p of pending) {
        this.run({
          type: 'NodeReport',
          node: p.node,
          incarnation: this.h.state.members.find((x) => x.node === p.node)!.incarnation,
          seq: 1,
          events: [ShardEvents.ingestionStarted(ds1, p.shard as ShardNum, p.node)],
        });
      }
    }
    throw new Error('copies never caught up');
  }

  get mapper(): ShardMapper {
    return this.h.mapper(ds1);
  }

  copiesOf(name: string): number {
    return this.mapper.numShardsForNode(nodeId(name));
  }
}

/** (shard, node) pairs in `after` that `before` did not have. */
function copiesCreated(before: ShardMapper, after: ShardMapper): number {
  let n = 0;
  for (let s = 0; s < after.numShards; s++) {
    const had = new Set(before.nodesForShard(s));
    for (const node of after.nodesForShard(s)) if (!had.has(node)) n++;
  }
  return n;
}

/** Shards with no serving copy. */
const unserved = (m: ShardMapper): number[] =>
  Array.from({ length: m.numShards }, (_, s) => s).filter((s) => !m.recordForShard(s).assignments.some(isServingCopy));

/** The copies one decision of the strategy creates from `start` for the final members: the minimum of an operation. */
function oneDecisionMinimum(start: ShardMapper, members: readonly Member[], replicationFactor: number): number {
  const current = Array.from({ length: start.numShards }, (_, s) => start.nodesForShard(s));
  const target = new BalancedPlacementStrategy().place({ numShards: start.numShards, replicationFactor, nodes: members.map(placementNode), current });
  if (!target.ok) throw new Error(target.error.message);
  let n = 0;
  target.value.forEach((nodes, s) => (n += nodes.filter((x) => !current[s]!.includes(x)).length));
  return n;
}

/** Three racks of two nodes, a 3-copy dataset (one copy per rack), every copy serving. */
function threeRacks(extra: Record<string, unknown> = {}, options: ShardManagerOptions = {}): Cluster {
  const c = new Cluster(options);
  for (const [name, rack] of [
    ['a1', 'A'],
    ['a2', 'A'],
    ['b1', 'B'],
    ['b2', 'B'],
    ['c1', 'C'],
    ['c2', 'C'],
  ] as const)
    c.up(name, rack);
  c.setup(balanced(32, 3, extra));
  c.advance(SETTLE);
  c.catchUp();
  c.created = 0;
  return c;
}

describe('a lost node within its replacement delay', () => {
  it('keeps its copies, marked Down, while the other copies serve; nothing moves', () => {
    const c = threeRacks();
    const held = c.copiesOf('a1');
    c.down('a1');
    expect(c.copiesOf('a1')).toBe(held);
    for (const { copy } of c.mapper.copiesForNode(nodeId('a1'))) expect(copy.status.type).toBe('Down');
    expect(noticesNamed(c.h.effects, 'node.absent')).toEqual([
      expect.stringMatching(
        new RegExp(
          `^ds1: a1 is absent: ${held} copies kept for it until \\S+Z \\(\\d+\\) \\(replacementDelayMs 60000\\); 0 shards with no other serving copy re-placed now$`,
        ),
      ),
    ]);
    // An operator asking why those shards lack a copy is told who it is kept for, and until when.
    const described = replyOf(c.h.run({ type: 'DescribeCluster', replyTo: adminReplyTo() }));
    if (described?.type !== 'ClusterDescription') throw new Error('no description');
    expect(described.datasets[0]!.missingCopies).toEqual([
      {
        shards: c.mapper.shardsForNode(nodeId('a1')),
        copies: 2,
        reason: expect.stringMatching(/^a copy is kept for a1 until \S+Z \(\d+\), away within the replacement delay \(replacementDelayMs 60000\)/),
      },
    ]);
    c.advance(DELAY - 1);
    expect(c.created).toBe(0);
    expect(unserved(c.mapper)).toEqual([]);
  });

  it('a check that comes a moment before the delay ends asks again at its end, and then re-creates the copies', () => {
    const c = threeRacks();
    c.down('a1');
    const until = c.h.state.absent.get('a1' as never)!.since + DELAY;
    // The singleton's timer fired 1 ms early by its clock (Node's timers and Date.now() drift apart).
    c.h.now = until - 1;
    c.h.run({ type: 'CheckCooldowns' });
    expect(c.h.effects).toContainEqual({ type: 'ScheduleCheck', at: until });
    expect([...c.h.state.absent.keys()]).toEqual(['a1']);
    c.h.now = until;
    c.h.run({ type: 'CheckCooldowns' });
    expect(noticesNamed(c.h.effects, 'node.absence-ended')).toHaveLength(1);
    expect(c.h.state.absent.size).toBe(0);
  });

  it('takes its copies back when it returns under the same id: they restart on it, nothing moves', () => {
    const c = threeRacks();
    const before = c.mapper.shardsForNode(nodeId('a1'));
    c.down('a1');
    c.advance(20_000);
    c.restart('a1');
    expect(c.mapper.shardsForNode(nodeId('a1'))).toEqual(before);
    // Restarted as any assigned copy: the node runs it, catches up from its own checkpoint, serves.
    for (const { copy } of c.mapper.copiesForNode(nodeId('a1'))) expect(copy.status.type).toBe('Assigned');
    expect(noticesNamed(c.h.effects, 'node.returned')).toEqual([
      expect.stringMatching(new RegExp(`^a1 is back within its replacement delay \\(absent since .+\\): its ${before.length} copies stay and restart on it$`)),
    ]);
    c.advance(DELAY * 2);
    c.catchUp();
    expect(c.mapper.shardsForNode(nodeId('a1'))).toEqual(before);
    for (const { copy } of c.mapper.copiesForNode(nodeId('a1'))) expect(copy.status.type).toBe('Active');
    expect(c.created).toBe(0);
  });

  it('a rolling restart of every node of a 3-rack, 3-copy dataset creates no copy', () => {
    const c = threeRacks();
    const start = c.mapper;
    for (const name of ['a1', 'a2', 'b1', 'b2', 'c1', 'c2']) {
      c.down(name);
      c.advance(15_000); // the process restarts
      c.restart(name);
      c.advance(SETTLE);
      c.catchUp();
    }
    expect(c.created).toBe(0);
    for (let s = 0; s < 32; s++) expect(c.mapper.nodesForShard(s).sort()).toEqual(start.nodesForShard(s).sort());
  });

  it("a rolling restart creates no copy where a capped rack would otherwise pull copies into the absent node's rack (issue 33)", () => {
    // 4 shards at RF 2 over n0@r0 n1@r1 n2@r2 n3@r3 and n4..n7@r0: rack r0 is capped. Over the
    // present nodes alone, a node away left its rack's capacity to its rack mates and copies moved
    // during the delay (2 created by a rolling restart); the bounds as if it were present keep them.
    const c = new Cluster({ settleWindowMs: 1_000 });
    const racks: [string, string][] = [
      ['n0', 'r0'],
      ['n1', 'r1'],
      ['n2', 'r2'],
      ['n3', 'r3'],
      ['n4', 'r0'],
      ['n5', 'r0'],
      ['n6', 'r0'],
      ['n7', 'r0'],
    ];
    for (const [name, rack] of racks) c.up(name, rack);
    c.setup(balanced(4, 2));
    c.advance(SETTLE);
    c.catchUp();
    c.created = 0;
    const start = c.mapper;
    for (const [name] of racks) {
      c.down(name);
      c.advance(15_000);
      c.restart(name);
      c.advance(SETTLE);
      c.catchUp();
    }
    expect(c.created).toBe(0);
    for (let s = 0; s < 4; s++) expect(c.mapper.nodesForShard(s).sort()).toEqual(start.nodesForShard(s).sort());
  });

  it('a restart seen only as a new incarnation keeps every copy, those of single-copy shards too', () => {
    const c = new Cluster();
    for (const [name, rack] of [
      ['n1', 'A'],
      ['n2', 'B'],
      ['n3', 'C'],
    ] as const)
      c.up(name, rack);
    c.setup(balanced(8, 1));
    c.advance(SETTLE);
    c.catchUp();
    c.created = 0;
    const before = c.mapper.shardsForNode(nodeId('n2'));
    c.restart('n2'); // no MemberDown first: the membership saw only the new incarnation
    expect(c.mapper.shardsForNode(nodeId('n2'))).toEqual(before);
    expect(noticesNamed(c.h.effects, 'node.returned')).toEqual([
      expect.stringMatching(/^n2 restarted \(incarnation n2#2\): its \d+ copies stay and restart on it$/),
    ]);
    c.catchUp();
    expect(c.created).toBe(0);
  });

  it('after the delay, its copies are re-created elsewhere (after the settle window that merges such ends)', () => {
    const c = threeRacks();
    const held = c.copiesOf('a1');
    c.down('a1');
    c.advance(DELAY - 1);
    expect(c.copiesOf('a1')).toBe(held);
    c.advance(1);
    expect(noticesNamed(c.h.effects, 'node.absence-ended')).toEqual([
      expect.stringMatching(new RegExp(`^ds1: a1 did not come back within its replacement delay .*: its ${held} copies are re-created elsewhere$`)),
    ]);
    c.advance(SETTLE);
    expect(c.copiesOf('a1')).toBe(0);
    expect(c.created).toBe(held);
    // A rack keeps one copy of each shard: a2, the rack's other node, holds them all.
    expect(c.copiesOf('a2')).toBe(32);
    c.catchUp();
    expect(unserved(c.mapper)).toEqual([]);
  });

  it('an operator removing it (RemoveNode) ends the wait: its copies are re-created now', () => {
    const c = threeRacks();
    const held = c.copiesOf('a1');
    c.down('a1');
    c.advance(5_000);
    const reply = replyOf(c.h.run({ type: 'RemoveNode', node: 'a1', replyTo: adminReplyTo() }));
    expect(reply).toMatchObject({ type: 'NodeOperationAccepted', operation: 'remove', moves: held, pending: false });
    expect(c.copiesOf('a1')).toBe(0);
    expect(c.copiesOf('a2')).toBe(32);
    expect(c.h.state.absent.size).toBe(0);
    expect(noticesNamed(c.h.effects, 'node.absence-ended')).toEqual([
      expect.stringMatching(new RegExp(`^a1, absent since .*, was removed by an operator: its ${held} copies are re-created now$`)),
    ]);
    // Not absent any more: removing it again is refused as for any node that is not a member.
    expect(replyOf(c.h.run({ type: 'RemoveNode', node: 'a1', replyTo: adminReplyTo() }))).toMatchObject({
      type: 'NodeOperationRefused',
      reason: 'unknown-node',
    });
  });

  it('comes back after its delay as a new node: it gets a share, not its old copies', () => {
    const c = threeRacks();
    c.down('a1');
    c.advance(DELAY + SETTLE);
    c.catchUp();
    c.restart('a1');
    expect(noticesNamed(c.h.effects, 'node.returned')).toEqual([]);
  });
});

describe('a lost node whose shards have no other serving copy', () => {
  it('single-copy shards are placed again at once, in the same decision', () => {
    const c = new Cluster();
    for (const [name, rack] of [
      ['n1', 'A'],
      ['n2', 'B'],
      ['n3', 'C'],
    ] as const)
      c.up(name, rack);
    c.setup(balanced(16, 1));
    c.advance(SETTLE);
    c.catchUp();
    c.created = 0;
    const lost = c.copiesOf('n2');
    c.down('n2');
    expect(c.copiesOf('n2')).toBe(0);
    expect(c.mapper.numUnassignedShards).toBe(0);
    expect(c.created).toBe(lost);
    expect(noticesNamed(c.h.effects, 'node.absent')).toEqual([expect.stringContaining(`0 copies kept for it until`)]);
    expect(noticesNamed(c.h.effects, 'node.absent')[0]).toContain(`; ${lost} shards with no other serving copy re-placed now`);
  });

  it('a replicated shard whose other copies are all away is re-placed now; the shards served elsewhere are kept', () => {
    const c = threeRacks();
    // b1 and one C node go: the shards they share with a1 are served by a1 alone (theirs are kept, Down).
    const shared = c.mapper.shardsForNode(nodeId('a1')).filter((s) => c.mapper.nodesForShard(s).includes(nodeId('b1')));
    const cNode = c.mapper.nodesForShard(shared[0]!).find((x) => x.startsWith('c'))!;
    const alone = shared.filter((s) => c.mapper.nodesForShard(s).includes(cNode));
    const servedElsewhere = c.mapper.shardsForNode(nodeId('a1')).filter((s) => !alone.includes(s));
    c.down(cNode);
    c.down('b1');
    c.created = 0;
    c.down('a1');
    for (const s of alone) {
      // a1's copy is gone and a new one (on a2, the only node left in rack A) was placed in this decision.
      expect(c.mapper.copyOnNode(s, nodeId('a1'))).toBeUndefined();
      expect(c.mapper.copyOnNode(s, nodeId('a2'))?.status.type).toBe('Assigned');
    }
    for (const s of servedElsewhere) expect(c.mapper.copyOnNode(s, nodeId('a1'))?.status.type).toBe('Down');
    expect(c.created).toBe(alone.length);
    expect(noticesNamed(c.h.effects, 'node.absent')[0]).toContain(`${servedElsewhere.length} copies kept for it`);
    expect(noticesNamed(c.h.effects, 'node.absent')[0]).toContain(`; ${alone.length} shards with no other serving copy re-placed now`);
  });
});

describe('the settle window', () => {
  it("a replacement seen as a node down then a node up creates the departed node's copies once: the one-decision minimum", () => {
    const c = threeRacks();
    const start = c.mapper;
    const lost = c.copiesOf('a1');
    c.down('a1');
    c.advance(300);
    c.up('a3', 'A');
    expect(noticesNamed(c.h.effects, 'node.absence-ended')).toEqual([
      expect.stringMatching(new RegExp(`^a3 joined while a1 was absent .*: it is taken as its replacement, and a1's ${lost} copies are re-created now$`)),
    ]);
    expect(c.created).toBe(0); // the round waits for the window's end
    c.advance(SETTLE);
    expect(c.copiesOf('a1')).toBe(0);
    const minimum = oneDecisionMinimum(start, c.h.state.members, 3);
    expect(c.created).toBe(lost);
    expect(c.created).toBe(minimum);
    c.catchUp();
    expect(unserved(c.mapper)).toEqual([]);
  });

  it('a node joining as the replacement an operator named for another node does not end the absences', () => {
    const c = threeRacks({}, { settleWindowMs: 0 });
    c.down('a1');
    const reply = replyOf(c.h.run({ type: 'ReplaceNode', old: 'b1', new: 'b3', replyTo: adminReplyTo() }));
    expect(reply).toMatchObject({ type: 'NodeOperationAccepted', pending: true });
    c.up('b3', 'B');
    expect(noticesNamed(c.h.effects, 'node.absence-ended')).toEqual([]);
    expect([...c.h.state.absent.keys()]).toEqual(['a1']);
    expect(c.h.state.operations.draining).toEqual(['b1']);
  });

  it('k nodes added one at a time within the window make one round, the one-decision minimum', () => {
    const c = threeRacks({ maxConcurrentMoves: 1000 });
    const start = c.mapper;
    const version = c.mapper.version;
    for (const [name, rack] of [
      ['a3', 'A'],
      ['b3', 'B'],
      ['c3', 'C'],
    ] as const) {
      c.up(name, rack);
      c.advance(200);
    }
    expect(c.mapper.version).toBe(version);
    expect(c.h.state.datasets.get(ds1)!.roundDueAt).toBe(c.h.now - 200 + SETTLE); // a window after the last
    c.advance(SETTLE);
    expect(c.created).toBe(oneDecisionMinimum(start, c.h.state.members, 3));
    expect(c.created).toBeGreaterThan(0);
    c.catchUp();
    expect(c.created).toBe(oneDecisionMinimum(start, c.h.state.members, 3));
  });

  // Seen from outside: a rack added node by node 300 ms apart, more nodes than one window holds,
  // made two decisions and created more copies than one decision needs (689 where 661 suffice).
  it('an operation longer than one window, its changes less than a window apart, is one decision', () => {
    const c = threeRacks({ maxConcurrentMoves: 1000 });
    const start = c.mapper;
    const version = c.mapper.version;
    const gap = SETTLE * 0.6;
    for (const [name, rack] of [
      ['a3', 'A'],
      ['b3', 'B'],
      ['c3', 'C'],
      ['a4', 'A'],
      ['b4', 'B'],
    ] as const) {
      c.up(name, rack);
      c.advance(gap);
    }
    expect(c.mapper.version).toBe(version); // 2.4 windows long, and not decided yet
    c.advance(SETTLE);
    expect(c.created).toBe(oneDecisionMinimum(start, c.h.state.members, 3));
    expect(c.created).toBeGreaterThan(0);
  });

  it('a stream of changes that never pauses is decided all the same, the bound after its window opened', () => {
    const c = threeRacks({ maxConcurrentMoves: 1000 });
    const version = c.mapper.version;
    const opened = c.h.now;
    const before = c.changedAt.length;
    for (let i = 0; c.h.now < opened + SETTLE_WINDOW_BOUND * SETTLE + SETTLE; i++) {
      c.up(`x${i}`, 'ABC'[i % 3]!);
      c.advance(SETTLE / 2);
    }
    expect(c.mapper.version).toBeGreaterThan(version);
    expect(c.changedAt[before]).toBe(opened + SETTLE_WINDOW_BOUND * SETTLE);
  });

  it('a rack lost node by node creates no copy while its nodes are absent, and after their delay only what the final racks need', () => {
    const c = threeRacks();
    const start = c.mapper;
    c.down('a1');
    c.advance(400);
    c.down('a2');
    c.advance(SETTLE);
    expect(c.created).toBe(0);
    expect(unserved(c.mapper)).toEqual([]);
    c.advance(DELAY + SETTLE);
    c.catchUp();
    expect(c.copiesOf('a1') + c.copiesOf('a2')).toBe(0);
    // Two racks left for three copies: each shard keeps its two, nothing to create.
    expect(c.created).toBe(oneDecisionMinimum(start, c.h.state.members, 3));
  });

  it('a change that leaves a shard without a serving copy decides at once, the changes pending included', () => {
    const c = new Cluster();
    for (const [name, rack] of [
      ['n1', 'A'],
      ['n2', 'B'],
      ['n3', 'C'],
    ] as const)
      c.up(name, rack);
    c.setup(balanced(16, 1, { maxConcurrentMoves: 100 }));
    c.advance(SETTLE);
    c.catchUp();
    c.up('n4', 'A'); // opens the window
    expect(c.h.state.datasets.get(ds1)!.roundDueAt).toBeDefined();
    expect(c.copiesOf('n4')).toBe(0);
    c.down('n1'); // single copies lost: the round runs now, n4 included
    expect(c.h.state.datasets.get(ds1)!.roundDueAt).toBeUndefined();
    expect(c.copiesOf('n4')).toBeGreaterThan(0);
    expect(c.mapper.numUnassignedShards).toBe(0);
  });

  it('a check that comes a moment before the window ends asks again, and the round runs at the end', () => {
    const c = threeRacks({ maxConcurrentMoves: 1000 });
    const version = c.mapper.version;
    c.up('a3', 'A');
    const due = c.h.state.datasets.get(ds1)!.roundDueAt!;
    // The singleton's timer fired 1 ms early by its clock (Node's timers and Date.now() drift apart).
    c.h.now = due - 1;
    c.h.run({ type: 'CheckCooldowns' });
    expect(c.mapper.version).toBe(version);
    expect(c.h.effects).toContainEqual({ type: 'ScheduleCheck', at: due });
    c.h.now = due;
    c.h.run({ type: 'CheckCooldowns' });
    expect(c.mapper.version).toBeGreaterThan(version);
    expect(c.h.state.datasets.get(ds1)!.roundDueAt).toBeUndefined();
  });

  it('0 decides every change at once, as before', () => {
    const c = threeRacks({}, { settleWindowMs: 0 });
    c.up('a3', 'A');
    expect(c.created).toBeGreaterThan(0);
    expect(c.h.state.datasets.get(ds1)!.roundDueAt).toBeUndefined();
  });
});

describe('what the delay does not wait for', () => {
  it('replacementDelayMs 0: the copies are dropped at once and re-created by the round', () => {
    const c = threeRacks({ replacementDelayMs: 0 }, { settleWindowMs: 0 });
    const lost = c.copiesOf('a1');
    c.down('a1');
    expect(c.copiesOf('a1')).toBe(0);
    expect(c.created).toBe(lost);
    expect(noticesNamed(c.h.effects, 'node.absent')).toEqual([]);
    expect(c.h.state.absent.size).toBe(0);
  });

  it('a node being drained that dies is not waited for', () => {
    const c = threeRacks({}, { settleWindowMs: 0 });
    const r = replyOf(c.h.run({ type: 'RemoveNode', node: 'a1', replyTo: adminReplyTo() }));
    expect(r?.type).toBe('NodeOperationAccepted');
    c.down('a1');
    expect(c.copiesOf('a1')).toBe(0);
    expect(c.h.state.absent.size).toBe(0);
  });

  it("FiloDB's datasets re-place at once, as FiloDB does", () => {
    const h = new Harness();
    for (const name of ['n1', 'n2', 'n3']) h.addMember(name);
    h.setup(ds1 as DatasetRef, 8, 2);
    const lost = h.mapper(ds1).shardsForNode(nodeId('n3') as NodeId);
    expect(lost.length).toBeGreaterThan(0);
    h.removeMember('n3');
    expect(h.mapper(ds1).shardsForNode(nodeId('n3'))).toEqual([]);
    expect(lost.every((s) => h.mapper(ds1).nodeForShard(s) !== undefined)).toBe(true);
    expect(h.state.absent.size).toBe(0);
  });
});

describe('a singleton failover (absences are not persisted)', () => {
  /** What a new singleton gathers from the old one's state, with the membership view `members`. */
  const recovering = (c: Cluster, members: readonly Member[]): Harness =>
    new Harness(
      { settleWindowMs: SETTLE },
      {
        epoch: epoch(c.h.state.epoch + 1),
        datasets: [...c.h.state.datasets.values()].map((d) => d.config),
        maps: [...c.h.state.datasets.values()].map((d) => d.mapper.toSnapshot(c.h.state.epoch)),
        subscriptions: [],
        watchers: [],
        cooldowns: [],
        members,
        running: [],
      },
    );

  it('re-creates at once the copies kept for a node absent at the takeover', () => {
    const c = threeRacks();
    const lost = c.copiesOf('a1');
    c.down('a1');
    const next = recovering(c, c.h.state.members);
    const m = next.mapper(ds1);
    expect(m.numShardsForNode(nodeId('a1'))).toBe(0);
    expect(copiesCreated(c.mapper, m)).toBe(lost);
    expect(next.state.absent.size).toBe(0);
  });

  it('restarts the copies kept Down for a node that is a member again', () => {
    const c = threeRacks();
    const mine = c.mapper.shardsForNode(nodeId('a1'));
    c.down('a1');
    // The old singleton died before it heard a1 come back; the new one finds a1 in the view.
    const a1 = { ...c.member('a1', 'A'), incarnation: incarnation('a1#2') };
    const next = recovering(c, [...c.h.state.members, a1]);
    const m = next.mapper(ds1);
    expect(m.shardsForNode(nodeId('a1'))).toEqual(mine);
    for (const { copy } of m.copiesForNode(nodeId('a1'))) expect(copy.status.type).toBe('Assigned');
    expect(copiesCreated(c.mapper, m)).toBe(0);
  });
});

describe('bad settings are refused at setup, naming the key', () => {
  it('settleWindowMs', () => {
    for (const bad of [-1, 1.5, Number.NaN, Number.POSITIVE_INFINITY]) {
      expect(() => new ShardManager({ settleWindowMs: bad })).toThrow(RangeError);
      expect(() => new ShardManager({ settleWindowMs: bad })).toThrow(/settleWindowMs/);
      expect(() => runtimeSettings({ settleWindowMs: bad })).toThrow(/invalid runtime setting settleWindowMs/);
    }
    expect(() => runtimeSettings({ settleWindowMs: '1000' as unknown as number })).toThrow(/settleWindowMs/);
    expect(runtimeSettings().settleWindowMs).toBe(1_000);
  });
});
