// A new singleton's recovery (docs/ARCHITECTURE.md §6; FiloDB reference §5.3 for what goes wrong there).
import { describe, expect, it } from 'vitest';
import { epoch, incarnation, subscriberId, type ShardNum } from '../../src/core/ids.js';
import { ShardMapFollower } from '../../src/core/map-follower.js';
import { validateDatasetConfig } from '../../src/core/dataset-config.js';
import type { RecoveryData } from '../../src/core/shard-manager/protocol.js';
import type { ShardManagerState } from '../../src/core/shard-manager/step.js';
import { ShardEvents, Status } from '../../src/core/status.js';
import { config, changesOf, mapsPublished, ds1, ds2, Harness, HOUR, messagesTo, n, noticesNamed, sub } from '../support/manager-harness.js';

const s = (x: number) => x as ShardNum;

/** What a new singleton would gather from a cluster whose old singleton had `state`. */
function recoveryFrom(state: ShardManagerState, overrides: Partial<RecoveryData> = {}): RecoveryData {
  return {
    epoch: epoch(state.epoch + 1),
    datasets: [...state.datasets.values()].map((d) => d.config),
    maps: [...state.datasets.values()].map((d) => d.mapper.toSnapshot(state.epoch)),
    subscriptions: state.subscriptions.toList(),
    watchers: state.subscriptions.watcherList(),
    cooldowns: [...state.datasets.entries()].flatMap(([dataset, d]) => [...d.cooldowns].map(([shard, reassignedAt]) => ({ dataset, shard, reassignedAt }))),
    members: state.members,
    running: [],
    ...overrides,
  };
}

/** ds1 (8 shards / 3) over c1, c2, c3, c4 (spare), with traffic: c3 = [0,1,2] Active, c2 = [3,4,5], c1 = [6,7]. */
function busyCluster(): Harness {
  const h = new Harness();
  for (const c of ['c1', 'c2', 'c3']) h.addMember(c);
  h.run({ type: 'SubscribeAll', subscriber: sub });
  h.run({ type: 'Subscribe', subscriber: subscriberId('router'), dataset: 'ds1' as never });
  h.setup(ds1, 8, 3);
  h.setup(ds2, 4, 2);
  h.addMember('c4');
  expect(h.shardsByNode(ds1)).toEqual({ c1: [6, 7], c2: [3, 4, 5], c3: [0, 1, 2], c4: [] });
  for (const shard of [0, 1, 2]) h.report('c3', ShardEvents.ingestionStarted(ds1, s(shard), n('c3')));
  return h;
}

describe('failover recovery', () => {
  it('loses nothing: datasets, maps, subscriptions, cooldowns and members equal the old singleton’s, field by field', () => {
    const old = busyCluster();
    old.report('c3', ShardEvents.ingestionError(ds1, s(0), n('c3'), 'bad')); // moves to c4 and starts a cooldown
    const before = old.state;
    const next = new Harness({}, recoveryFrom(before));
    const after = next.state;
    expect(after.epoch).toBe(before.epoch + 1);
    expect(after.members).toEqual(before.members);
    expect([...after.datasets.keys()].sort()).toEqual([...before.datasets.keys()].sort());
    for (const [ref, ds] of before.datasets) {
      const got = after.datasets.get(ref)!;
      expect(got.config).toEqual(ds.config);
      expect(got.mapper.equals(ds.mapper)).toBe(true);
      expect(got.mapper.version).toBe(ds.mapper.version);
      expect([...got.cooldowns]).toEqual([...ds.cooldowns]);
    }
    expect(after.subscriptions.toList()).toEqual(before.subscriptions.toList());
    expect(after.subscriptions.watcherList()).toEqual(before.subscriptions.watcherList());
  });

  it('takes the newest (epoch, version) map per dataset, whichever copy holds it', () => {
    const h = busyCluster();
    const older = h.mapper(ds1).toSnapshot(h.state.epoch);
    h.removeMember('c1'); // the spare c4 takes 6 and 7: a newer map
    const newer = h.mapper(ds1).toSnapshot(h.state.epoch);
    const fromEarlierEpoch = { ...newer, epoch: epoch(0), version: newer.version + 100 };
    const next = new Harness({}, recoveryFrom(h.state, { maps: [older, fromEarlierEpoch, newer] }));
    expect(next.mapper(ds1).equals(h.mapper(ds1))).toBe(true);
    expect(noticesNamed(next.effects, 'recovery.map-chosen')[0]).toMatch(`version ${newer.version}, the newest of 3`);
  });

  it('never starts from nothing while a guardian holds a map, even if the MetaStore lost it', () => {
    const h = busyCluster();
    const guardianCopy = h.mapper(ds1).toSnapshot(h.state.epoch);
    const next = new Harness({}, recoveryFrom(h.state, { maps: [guardianCopy] }));
    expect(next.mapper(ds1).equals(h.mapper(ds1))).toBe(true);
    // ds2 had no copy anywhere: it starts empty and is assigned afresh.
    expect(noticesNamed(next.effects, 'recovery.map-chosen')).toContain('ds2: no map found; starting from an empty one');
    expect(next.mapper(ds2).numAssignedShards).toBe(4);
  });

  it('ignores maps with another shard count and maps of unknown datasets, and says so', () => {
    const h = busyCluster();
    const wrong = { ...h.mapper(ds2).toSnapshot(h.state.epoch), dataset: ds1, version: 10_000 };
    const next = new Harness(
      {},
      recoveryFrom(h.state, { datasets: [config(ds1, 8, 3)], maps: [wrong, h.mapper(ds1).toSnapshot(h.state.epoch), h.mapper(ds2).toSnapshot(h.state.epoch)] }),
    );
    expect(next.mapper(ds1).equals(h.mapper(ds1))).toBe(true);
    expect(next.state.datasets.has(ds2)).toBe(false);
    expect(noticesNamed(next.effects, 'recovery.map-ignored')).toEqual([
      'a map of ds1 with 4 shards was ignored: the dataset has 8',
      'a map of ds2 was found but the MetaStore has no such dataset',
    ]);
  });

  it('owners that are no longer members lose their shards, which go to live nodes', () => {
    const h = busyCluster();
    const withoutC3 = h.state.members.filter((m) => m.node !== 'c3');
    const next = new Harness({}, recoveryFrom(h.state, { members: withoutC3 }));
    expect(next.mapper(ds1).shardsForNode(n('c3'))).toEqual([]);
    expect(next.shardsByNode(ds1).c4).toEqual([0, 1, 2]); // the spare
    expect(mapsPublished(next.effects).sort()).toEqual([ds1, ds2]);
  });

  it('reconciles with what live nodes run: their status wins, unowned running shards are kept, strays are stopped', () => {
    const h = busyCluster();
    const stale = h.mapper(ds1).toSnapshot(h.state.epoch);
    h.report('c2', ShardEvents.ingestionStarted(ds1, s(3), n('c2'))); // lost with the old singleton
    const running: RecoveryData['running'] = [
      { node: n('c2'), incarnation: incarnation('c2#1'), shards: [{ dataset: ds1, shard: 3, status: Status.active }] },
      // c3 runs 0 and 1 but no longer 2 (it crashed there); c4 also runs 1 (a stray) and 7 is unowned in no map
      {
        node: n('c3'),
        incarnation: incarnation('c3#1'),
        shards: [
          { dataset: ds1, shard: 0, status: Status.active },
          { dataset: ds1, shard: 1, status: Status.recovery(40) },
        ],
      },
      { node: n('c4'), incarnation: incarnation('c4#1'), shards: [{ dataset: ds1, shard: 1, status: Status.active }] },
    ];
    const next = new Harness({}, recoveryFrom(h.state, { maps: [stale], running }));
    const m = next.mapper(ds1);
    expect(m.statusForShard(3)).toEqual(Status.active);
    expect(m.statusForShard(1)).toEqual(Status.recovery(40));
    expect(m.statusForShard(2)).toEqual(Status.assigned); // c3 will start it again
    expect(m.nodeForShard(1)).toBe('c3');
    expect(noticesNamed(next.effects, 'recovery.stray-shard')).toEqual(['c4 runs ds1/1 but the map gives it to c3: it will stop it']);
  });

  it('starts again what the map shows running on a node that answered without that dataset’s shards', () => {
    const h = busyCluster();
    expect(h.shardsByNode(ds2).c3).toEqual([0, 1]);
    h.report('c3', ShardEvents.ingestionStarted(ds2, s(0), n('c3')));
    // c3 answered: it runs its ds1 shards, but none of ds2 any more.
    const running: RecoveryData['running'] = [
      { node: n('c3'), incarnation: incarnation('c3#1'), shards: [0, 1, 2].map((shard) => ({ dataset: ds1, shard, status: Status.active })) },
    ];
    const next = new Harness({}, recoveryFrom(h.state, { running }));
    expect(next.mapper(ds2).statusForShard(0)).toEqual(Status.assigned);
    expect(next.mapper(ds2).nodeForShard(0)).toBe('c3');
    expect(next.mapper(ds1).statusForShard(0)).toEqual(Status.active);
  });

  it('adopts a running shard the recovered map shows without owner, instead of restarting it elsewhere', () => {
    const h = busyCluster();
    // The stored map lost shard 6's owner (Down, no copy) before the singleton died; c4 runs it.
    const mapper = h.state.datasets.get(ds1)!.mapper.clone();
    mapper.updateFromEvent(ShardEvents.shardDown(ds1, s(6), n('c1')));
    h.state = { ...h.state, datasets: new Map([...h.state.datasets].map(([ref, ds]) => [ref, ref === ds1 ? { ...ds, mapper } : ds])) };
    const running: RecoveryData['running'] = [{ node: n('c4'), incarnation: incarnation('c4#1'), shards: [{ dataset: ds1, shard: 6, status: Status.active }] }];
    const next = new Harness({}, recoveryFrom(h.state, { running }));
    expect(next.mapper(ds1).nodeForShard(6)).toBe('c4');
    expect(next.mapper(ds1).statusForShard(6)).toEqual(Status.active);
    expect(noticesNamed(next.effects, 'recovery.shard-adopted')).toHaveLength(1);
  });

  it('keeps a shard an operator stopped stopped: a node still running it is not given it back', () => {
    const h = busyCluster();
    h.stopShards(ds1, [6]);
    const running: RecoveryData['running'] = [{ node: n('c4'), incarnation: incarnation('c4#1'), shards: [{ dataset: ds1, shard: 6, status: Status.active }] }];
    const next = new Harness({}, recoveryFrom(h.state, { running }));
    expect(next.mapper(ds1).nodeForShard(6)).toBeUndefined();
    expect(next.mapper(ds1).statusForShard(6).type).toBe('Stopped');
  });

  it('fences a node that runs shards but is not a member (FiloDB lets it ingest on: duplicate ingestion)', () => {
    const h = busyCluster();
    const running: RecoveryData['running'] = [
      { node: n('ghost'), incarnation: incarnation('ghost#1'), shards: [{ dataset: ds1, shard: 0, status: Status.active }] },
    ];
    const next = new Harness({}, recoveryFrom(h.state, { running }));
    expect(next.effects).toContainEqual({ type: 'FenceNode', node: 'ghost', incarnation: 'ghost#1', reason: 'runs shards but is not a member' });
    expect(next.mapper(ds1).nodeForShard(0)).toBe('c3');
  });

  it('keeps cooldowns across failover (FiloDB forgets them)', () => {
    const h = busyCluster();
    h.report('c3', ShardEvents.ingestionError(ds1, s(0), n('c3'), 'bad'));
    expect(h.mapper(ds1).nodeForShard(0)).toBe('c4');
    const next = new Harness({}, recoveryFrom(h.state));
    next.now = h.now + HOUR;
    next.report('c4', ShardEvents.ingestionError(ds1, s(0), n('c4'), 'bad'));
    expect(next.mapper(ds1).nodeForShard(0)).toBeUndefined();
    expect(noticesNamed(next.effects, 'shard.reassignment-skipped')[0]).toMatch(/until its cooldown ends/);
  });

  it('continues every map under the new epoch, so followers drop whatever the old singleton still sends', () => {
    const h = busyCluster();
    const follower = new ShardMapFollower(ds1);
    follower.applySnapshot(h.mapper(ds1).toSnapshot(h.state.epoch));
    const next = new Harness({}, recoveryFrom(h.state));
    const changes = changesOf(next.effects).filter((c) => c.dataset === ds1);
    expect(changes).toHaveLength(1);
    expect(follower.applyChanges(changes[0]!)).toBe('applied');
    expect(follower.epoch).toBe(2);
    expect(follower.mapper!.equals(next.mapper(ds1))).toBe(true);
    // The old singleton, not yet aware it was replaced, moves a shard: nobody applies it.
    const late = h.report('c3', ShardEvents.ingestionError(ds1, s(1), n('c3'), 'x'));
    for (const m of messagesTo(late, sub)) if (m.type === 'StampedShardEvent') expect(follower.applyEvent(m)).toBe('stale');
    expect(follower.mapper!.nodeForShard(1)).toBe('c3');
  });

  it('is idempotent: recovering from a recovered singleton changes nothing', () => {
    const h = busyCluster();
    const once = new Harness({}, recoveryFrom(h.state));
    const twice = new Harness({}, recoveryFrom(once.state));
    for (const ref of [ds1, ds2]) {
      expect(twice.mapper(ref).equals(once.mapper(ref))).toBe(true);
      expect(twice.mapper(ref).version).toBe(once.mapper(ref).version);
    }
  });

  it('a second Recover is ignored', () => {
    const h = busyCluster();
    const version = h.mapper(ds1).version;
    h.run({ type: 'Recover', recovery: recoveryFrom(h.state, { maps: [] }) });
    expect(h.mapper(ds1).version).toBe(version);
    expect(noticesNamed(h.effects, 'input.ignored')).toHaveLength(1);
  });
});

describe('failover recovery of absences (balanced datasets, replacement delay)', () => {
  const DELAY = 60_000;
  const balanced = () => {
    const r = validateDatasetConfig({
      ref: 'ds1',
      numShards: 4,
      minNumNodes: 1,
      replicationFactor: 2,
      strategy: 'balanced',
      replacementDelayMs: DELAY,
      source: { type: 'synthetic' },
    });
    if (!r.ok) throw new Error(r.error.message);
    return r.value;
  };
  /** c1..c4 in racks a, b, a, b holding ds1 at RF 2, every copy Active. */
  function racked(): Harness {
    const h = new Harness({ settleWindowMs: 0 });
    for (const [name, rack] of [
      ['c1', 'a'],
      ['c2', 'b'],
      ['c3', 'a'],
      ['c4', 'b'],
    ] as const)
      h.run({ type: 'MemberUp', member: { ...h.memberFor(name), rack } });
    h.run({ type: 'SetupDataset', config: balanced(), replyTo: 'admin-absence' as never });
    for (let shard = 0; shard < 4; shard++)
      for (const node of h.mapper(ds1).nodesForShard(shard)) h.report(node, ShardEvents.ingestionStarted(ds1, s(shard), n(node)));
    return h;
  }
  const persisted = (h: Harness) => {
    const e = h.effects.find((x) => x.type === 'PersistNodeOperations');
    return e?.type === 'PersistNodeOperations' ? e.operations : undefined;
  };

  it('a successor keeps waiting for a node its predecessor saw leave, until the same end, and moves nothing', () => {
    const old = racked();
    const c2Shards = old.mapper(ds1).shardsForNode(n('c2'));
    expect(c2Shards.length).toBeGreaterThan(0);
    const leftAt = old.now;
    old.removeMember('c2');
    const operations = persisted(old)!;
    expect(operations.absent?.map((a) => [a.member.node, a.member.rack, a.since])).toEqual([['c2', 'b', leftAt]]);

    const next = new Harness({ settleWindowMs: 0 }, { ...recoveryFrom(old.state), operations });
    next.now = old.now + 10_000;
    expect(next.mapper(ds1).shardsForNode(n('c2'))).toEqual(c2Shards);
    for (const shard of c2Shards) expect(next.mapper(ds1).copyOnNode(shard, n('c2'))?.status.type).toBe('Down');
    // Its delay ends when it would have under the old singleton: the copies are re-created then.
    next.now = leftAt + DELAY + 1;
    next.run({ type: 'CheckCooldowns' });
    expect(next.mapper(ds1).shardsForNode(n('c2'))).toEqual([]);
  });

  it("a successor keeps the copies of its predecessor's own host, lost while no singleton ran, for its delay", () => {
    const old = racked();
    // The oldest member hosted the singleton; it goes with it. The record its successor reads was
    // written at the last change of the members, with every member's rack.
    const operations = old.state.operations;
    expect(operations.members?.map((m) => m.node)).toEqual(['c1', 'c2', 'c3', 'c4']);
    const c1Shards = old.mapper(ds1).shardsForNode(n('c1'));
    const members = old.state.members.filter((m) => m.node !== 'c1');
    const next = new Harness({ settleWindowMs: 0 }, { ...recoveryFrom(old.state), members, operations });
    expect(next.mapper(ds1).shardsForNode(n('c1'))).toEqual(c1Shards);
    expect(noticesNamed(next.effects, 'node.absent').length).toBeGreaterThan(0);
    // Back within the delay: its copies restart on it, no copy elsewhere was created.
    const before = Array.from({ length: 4 }, (_, shard) => next.mapper(ds1).nodesForShard(shard).slice().sort());
    next.restartMember('c1');
    expect(Array.from({ length: 4 }, (_, shard) => next.mapper(ds1).nodesForShard(shard).slice().sort())).toEqual(before);
  });
});
